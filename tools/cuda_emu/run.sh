#!/usr/bin/env bash
# Checks the CUDA kernels without a GPU: turns src/backend/cuda's newer kernel files into
# host code (gen.py, emu.h) and runs them through the op harness against the scalar
# references. Needs build/libglia_lib.a (a CUDA build) and takes about 10 minutes (a thread
# per CUDA thread). Usage: tools/cuda_emu/run.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
here="$root/tools/cuda_emu"
python3 "$here/gen.py" "$root" "$work/kernels_emu.h"
cudart="$(dirname "$(command -v nvcc)")/../lib64/libcudart_static.a"
g++ -std=c++20 -O1 -w -I"$root/src" -I"$here" -I"$work" "$here/driver.cpp" "$build/libglia_lib.a" "$cudart" \
  -ldl -lrt -lpthread -o "$work/driver"
"$work/driver"
