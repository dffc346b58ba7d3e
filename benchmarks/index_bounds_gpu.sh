#!/usr/bin/env bash
# Index inputs on a CUDA machine: the generated suites of tests/test_index_inputs.py's project
# (two masked Triton gathers, 'indexes:' inputs), its unchecked script under compute-sanitizer
# (entries up to 2**40 with set_index_check(False): the kernels must read and write nothing out
# of bounds), the compiled check's device-side assert, and a control that proves the sanitizer
# sees an unmasked gather's out-of-bounds read.
#
# The machine needs no generator: generate the project first where the generator runs,
#   PYTHONPATH=tests python -c "from test_index_inputs import write_project; write_project('.gpu/idx')"
# then, on the CUDA machine:  bash benchmarks/index_bounds_gpu.sh .gpu/idx
set -u
project=$(cd "${1:?usage: index_bounds_gpu.sh PROJECT}" && pwd)
export PYTHONPATH="$project/out:$project"
sanitizer=${SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
status=0
step() { echo "== $1"; shift; "$@" || { echo "FAILED ($?)"; status=1; }; }
cd "$project/out" || exit 1
step "generated suites on CUDA" python -m pytest -q -p no:cacheprovider -rfs tests
# Under the sanitizer, exact allocations (no caching allocator), so that a read past a tensor is
# past its allocation too. Not for the suites: CUDA-graph capture needs the caching allocator.
step "unchecked gathers under compute-sanitizer" \
  env PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$sanitizer" --tool memcheck --error-exitcode 9 python "$project/unchecked.py"
step "compiled check (device-side assert)" python "$project/compiled_assert.py"
echo "== control: an unmasked gather read out of bounds is reported"
PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$sanitizer" --tool memcheck --error-exitcode 9 \
  python "$project/unmasked.py" > control.log 2>&1
code=$?
grep -m3 -E "Invalid __global__ read|ERROR SUMMARY" control.log
if [[ $code -ne 9 ]]; then echo "FAILED: the control was not reported (exit $code)"; status=1; fi
exit $status
