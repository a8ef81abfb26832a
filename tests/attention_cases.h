// tests/attention_cases.h: the attention test cases, their seeded inputs and the reference check, shared
// by the CPU and CUDA reference tests so both backends are checked on the same problems by the same rules.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "attnprof/attention.h"

namespace attnprof::testing_cases {

struct Case {
  int64_t B, Hq, Hkv, Nq, Nk, D;
  MaskKind mask;
};

inline std::string case_name(const Case& c, DType t) {
  return fmt::format("B{}Hq{}Hkv{}Nq{}Nk{}D{}-{}-{}", c.B, c.Hq, c.Hkv, c.Nq, c.Nk, c.D, mask_kind_name(c.mask),
                     dtype_name(t));
}

struct Inputs {
  Tensor q, k, v;
  AttnOptions opt;
};

// N(0,1) q, k, v from `seed`. Bool masks broadcast over the batch, per head, with row 0 of head 0 fully
// masked (the zero-row rule); additive masks are N(0,1) per batch, broadcast over heads.
inline Inputs make_inputs(const Case& c, DType t, uint64_t seed) {
  Inputs in;
  in.q = Tensor::empty({c.B, c.Hq, c.Nq, c.D}, t);
  in.k = Tensor::empty({c.B, c.Hkv, c.Nk, c.D}, t);
  in.v = Tensor::empty({c.B, c.Hkv, c.Nk, c.D}, t);
  fill_randn(in.q, seed);
  fill_randn(in.k, seed + 1);
  fill_randn(in.v, seed + 2);
  if (c.mask == MaskKind::Causal) in.opt.is_causal = true;
  if (c.mask == MaskKind::Bool) {
    in.opt.attn_mask = Tensor::empty({1, c.Hq, c.Nq, c.Nk}, DType::Bool);
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t i = 0; i < c.Nq; ++i)
        for (int64_t j = 0; j < c.Nk; ++j)
          in.opt.attn_mask.set(0, h, i, j, (h == 0 && i == 0) ? 0.0f : float(((i * 7 + j * 3 + h) % 5) != 0));
  }
  if (c.mask == MaskKind::Additive) {
    in.opt.attn_mask = Tensor::empty({c.B, 1, c.Nq, c.Nk}, DType::F32);
    fill_randn(in.opt.attn_mask, seed + 3);
  }
  return in;
}

// One variant's output against the fp64 reference: every element within the variant's tolerance; in bf16
// and fp16, max error at most 2x the naive kernel's (`naive_err`: recorded here when `var` is naive, -1 until then);
// the logsumexp, when the variant returns one, within 1e-3.
inline void expect_matches_reference(const Variant& var, const AttnOutput& out, const Reference& ref, DType t,
                                     double& naive_err) {
  const Tolerance tol = var.tolerance(t);
  const ErrorStats e = compare_to_reference(out.out, ref, tol);
  EXPECT_TRUE(e.ok()) << e.violations << " of " << e.count << " outside atol=" << tol.atol << " rtol=" << tol.rtol
                      << ", max_abs=" << e.max_abs << " nmse=" << e.nmse;
  if (var.name == "naive") naive_err = e.max_abs;
  if (is_half(t) && naive_err >= 0)
    EXPECT_LE(e.max_abs, 2.0 * naive_err + 1e-6) << dtype_name(t) << " error above 2x the naive kernel's";
  if (out.lse.defined()) EXPECT_TRUE(compare_lse(out.lse, ref, Tolerance{1e-3, 1e-3}).ok());
}

}  // namespace attnprof::testing_cases
