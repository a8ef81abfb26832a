// Variant 3: scaled_dot_product_attention, one fused entry point with backends, PyTorch's semantics.
//   math:  the composed reference path, as PyTorch's _scaled_dot_product_attention_math: bf16 and fp16
//          inputs are upcast to fp32, q and k are each scaled by sqrt(|scale|) (q with its sign), the causal mask is rebuilt on every
//          call, then matmul, masked_fill/add, softmax, matmul, and a cast back. (The blog found it 3.7×
//          slower than in-place naive for exactly these reasons.)
//   flash: attnprof's FlashAttention-2-style kernel (flash_attention).
//   auto:  the fastest backend that supports the call.
#include <cmath>
#include <limits>

#include "attnprof/allocator.h"
#include "attnprof/attention.h"
#include "attnprof/error.h"
#include "attnprof/ops.h"
#include "attnprof/profiler.h"
#include "attention/variants.h"

namespace attnprof {

SdpaBackend parse_sdpa_backend(std::string_view s) {
  if (s == "auto") return SdpaBackend::Auto;
  if (s == "math") return SdpaBackend::Math;
  if (s == "flash") return SdpaBackend::Flash;
  ATTNPROF_FAIL("unknown SDPA backend '{}': expected auto, math or flash", s);
}

std::string_view sdpa_backend_name(SdpaBackend b) {
  switch (b) {
    case SdpaBackend::Auto: return "auto";
    case SdpaBackend::Math: return "math";
    case SdpaBackend::Flash: return "flash";
  }
  return "?";
}

std::optional<std::string> sdpa_backend_unsupported(SdpaBackend b, const AttnProblem& p) {
  switch (b) {
    case SdpaBackend::Auto: return sdpa_backend_unsupported(sdpa_select_backend(p), p);
    case SdpaBackend::Math: return variants::sgemm_sizes_unsupported(p, DType::F32);  // it upcasts to fp32
    case SdpaBackend::Flash:
      if (p.D > variants::kFlashMaxHeadDim)
        return fmt::format("the flash backend supports head dims up to {}, got D={}", variants::kFlashMaxHeadDim, p.D);
      return std::nullopt;
  }
  return std::nullopt;
}

SdpaBackend sdpa_select_backend(const AttnProblem& p) {
  return sdpa_backend_unsupported(SdpaBackend::Flash, p) ? SdpaBackend::Math : SdpaBackend::Flash;
}

std::string sdpa_selection_note(const AttnProblem& p) {
  const SdpaBackend b = sdpa_select_backend(p);
  const std::optional<std::string> why = sdpa_backend_unsupported(SdpaBackend::Flash, p);
  return fmt::format("sdpa (auto) selects {}{}{}", sdpa_backend_name(b), why ? ": " : "", why.value_or(""));
}

// What sdpa_math allocates at its peak beyond the caller's q, k and v, all in fp32: the upcast copies (half
// inputs), the √scale-scaled q and k, which replace them once made, then the worst of five moments: scaling
// q (its upcast copy and the scaled one live), making the additive mask (the bool mask and the fp32 one),
// scaling k (its upcast copy and the scaled one, beside that mask; it outweighs q when Nk·Hkv > Nq·Hq), the
// softmax (its input and output scores; the mask, added in place, is gone by then) and the second matmul (the
// probabilities beside the fp32 output, and the cast-back output of a half input).
double sdpa_math_peak_bytes(const AttnProblem& p) {
  const double f4 = 4, bh = double(p.B) * double(p.Hq), d = double(p.D);
  const double q = bh * double(p.Nq) * d * f4, kv = double(p.B) * double(p.Hkv) * double(p.Nk) * d * f4;
  const double scores = bh * double(p.Nq) * double(p.Nk) * f4;
  const bool upcast = is_half(p.dtype);
  const double held = q + kv + (upcast ? kv : 0.0);  // scaled q and k, and v's fp32 copy
  const double bool_mask = variants::fill_mask_bytes(p), add_mask = 4 * bool_mask;  // one byte, one float a pair
  const double out_half = upcast ? q * double(dtype_size(p.dtype)) / f4 : 0.0;
  return held + std::max({upcast ? q : 0.0, bool_mask + add_mask, (upcast ? kv : 0.0) + add_mask, 2 * scores,
                          scores + q + out_half});
}

namespace {

Tensor sdpa_math(const Tensor& q0, const Tensor& k0, const Tensor& v0, const AttnProblem& p,
                 const AttnOptions& o) {
  ATTNPROF_OP_ZONE(z, "_scaled_dot_product_attention_math");
  z.add_shape(q0.shape(), dtype_name(q0.dtype()).data());
  z.add_shape(k0.shape(), dtype_name(k0.dtype()).data());
  z.add_shape(v0.shape(), dtype_name(v0.dtype()).data());
  const bool upcast = is_half(p.dtype);
  Tensor q = upcast ? ops::to(q0, DType::F32) : q0;
  Tensor k = upcast ? ops::to(k0, DType::F32) : k0;
  Tensor v = upcast ? ops::to(v0, DType::F32) : v0;
  // sqrt of the scale's magnitude on each side, its sign on q's (as PyTorch does since 2.1): a negative scale
  // is valid, and its plain square root is NaN.
  const double scale = p.effective_scale(), sq = std::sqrt(std::fabs(scale));
  q = ops::mul(q, std::copysign(sq, scale));
  // The mask as PyTorch's math backend makes it, on every call: the pairs to mask as a bool tensor (the causal
  // triu, which torch builds as ones().tril() and negates; a bool mask's logical_not), turned into an additive
  // mask (convert_boolean_attn_mask: -inf where masked, 0 where kept) and added to the scores in place. No copy
  // of the scores: unlike masked_fill out of place (the naive variant's Memcpy), add_ writes them where they
  // are. One simplification: torch converts a user's bool mask at SDPA's entry, in the inputs' dtype (bf16 for
  // bf16 inputs); here every additive mask is fp32, as torch's causal one is.
  const float ninf = -std::numeric_limits<float>::infinity();
  Tensor mask;
  if (p.mask == MaskKind::Causal) mask = ops::where(ops::triu_mask(p.Nq, p.Nk, 1), ninf, 0.0f, DType::F32);
  if (p.mask == MaskKind::Bool) mask = ops::where(ops::logical_not(o.attn_mask), ninf, 0.0f, DType::F32);
  if (p.mask == MaskKind::Additive) mask = o.attn_mask;
  k = ops::mul(k, sq);
  Tensor s = ops::matmul(q, ops::transpose(k));
  if (mask.defined()) ops::add_(s, mask);
  mask = Tensor();
  Tensor attn = ops::softmax(s);
  s = Tensor();
  Tensor out = ops::matmul(attn, v);
  return upcast ? ops::to(out, p.dtype) : out;
}

// The backend a call runs: `b`, or the one Auto selects for `p`; an error when it cannot serve `p`.
SdpaBackend resolve_sdpa_backend(SdpaBackend b, const AttnProblem& p) {
  if (b == SdpaBackend::Auto) b = sdpa_select_backend(p);
  if (auto why = sdpa_backend_unsupported(b, p))
    ATTNPROF_FAIL("SDPA backend '{}' cannot serve this call: {}", sdpa_backend_name(b), *why);
  return b;
}

Tensor sdpa_dispatch(const Tensor& q, const Tensor& k, const Tensor& v, const AttnOptions& o, SdpaBackend backend,
                     const AttnProblem& p) {
  ATTNPROF_OP_ZONE(z, "scaled_dot_product_attention");
  z.add_shape(q.shape(), dtype_name(q.dtype()).data());
  z.add_shape(k.shape(), dtype_name(k.dtype()).data());
  z.add_shape(v.shape(), dtype_name(v.dtype()).data());
  backend = resolve_sdpa_backend(backend, p);
  if (backend == SdpaBackend::Math) return sdpa_math(q, k, v, p, o);
  ATTNPROF_OP_ZONE(zf, "_scaled_dot_product_flash_attention");
  zf.add_shape(q.shape(), dtype_name(q.dtype()).data());
  zf.add_shape(k.shape(), dtype_name(k.dtype()).data());
  zf.add_shape(v.shape(), dtype_name(v.dtype()).data());
  return flash_attention(q, k, v, o).out;
}

class SdpaRunner final : public Runner {
 public:
  SdpaRunner(const AttnProblem& p, const AttnOptions& o, SdpaBackend b)
      : p_(p), o_(o), backend_(resolve_sdpa_backend(b, p)) {
    if (backend_ == SdpaBackend::Math) {
      check_memory_budget(sdpa_math_peak_bytes(p), fmt::format("SDPA math backend at {} (its N×N scores)", p.str()),
                          kNoScoresHint);
      ops::prepare_matmul(DType::F32);  // its matmuls are fp32 (upcast); OpenBLAS loads here, not when timed
    } else {
      check_flash_fits(p, "SDPA flash backend");
    }
  }
  AttnOutput run(const Tensor& q, const Tensor& k, const Tensor& v) override {
    return {sdpa_dispatch(q, k, v, o_, backend_, p_), {}};
  }

