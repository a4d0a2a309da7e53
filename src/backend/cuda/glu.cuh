// The gated activations of the FFNs (GluKind): SWIGLU silu(g) u and SITU, one formula for
// every kernel that applies them (the expert products' epilogues, SITU on its own).
#pragma once

namespace glia::cuda {

__device__ __forceinline__ float situ_value(float g, float u, float beta, float linear_beta) {
    const float a = beta * tanhf(g * (1.0f / beta));
    const float sg = 1.0f / (1.0f + expf(-g));
    return (a * sg) * (linear_beta * tanhf(u * (1.0f / linear_beta)));
}
__device__ __forceinline__ float swiglu_value(float g, float u) { return g / (1.0f + expf(-g)) * u; }

}  // namespace glia::cuda
