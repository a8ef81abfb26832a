// Every registry entry x dtype x ISA target x mask kind against the fp64 reference (issue: the engine).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>

#include "attnprof/attention.h"
#include "attnprof/isa.h"
#include "attnprof/ops.h"
#include "attention_cases.h"

using namespace attnprof;
using namespace attnprof::testing_cases;

namespace {

const std::vector<Case> kCases = {
    {1, 2, 2, 1, 1, 16, MaskKind::None},      {1, 2, 2, 17, 17, 40, MaskKind::Causal},
    {2, 4, 2, 33, 70, 64, MaskKind::None},    {1, 4, 1, 65, 65, 64, MaskKind::Causal},
    {1, 2, 2, 100, 37, 96, MaskKind::Causal}, {1, 2, 2, 37, 100, 128, MaskKind::Causal},
    {2, 2, 1, 50, 90, 48, MaskKind::Bool},    {1, 3, 3, 64, 129, 72, MaskKind::Additive},
    {1, 1, 1, 1000, 1000, 64, MaskKind::Causal}, {1, 2, 2, 80, 80, 256, MaskKind::Causal},
};

}  // namespace

TEST(Attention, EveryVariantMatchesReference) {
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    for (const Case& c : kCases) {
      Inputs in = make_inputs(c, t, 42);
      const Reference ref = reference_attention(in.q, in.k, in.v, in.opt);
      const AttnProblem p = AttnProblem::from(in.q, in.k, in.v, in.opt);
      double naive_err = -1.0;
      for (const Variant& var : registry()) {
        if (var.unsupported(p)) continue;
        for (Isa isa : available_isas()) {
          IsaOverride use(isa);
          auto runner = var.prepare(p, in.opt);
          SCOPED_TRACE(fmt::format("{} {} isa={}", var.name, case_name(c, t), isa_name(isa)));
          expect_matches_reference(var, runner->run(in.q, in.k, in.v), ref, t, naive_err);
        }
      }
    }
  }
}

TEST(Attention, FullyMaskedRowGivesZeros) {
  Case c{1, 1, 1, 4, 4, 16, MaskKind::Bool};
  Inputs in = make_inputs(c, DType::F32, 1);
  in.opt.attn_mask = Tensor::zeros({1, 1, 4, 4}, DType::Bool);  // nothing may attend
  in.opt.attn_mask.set(0, 0, 2, 1, 1.0f);                        // except row 2 -> key 1
  for (const Variant& var : registry()) {
    auto out = var.prepare(AttnProblem::from(in.q, in.k, in.v, in.opt), in.opt)->run(in.q, in.k, in.v);
    for (int64_t i : {0, 1, 3})
      for (int64_t d = 0; d < 16; ++d) EXPECT_EQ(out.out.get(0, 0, i, d), 0.0f) << var.name;
    for (int64_t d = 0; d < 16; ++d) EXPECT_NEAR(out.out.get(0, 0, 2, d), in.v.get(0, 0, 1, d), 1e-6) << var.name;
  }
}
