// Debug dumps of node outputs, comparable with the reference's eval-callback dumps
// (GLIA_DEBUG_LAYERS=1; compared with ../shared/golden/<model>/layers-once.txt).
#pragma once
#include <cstdio>

#include "graph/graph.h"

namespace glia {

// Writes a summary of node.out (host memory): header line, first/last 3 values of each
// dimension, and the sum of all elements.
void dump_tensor(FILE* out, const Node& node);

}  // namespace glia
