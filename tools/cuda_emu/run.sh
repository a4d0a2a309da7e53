#!/usr/bin/env bash
# Checks the CUDA kernels without a GPU: turns src/backend/cuda's kernel files into host code
# (gen.py, emu.h; mma.sync int8 and f16/bf16, ldmatrix, cp.async emulated) and runs them
# through the op harness against the scalar references; the packed products at 1, 3, 8, 16, 40
# and 130 tokens and three grouped in one launch for bit equality (with the tensor-core kernel's
# split and whole-K paths: GLIA_EMU_SMS; its 8-, 16- and 64-token tiles: GLIA_MMQ_MIN_T=2 with
# GLIA_MMQ_FEW=1 and without); the one-token products' prologues (SWIGLU, RMS_NORM, ADD + RMS_NORM
# in the products' launch, prologue.h) against the separate kernels, bit for bit; the F16/BF16 tensor-core products at 1, 3, 20 and
# 130 tokens and grouped by input (the many-token products on the mma.sync tile kernel and,
# GLIA_MMA16_WGMMA=1, on warpgroup instructions: wgmma emulated with B read through its
# descriptor as documented); the CUDA-core attention over f16, bf16, q8_0 and q4_0 caches
# (attention_core_check.h: the stored rows against the CPU's bytes, a double reference over
# the cache as the CPU widens it, tokens alone against the batch) and the tensor-core
# attention (attention_check.h: against a double reference, and the bits of tokens alone and
# in other batches); GLIA_EMU_ONLY=attention runs only the attention checks (attention_tc: the
# tensor-core kernel's; each case prints its outputs' bits as one hash, to compare across edits),
# GLIA_CUDA_ATTN_WARPS=8 the tensor-core kernel's 8-warp tiles. Needs build/libglia_lib.a (a CPU-only
# build's will do) and takes about 10 minutes on 2 cores (a thread per CUDA thread). What it
# cannot show: speed, register or shared-memory limits, races between warps.
# Usage: tools/cuda_emu/run.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
here="$root/tools/cuda_emu"
python3 "$here/gen.py" "$root" "$work/kernels_emu.h"
cudart="$(dirname "$(command -v nvcc)")/../lib64/libcudart_static.a"
g++ -std=c++20 -O1 -w -I"$root/src" -I"$here" -I"$work" "$here/driver.cpp" "$build/libglia_lib.a" "$cudart" \
  -lcpp-httplib -lssl -lcrypto -lz -lbrotlienc -lbrotlidec -lpcre2-8 -ldl -lrt -lpthread -o "$work/driver"
status=0
"$work/driver" || status=1
[ -n "${GLIA_EMU_ONLY:-}" ] && exit $status  # the caller chose one part: the rest is not asked for
echo "== packed products, whole-K tensor-core path (GLIA_EMU_SMS=1)"
GLIA_EMU_SMS=1 GLIA_EMU_ONLY=products "$work/driver" || status=1
echo "== packed products, every type on tensor cores from 2 tokens, the few-token tiles (GLIA_MMQ_MIN_T=2 GLIA_MMQ_FEW=1)"
GLIA_MMQ_MIN_T=2 GLIA_MMQ_FEW=1 GLIA_EMU_ONLY=packed "$work/driver" || status=1
echo "== packed products, every type on tensor cores from 2 tokens, the 64-token tiles (GLIA_MMQ_MIN_T=2 GLIA_MMQ_FEW=0)"
GLIA_MMQ_MIN_T=2 GLIA_MMQ_FEW=0 GLIA_EMU_ONLY=packed "$work/driver" || status=1
echo "== the CUDA-core attention over f16 caches too (GLIA_CUDA_ATTN_TC=0)"
GLIA_CUDA_ATTN_TC=0 GLIA_EMU_ONLY=attention_core "$work/driver" || status=1
echo "== F16/BF16 products, the warpgroup (wgmma) kernel for many tokens (GLIA_MMA16_WGMMA=1)"
GLIA_MMA16_WGMMA=1 GLIA_EMU_ONLY=mma16 "$work/driver" || status=1
exit $status
