// Bootstrap of a tensor-parallel group of several processes (`--rank R --world W
// --coordinator HOST:PORT`): rank 0 listens on PORT, every other rank connects and says
// its rank and world size, and rank 0 answers each with the same opaque blob (for NCCL,
// the unique id every rank passes to ncclCommInitRank). Nothing else travels here: the
// collectives themselves go through NCCL.
//
// Wire format (every integer little-endian u32): a frame is "GLTP" magic, a type, a
// payload length and the payload. HELLO (rank -> 0): rank, world. BLOB (0 -> rank): the
// blob. ERROR (0 -> rank): a message, and the bootstrap fails on both sides.
#pragma once
#include <string>

namespace glia {

struct Coordinator {
    std::string host;
    int port = 0;
};
// "HOST:PORT" ("[v6addr]:PORT" too); throws Error naming what is wrong.
Coordinator parse_coordinator(const std::string& s);

struct BootstrapOptions {
    int rank = 0;
    int world = 1;
    Coordinator coordinator;
    // Rank 0: how long to wait for every rank. Others: how long to keep trying to reach
    // rank 0 (it may start later) and then to wait for its answer.
    double timeout_s = 60;
};

// Every rank returns rank 0's blob (`blob` is read on rank 0 only). Throws Error on a
// timeout, a world size or rank that does not fit the coordinator's, a rank claimed
// twice, or a broken connection; the message names the coordinator and the remedy.
std::string bootstrap_exchange(const BootstrapOptions& o, const std::string& blob);

}  // namespace glia
