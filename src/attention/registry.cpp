// The one registry of attention variants: the CLI, tests and benchmarks all iterate over it, so a new
// kernel is one new entry and is automatically tested, profiled and benchmarked.
#include "attention/variants.h"
#include "attnprof/attention.h"
#include "attnprof/error.h"

namespace attnprof {

namespace variants {

// Per-element |x - ref| <= atol + rtol·|ref| against the fp64 reference, inputs N(0,1).
// fp32: every path accumulates in fp32; errors are ~1e-6, the bound leaves room for long rows (Nk 8192).
// bf16: the naive paths round scores and probabilities to bf16 between ops (~2^-9 relative each);
// the flash path only rounds the output. fp16 keeps 3 more mantissa bits (2^-12 relative per rounding), so
// its bounds are 8x tighter. Tests also require a half type's error <= 2x the naive kernel's in that type.
Tolerance unfused_tolerance(DType t) {
  return t == DType::F32 ? Tolerance{2e-4, 2e-3} : t == DType::F16 ? Tolerance{5e-3, 5e-3} : Tolerance{4e-2, 4e-2};
}
Tolerance fused_tolerance(DType t) {
  return t == DType::F32 ? Tolerance{2e-4, 2e-3} : t == DType::F16 ? Tolerance{2.5e-3, 2.5e-3} : Tolerance{2e-2, 2e-2};
}

}  // namespace variants

namespace {

using variants::fused_tolerance;
using variants::unfused_tolerance;

std::optional<std::string> unfused_unsupported(const AttnProblem& p) {
  return variants::sgemm_sizes_unsupported(p, p.dtype);
}
std::optional<std::string> sdpa_math_unsupported(const AttnProblem& p) {
  return sdpa_backend_unsupported(SdpaBackend::Math, p);
}

std::optional<std::string> flash_unsupported(const AttnProblem& p) {
  return sdpa_backend_unsupported(SdpaBackend::Flash, p);
}

std::vector<Variant> build() {
  std::vector<Variant> r;
  r.push_back(Variant{
      "naive", "cpu", "attn_fwd",
      "the blog's five ops, out of place: matmul, mul, masked_fill (clone + fill), softmax, matmul",
      unfused_unsupported,
      [](const AttnProblem& p) { return variants::naive_cost(p, false); }, unfused_tolerance,
      [](const AttnProblem& p, const AttnOptions& o) { return variants::make_naive(p, o, false); },
      [](const AttnProblem& p) { return naive_peak_bytes(p, false, naive_matmul_scratch_bytes(p)); }});
  r.push_back(Variant{
      "inplace", "cpu", "attn_fwd", "the same five ops in place: mul_, masked_fill_, softmax_ (no copy)",
      unfused_unsupported,
      [](const AttnProblem& p) { return variants::naive_cost(p, true); }, unfused_tolerance,
      [](const AttnProblem& p, const AttnOptions& o) { return variants::make_naive(p, o, true); },
      [](const AttnProblem& p) { return naive_peak_bytes(p, true, naive_matmul_scratch_bytes(p)); }});
  r.push_back(Variant{
      "sdpa-math", "cpu", "sdpa_fwd",
      "scaled_dot_product_attention, math backend: fp32 upcast, mask rebuilt per call, composed ops",
      sdpa_math_unsupported,
      [](const AttnProblem& p) { return variants::sdpa_math_cost(p); }, unfused_tolerance,
      [](const AttnProblem& p, const AttnOptions& o) { return variants::make_sdpa(p, o, SdpaBackend::Math); },
      sdpa_math_peak_bytes});
  r.push_back(Variant{
      "sdpa-flash", "cpu", "sdpa_fwd", "scaled_dot_product_attention, flash backend (dispatches to the flash kernel)",
      flash_unsupported, [](const AttnProblem& p) { return flash_cost(p); }, fused_tolerance,
      [](const AttnProblem& p, const AttnOptions& o) { return variants::make_sdpa(p, o, SdpaBackend::Flash); },
      flash_peak_bytes});
  r.push_back(Variant{
      "flash", "cpu", "flash_kernel_fwd",
      "hand-written FlashAttention-2 kernel: tiled, online softmax, causal block skipping, SIMD per ISA",
      flash_unsupported, [](const AttnProblem& p) { return flash_cost(p); }, fused_tolerance, variants::make_flash,
      flash_peak_bytes});
  return r;
}

}  // namespace

const std::vector<Variant>& registry() {
  static const std::vector<Variant> r = build();
  return r;
}

std::string variant_names() { return fmt::format("{}", fmt::join(variant_name_list(registry()), ", ")); }

std::vector<std::string> variant_name_list(const std::vector<Variant>& reg) {
  std::vector<std::string> names;
  for (const Variant& v : reg) names.push_back(v.name);
  return names;
}

const Variant& find_variant(std::string_view name) {
  for (const Variant& v : registry())
    if (v.name == name) return v;
  ATTNPROF_FAIL("unknown variant '{}'{}: expected one of {}", name, did_you_mean(name, variant_name_list(registry())),
                variant_names());
}

}  // namespace attnprof
