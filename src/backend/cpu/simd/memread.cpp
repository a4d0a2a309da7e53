// A plain streaming read, the yardstick for memory-bound kernels (bench-ops compares the
// decode matmul's weight bandwidth with it, in the same run and conditions).
#include <cstring>

#include "backend/cpu/simd/internal.h"

#ifdef GLIA_SIMD_X86
#include <immintrin.h>
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace glia::cpu::simd {
namespace {

#ifdef GLIA_SIMD_X86
GLIA_TARGET_AVX512 uint64_t read_avx512(const uint8_t* p, size_t n) {
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    size_t i = 0;
    for (; i + 256 <= n; i += 256) {
        a = _mm512_xor_si512(a, _mm512_loadu_si512(p + i));
        b = _mm512_xor_si512(b, _mm512_loadu_si512(p + i + 64));
        c = _mm512_xor_si512(c, _mm512_loadu_si512(p + i + 128));
        d = _mm512_xor_si512(d, _mm512_loadu_si512(p + i + 192));
    }
    uint64_t s = uint64_t(_mm512_reduce_add_epi64(_mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d))));
    for (; i < n; ++i) s += p[i];
    return s;
}

GLIA_TARGET_AVX2 uint64_t read_avx2(const uint8_t* p, size_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        a = _mm256_xor_si256(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
        b = _mm256_xor_si256(b, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
        c = _mm256_xor_si256(c, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
        d = _mm256_xor_si256(d, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
    }
    const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
    uint64_t s = uint64_t(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 1) ^ _mm256_extract_epi64(x, 2) ^
                          _mm256_extract_epi64(x, 3));
    for (; i < n; ++i) s += p[i];
    return s;
}
#endif

uint64_t read_scalar(const uint8_t* p, size_t n) {
    uint64_t s = 0, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) { std::memcpy(&w, p + i, 8); s ^= w; }
    for (; i < n; ++i) s += p[i];
    return s;
}

}  // namespace

uint64_t read_memory(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
#ifdef GLIA_SIMD_X86
    if (isa_supported(Isa::Avx512)) return read_avx512(b, n);
    if (isa_supported(Isa::Avx2)) return read_avx2(b, n);
#endif
    return read_scalar(b, n);
}

}  // namespace glia::cpu::simd
