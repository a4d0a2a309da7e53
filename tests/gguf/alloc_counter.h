// Heap allocations made by the calling thread, counted by the test executable's own global
// operator new (alloc_counter.cpp): an operation count that, unlike a wall-clock time, a
// loaded machine cannot change.
#pragma once
#include <cstdint>

namespace glia::test {

// Allocations (operator new and new[], every form but the aligned ones) by this thread so far.
uint64_t thread_allocations();

}  // namespace glia::test
