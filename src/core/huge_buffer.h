// Large anonymous memory for data the CPU streams through at random-ish offsets (KV
// cache, packed weights, graph activations): 2 MiB-aligned and, on Linux, advised onto
// transparent huge pages, so reading it does not miss the TLB every few rows. Contents
// start zeroed (fresh anonymous pages); the buffer cannot be copied, only moved.
#pragma once
#include <cstddef>
#include <cstdint>

namespace glia {

class HugeBuffer {
public:
    HugeBuffer() = default;
    explicit HugeBuffer(size_t bytes);  // throws glia::Error when the memory is not there
    ~HugeBuffer();
    HugeBuffer(HugeBuffer&& o) noexcept;
    HugeBuffer& operator=(HugeBuffer&& o) noexcept;
    HugeBuffer(const HugeBuffer&) = delete;
    HugeBuffer& operator=(const HugeBuffer&) = delete;

    uint8_t* data() const { return data_; }
    size_t size() const { return size_; }

private:
    void release();
    uint8_t* data_ = nullptr;
    size_t size_ = 0;     // bytes asked for
    size_t mapped_ = 0;   // bytes mapped (rounded up)
};

}  // namespace glia
