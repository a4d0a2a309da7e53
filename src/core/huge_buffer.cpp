#include "core/huge_buffer.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/error.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace glia {

namespace {
constexpr size_t kHuge = size_t(2) << 20;
}

HugeBuffer::HugeBuffer(size_t bytes) : size_(bytes) {
    if (bytes == 0) return;
    mapped_ = (bytes + kHuge - 1) / kHuge * kHuge;
#if defined(__linux__)
    // Map one huge page more than needed and trim to a 2 MiB boundary.
    const size_t span = mapped_ + kHuge;
    void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail("out of memory: cannot map ", bytes >> 20, " MiB");
    auto base = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (base + kHuge - 1) & ~uintptr_t(kHuge - 1);
    if (aligned > base) munmap(p, aligned - base);
    const uintptr_t end = base + span, used_end = aligned + mapped_;
    if (end > used_end) munmap(reinterpret_cast<void*>(used_end), end - used_end);
    data_ = reinterpret_cast<uint8_t*>(aligned);
    madvise(data_, mapped_, MADV_HUGEPAGE);  // advice only: fine if it is refused
#else
    data_ = static_cast<uint8_t*>(std::aligned_alloc(kHuge, mapped_));
    if (!data_) fail("out of memory: cannot allocate ", bytes >> 20, " MiB");
    std::memset(data_, 0, mapped_);
#endif
}

void HugeBuffer::release() {
    if (!data_) return;
#if defined(__linux__)
    munmap(data_, mapped_);
#else
    std::free(data_);
#endif
    data_ = nullptr;
    size_ = mapped_ = 0;
}

HugeBuffer::~HugeBuffer() { release(); }

HugeBuffer::HugeBuffer(HugeBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), mapped_(std::exchange(o.mapped_, 0)) {}

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& o) noexcept {
    if (this != &o) {
        release();
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
        mapped_ = std::exchange(o.mapped_, 0);
    }
    return *this;
}

}  // namespace glia
