#!/usr/bin/env bash
# The benchmark suite on the H200 (or, with --dry-run, on a CPU under Triton's interpreter).
# Runs from a checkout without installing it: symlinks give the import names that pyproject.toml
# maps, and the pure-Python wheels carried in .device/ (fla-core 0.6.0 and einops, which it
# imports; quack-kernels 0.6.5 with the CuTeDSL bundle) are unpacked onto PYTHONPATH; without
# them those baselines are skipped with the reason. First each operator's generated benchmark (generated/benchmarks/bench_<op>.py,
# declared in ops.yaml), one process each so that baselines autotune alone; then suite.py (first
# calls, recompiles, the layers of a call), and chunk_gla_memory.py where chunk_gla is among the
# operators. Markdown tables go to stdout (and $OUT/suite.md),
# PNG plots (where matplotlib is installed) and stderr logs to $OUT.
#
#   OUT=logs bash benchmarks/suite.sh                    # everything (default OUT: /tmp/attnops-suite)
#   bash benchmarks/suite.sh --ops l2norm,gate --quick   # two operators, their first shape
#   bash benchmarks/suite.sh --dry-run --no-compile      # CPU check of the scripts themselves
#   python generated/benchmarks/bench_gate.py --help     # the options of one benchmark
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-${TMPDIR:-/tmp}/attnops-suite}
py=${PYTHON:-python3}
mkdir -p "$out"
site=$(mktemp -d)
ln -s "$root/generated/attnops" "$site/attnops"
ln -s "$root/kernels" "$site/attnops_kernels"
pp="$site"
for wheel in "$root"/.device/fla_core-*.whl "$root"/.device/einops-*.whl \
  "$root"/.device/quack_kernels-*.whl; do
  [[ -f "$wheel" ]] || continue
  dir="$site/$(basename "$wheel" .whl)"
  "$py" -m zipfile -e "$wheel" "$dir" && pp="$pp:$dir"
done
# The CuTeDSL bundle (../shared/tools/cutedsl-bundle.sh), which quack and our CuTeDSL backends
# import; without it they are skipped with the reason.
if [[ -s "$root/.device/cutedsl-site.tar.xz" ]]; then
  cute=$(mktemp -d)
  tar -xJf "$root/.device/cutedsl-site.tar.xz" -C "$cute"
  pp="$pp:$cute:$cute/nvidia_cutlass_dsl/dsl_packages"
fi
export PYTHONPATH="$pp:$root${PYTHONPATH:+:$PYTHONPATH}"
ops=l2norm,gate,chunk_gla,recurrent_gla_step,block_mask_worklist
bench_args=()
suite_args=()
memory_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ops) ops=$2; shift 2 ;;
    --ops=*) ops=${1#--ops=}; shift ;;
    --dry-run) export TRITON_INTERPRET=1; bench_args+=(--smallest --calls 5); suite_args+=(--dry-run --calls 5); memory_args+=(--dry-run --repeats 1); shift ;;
    --quick) bench_args+=(--smallest); shift ;;
    *) suite_args+=("$1"); shift ;;
  esac
done
cd "$root" || exit 1
: >"$out/suite.md"
rc=0
for op in ${ops//,/ }; do
  [[ "$op" == block_mask ]] && op=block_mask_worklist
  [[ "$op" == recurrent ]] && op=recurrent_gla_step
  [[ "$op" == chunk ]] && op=chunk_gla
  "$py" "generated/benchmarks/bench_$op.py" --plot "$out/$op.png" ${bench_args[@]+"${bench_args[@]}"} \
    2>"$out/bench_$op.stderr.log" | tee -a "$out/suite.md"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || rc=1
done
"$py" benchmarks/suite.py --ops "$ops" ${suite_args[@]+"${suite_args[@]}"} 2>"$out/suite.stderr.log" | tee -a "$out/suite.md"
[[ ${PIPESTATUS[0]} -eq 0 ]] || rc=1
# chunk_gla's activation memory, each save_states against fla-core (benchmarks/chunk_gla_memory.py).
if [[ ",$ops," == *,chunk_gla,* || ",$ops," == *,chunk,* ]]; then
  "$py" benchmarks/chunk_gla_memory.py ${memory_args[@]+"${memory_args[@]}"} \
    2>"$out/chunk_gla_memory.stderr.log" | tee -a "$out/suite.md"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || rc=1
fi
if [[ $rc -ne 0 ]]; then
  echo "a benchmark failed; last lines of the logs in $out:"
  tail -n 20 "$out"/*.stderr.log
fi
exit "$rc"
