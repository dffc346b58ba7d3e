#!/usr/bin/env bash
# The CUDA half of validation: the generated operator suite (including what CPU CI cannot run:
# compiled Triton on the device, triton_op under torch.compile, CUDA-graph replay), the schema
# oracle on this torch, and the boundary benchmark with CUDA tensors. Runs from a checkout without
# installing it: symlinks give the import names that pyproject.toml maps. Full logs go to $OUT.
#
# The generated suite runs as parallel pytest shards (one per test file, the largest split by
# test kind): compilation is CPU-bound and the machine has many cores. Each shard writes its log
# straight to $OUT and is stopped at $DEADLINE seconds (killed 15 s later), and a test that runs
# longer than $HANG seconds dumps every thread's stack into the log, so a hung run still
# explains itself.
#
#   OUT=logs bash benchmarks/gpu_validation.sh            # everything
#   SHARDS="chunk_gla" SKIP_BENCH=1 bash benchmarks/...    # only shards whose name matches
#   SHARD_LIST=$'again|test_gate.py|compile and dynamic' bash ...  # shards of your own, one a line
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-logs}
deadline=${DEADLINE:-540}
hang=${HANG:-120}
# One Inductor compile process per shard: the shards already fill the cores.
export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-1}
mkdir -p "$out"
site=$(mktemp -d)
ln -s "$root/generated/attnops" "$site/attnops"
ln -s "$root/kernels" "$site/attnops_kernels"
export PYTHONPATH="$site:$root${PYTHONPATH:+:$PYTHONPATH}"
# The CuTeDSL bundle (../shared/tools/cutedsl-bundle.sh), when it travelled with the checkout:
# without it the CuTeDSL backends are skipped by selection and their tests say so.
if [[ -s "$root/.device/cutedsl-site.tar.xz" ]]; then
  cute=$(mktemp -d)
  tar -xJf "$root/.device/cutedsl-site.tar.xz" -C "$cute"
  export PYTHONPATH="$cute:$cute/nvidia_cutlass_dsl/dsl_packages:$PYTHONPATH"
fi
cd "$root" || exit 1

python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
python -c "import importlib.metadata as m; print('nvidia-cutlass-dsl', m.version('nvidia-cutlass-dsl'))" 2>/dev/null \
  || echo "nvidia-cutlass-dsl not found: CuTeDSL backends skipped"

# name|test files under generated/tests|-k expression (empty: all of them). At most 8 shards:
# each writes one log, and that is what comes back from a remote run.
# Balanced from H200 timings (torch 2.11): no shard above about 5 minutes.
shards=(
  "gate_opcheck_bwd_a|test_gate.py|opcheck_backward and batch2x37"
  "gate_opcheck_bwd_b|test_gate.py|opcheck_backward and not batch2x37"
  "gate_opcheck_fwd_static|test_gate.py|opcheck_forward or (compile and static)"
  "gate_compile_dynamic|test_gate.py|compile and dynamic"
  "gate_rest|test_gate.py|not opcheck and not compile"
  "chunk_gla_opcheck_compile|test_chunk_gla.py|opcheck or compile"
  "chunk_gla_rest|test_chunk_gla.py|not opcheck and not compile"
  "small_ops|test_l2norm.py test_recurrent_gla_step.py test_block_mask_worklist.py|"
)
if [[ -n "${SHARD_LIST:-}" ]]; then
  mapfile -t shards <<<"$SHARD_LIST"
fi
start=$(date +%s)
for shard in "${shards[@]}"; do
  IFS='|' read -r name files expr <<<"$shard"
  [[ -n "${SHARDS:-}" && ! "$name" =~ ${SHARDS} ]] && continue
  # -n 0: the shards are the parallelism here; pytest-xdist's default of one worker per core in
  # each of eight shards starts over a hundred CUDA contexts and runs the GPU out of memory.
  args=(-q -p no:cacheprovider -n 0 -rfEs --tb=short --maxfail=25 --durations=5
    -o "faulthandler_timeout=$hang")
  [[ -n "$expr" ]] && args+=(-k "$expr")
  # shellcheck disable=SC2046,SC2086
  (timeout -k 15 -s INT "$deadline" python -m pytest $(printf 'generated/tests/%s ' $files) "${args[@]}" \
    ${PYTEST_ARGS:-} >"$out/$name.log" 2>&1
   echo "exit $?" >>"$out/$name.log") &
done
wait
echo "generated tests: $(($(date +%s) - start)) s wall"
for shard in "${shards[@]}"; do
  name=${shard%%|*}
  f=$out/$name.log
  [[ -f "$f" ]] || continue
  printf '%-22s %-8s %s\n' "$name" "$(tail -n 1 "$f")" \
    "$(grep -E '(passed|failed|error|no tests ran).* in ' "$f" | tail -n 1)"
done
grep -hE "^(FAILED|ERROR) |^Timeout" "$out"/*.log | cut -c1-240 | head -n 40

python -m pytest tests/test_generator.py -q -p no:cacheprovider -k "schema or import" 2>&1 | tail -n 15
if [ -z "${SKIP_BENCH:-}" ]; then
  echo "boundary benchmark (cuda):"
  python benchmarks/boundary_overhead.py --device cuda --rounds 15 2>&1 | tail -n 30
fi
