// Communicator: the collectives tensor parallelism needs, between the `world` ranks of a
// group (src/model/shard.h splits a model for one rank; the graph's ALL_REDUCE and
// ALL_GATHER nodes call these).
//
// Every collective is deterministic: every rank receives the same bits, and sums add the
// ranks' contributions in rank order (((r0 + r1) + r2) + ...), so a run's tokens do not
// depend on thread timing or on which rank reads them. Every rank must call the same
// collectives in the same order with the same sizes (the ranks run the same graph).
#pragma once
#include <cstddef>
#include <string>

namespace glia {

class Communicator {
public:
    virtual ~Communicator() = default;
    virtual int rank() const = 0;
    virtual int world() const = 0;
    // "threads" (ranks in this process), "nccl" (GPUs, several processes or machines).
    virtual const char* kind() const = 0;

    // buf[i] = sum over ranks r (in rank order) of rank r's buf[i], on every rank.
    virtual void all_reduce_sum(float* buf, size_t n) = 0;
    // out[r * n + i] = rank r's in[i], on every rank (out holds world * n floats).
    virtual void all_gather(const float* in, float* out, size_t n) = 0;

    // A rank failed: ranks waiting in a collective (now or later) get an error naming
    // `why` instead of waiting for it forever. The group cannot be used afterwards.
    virtual void abort(const std::string& why) = 0;
};

}  // namespace glia
