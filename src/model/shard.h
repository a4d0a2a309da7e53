// Tensor parallelism as a transformation of the model: the profile and the weights of
// rank r of N. The graph builders then build that rank's share of every block from the
// same code (src/model/blocks.cpp), and sum the partial results with ALL_REDUCE:
//
// - attention: each rank holds whole heads: the rows of attn_q (and their output gates)
//   for its query heads, the rows of attn_k / attn_v for the KV heads those query heads
//   read (GQA groups stay whole; with fewer KV heads than ranks a KV head is repeated on
//   the ranks of its group), so its KV cache holds only those KV heads. attn_output is
//   split along its input (K) columns and followed by ALL_REDUCE.
// - feed-forward: ffn_gate / ffn_up split by rows, ffn_down along K, then ALL_REDUCE;
//   MoE experts the same way inside every expert (the router is replicated, so every rank
//   picks the same experts).
// - embeddings replicated; the LM head split by rows (ALL_GATHER of the logits) when the
//   vocabulary divides, else replicated; norms and other vectors replicated.
//
// No weight is copied: a row split is a contiguous range of the mapped tensor, a K split
// a strided view (same row stride, fewer columns) that starts on a block boundary. A K
// split of a quantized matrix therefore needs K / N to be a whole number of blocks; a
// split that is not is refused, naming the tensor and the remedy.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/profile.h"
#include "model/weights.h"

namespace glia {

// Ranks a model can be split into (ignoring block alignment, which depends on the
// tensors' types): every N for which shard_profile succeeds, up to max_world.
std::vector<int> tp_worlds(const ModelProfile& p, int max_world = 16);

// What no number of ranks can split in this model (recurrent layers, latent attention,
// shared experts), as a phrase for messages; empty when nothing.
std::string tp_missing(const ModelProfile& p);

// The profile of rank `rank` of `world`. Throws Error naming what does not divide (heads,
// KV heads, FFN widths) or the layers that have no split (recurrent, latent attention).
ModelProfile shard_profile(const ModelProfile& p, int rank, int world);

// The weights of the rank whose profile is `rank_p` (from shard_profile(full_p, ...)):
// views of `full`'s tensors. Throws Error for a K split that is not block-aligned.
std::unique_ptr<WeightSet> shard_weights(const WeightSet& full, const ModelProfile& full_p,
                                         const ModelProfile& rank_p);

}  // namespace glia
