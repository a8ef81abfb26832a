// Every registry entry x dtype x ISA target x mask kind against the fp64 reference (issue: the engine).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

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

// An explicit scale reaches every variant the same way, a negative one included (valid in SDPA: PyTorch
// scales q and k by sqrt(|scale|) with the sign on q, where a plain sqrt would be NaN). bf16 runs at
// magnitudes near the default 1/sqrt(D): a larger scale's logits lose more to bf16's rounding in naive's bf16
// scores than the tolerance allows, as in PyTorch.
TEST(Attention, EveryVariantTakesAnExplicitScaleANegativeOneToo) {
  const std::vector<std::pair<DType, double>> runs = {
      {DType::F32, 0.7}, {DType::F32, -0.25}, {DType::F32, -2.0}, {DType::BF16, 0.09}, {DType::BF16, -0.125}};
  for (const auto& [t, scale] : runs)
    for (const Case& c : {Case{1, 2, 2, 100, 130, 64, MaskKind::Causal}, Case{2, 2, 1, 50, 90, 48, MaskKind::Bool}}) {
      Inputs in = make_inputs(c, t, 7);
      in.opt.scale = scale;
      const Reference ref = reference_attention(in.q, in.k, in.v, in.opt);
      const AttnProblem p = AttnProblem::from(in.q, in.k, in.v, in.opt);
      double naive_err = -1.0;
      for (const Variant& var : registry()) {
        if (var.unsupported(p)) continue;
        SCOPED_TRACE(fmt::format("{} {} scale={}", var.name, case_name(c, t), scale));
        expect_matches_reference(var, var.prepare(p, in.opt)->run(in.q, in.k, in.v), ref, t, naive_err);
      }
    }
}

// A NaN in the inputs is never hidden: a NaN in one query row makes that row's output NaN in every variant
// (as the fp64 reference's), and the other rows stay right. A NaN in one key reaches every query row that
// sees that key. Validation then counts them (compare_to_reference's non_finite). sdpa-math adds its mask
// (-inf where masked) to the scores, as PyTorch's math backend does, and NaN + -inf is NaN: there the NaN key
// reaches every row of its head, those the mask hides it from too, as it does in PyTorch.
TEST(Attention, ANaNInTheInputsReachesTheOutputInEveryVariant) {
  for (DType t : {DType::F32, DType::BF16})
    for (Isa isa : available_isas()) {
      IsaOverride use(isa);
      const Case c{1, 2, 2, 70, 70, 32, MaskKind::Causal};
      Inputs in = make_inputs(c, t, 3);
      in.q.set(0, 1, 5, 7, std::numeric_limits<float>::quiet_NaN());
      in.k.set(0, 0, 40, 3, std::numeric_limits<float>::quiet_NaN());
      const AttnProblem p = AttnProblem::from(in.q, in.k, in.v, in.opt);
      for (const Variant& var : registry()) {
        if (var.unsupported(p)) continue;
        SCOPED_TRACE(fmt::format("{} {} isa={}", var.name, dtype_name(t), isa_name(isa)));
        const bool additive_mask = var.name == "sdpa-math";
        const Tensor o = var.prepare(p, in.opt)->run(in.q, in.k, in.v).out;
        int64_t nan_rows_h1 = 0, nan_rows_h0 = 0, finite_rows = 0;
        for (int64_t i = 0; i < c.Nq; ++i) {
          bool all_nan1 = true, all_nan0 = true, finite = true;
          for (int64_t d = 0; d < c.D; ++d) {
            all_nan1 = all_nan1 && std::isnan(o.get(0, 1, i, d));
            all_nan0 = all_nan0 && std::isnan(o.get(0, 0, i, d));
            finite = finite && std::isfinite(o.get(0, 1, i, d));
          }
          nan_rows_h1 += all_nan1;
          finite_rows += finite;
          nan_rows_h0 += all_nan0 && (i >= 40 || additive_mask);  // causal: rows 40.. see key 40
          if (i < 40 && !additive_mask) {
            for (int64_t d = 0; d < c.D; ++d) EXPECT_TRUE(std::isfinite(o.get(0, 0, i, d))) << "head 0 row " << i;
          }
        }
        EXPECT_EQ(nan_rows_h1, 1);  // query row 5 of head 1
        EXPECT_EQ(finite_rows, c.Nq - 1);
        EXPECT_EQ(nan_rows_h0, additive_mask ? c.Nq : c.Nq - 40);
      }
    }
}

