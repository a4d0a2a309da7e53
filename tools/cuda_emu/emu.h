// A tiny CUDA-on-the-host emulator: one std::thread per CUDA thread, one block at a time,
// __syncthreads and warp shuffles through a barrier. Enough for the simple kernels here.
#pragma once
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>
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
template <class T> T __shfl_xor_sync(unsigned, T v, int o) {
    const unsigned t = threadIdx.x;
    g_xchg[t] = double(v);
    g_bar->arrive_and_wait();
    const T r = T(g_xchg[(t & ~31u) | ((t & 31u) ^ unsigned(o))]);
    g_bar->arrive_and_wait();
    return r;
}
template <class F, class... A> void emu_launch(dim3 grid, dim3 block, size_t, cudaStream_t, F f, A... args) {
    gridDim = grid; blockDim = block;
    for (unsigned z = 0; z < grid.z; ++z) for (unsigned y = 0; y < grid.y; ++y) for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = dim3(x, y, z);
        std::barrier<> bar(block.x);
        g_bar = &bar;
        std::vector<std::thread> th;
        for (unsigned t = 0; t < block.x; ++t)
            th.emplace_back([&, t] { threadIdx = dim3(t); f(args...); bar.arrive_and_drop(); });
        for (auto& h : th) h.join();
    }
}
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
inline float __uint_as_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
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
#define __launch_bounds__(x)
#define __forceinline__ inline
#define cudaGetLastError() 0
