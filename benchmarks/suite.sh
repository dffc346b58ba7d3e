#!/usr/bin/env bash
# The benchmark suite on the H200 (or, with --dry-run, on a CPU under Triton's interpreter).
# Runs from a checkout without installing it: symlinks give the import names that pyproject.toml
# maps, and the pure-Python wheels carried in .device/ (fla-core 0.6.0 and einops, which it
# imports) are unpacked onto PYTHONPATH; without them the fla-core columns say n/a.
# Markdown tables go to stdout (and $OUT/suite.md); full logs, results.json and PNG plots to $OUT.
#
#   OUT=logs bash benchmarks/suite.sh                    # everything (default OUT: /tmp/attnops-suite)
#   bash benchmarks/suite.sh --ops l2norm,gate --quick   # two operators, fewest shapes
#   bash benchmarks/suite.sh --dry-run --no-compile      # CPU check of the script itself
#   python benchmarks/suite.py --help                    # every option
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-${TMPDIR:-/tmp}/attnops-suite}
py=${PYTHON:-python3}
mkdir -p "$out"
site=$(mktemp -d)
ln -s "$root/generated/attnops" "$site/attnops"
ln -s "$root/kernels" "$site/attnops_kernels"
pp="$site"
for wheel in "$root"/.device/fla_core-*.whl "$root"/.device/einops-*.whl; do
  [[ -f "$wheel" ]] || continue
  dir="$site/$(basename "$wheel" .whl)"
  "$py" -m zipfile -e "$wheel" "$dir" && pp="$pp:$dir"
done
export PYTHONPATH="$pp:$root${PYTHONPATH:+:$PYTHONPATH}"
for arg in "$@"; do
  [[ "$arg" == "--dry-run" ]] && export TRITON_INTERPRET=1
done
cd "$root" || exit 1
"$py" benchmarks/suite.py --out "$out" "$@" 2>"$out/suite.stderr.log" | tee "$out/suite.md"
rc=${PIPESTATUS[0]}
if [[ $rc -ne 0 ]]; then
  echo "suite.py exited with $rc; last lines of $out/suite.stderr.log:"
  tail -n 20 "$out/suite.stderr.log"
fi
exit "$rc"
