// The NCCL communicator: the collectives between GPUs (NVLink / PCIe in a host, sockets
// or InfiniBand between hosts). Built only when nccl.h and libnccl are found next to the
// CUDA toolkit (GLIA_HAVE_NCCL).
//
// NOT RUN YET: this compiles in CI, but no multi-GPU machine has executed it, and no test
// claims to exercise it. The runtime does not use it: a Runner refuses GPU ranks (runner.h).
//
// Today's form works on host buffers (the CPU kernel of ALL_REDUCE / ALL_GATHER calls it):
// it stages the rank's part onto its GPU, all-gathers every rank's part with NCCL on its
// own stream and sums them on the host in rank order, so every rank gets the same bits
// as with ThreadGroup. The fast form (ALL_REDUCE as a CUDA-backend node on the backend's
// stream, no host round trip) is the next step on a multi-GPU machine.
#pragma once
#include <memory>
#include <string>

#include "parallel/communicator.h"

namespace glia {

// A new NCCL unique id (rank 0 makes it; bootstrap_exchange hands it to the others).
std::string nccl_unique_id();

// Rank `rank` of `world` on CUDA device `device`, joined through `id`.
std::unique_ptr<Communicator> make_nccl_communicator(int rank, int world, const std::string& id, int device);

}  // namespace glia