 private:
  AttnProblem p_;
  AttnOptions o_;
  SdpaBackend backend_;
};

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnOptions& o,
                                    SdpaBackend backend) {
  const AttnProblem p = AttnProblem::from(q, k, v, o);
  return sdpa_dispatch(q, k, v, o, backend, p);
}

namespace variants {

std::unique_ptr<Runner> make_sdpa(const AttnProblem& p, const AttnOptions& o, SdpaBackend backend) {
  return std::make_unique<SdpaRunner>(p, o, backend);
}

OpCost sdpa_math_cost(const AttnProblem& p, bool bool_mask_per_call) {
  const Shape4 q{p.B, p.Hq, p.Nq, p.D}, kv{p.B, p.Hkv, p.Nk, p.D}, kt{p.B, p.Hkv, p.D, p.Nk},
      s{p.B, p.Hq, p.Nq, p.Nk};
  const DType f = DType::F32;
  OpCost c;
  if (is_half(p.dtype)) {
    c += ops::copy_cost(q, p.dtype, f);
    c += ops::copy_cost(kv, p.dtype, f);
    c += ops::copy_cost(kv, p.dtype, f);
  }
  c += ops::mul_cost(q, f);
  // The mask it builds per call (the causal triu; a bool mask's logical_not), made additive (where), then added
  // to the scores in place.
  const Shape4 m = p.mask == MaskKind::Causal ? Shape4{1, 1, p.Nq, p.Nk} : p.mask_shape;
  if (p.mask == MaskKind::Causal) c += ops::triu_mask_cost(p.Nq, p.Nk);
  if (p.mask == MaskKind::Bool && bool_mask_per_call) c += ops::logical_not_cost(p.mask_shape);
  if (p.mask == MaskKind::Causal || p.mask == MaskKind::Bool) c += ops::where_cost(m, f);
  c += ops::mul_cost(kv, f);
  c += ops::matmul_cost(q, kt, f);
  if (p.mask != MaskKind::None)
    c += ops::add_cost(s, f, m, p.mask == MaskKind::Additive ? p.mask_dtype : f);
  c += ops::softmax_cost(s, f);
  c += ops::matmul_cost(s, kv, f);
  if (is_half(p.dtype)) c += ops::copy_cost(q, f, p.dtype);
  return c.with_flops(attention_flops(p));  // its matmuls are fp32 (upcast): no bf16 FLOPs
}

}  // namespace variants
}  // namespace attnprof