// The oracle itself against attention written as its definition reads, one key's dot product at a time:
// reference_attention reorganises the loops for speed (keys transposed, causal keys past the query skipped,
// four terms per pass) and must still add every sum in the definition's order, so the two agree to the last
// bits (a relative 1e-14 allows for a compiler that fuses a multiply and an add in one of them only).
TEST(Attention, ReferenceIsTheDefinition) {
  const std::vector<Case> cases = {
      {1, 2, 2, 1, 1, 16, MaskKind::None},     {1, 2, 2, 17, 17, 40, MaskKind::Causal},
      {2, 4, 2, 33, 70, 63, MaskKind::None},   {1, 2, 2, 100, 37, 96, MaskKind::Causal},
      {1, 2, 2, 37, 100, 5, MaskKind::Causal}, {2, 2, 1, 50, 90, 48, MaskKind::Bool},
      {1, 3, 3, 64, 129, 72, MaskKind::Additive}};
  const double ninf = -std::numeric_limits<double>::infinity();
  for (const Case& c : cases) {
    SCOPED_TRACE(case_name(c, DType::BF16));
    const Inputs in = make_inputs(c, DType::BF16, 5);
    const Reference ref = reference_attention(in.q, in.k, in.v, in.opt);
    const AttnProblem p = AttnProblem::from(in.q, in.k, in.v, in.opt);
    Tensor mask;
    if (in.opt.attn_mask.defined()) mask = in.opt.attn_mask.expand({c.B, c.Hq, c.Nq, c.Nk});
    const auto close = [](double want, double got) {
      return want == got || std::fabs(want - got) <= 1e-14 * std::max(std::fabs(want), std::fabs(got));
    };
    int64_t rows = 0, masked_rows = 0;
    double max_abs_score = 0.0;  // over the visible pairs
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.Hq; ++h)
        for (int64_t i = 0; i < c.Nq; ++i, ++rows) {
          const int64_t hk = h / (c.Hq / c.Hkv);
          std::vector<double> s(size_t(c.Nk));
          double mx = ninf;
          for (int64_t j = 0; j < c.Nk; ++j) {
            double acc = 0.0;
            for (int64_t d = 0; d < c.D; ++d) acc += double(in.q.get(b, h, i, d)) * double(in.k.get(b, hk, j, d));
            acc *= p.effective_scale();
            if (c.mask == MaskKind::Causal && j > i) acc = ninf;
            if (c.mask == MaskKind::Bool && mask.get(b, h, i, j) == 0.0f) acc = ninf;
            if (c.mask == MaskKind::Additive) acc += double(mask.get(b, h, i, j));
            s[size_t(j)] = acc;
            mx = std::max(mx, acc);
            if (acc != ninf) max_abs_score = std::max(max_abs_score, std::fabs(acc));
          }
          const size_t row = size_t((b * c.Hq + h) * c.Nq + i);
          if (mx == ninf) {  // nothing visible: zeros and lse -inf
            ++masked_rows;
            EXPECT_EQ(ref.lse[row], ninf);
            for (int64_t d = 0; d < c.D; ++d) EXPECT_EQ(ref.out[row * size_t(c.D) + size_t(d)], 0.0);
            continue;
          }
          double sum = 0.0;
          for (double& x : s) sum += (x = std::exp(x - mx));
          ASSERT_TRUE(close(mx + std::log(sum), ref.lse[row])) << "row " << row << ": lse " << ref.lse[row];
          for (int64_t d = 0; d < c.D; ++d) {
            double o = 0.0;
            for (int64_t j = 0; j < c.Nk; ++j) o += (s[size_t(j)] * (1.0 / sum)) * double(in.v.get(b, hk, j, d));
            ASSERT_TRUE(close(o, ref.out[row * size_t(c.D) + size_t(d)]))
                << "row " << row << " d " << d << ": " << o << " vs " << ref.out[row * size_t(c.D) + size_t(d)];
          }
        }
    EXPECT_EQ(masked_rows > 0, c.mask == MaskKind::Bool) << "the Bool case's fully masked row (head 0, row 0)";
    EXPECT_TRUE(close(max_abs_score, ref.max_abs_score)) << max_abs_score << " vs " << ref.max_abs_score;
    EXPECT_GT(ref.max_abs_score, 0.0);
    EXPECT_EQ(size_t(rows), ref.lse.size());
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
