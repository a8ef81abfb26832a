// Variants 1 and 2 of the blog: attention as five separate ops.
//   naive:   every step allocates its result; masked_fill copies (clone + fill).
//   inplace: mul_, masked_fill_, softmax_ reuse the scores tensor; no copy.
// The causal mask is an N×N bool tensor built once in prepare(), as the blog builds it outside forward().
#include <algorithm>
#include <limits>

#include "attnprof/allocator.h"
#include "attnprof/attention.h"
#include "attnprof/error.h"
#include "attnprof/ops.h"
#include "attnprof/profiler.h"
#include "attention/variants.h"

namespace attnprof {

double variants::fill_mask_bytes(const AttnProblem& p) {
  // What the op that makes the mask writes: triu's Nq·Nk bytes, or logical_not's copy of a bool mask at its
  // own shape (a key-padding [B,1,1,Nk] mask is B·Nk bytes).
  if (p.mask == MaskKind::Causal) return ops::triu_mask_cost(p.Nq, p.Nk).bytes_written;
  if (p.mask == MaskKind::Bool) return ops::logical_not_cost(p.mask_shape).bytes_written;
  return 0.0;
}

double naive_matmul_scratch_bytes(const AttnProblem& p) {
  const Shape4 q{p.B, p.Hq, p.Nq, p.D}, kt{p.B, p.Hkv, p.D, p.Nk}, s{p.B, p.Hq, p.Nq, p.Nk}, v{p.B, p.Hkv, p.Nk, p.D};
  return std::max(ops::matmul_scratch_bytes(q, kt, p.dtype), ops::matmul_scratch_bytes(s, v, p.dtype));
}

double naive_peak_bytes(const AttnProblem& p, bool inplace, double matmul_scratch) {
  // Beyond q, k and v, which the caller holds: the prepared mask throughout, then at the worst moment either
  // an out-of-place step's input and output scores (two B·Hq·Nq·Nk tensors; one for in-place) or, in the
  // second matmul, the probabilities beside the output and the matmul's scratch. In double: at a shape too
  // large to run, the integer product would overflow.
  const double nn = double(p.Nq) * double(p.Nk);
  const double scores = double(p.B) * double(p.Hq) * nn * double(dtype_size(p.dtype));
  const double out = double(p.B) * double(p.Hq) * double(p.Nq) * double(p.D) * double(dtype_size(p.dtype));
  return variants::fill_mask_bytes(p) + std::max((inplace ? 1 : 2) * scores, scores + matmul_scratch + out);
}

namespace {

class NaiveRunner final : public Runner {
 public:
  NaiveRunner(const AttnProblem& p, const AttnOptions& o, bool inplace) : p_(p), inplace_(inplace) {
    check_memory_budget(naive_peak_bytes(p, inplace, naive_matmul_scratch_bytes(p)),
                        fmt::format("{} attention at {} (its N×N scores)", inplace ? "in-place" : "naive", p.str()),
                        kNoScoresHint);
    ops::prepare_matmul(p.dtype);  // OpenBLAS is loaded here, not in the first timed matmul
    if (p.mask == MaskKind::Causal) fill_mask_ = ops::triu_mask(p.Nq, p.Nk, 1);
    if (p.mask == MaskKind::Bool) fill_mask_ = ops::logical_not(o.attn_mask);  // SDPA's keep -> masked_fill's fill
    if (p.mask == MaskKind::Additive) add_mask_ = o.attn_mask;
  }

  AttnOutput run(const Tensor& q, const Tensor& k, const Tensor& v) override {
    const double scale = p_.effective_scale();
    const float ninf = -std::numeric_limits<float>::infinity();
    Tensor s = ops::matmul(q, ops::transpose(k));
    if (inplace_) {
      ops::mul_(s, scale);
      if (fill_mask_.defined()) ops::masked_fill_(s, fill_mask_, ninf);
      if (add_mask_.defined()) ops::add_(s, add_mask_);
      ops::softmax_(s);
      return {ops::matmul(s, v), {}};
    }
    s = ops::mul(s, scale);
    if (fill_mask_.defined()) s = ops::masked_fill(s, fill_mask_, ninf);
    if (add_mask_.defined()) s = ops::add(s, add_mask_);
    Tensor attn = ops::softmax(s);
    s = Tensor();  // as in eager Python, the scores die once softmax has consumed them
    return {ops::matmul(attn, v), {}};
  }

 private:
  AttnProblem p_;
  bool inplace_;
  Tensor fill_mask_, add_mask_;
};

}  // namespace

namespace variants {

std::unique_ptr<Runner> make_naive(const AttnProblem& p, const AttnOptions& o, bool inplace) {
  return std::make_unique<NaiveRunner>(p, o, inplace);
}

std::optional<std::string> sgemm_sizes_unsupported(const AttnProblem& p, DType matmul_dtype) {
  if (!ops::matmul_uses_sgemm(matmul_dtype)) return std::nullopt;
  const int64_t longest = std::max({p.Nq, p.Nk, p.D});
  if (longest <= ops::kSgemmMaxDim) return std::nullopt;
  return fmt::format("its {} matmuls run on OpenBLAS's sgemm, which takes sizes up to {} (32-bit ints), and this "
                     "problem has {} = {}",
                     dtype_name(matmul_dtype), ops::kSgemmMaxDim, longest == p.Nk ? "Nk" : longest == p.Nq ? "Nq" : "D",
                     longest);
}

OpCost mask_ops_cost(const AttnProblem& p, DType dtype, bool copy) {
  const Shape4 s{p.B, p.Hq, p.Nq, p.Nk};
  OpCost c;
  if (p.mask == MaskKind::None) return c;
  if (copy) c += ops::copy_cost(s, dtype, dtype);
  if (p.mask == MaskKind::Additive) return c += ops::add_cost(s, dtype, p.mask_shape, p.mask_dtype);
  return c += ops::masked_fill_cost(s, dtype, p.mask == MaskKind::Causal ? Shape4{1, 1, p.Nq, p.Nk} : p.mask_shape);
}

OpCost naive_cost(const AttnProblem& p, bool inplace, OpCost (*gemm)(const Shape4&, const Shape4&, DType)) {
  // The sum of its ops' cost models, so the variant's bytes are what its ops report.
  const Shape4 q{p.B, p.Hq, p.Nq, p.D}, kt{p.B, p.Hkv, p.D, p.Nk}, s{p.B, p.Hq, p.Nq, p.Nk},
      v{p.B, p.Hkv, p.Nk, p.D};
  OpCost c = gemm(q, kt, p.dtype);
  c += ops::mul_cost(s, p.dtype);
  c += mask_ops_cost(p, p.dtype, /*copy=*/!inplace);
  c += ops::softmax_cost(s, p.dtype);
  c += gemm(s, v, p.dtype);
  return c.with_flops(attention_flops(p));  // report the convention's useful FLOPs, like every variant
}

}  // namespace variants
}  // namespace attnprof
