// SHA-256 (FIPS 180-4) of a byte buffer, as lowercase hex.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace glia {

// Incremental form: update() any number of times, then hex() (once).
class Sha256 {
public:
    Sha256();
    void update(const void* data, size_t n);
    std::string hex();  // finalizes

private:
    void block(const uint8_t* p);
    uint32_t h_[8];
    uint8_t buf_[64];
    size_t buf_len_ = 0;
    uint64_t total_ = 0;
};

std::string sha256_hex(const void* data, size_t n);

}  // namespace glia
