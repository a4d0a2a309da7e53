// Tensor-core and asynchronous-copy instructions shared by the product kernels (sm_80+):
// mma.sync with the PTX fragment layouts (groupID g = lane / 4, t = lane % 4), cp.async
// into shared memory. tools/cuda_emu supplies host versions of everything here.
#pragma once
#include <cstdint>

namespace glia::cuda {

// int8 x int8 -> int32, C = 0. m16n8k32: A regs 0, 2 row g, regs 1, 3 row g + 8, bytes
// k = 4t + i (+ 16 for regs 2, 3); B column g, bytes k = 4t + i (+ 16 for reg 1).
__device__ __forceinline__ void mma_k32(int (&d)[4], int a0, int a1, int a2, int a3, int b0, int b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0));
}
__device__ __forceinline__ void mma_k16(int (&d)[4], int a0, int a1, int b0) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a0), "r"(a1), "r"(b0), "r"(0));
}

// d += A . B, m16n8k16, 16-bit floats (f16 when !bf16, else bf16) in, f32 accumulation.
// Each register holds two values, the lower k first: A reg 0 row g k 2t, 2t + 1; reg 1 row
// g + 8; regs 2, 3 the same at k + 8. B reg 0 column g k 2t, 2t + 1; reg 1 at k + 8.
// d: rows g (0, 1), g + 8 (2, 3), columns 2t, 2t + 1.
template <bool bf16>
__device__ __forceinline__ void mma_h16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
    if constexpr (bf16)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// ldmatrix .x4 (b16): lane L names row L % 8 of matrix L / 8 (16 bytes of shared memory);
// lane (g, t) receives bytes 4t .. 4t + 3 of row g of matrix i in r[i]: for int8 data that
// is the A (rows as matrix rows) or B (tokens as matrix rows) fragment register of mma.sync.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* row) {
    const unsigned a = unsigned(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// ldmatrix .x4.trans (b16): rows named as above; lane (g, t) receives the 16-bit values at
// column g of rows 2t and 2t + 1 of matrix i in r[i] (low half first): with cells as matrix
// rows and value dims as columns, the B fragment of mma.sync m16n8k16 for P . V.
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const void* row) {
    const unsigned a = unsigned(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// Warpgroup tensor-core products (sm_90a: wgmma), A from registers, B from shared memory.
// Each warp w of the 4-warp group holds rows 16w .. 16w + 15 of A in mma.sync m16n8k16's A
// layout (regs 0, 2 row g, 1, 3 row g + 8; k 2t, 2t + 1, + 8 for regs 2, 3); B is N x 16
// values (k contiguous) in shared memory as 8-row x 16-byte core matrices (128 bytes each,
// row i at byte 16 i), described by smem_desc: core matrix (n / 8, k / 8) at start + (n / 8) *
// sbo + (k / 8) * lbo (no swizzle). d[4i + c]: row g + 8 (c >> 1), column 8i + 2t + (c & 1)
// of the warp's rows, as mma.sync's D for each 8 columns. d += A . B.
__device__ __forceinline__ uint64_t smem_desc(const void* start, uint32_t lbo, uint32_t sbo) {
    const uint32_t a = unsigned(__cvta_generic_to_shared(start));
    return uint64_t((a & 0x3FFFF) >> 4) | (uint64_t(lbo >> 4) << 16) | (uint64_t(sbo >> 4) << 32);
}
__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N of the warpgroup's committed product groups are in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Generic-proxy writes to shared memory (cp.async, st.shared) made visible to wgmma's reads.
__device__ __forceinline__ void fence_proxy_async() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Keeps a register's value where it is until here (operands of an unfinished wgmma).
__device__ __forceinline__ void keep_reg(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }
__device__ __forceinline__ void keep_reg(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void keep_reg(uint4& r) { keep_reg(r.x), keep_reg(r.y), keep_reg(r.z), keep_reg(r.w); }

#define GLIA_WG_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                      "+f"(d[i + 6]), "+f"(d[i + 7])
#define GLIA_WG_R32 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25," \
                    "%26,%27,%28,%29,%30,%31"
#define GLIA_WG_R64 GLIA_WG_R32 ",%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51," \
                    "%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
// The instruction with scale-d = 1 (d += A . B), A and B unscaled, B not transposed.
#define GLIA_WGMMA(shape, type, dregs, aregs, one) \
    "{\n.reg .pred p;\nsetp.ne.b32 p, " one ", 0;\nwgmma.mma_async.sync.aligned." shape ".f32." type "." type " {" dregs \
    "}, " aregs ", p, 1, 1, 0;\n}\n"
template <bool bf16, int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint64_t desc) {
    static_assert(N == 64 || N == 128, "wgmma_rs: 64 or 128 columns");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (N == 64 && bf16)
        asm volatile(GLIA_WGMMA("m64n64k16", "bf16", GLIA_WG_R32, "{%32,%33,%34,%35}, %36", "%37")
                     : GLIA_WG_D8(0), GLIA_WG_D8(8), GLIA_WG_D8(16), GLIA_WG_D8(24)
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1));
    else if constexpr (N == 64)
        asm volatile(GLIA_WGMMA("m64n64k16", "f16", GLIA_WG_R32, "{%32,%33,%34,%35}, %36", "%37")
                     : GLIA_WG_D8(0), GLIA_WG_D8(8), GLIA_WG_D8(16), GLIA_WG_D8(24)
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1));
    else if constexpr (bf16)
        asm volatile(GLIA_WGMMA("m64n128k16", "bf16", GLIA_WG_R64, "{%64,%65,%66,%67}, %68", "%69")
                     : GLIA_WG_D8(0), GLIA_WG_D8(8), GLIA_WG_D8(16), GLIA_WG_D8(24), GLIA_WG_D8(32), GLIA_WG_D8(40),
                       GLIA_WG_D8(48), GLIA_WG_D8(56)
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1));
    else
        asm volatile(GLIA_WGMMA("m64n128k16", "f16", GLIA_WG_R64, "{%64,%65,%66,%67}, %68", "%69")
                     : GLIA_WG_D8(0), GLIA_WG_D8(8), GLIA_WG_D8(16), GLIA_WG_D8(24), GLIA_WG_D8(32), GLIA_WG_D8(40),
                       GLIA_WG_D8(48), GLIA_WG_D8(56)
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1));
#else
    __trap();
#endif
}
#undef GLIA_WGMMA
#undef GLIA_WG_R64
#undef GLIA_WG_R32
#undef GLIA_WG_D8

// Asynchronous 16- and 4-byte copies into shared memory (zero-filled when !pred).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool pred) {
    const unsigned sa = unsigned(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(gmem), "r"(pred ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem, bool pred) {
    const unsigned sa = unsigned(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(sa), "l"(gmem), "r"(pred ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace glia::cuda
