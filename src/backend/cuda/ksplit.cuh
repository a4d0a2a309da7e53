// How the products cut K for their fixed summation order (K alone decides it, whatever the
// number of tokens): `units` blocks of K (superblocks, 32-value steps), `per` of them a
// segment (at least `least`), `nseg` segments (at most 16); the segments' sums are added in
// order. Plain C++ (tools/cuda_emu takes it as it is).
#pragma once

namespace glia::cuda {

struct KSplit {
    int units, per, nseg;
};
inline KSplit cut_k(int units, int least) {
    const int per = (units + 15) / 16 > least ? (units + 15) / 16 : least;
    return {units, per, (units + per - 1) / per};
}

}  // namespace glia::cuda
