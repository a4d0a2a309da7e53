// A weight whose decode layout is built hands its file pages back (DecodeCache::get,
// core/page_out): the layout takes the weight's place in memory. Checked on a real mapped
// file through /proc/self/smaps: the pages leave the process's memory, the bytes are still the file's when read
// again, the products keep their bits, and a weight that other ops read (keep_pages, as the
// CPU backend marks a tied embedding) keeps its pages.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/simd/matmul.h"
#include "backend/cpu/simd/simd.h"
#include "backend/cpu/threadpool.h"
#include "core/f16.h"
#include "core/page_out.h"

namespace glia {
namespace {

using cpu::simd::Isa;

// A file of `bytes` written, flushed to disk (clean pages can be dropped) and mapped
// read-only, as the model loader maps a GGUF file.
struct MappedFile {
    std::string path;
    void* p = MAP_FAILED;
    size_t n = 0;
    explicit MappedFile(const std::vector<uint8_t>& bytes) : n(bytes.size()) {
        char tmpl[] = "/tmp/glia-layout-pages-XXXXXX";
        const int fd = mkstemp(tmpl);
        if (fd < 0) return;
        path = tmpl;
        const bool ok = write(fd, bytes.data(), n) == ssize_t(n) && fsync(fd) == 0;
        if (ok) p = mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
    }
    ~MappedFile() {
        if (p != MAP_FAILED) munmap(p, n);
        if (!path.empty()) std::remove(path.c_str());
    }
    const uint8_t* data() const { return static_cast<const uint8_t*>(p); }
    // Reads every page (brings the file into memory) and returns a checksum.
    unsigned touch() const {
        const volatile uint8_t* v = data();  // reads the optimiser keeps
        unsigned s = 0;
        for (size_t o = 0; o < n; o += 64) s += v[o];
        return s;
    }
    // Pages of the mapping in this process's memory (its Rss in /proc/self/smaps: the
    // pages mapped in; the kernel may keep a dropped page in its cache, unmapped).
    size_t resident() const {
        std::ifstream smaps("/proc/self/smaps");
        const uintptr_t start = reinterpret_cast<uintptr_t>(p);
        std::string line;
        bool in = false;
        while (std::getline(smaps, line)) {
            uintptr_t b = 0, e = 0;
            if (std::sscanf(line.c_str(), "%lx-%lx ", &b, &e) == 2 && line.find(' ') != std::string::npos &&
                line.find('-') < line.find(' ')) {
                in = b == start;
                continue;
            }
            size_t kb = 0;
            if (in && std::sscanf(line.c_str(), "Rss: %zu kB", &kb) == 1)
                return kb * 1024 / size_t(sysconf(_SC_PAGESIZE));
        }
        return size_t(-1);
    }
    size_t pages() const { return (n + size_t(sysconf(_SC_PAGESIZE)) - 1) / size_t(sysconf(_SC_PAGESIZE)); }
};

// Q4_K rows of random quants with small valid f16 scales.
std::vector<uint8_t> q4k_rows(std::mt19937& rng, int64_t K, int64_t N) {
    std::vector<uint8_t> w(row_bytes(DType::Q4_K, K) * size_t(N));
    for (auto& b : w) b = uint8_t(rng());
    std::uniform_real_distribution<float> u(0.001f, 0.05f);
    for (size_t o = 0; o < w.size(); o += dtype_info(DType::Q4_K).type_size)
        for (int h = 0; h < 2; ++h) {
            const uint16_t v = f32_to_f16(u(rng));
            std::memcpy(w.data() + o + 2 * h, &v, 2);
        }
    return w;
}

TEST(DecodeLayoutPages, BuiltLayoutHandsTheFilePagesBack) {
    if (!cpu::simd::isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 VNNI: no decode layout";
    const auto& kk = cpu::simd::kernels(DType::Q4_K, Isa::Avx512);
    ASSERT_TRUE(kk.gemm && kk.gemm->il_rows > 0 && kk.gemm->il_pack_panel);
    std::mt19937 rng(5);
    const int64_t K = 2048, N = 256;  // 288 KiB: 72 pages
    const std::vector<uint8_t> bytes = q4k_rows(rng, K, N);
    const size_t wrow = row_bytes(DType::Q4_K, K);

    // Does this kernel drop a clean file page on MADV_PAGEOUT at all? (Linux >= 5.4)
    {
        MappedFile probe(bytes);
        ASSERT_NE(probe.p, MAP_FAILED);
        probe.touch();
        page_out(probe.data(), probe.n);
        if (probe.resident() == probe.pages()) GTEST_SKIP() << "this kernel keeps pages on MADV_PAGEOUT";
    }

    MappedFile f(bytes);
    ASSERT_NE(f.p, MAP_FAILED);
    cpu::ThreadPool pool(2);
    std::vector<float> x(K);
    std::normal_distribution<float> g(0.f, 1.f);
    for (auto& v : x) v = g(rng);
    std::vector<uint8_t> scratch;
    const cpu::MatmulAct a = cpu::matmul_prepare(kk, x.data(), K * 4, K, 1, scratch, pool);

    // The product from the file's rows first (no cache), with every page in memory.
    f.touch();
    ASSERT_EQ(f.resident(), f.pages());
    std::vector<float> want(N, -1.f), got(N, -2.f), again(N, -3.f);
    cpu::matmul_compute(kk, f.data(), wrow, K, N, a, 1, want.data(), pool);

    cpu::DecodeCache cache;
    bool built = false;
    ASSERT_NE(cache.get(kk, f.data(), wrow, K, N, pool, &built), nullptr);
    EXPECT_TRUE(built);
    EXPECT_EQ(f.resident(), 0u) << "the layout was built but the file's pages stayed in memory";
    cpu::matmul_compute(kk, f.data(), wrow, K, N, a, 1, got.data(), pool, nullptr, &cache);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
    EXPECT_EQ(f.resident(), 0u) << "a product on the layout read the weight's own bytes";
    // More than kDecodeLayoutMaxTokens tokens: the GEMM packs its panels from the layout.
    const int64_t T = cpu::kDecodeLayoutMaxTokens + 3;
    std::vector<float> xs(size_t(K * T));
    for (auto& v : xs) v = g(rng);
    std::vector<uint8_t> scratch2;
    const cpu::MatmulAct b = cpu::matmul_prepare(kk, xs.data(), K * 4, K, T, scratch2, pool);
    std::vector<float> many(size_t(N * T));
    cpu::matmul_compute(kk, f.data(), wrow, K, N, b, T, many.data(), pool, nullptr, &cache);
    EXPECT_EQ(f.resident(), 0u) << "the GEMM read the weight's own bytes";
    // Nothing lost: the bytes read again are the file's.
    EXPECT_EQ(0, std::memcmp(f.data(), bytes.data(), bytes.size()));
    cpu::matmul_compute(kk, f.data(), wrow, K, N, a, 1, again.data(), pool);
    EXPECT_EQ(0, std::memcmp(want.data(), again.data(), want.size() * sizeof(float)));

    // A weight that another op reads keeps its pages.
    MappedFile kept(bytes);
    ASSERT_NE(kept.p, MAP_FAILED);
    kept.touch();
    cpu::DecodeCache cache2;
    cache2.keep_pages(kept.data(), kept.n);
    built = false;
    ASSERT_NE(cache2.get(kk, kept.data(), wrow, K, N, pool, &built), nullptr);
    EXPECT_TRUE(built);
    EXPECT_EQ(kept.resident(), kept.pages());
}

}  // namespace
}  // namespace glia
