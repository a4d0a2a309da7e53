// Which nodes run as the prologue of the one-token packed products (prologue.h). Host code.
#include <cstdlib>
#include <cstring>
#include <string>

#include "packed.cuh"
#include "prologue.h"
#include "rowvec.cuh"

namespace glia::cuda {
namespace {

// One row of ne0 float values (a view's first row is its data).
bool f32_row(const Tensor* t, int64_t ne0) {
    return t && t->type == DType::F32 && t->ne[0] == ne0 && t->n_rows() == 1;
}
// Read or written as float4 chunks, as the separate kernels would (k_rows.cu's norm_vec,
// k_fused.cu): 16-byte aligned (placed memory only).
bool chunks_ok(const Tensor* t, bool placed) { return !placed || !t || aligned16(t->data); }
bool rows_ok(const Tensor* t, bool placed) { return !placed || !t || rows16(*t); }

}  // namespace

bool prologues_enabled(ProKind kind) {
    static const int mask = [] {  // bit k: kind k
        const char* e = std::getenv("GLIA_CUDA_PROLOGUE");
        if (!e || !*e || std::strcmp(e, "0") == 0) return 0;
        if (std::strcmp(e, "1") == 0) return 0xe;
        int m = 0;
        const std::string s = std::string(",") + e + ",";
        if (s.find(",swiglu,") != std::string::npos) m |= 1 << PRO_SWIGLU;
        if (s.find(",norm,") != std::string::npos) m |= 1 << PRO_NORM;
        if (s.find(",add_norm,") != std::string::npos) m |= 1 << PRO_ADD_NORM;
        return m;
    }();
    return (mask >> kind) & 1;
}

int64_t prologue_max_blocks() {
    static const int64_t v = [] {
        const char* e = std::getenv("GLIA_CUDA_PROLOGUE_MAX_BLOCKS");
        return e && *e ? int64_t(std::atoll(e)) : int64_t(1) << 40;
    }();
    return v;
}

ProKind prologue_fusable(const Node* const* pre, int npre, const Node* const* products, int count, bool placed) {
    if (npre < 1 || npre > 2 || count < 1) return PRO_NONE;
    const Node& last = *pre[npre - 1];
    ProKind kind = PRO_NONE;
    if (npre == 1 && last.op == Op::SWIGLU) kind = PRO_SWIGLU;
    else if (npre == 1 && last.op == Op::RMS_NORM) kind = PRO_NORM;
    else if (npre == 2 && last.op == Op::RMS_NORM && add_rms_norm_fusable(*pre[0], last)) kind = PRO_ADD_NORM;
    if (kind == PRO_NONE) return PRO_NONE;
    const Tensor* out = last.out;
    const int64_t ne0 = out->ne[0];
    if (ne0 % 256 != 0 || !f32_row(out, ne0) || !out->is_contiguous() || !chunks_ok(out, placed)) return PRO_NONE;
    // What the prologue reads: x, y, w (prologue.h).
    const Tensor *x = nullptr, *y = nullptr, *w = nullptr, *sum = nullptr;
    if (kind == PRO_SWIGLU) {
        x = last.src[BinaryArg::A], y = last.src[BinaryArg::B];
        if (!f32_row(y, ne0) || !rows_ok(y, placed)) return PRO_NONE;
    } else {
        w = last.src[NormArg::W];
        if (w && (w->type != DType::F32 || w->ne[0] != ne0 || !w->is_contiguous() || !chunks_ok(w, placed)))
            return PRO_NONE;
        x = kind == PRO_NORM ? last.src[NormArg::X] : pre[0]->src[BinaryArg::A];
        if (kind == PRO_ADD_NORM) {
            y = pre[0]->src[BinaryArg::B], sum = pre[0]->out;
            if (!f32_row(y, ne0) || !rows_ok(y, placed) || !f32_row(sum, ne0) || !sum->is_contiguous() ||
                !chunks_ok(sum, placed))
                return PRO_NONE;
        }
    }
    if (!f32_row(x, ne0) || !rows_ok(x, placed)) return PRO_NONE;
    for (int i = 0; i < count; ++i) {
        const Node& p = *products[i];
        const Tensor* px = p.src[MatmulArg::X];
        if (p.op != Op::MATMUL || !p.src[MatmulArg::W] || !packable(*p.src[MatmulArg::W]) || !px ||
            p.src[MatmulArg::W]->ne[0] != ne0 || px->ne[0] != ne0 || px->n_rows() != 1 ||
            px->root() != out->root() || px->root_offset() != out->root_offset() ||
            !matmul_packed_one_token(p, kind))
            return PRO_NONE;
    }
    if (!placed) return kind;
    // One launch reads x, y, w and writes out, sum and the products' outputs: none of those
    // writes may meet a read or another write.
    const Tensor* reads[3] = {x, y, w};
    std::vector<const Tensor*> writes = {out};
    if (sum) writes.push_back(sum);
    for (int i = 0; i < count; ++i) writes.push_back(products[i]->out);
    for (size_t i = 0; i < writes.size(); ++i) {
        for (const Tensor* r : reads)
            if (r && overlaps(*writes[i], *r)) return PRO_NONE;
        for (size_t j = i + 1; j < writes.size(); ++j)
            if (overlaps(*writes[i], *writes[j])) return PRO_NONE;
    }
    return kind;
}

ActPrologue prologue_of(ProKind kind, const Node* const* pre) {
    ActPrologue p;
    p.kind = kind;
    const Node& last = kind == PRO_ADD_NORM ? *pre[1] : *pre[0];
    p.out = last.out->ptr<float>();
    p.ne0 = int(last.out->ne[0]);
    if (kind == PRO_SWIGLU) {
        p.x = last.src[BinaryArg::A]->ptr<float>();
        p.y = last.src[BinaryArg::B]->ptr<float>();
        return p;
    }
    p.w = last.src[NormArg::W] ? last.src[NormArg::W]->ptr<float>() : nullptr;
    p.eps = last.p<NormParams>().eps;
    p.norm_threads = norm_threads(p.ne0);
    if (kind == PRO_NORM) {
        p.x = last.src[NormArg::X]->ptr<float>();
    } else {
        p.x = pre[0]->src[BinaryArg::A]->ptr<float>();
        p.y = pre[0]->src[BinaryArg::B]->ptr<float>();
        p.sum = pre[0]->out->ptr<float>();
    }
    return p;
}

}  // namespace glia::cuda
