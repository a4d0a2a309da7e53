// The plain scalar reference of every op: the textbook math in double precision over
// dequantized operands, written for clarity, not speed. Every other implementation of an
// op (SIMD, CUDA, fused) is checked against this one (op_check.h).
#pragma once
#include <vector>

#include "graph/graph.h"

namespace glia {

// Computes node n's output from its operands (host memory) into out[] (n.out's elements in
// order; I32 outputs as their values). Throws glia::Error for an op it does not know.
void reference_op(const Node& n, std::vector<double>& out);

}  // namespace glia
