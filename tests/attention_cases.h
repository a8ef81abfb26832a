// tests/attention_cases.h: the attention test cases and their seeded inputs, shared by the CPU and CUDA
// reference tests so both backends are checked on the same problems.
#pragma once

#include <fmt/format.h>

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

}  // namespace attnprof::testing_cases
