#!/usr/bin/env python3
"""Writes kernels_emu.h: the CUDA backend's newer kernel files (src/backend/cuda/) turned
into host C++ for emu.h (kernel launches become emu_launch calls, __shared__ becomes static,
namespace glia::emucuda so that the real objects can be linked beside them)."""
import re, sys
W = sys.argv[1] + '/src/backend/cuda/'
out_path = sys.argv[2]

def body(f):
    s = open(W + f).read()
    s = re.sub(r'#include "[^"]*"\n', '', s)
    return s.replace('#pragma once\n', '')

head = '''#include "emu.h"
#include "core/error.h"
#include "core/f16.h"
#include "graph/graph.h"
namespace glia::cuda {
inline float h2f(uint16_t h) { return glia::f16_to_f32(h); }
inline float round_h(float f) { return glia::f16_to_f32(glia::f32_to_f16(f)); }
inline float warp_sum(float v) { for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o); return v; }
struct Rows {
    const char* p; int64_t nb1, nb2; int64_t ne0, ne1;
    static Rows of(const Tensor& t) { return {static_cast<const char*>(t.data), int64_t(t.nb[1]), int64_t(t.nb[2]), t.ne[0], t.ne[1]}; }
    const float* f(int64_t i1, int64_t i2 = 0) const { return reinterpret_cast<const float*>(p + i1 * nb1 + i2 * nb2); }
};
}
'''
parts = [body('dequant.cuh'), body('strided.cuh'), body('launch.cuh')]
for f in ['k_gemv.cu', 'k_mix.cu', 'k_recurrent.cu', 'k_moe_conv.cu', 'k_rows.cu']:
    parts.append(body(f).replace('kThreads', 'kThreads_' + f.split('.')[0]))
txt = head + '\n'.join(parts)
txt = txt.replace('extern __shared__ float p[];', 'float* p = reinterpret_cast<float*>(g_dyn.data());')
txt = txt.replace('__shared__', 'static')
txt = re.sub(r'([A-Za-z_][\w:]*(?:<[^<>;]*>)?)<<<(.*?)>>>\(',
             lambda m: 'emu_launch(%s, [&](auto... a_) { %s(a_...); }, ' % (m.group(2), m.group(1)), txt, flags=re.S)
txt = txt.replace('namespace glia::cuda', 'namespace glia::emucuda')
open(out_path, 'w').write(txt)
