// Input validation and the shape-level description shared by every variant.
#include <algorithm>
#include <cmath>
#include <limits>

#include "attnprof/attention.h"
#include "attnprof/error.h"
#include "attnprof/ops.h"

namespace attnprof {

std::string_view mask_kind_name(MaskKind m) {
  switch (m) {
    case MaskKind::None: return "no-mask";
    case MaskKind::Causal: return "causal";
    case MaskKind::Bool: return "bool-mask";
    case MaskKind::Additive: return "additive-mask";
  }
  return "?";
}

double AttnProblem::effective_scale() const { return scale != 0.0 ? scale : 1.0 / std::sqrt(double(D)); }

std::string AttnProblem::str() const {
  std::string s = fmt::format("B={} Hq={} Hkv={} Nq={} Nk={} D={} {} {}", B, Hq, Hkv, Nq, Nk, D, dtype_name(dtype),
                              mask_kind_name(mask));
  if (scale != 0.0) s += fmt::format(" scale={}", scale);
  return s;
}

AttnProblem AttnProblem::from(const Tensor& q, const Tensor& k, const Tensor& v, const AttnOptions& o) {
  ATTNPROF_CHECK(q.defined() && k.defined() && v.defined(), "attention needs q, k and v (one is empty)");
  ATTNPROF_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(),
                 "q, k and v must share a dtype: got q {}, k {}, v {}", dtype_name(q.dtype()), dtype_name(k.dtype()),
                 dtype_name(v.dtype()));
  ATTNPROF_CHECK(q.dtype() == DType::F32 || is_half(q.dtype()),
                 "unsupported dtype {} for attention: expected fp32, bf16 or fp16", dtype_name(q.dtype()));
  return from_shapes(q.shape(), k.shape(), v.shape(), q.dtype(), o);
}

AttnProblem AttnProblem::from_shapes(const Shape4& q, const Shape4& k, const Shape4& v, DType dtype,
                                     const AttnOptions& o) {
  for (const Shape4* s : {&q, &k, &v})
    ATTNPROF_CHECK(std::all_of(s->begin(), s->end(), [](int64_t d) { return d > 0; }),
                   "attention input of shape {} is empty", shape_str(*s));
  // Every size and cost below multiplies dims in int64 (elements, bytes, block counts): a shape whose tensors,
  // or whose N×N scores (what naive holds, and what each cost model counts), pass 2^53 elements (16 PiB of bf16)
  // could overflow them, and runs on no machine. Refused here, in double, before any product is formed.
  constexpr double kMaxElements = 9007199254740992.0;  // 2^53: exact in a double, 2^56 bytes at 8 per element
  auto elements = [](std::initializer_list<int64_t> dims) {
    double n = 1.0;
    for (int64_t d : dims) n *= double(d);
    return n;
  };
  for (const auto& [what, n] : {std::pair<const char*, double>{"q", elements({q[0], q[1], q[2], q[3]})},
                                {"k and v", elements({k[0], k[1], k[2], k[3]})},
                                {"N×N scores", elements({q[0], q[1], q[2], k[2]})}})
    ATTNPROF_CHECK(n <= kMaxElements,
                   "attention of q {} over k, v {}: the {} would hold {:.3g} elements, past 2^53 (9.0e15), the most "
                   "any tensor or cost here can count; no machine runs it",
                   shape_str(q), shape_str(k), what, n);
  ATTNPROF_CHECK(q[0] == k[0] && k[0] == v[0], "batch sizes differ: q {}, k {}, v {}", shape_str(q), shape_str(k),
                 shape_str(v));
  ATTNPROF_CHECK(k == v, "k and v shapes differ: k {}, v {}", shape_str(k), shape_str(v));
  ATTNPROF_CHECK(q[3] == k[3], "head dims differ: q has D={}, k and v have D={}", q[3], k[3]);
  ATTNPROF_CHECK(q[1] % k[1] == 0,
                 "query heads ({}) must be a multiple of key/value heads ({}) for grouped-query attention", q[1],
                 k[1]);
  AttnProblem p;
  p.B = q[0];
  p.Hq = q[1];
  p.Hkv = k[1];
  p.Nq = q[2];
  p.Nk = k[2];
  p.D = q[3];
  p.dtype = dtype;
  if (o.scale) {
    ATTNPROF_CHECK(std::isfinite(*o.scale) && *o.scale != 0.0, "scale must be finite and non-zero, got {}",
                   *o.scale);
    // The kernels scale in fp32: a scale past float's range (or under its smallest normal) would turn every
    // score into inf or 0 there, and the output into NaN or a plain average, where the fp64 reference is fine.
    ATTNPROF_CHECK(std::fabs(*o.scale) <= double(std::numeric_limits<float>::max()) &&
                       std::fabs(*o.scale) >= double(std::numeric_limits<float>::min()),
                   "scale {} is outside fp32's normal range ({:g} to {:g}), in which the kernels scale the scores",
                   *o.scale, double(std::numeric_limits<float>::min()), double(std::numeric_limits<float>::max()));
    p.scale = *o.scale;
  }
  if (o.attn_mask.defined()) {
    ATTNPROF_CHECK(!o.is_causal, "is_causal and an explicit attn_mask cannot be used together");
    const Tensor& m = o.attn_mask;
    ATTNPROF_CHECK(m.numel() > 0, "attn_mask of shape {} is empty", shape_str(m.shape()));
    ops::check_broadcast(m.shape(), {p.B, p.Hq, p.Nq, p.Nk}, "attn_mask");
    ATTNPROF_CHECK(m.dtype() == DType::Bool || m.dtype() == DType::F32 || is_half(m.dtype()),
                   "attn_mask must be bool or floating point, got {}", dtype_name(m.dtype()));
    ATTNPROF_CHECK(!is_half(m.dtype()) || !is_half(dtype) || m.dtype() == dtype,
                   "a {} attn_mask cannot be added to {} scores: pass it as bool, fp32 or {}", dtype_name(m.dtype()),
                   dtype_name(dtype), dtype_name(dtype));
    p.mask = m.dtype() == DType::Bool ? MaskKind::Bool : MaskKind::Additive;
    p.mask_shape = m.shape();
    p.mask_dtype = m.dtype();
  } else if (o.is_causal) {
    p.mask = MaskKind::Causal;
  }
  return p;
}

double causal_visible_pairs(int64_t nq, int64_t nk) {
  // Top-left aligned: query i sees keys 0..i. The visible region's area, the diagonal counted half, so that
  // Nq == Nk gives exactly N²/2 (FlashAttention's halving).
  const double q = double(nq), k = double(nk);
  return q <= k ? q * q / 2.0 : q * k - k * k / 2.0;
}

double attention_flops(const AttnProblem& p) {
  const double pairs = p.mask == MaskKind::Causal ? causal_visible_pairs(p.Nq, p.Nk) : double(p.Nq) * double(p.Nk);
  return 4.0 * double(p.B) * double(p.Hq) * double(p.D) * pairs;
}

OpCost fused_attention_cost(const AttnProblem& p, double bytes_read, double bytes_written) {
  OpCost c{attention_flops(p), bytes_read, bytes_written};
  if (p.dtype == DType::BF16) c.bf16_flops = c.flops;
  return c;
}

double attention_io_bytes(const AttnProblem& p) {
  const double es = double(dtype_size(p.dtype));
  return es * double(p.B) * double(p.D) * (2.0 * double(p.Hq) * double(p.Nq) + 2.0 * double(p.Hkv) * double(p.Nk));
}

}  // namespace attnprof
