// Tells the kernel that a range of memory will not be read again soon (MADV_PAGEOUT): the
// whole pages inside it that belong to a mapped file are dropped from memory (read again
// from the file if touched); anonymous pages keep their contents. Advice only: nothing
// happens where the kernel does not offer it.
#pragma once
#include <cstddef>

namespace glia {

void page_out(const void* p, size_t n);

}  // namespace glia
