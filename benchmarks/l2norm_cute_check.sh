#!/usr/bin/env bash
# Runs benchmarks/l2norm_cute_check.py from a checkout, without installing it: the CuTeDSL bundle
# (.device/cutedsl-site.tar.xz, built by ../shared/tools/cutedsl-bundle.sh) is unpacked into a
# temp dir, and symlinks give the import names that pyproject.toml maps. Arguments go to the
# script; its log goes to $OUT.
#
#   OUT=logs bash benchmarks/l2norm_cute_check.sh [--skip-bench] [--sweep]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
export OUT=${OUT:-$root/gpu-logs}
mkdir -p "$OUT"
bundle=$(mktemp -d)
tar -xJf "$root/.device/cutedsl-site.tar.xz" -C "$bundle"
site=$(mktemp -d)
ln -s "$root/generated/attnops" "$site/attnops"
ln -s "$root/kernels" "$site/attnops_kernels"
export PYTHONPATH="$site:$root:$bundle:$bundle/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH}"
cd "$root"
python benchmarks/l2norm_cute_check.py "$@"
