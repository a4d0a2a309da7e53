// A tiny CUDA-on-the-host emulator: one std::thread per CUDA thread, one block at a time,
// __syncthreads and warp shuffles through a barrier. Enough for the simple kernels here.
#pragma once
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <memory>
#include <vector>
#include "core/f16.h"
struct dim3 { unsigned x = 1, y = 1, z = 1; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
using cudaStream_t = void*;
inline thread_local dim3 threadIdx;
inline dim3 blockIdx, blockDim, gridDim;
inline std::barrier<>* g_bar;
inline std::vector<double> g_xchg(1024);
inline std::atomic<int> g_or{0};
inline std::vector<char> g_dyn(1 << 20);
inline void __syncthreads() { g_bar->arrive_and_wait(); }
inline bool __syncthreads_or(bool p) {
    g_bar->arrive_and_wait(); if (p) g_or = 1; g_bar->arrive_and_wait();
    const bool r = g_or.load(); g_bar->arrive_and_wait(); if (threadIdx.x == 0) g_or = 0; g_bar->arrive_and_wait(); return r;
}
// Shuffles wait for the thread's warp only (g_wbar), as on the device: warps of a block may
// take different paths (the attention's warps that have no query head left).
inline thread_local std::barrier<>* g_wbar;  // this thread's warp
template <class T> T __shfl_xor_sync(unsigned, T v, int o) {
    const unsigned t = threadIdx.x;
    g_xchg[t] = double(v);
    g_wbar->arrive_and_wait();
    const T r = T(g_xchg[(t & ~31u) | ((t & 31u) ^ unsigned(o))]);
    g_wbar->arrive_and_wait();
    return r;
}
template <class T> T __shfl_sync(unsigned, T v, int src) {
    const unsigned t = threadIdx.x;
    g_xchg[t] = double(v);
    g_wbar->arrive_and_wait();
    const T r = T(g_xchg[(t & ~31u) | (unsigned(src) & 31u)]);
    g_wbar->arrive_and_wait();
    return r;
}
template <class F, class... A> void emu_launch(dim3 grid, dim3 block, size_t, cudaStream_t, F f, A... args) {
    gridDim = grid; blockDim = block;
    for (unsigned z = 0; z < grid.z; ++z) for (unsigned y = 0; y < grid.y; ++y) for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = dim3(x, y, z);
        std::barrier<> bar(block.x);
        g_bar = &bar;
        std::vector<std::unique_ptr<std::barrier<>>> warps;
        for (unsigned w = 0; w * 32 < block.x; ++w)
            warps.emplace_back(new std::barrier<>(std::ptrdiff_t(block.x - w * 32 < 32 ? block.x - w * 32 : 32)));
        std::vector<std::thread> th;
        for (unsigned t = 0; t < block.x; ++t)
            th.emplace_back([&, t] {
                threadIdx = dim3(t);
                g_wbar = warps[t / 32].get();
                f(args...);
                bar.arrive_and_drop();
                g_wbar->arrive_and_drop();
            });
        for (auto& h : th) h.join();
    }
}
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
inline float __uint_as_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t __float_as_uint(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
struct float2 { float x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
struct float4 { float x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
struct uint2 { uint32_t x, y; };
struct uint4 { uint32_t x, y, z, w; };
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return {x, y, z, w}; }
inline int max(int a, int b) { return a > b ? a : b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
#define __device__
#define __host__
#define __global__
#define __launch_bounds__(...)
#define __forceinline__ inline
#define cudaGetLastError() 0
#define __restrict__
#define __align__(x)
struct int2 { int x, y; };
struct int4 { int x, y, z, w; };
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
template <class T> T __ldg(const T* p) { return *p; }
template <class T> T __ldcg(const T* p) { return *p; }
inline int __ffs(int x) { return x ? __builtin_ctz(unsigned(x)) + 1 : 0; }
inline int atomicAdd(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }
inline int __dp4a(int a, int b, int c) {  // four signed byte products added to c
    for (int i = 0; i < 4; ++i) c += int(int8_t(uint32_t(a) >> (8 * i))) * int(int8_t(uint32_t(b) >> (8 * i)));
    return c;
}
// Every thread of a block calls the kernels' __syncwarp where the emulated kernels use it
// (uniformly), so a block barrier stands in for it.
inline void __syncwarp() { g_bar->arrive_and_wait(); }
// The device runtime's queries, as a GPU of GLIA_EMU_SMS multiprocessors (default 132).
using cudaError_t = int;
constexpr int cudaSuccess = 0, cudaFuncAttributeMaxDynamicSharedMemorySize = 8, cudaDevAttrMultiProcessorCount = 16,
              cudaDevAttrComputeCapabilityMajor = 75;
template <class F> int cudaFuncSetAttribute(F, int, int) { return cudaSuccess; }
inline int cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline int cudaDeviceGetAttribute(int* v, int attr, int) {
    if (attr == cudaDevAttrComputeCapabilityMajor) {  // an H100/H200
        *v = 9;
        return cudaSuccess;
    }
    const char* e = std::getenv("GLIA_EMU_SMS");
    *v = e && *e ? std::atoi(e) : 132;
    return cudaSuccess;
}
// cp.async: a synchronous copy (zero-filled when !pred); commit and wait have nothing to do.
inline void cp_async16(void* smem, const void* gmem, bool pred) {
    if (pred) std::memcpy(smem, gmem, 16); else std::memset(smem, 0, 16);
}
inline void cp_async4(void* smem, const void* gmem, bool pred) {
    if (pred) std::memcpy(smem, gmem, 4); else std::memset(smem, 0, 4);
}
inline void cp_async_commit() {}
template <int N> void cp_async_wait() {}
// mma.sync m16n8k32 / m16n8k16, s8 x s8 -> s32, C = 0, with the PTX fragment layouts
// (groupID g = lane / 4, t = lane % 4): A row g (regs 0, 2) or g + 8 (regs 1, 3), bytes
// k = 4t + i (+ 16 for regs 2, 3); B column g, bytes k = 4t + i (+ 16 for reg 1); D rows g,
// g + 8, columns 2t, 2t + 1. The warp's fragments meet in g_mma.
inline std::vector<int32_t> g_mma(1024 * 6);
inline int frag_byte(int w, int k) { return int(int8_t(uint32_t(w) >> (8 * (k % 4)))); }
inline void mma_emu(int (&d)[4], int kdim) {
    const int t = int(threadIdx.x), base = t & ~31, lane = t & 31, g = lane >> 2, tig = lane & 3;
    auto A = [&](int row, int k) {
        const int src = base + (row % 8) * 4 + (k % 16) / 4;
        return frag_byte(g_mma[size_t(src) * 6 + (row >= 8) + 2 * (k >= 16)], k);
    };
    auto B = [&](int k, int n) { return frag_byte(g_mma[size_t(base + n * 4 + (k % 16) / 4) * 6 + 4 + (k >= 16)], k); };
    for (int i = 0; i < 4; ++i) {
        const int row = g + 8 * (i >> 1), col = tig * 2 + (i & 1);
        int s = 0;
        for (int k = 0; k < kdim; ++k) s += A(row, k) * B(k, col);
        d[i] = s;
    }
}
inline void mma_k32(int (&d)[4], int a0, int a1, int a2, int a3, int b0, int b1) {
    int32_t* me = &g_mma[size_t(threadIdx.x) * 6];
    me[0] = a0, me[1] = a1, me[2] = a2, me[3] = a3, me[4] = b0, me[5] = b1;
    g_bar->arrive_and_wait();
    mma_emu(d, 32);
    g_bar->arrive_and_wait();
}
inline void mma_k16(int (&d)[4], int a0, int a1, int b0) {
    int32_t* me = &g_mma[size_t(threadIdx.x) * 6];
    me[0] = a0, me[1] = a1, me[2] = 0, me[3] = 0, me[4] = b0, me[5] = 0;
    g_bar->arrive_and_wait();
    mma_emu(d, 16);
    g_bar->arrive_and_wait();
}
// ldmatrix .x4: lane (g, t) gets bytes 4t .. 4t + 3 of the row that lane 8i + g named, for
// each matrix i. Only the thread's warp meets.
inline std::vector<const void*> g_ldsm(1024);
inline void ldsm_x4(uint32_t (&r)[4], const void* row) {
    const int t = int(threadIdx.x), base = t & ~31, lane = t & 31;
    g_ldsm[size_t(t)] = row;
    g_wbar->arrive_and_wait();
    for (int i = 0; i < 4; ++i)
        std::memcpy(&r[i], static_cast<const uint8_t*>(g_ldsm[size_t(base + 8 * i + lane / 4)]) + 4 * (lane % 4), 4);
    g_wbar->arrive_and_wait();
}
// ldmatrix .x4.trans: lane (g, t) gets the 16-bit values at column g of rows 2t, 2t + 1 of
// matrix i (rows named by lanes 8i + 2t, 8i + 2t + 1).
inline void ldsm_x4_trans(uint32_t (&r)[4], const void* row) {
    const int t = int(threadIdx.x), base = t & ~31, lane = t & 31, g = lane / 4, tq = lane % 4;
    g_ldsm[size_t(t)] = row;
    g_wbar->arrive_and_wait();
    for (int i = 0; i < 4; ++i) {
        uint16_t lo, hi;
        std::memcpy(&lo, static_cast<const uint8_t*>(g_ldsm[size_t(base + 8 * i + 2 * tq)]) + 2 * g, 2);
        std::memcpy(&hi, static_cast<const uint8_t*>(g_ldsm[size_t(base + 8 * i + 2 * tq + 1)]) + 2 * g, 2);
        r[i] = uint32_t(lo) | (uint32_t(hi) << 16);
    }
    g_wbar->arrive_and_wait();
}
inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {  // bytes of y:x picked by s's nibbles
    const uint64_t v = (uint64_t(y) << 32) | x;
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) r |= uint32_t((v >> (8 * ((s >> (4 * i)) & 7))) & 0xffu) << (8 * i);
    return r;
}
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
// mma.sync m16n8k16 with 16-bit floats (f16, or bf16) and f32 accumulation, d += A . B, the
// PTX fragment layouts (two values a register, the lower k in the low half): A regs 0, 2
// row g, regs 1, 3 row g + 8, k 2t, 2t + 1 (+ 8 for regs 2, 3); B column g, k 2t, 2t + 1 (+ 8
// for reg 1). The sum is one fused multiply-add chain from d in k order: a fixed order, as
// the hardware's is, though not the hardware's rounding. Only the thread's warp meets.
inline std::vector<uint32_t> g_h16(1024 * 6);
template <bool bf16>
inline void mma_h16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
    const int t = int(threadIdx.x), base = t & ~31, lane = t & 31, g = lane >> 2, tig = lane & 3;
    uint32_t* me = &g_h16[size_t(t) * 6];
    me[0] = a0, me[1] = a1, me[2] = a2, me[3] = a3, me[4] = b0, me[5] = b1;
    g_wbar->arrive_and_wait();
    auto val = [](uint32_t w, int k) {
        const uint16_t h = uint16_t(k % 2 ? w >> 16 : w & 0xffffu);
        return bf16 ? glia::bf16_to_f32(h) : glia::f16_to_f32(h);
    };
    auto A = [&](int row, int k) { return val(g_h16[size_t(base + (row % 8) * 4 + (k % 8) / 2) * 6 + (row >= 8) + 2 * (k >= 8)], k); };
    auto B = [&](int k, int n) { return val(g_h16[size_t(base + n * 4 + (k % 8) / 2) * 6 + 4 + (k >= 8)], k); };
    float r[4];
    for (int i = 0; i < 4; ++i) {
        const int row = g + 8 * (i >> 1), col = tig * 2 + (i & 1);
        float s = d[i];
        for (int k = 0; k < 16; ++k) s = std::fma(A(row, k), B(k, col), s);
        r[i] = s;
    }
    g_wbar->arrive_and_wait();
    for (int i = 0; i < 4; ++i) d[i] = r[i];
}

// wgmma (warpgroup products, A from registers, B from shared memory through a descriptor).
// The descriptor here is the byte offset into the dynamic shared memory and the two strides
// (the device's holds the shared address and the strides in 16-byte units); B is read as
// the device is documented to read it: value (k, n) of core matrix (n / 8, k / 8) at start
// + (n / 8) * sbo + (k / 8) * lbo + 16 (n % 8) + 2 (k % 8). Each output is the mma.sync
// emulation's chain (fused multiply-adds from d in k order). Every thread of the block
// calls it at once (both warpgroups), so the block barrier stands in for the warpgroup's.
inline uint64_t smem_desc(const void* start, uint32_t lbo, uint32_t sbo) {
    const uint64_t off = uint64_t(static_cast<const char*>(start) - g_dyn.data());
    return off | (uint64_t(lbo) << 24) | (uint64_t(sbo) << 44);
}
inline void wgmma_fence() {}
inline void wgmma_commit() {}
template <int N> void wgmma_wait() {}
inline void fence_proxy_async() {}
inline void keep_reg(uint32_t&) {}
inline void keep_reg(float&) {}
inline void keep_reg(uint4&) {}
inline std::vector<uint32_t> g_wg_a(1024 * 4);
template <bool bf16, int N>
inline void wgmma_rs(float (&d)[N / 2], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint64_t desc) {
    const int th = int(threadIdx.x), wg_base = th & ~127, lane = th & 31, g = lane >> 2, tig = lane & 3;
    uint32_t* me = &g_wg_a[size_t(th) * 4];
    me[0] = a0, me[1] = a1, me[2] = a2, me[3] = a3;
    g_bar->arrive_and_wait();
    auto val = [](uint32_t w, int k) {
        const uint16_t h = uint16_t(k % 2 ? w >> 16 : w & 0xffffu);
        return bf16 ? glia::bf16_to_f32(h) : glia::f16_to_f32(h);
    };
    const int warp_base = th & ~31;
    auto A = [&](int row, int k) {  // row of this warp's 16
        return val(g_wg_a[size_t(warp_base + (row % 8) * 4 + (k % 8) / 2) * 4 + (row >= 8) + 2 * (k >= 8)], k);
    };
    const char* start = g_dyn.data() + (desc & 0xffffffu);
    const uint64_t lbo = (desc >> 24) & 0xfffffu, sbo = desc >> 44;
    auto B = [&](int k, int n) {
        uint16_t h;
        std::memcpy(&h, start + (n / 8) * sbo + (k / 8) * lbo + 16 * (n % 8) + 2 * (k % 8), 2);
        return bf16 ? glia::bf16_to_f32(h) : glia::f16_to_f32(h);
    };
    (void)wg_base;
    float r[N / 2];
    for (int i = 0; i < N / 8; ++i)
        for (int c = 0; c < 4; ++c) {
            const int row = g + 8 * (c >> 1), col = 8 * i + 2 * tig + (c & 1);
            float s = d[4 * i + c];
            for (int k = 0; k < 16; ++k) s = std::fma(A(row, k), B(k, col), s);
            r[4 * i + c] = s;
        }
    g_bar->arrive_and_wait();
    for (int i = 0; i < N / 2; ++i) d[i] = r[i];
}
