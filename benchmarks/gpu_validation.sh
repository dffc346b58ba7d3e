#!/usr/bin/env bash
# The CUDA half of validation: the generated operator suite (including what CPU CI cannot run:
# compiled Triton on the device, triton_op under torch.compile, CUDA-graph replay), the schema
# oracle on this torch, and the boundary benchmark with CUDA tensors. Runs from a checkout without
# installing it: symlinks give the import names that pyproject.toml maps. Full logs go to $OUT.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-logs}
mkdir -p "$out"
site=$(mktemp -d)
ln -s "$root/generated/attnops" "$site/attnops"
ln -s "$root/kernels" "$site/attnops_kernels"
export PYTHONPATH="$site:$root${PYTHONPATH:+:$PYTHONPATH}"
cd "$root" || exit 1

python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())" | tee "$out/env.txt"
summary() { grep -E "^(FAILED|ERROR)|passed|failed" "$1" | tail -n "${2:-15}"; }

python -m pytest generated/tests -q -p no:cacheprovider -rfEs -x --maxfail=20 ${PYTEST_ARGS:-} >"$out/generated.log" 2>&1
echo "generated tests: exit $?"; summary "$out/generated.log" 25
python -m pytest tests/test_generator.py -q -p no:cacheprovider -k "schema or import" >"$out/generator.log" 2>&1
echo "schema oracle: exit $?"; summary "$out/generator.log" 5
if [ -z "${SKIP_BENCH:-}" ]; then
  python benchmarks/boundary_overhead.py --device cuda --rounds 15 >"$out/boundary_cuda.txt" 2>&1
  echo "boundary benchmark (cuda): exit $?"; cat "$out/boundary_cuda.txt"
fi
