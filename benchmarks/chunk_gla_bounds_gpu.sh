#!/usr/bin/env bash
# On a CUDA machine: every malformed-offsets case of tests/chunk_gla_bounds.py under
# compute-sanitizer memcheck (each in its own process, float32 and bfloat16, forward and
# backward), the chunk_gla numerics tests, and the forward/backward GPU time of a packed batch
# against another version of the kernels. Runs from a checkout without installing it.
#
#   OUT=logs BASELINE=OLD/kernels bash benchmarks/chunk_gla_bounds_gpu.sh
#
# BASELINE (optional): another kernels/ folder; its chunk_gla is timed beside this one and a few
# cases are run under memcheck with it too (to show that memcheck sees what the clamps prevent).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-logs}
san=${SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
mkdir -p "$out"
site=$(mktemp -d)
ln -s "$root/generated/attnops" "$site/attnops"
ln -s "$root/kernels" "$site/attnops_kernels"
export PYTHONPATH="$site:$root${PYTHONPATH:+:$PYTHONPATH}"
cd "$root" || exit 1
script=tests/chunk_gla_bounds.py
dts=(--dtype float32 --dtype bfloat16)
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
mapfile -t cases < <(python "$script" --list)

# 1. plain runs (also fill Triton's cache, so the sanitized runs do not compile); three first,
# which compile every specialization the others use
plain() {
  (timeout 150 python "$script" "$1" "${dts[@]}" >"$out/plain_$1.log" 2>&1; echo "exit $?" >>"$out/plain_$1.log")
}
for c in valid last_lt_T first_nonzero; do plain "$c" & done
wait
for c in "${cases[@]}"; do
  [[ "$c" =~ ^(valid|last_lt_T|first_nonzero)$ ]] && continue
  plain "$c" &
done
wait

# 2. the numerics tests in the background, memcheck per case (each tensor its own allocation)
(timeout 250 python -m pytest generated/tests/test_chunk_gla.py -q -p no:cacheprovider \
  -k "forward_matches or varlen" >"$out/numerics.log" 2>&1; echo "exit $?" >>"$out/numerics.log") &
memcheck() {  # tag, site, case
  PYTHONPATH="$2:$root" PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 200 "$san" --tool memcheck \
    --error-exitcode 99 python "$script" "$3" "${dts[@]}" >"$out/mc_$1_$3.log" 2>&1
  echo "exit $?" >>"$out/mc_$1_$3.log"
}
pids=()
for c in "${cases[@]}"; do
  memcheck new "$site" "$c" &
  pids+=($!)
  while (($(jobs -rp | wc -l) > 10)); do sleep 0.5; done
done
if [[ -n "${BASELINE:-}" ]]; then
  site_old=$(mktemp -d)
  ln -s "$BASELINE" "$site_old/attnops_kernels"
  for c in last_gt_T negative_first strided; do memcheck old "$site_old" "$c" & done
fi
wait "${pids[@]}"
wait

echo
echo "case | plain | memcheck (these kernels) | exit"
for c in "${cases[@]}"; do
  p=$(grep -E " ok$| FAILED" "$out/plain_$c.log" | tail -1)
  m=$(grep -o "ERROR SUMMARY: .*" "$out/mc_new_$c.log" | tail -1)
  e=$(tail -1 "$out/mc_new_$c.log")
  echo "$c | ${p:-$(tail -1 "$out/plain_$c.log")} | ${m:-none} | $e"
done
if [[ -n "${BASELINE:-}" ]]; then
  echo "baseline kernels under memcheck:"
  for c in last_gt_T negative_first strided; do
    echo "$c | $(grep -o "ERROR SUMMARY: .*" "$out/mc_old_$c.log" | tail -1) | $(tail -1 "$out/mc_old_$c.log")"
  done
fi
echo "numerics: $(grep -E "passed|failed|error" "$out/numerics.log" | tail -1) $(tail -1 "$out/numerics.log")"
cat "$out"/plain_*.log >"$out/plain_all.txt"; rm -f "$out"/plain_*.log
cat "$out"/mc_*.log >"$out/memcheck_all.txt"; rm -f "$out"/mc_*.log

# 3. timing, alone on the GPU
if [[ -n "${BASELINE:-}" ]]; then
  timeout 150 python - "$BASELINE/chunk_gla/triton.py" <<'PY' 2>&1 | tee "$out/timing.log"
import sys
sys.path.insert(0, "benchmarks")
import chunk_gla_timing as m
m.SHAPES = [
    ("varlen 8 seqs B1 T32768 H16 K=V=128", "bf16", 1, 32768, 16, 128, 128, 8, False),
    ("varlen 8 seqs B1 T32768 H16 K=V=128 +states", "bf16", 1, 32768, 16, 128, 128, 8, True),
]
sys.argv = ["chunk_gla_timing.py", "--baseline", sys.argv[1], "--aa", "--rounds", "9"]
m.main()
PY
fi
