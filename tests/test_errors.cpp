// Bad input gets a clear error naming the problem, never a crash (issue: the engine).
#include <gtest/gtest.h>

#include <limits>

#include "attnprof/allocator.h"
#include "attnprof/attention.h"
#include "attnprof/error.h"
#include "attnprof/ops.h"

using namespace attnprof;

namespace {

Tensor rnd(const Shape4& s, DType t = DType::F32) {
  Tensor x = Tensor::empty(s, t);
  fill_randn(x, 7);
  return x;
}

// Runs f, expects attnprof::Error whose message contains every fragment.
template <class F>
void expect_error(F&& f, std::initializer_list<const char*> fragments) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    for (const char* frag : fragments) EXPECT_NE(std::string(e.what()).find(frag), std::string::npos) << e.what();
  }
}

void run_all_variants(const Tensor& q, const Tensor& k, const Tensor& v, const AttnOptions& o) {
  AttnProblem p = AttnProblem::from(q, k, v, o);
  for (const Variant& var : registry()) var.prepare(p, o)->run(q, k, v);
}

}  // namespace

// An unknown name's error names the nearest known one: its case ignored, at most a third of its letters edited
// (and at least one); none for a name near nothing, near two, or known.
TEST(Errors, DidYouMeanNamesTheOneNearName) {
  const std::vector<std::string> names{"naive", "inplace", "sdpa-math", "sdpa-flash", "flash"};
  EXPECT_EQ(did_you_mean("naiv", names), " (did you mean 'naive'?)");
  EXPECT_EQ(did_you_mean("NAIVE", names), " (did you mean 'naive'?)");
  EXPECT_EQ(did_you_mean("in-place", names), " (did you mean 'inplace'?)");
  EXPECT_EQ(did_you_mean("sdpa-flsh", names), " (did you mean 'sdpa-flash'?)");
  EXPECT_EQ(did_you_mean("naive", names), "");
  EXPECT_EQ(did_you_mean("softmax", names), "");
  EXPECT_EQ(did_you_mean("", names), "");
  EXPECT_EQ(did_you_mean("ab", {"ax", "ay"}), "");  // two as near: no guess
  EXPECT_EQ(did_you_mean("nai", names), "");         // two letters of five missing: over a third of "nai"
}

TEST(Errors, MismatchedHeadDims) {
  expect_error([] { run_all_variants(rnd({1, 2, 8, 64}), rnd({1, 2, 8, 32}), rnd({1, 2, 8, 32}), {}); },
               {"head dims differ", "D=64", "D=32"});
}

TEST(Errors, KvShapesDiffer) {
  expect_error([] { AttnProblem::from(rnd({1, 2, 8, 16}), rnd({1, 2, 8, 16}), rnd({1, 2, 9, 16}), {}); },
               {"k and v shapes differ"});
}

TEST(Errors, BatchDiffers) {
  expect_error([] { AttnProblem::from(rnd({2, 2, 8, 16}), rnd({1, 2, 8, 16}), rnd({1, 2, 8, 16}), {}); },
               {"batch sizes differ"});
}

TEST(Errors, HeadsNotMultiple) {
  expect_error([] { AttnProblem::from(rnd({1, 6, 8, 16}), rnd({1, 4, 8, 16}), rnd({1, 4, 8, 16}), {}); },
               {"multiple of key/value heads", "6", "4"});
}

TEST(Errors, MaskDoesNotBroadcast) {
  AttnOptions o;
  o.attn_mask = Tensor::zeros({1, 1, 8, 7}, DType::Bool);
  expect_error([&] { AttnProblem::from(rnd({1, 2, 8, 16}), rnd({1, 2, 8, 16}), rnd({1, 2, 8, 16}), o); },
               {"attn_mask", "does not broadcast", "[1, 1, 8, 7]"});
  o.attn_mask = Tensor::zeros({3, 1, 8, 8}, DType::Bool);
  expect_error([&] { AttnProblem::from(rnd({2, 2, 8, 16}), rnd({2, 2, 8, 16}), rnd({2, 2, 8, 16}), o); },
               {"does not broadcast"});
}

TEST(Errors, CausalPlusMask) {
  AttnOptions o{.is_causal = true};
  o.attn_mask = Tensor::zeros({1, 1, 8, 8}, DType::Bool);
  expect_error([&] { AttnProblem::from(rnd({1, 2, 8, 16}), rnd({1, 2, 8, 16}), rnd({1, 2, 8, 16}), o); },
               {"is_causal and an explicit attn_mask"});
}

TEST(Errors, EmptyTensor) {
  expect_error([] { AttnProblem::from(Tensor(), rnd({1, 2, 8, 16}), rnd({1, 2, 8, 16}), {}); }, {"empty"});
  expect_error([] { Tensor::empty({1, 0, 8, 16}, DType::F32); }, {"positive", "[1, 0, 8, 16]"});
  expect_error([] { Tensor::empty({1, -3, 8, 16}, DType::F32); }, {"positive"});
}

TEST(Errors, UnsupportedDtype) {
  Tensor b = Tensor::zeros({1, 1, 4, 16}, DType::Bool);
  expect_error([&] { AttnProblem::from(b, b, b, {}); }, {"unsupported dtype bool"});
  expect_error([] { AttnProblem::from(rnd({1, 1, 4, 16}, DType::BF16), rnd({1, 1, 4, 16}), rnd({1, 1, 4, 16}), {}); },
               {"share a dtype", "bf16", "fp32"});
  expect_error([] { parse_dtype("fp8"); }, {"unsupported dtype 'fp8'"});
}

TEST(Errors, BadScale) {
  AttnOptions o;
  o.scale = 0.0;
  expect_error([&] { AttnProblem::from(rnd({1, 1, 4, 16}), rnd({1, 1, 4, 16}), rnd({1, 1, 4, 16}), o); },
               {"scale must be finite and non-zero"});
  // Finite in fp64 but not in the fp32 the kernels scale in: refused, not a NaN output.
  for (double s : {1e39, -1e39, 1e-39}) {
    o.scale = s;
    expect_error([&] { AttnProblem::from(rnd({1, 1, 4, 16}), rnd({1, 1, 4, 16}), rnd({1, 1, 4, 16}), o); },
                 {"outside fp32's normal range"});
  }
}

TEST(Errors, HugeTensorRefused) {
  expect_error([] { Tensor::empty({1 << 20, 1 << 20, 1 << 20, 1 << 20}, DType::F32); }, {"too large"});
}

TEST(Errors, NaiveRefusesOverBudgetAndSuggestsFlash) {
  Tensor q = rnd({1, 4, 512, 64}), k = rnd({1, 4, 512, 64}), v = rnd({1, 4, 512, 64});
  AttnOptions o{.is_causal = true};
  AttnProblem p = AttnProblem::from(q, k, v, o);
  const int64_t need = int64_t(naive_peak_bytes(p, false, naive_matmul_scratch_bytes(p)));
  set_memory_budget(memory_stats().current_bytes + need / 2);
  try {
    find_variant("naive").prepare(p, o);
    ADD_FAILURE() << "no OutOfBudget";
  } catch (const OutOfBudget& e) {
    const std::string msg = e.what();
    // What needs the bytes, how many, the budget, then what to do instead (last, as one sentence reads).
    EXPECT_NE(msg.find("(its N×N scores) needs " + std::to_string(need) + " bytes"), std::string::npos) << msg;
    EXPECT_TRUE(msg.ends_with("over the memory budget of " + std::to_string(memory_budget()) + " bytes (" +
                              binary_size(double(memory_budget())) +
                              "); raise --memory-budget, or try flash or sdpa-flash, which need no N×N buffer"))
        << msg;
  }
  // flash needs no N×N buffer and still runs under the same budget.
  EXPECT_NO_THROW(find_variant("flash").prepare(p, o)->run(q, k, v));
  set_memory_budget(0);
  // The default: physical memory, or less under a cgroup's memory limit or an address-space limit.
  EXPECT_LE(memory_budget(), physical_memory_bytes());
  EXPECT_GT(memory_budget(), 0);
  EXPECT_NO_THROW(find_variant("naive").prepare(p, o));
}

TEST(Errors, BudgetCheckOfAHugeShapeDoesNotOverflow) {
  // Nq·Nk = 2^60: the scores of B=Hq=4 need 2^65 bf16 bytes, past int64. The estimate must stay positive and
  // the refusal must come before any allocation, with the true size. (Nq = Nk = 2^30 stays within sgemm's
  // 32-bit sizes, which SDPA's math backend checks first.)
  AttnProblem p;
  p.B = p.Hq = p.Hkv = 4;
  p.Nq = p.Nk = int64_t(1) << 30;
  p.D = 64;
  p.dtype = DType::BF16;
  p.mask = MaskKind::Causal;
  const double need = naive_peak_bytes(p, false, naive_matmul_scratch_bytes(p));
  EXPECT_GT(need, 2.0 * 16.0 * std::ldexp(1.0, 60) * 2.0 * 0.999);
  AttnOptions o{.is_causal = true};
  for (const char* name : {"naive", "inplace", "sdpa-math"})
    expect_error([&] { find_variant(name).prepare(p, o); }, {"needs ", " bytes", "over the memory budget"});
  try {
    find_variant("naive").prepare(p, o);
    ADD_FAILURE() << "no OutOfBudget";
  } catch (const OutOfBudget& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("needs {:.3e} bytes", need)), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("needs -"), std::string::npos) << e.what();
  }
}

TEST(Errors, BudgetEstimatesBoundTheMeasuredPeak) {
  // The pre-checks must count what a forward really allocates beyond its inputs (the widened matmul's fp32
  // scratch included: fp16 always widens, bf16 where oneDNN has no bf16 matmul; flash's output, logsumexp and
  // per-thread scratch) and not the inputs the caller
  // already holds, or the message's figure is wrong and a budget near the real peak is misjudged. Measured
  // against the tracked allocator's peak: an upper bound, and within 15%. Besides Nq = Nk, shapes where the
  // keys outweigh the queries (a few queries over a long cache, GQA), where scaling k is sdpa-math's worst moment.
  struct Case {
    Shape4 q, kv;
  };
  for (const Case& c : {Case{{1, 2, 512, 64}, {1, 2, 512, 64}}, Case{{1, 2, 1, 128}, {1, 2, 4096, 128}},
                        Case{{1, 4, 16, 128}, {1, 2, 4096, 128}}, Case{{2, 4, 300, 64}, {2, 1, 700, 64}}}) {
    for (DType dt : {DType::F16, DType::BF16, DType::F32})
      for (const char* name : {"naive", "inplace", "sdpa-math", "flash", "sdpa-flash"})
        for (bool key_padding : {false, true}) {  // causal, or a key-padding bool mask [B,1,1,Nk]
          const std::string what = fmt::format("{} {} q {} kv {}{}", dtype_name(dt), name, shape_str(c.q), shape_str(c.kv),
                                               key_padding ? " key-padding mask" : " causal");
          Tensor q = rnd(c.q, dt), k = rnd(c.kv, dt), v = rnd(c.kv, dt);
          AttnOptions o{.is_causal = !key_padding};
          if (key_padding) o.attn_mask = Tensor::full({c.q[0], 1, 1, c.kv[2]}, DType::Bool, 1.0f);
          const AttnProblem p = AttnProblem::from(q, k, v, o);
          const double scratch = naive_matmul_scratch_bytes(p);
          EXPECT_EQ(scratch > 0, dt == DType::F16 || (dt == DType::BF16 && !ops::bf16_matmul_uses_onednn())) << what;
          // The registry's figure, which check_forward_fits uses: naive's and sdpa-math's as their prepare
          // checks them, flash's (output, logsumexp, every thread's scratch) as flash_peak_bytes.
          const double estimate = find_variant(name).peak_bytes(p);
          if (std::string_view(name) == "sdpa-math") EXPECT_EQ(estimate, sdpa_math_peak_bytes(p)) << what;
          if (std::string_view(name) == "flash") EXPECT_EQ(estimate, flash_peak_bytes(p)) << what;
          if (std::string_view(name).starts_with("naive") || std::string_view(name) == "inplace")
            EXPECT_EQ(estimate, naive_peak_bytes(p, std::string_view(name) == "inplace", scratch)) << what;
          const int64_t base = memory_stats().current_bytes;
          reset_peak_memory();
          Tensor out = find_variant(name).prepare(p, o)->run(q, k, v).out;
          const double measured = double(memory_stats().peak_bytes - base);
          EXPECT_LE(measured, estimate) << what;
          EXPECT_GE(measured, 0.85 * estimate) << what << ": estimate " << estimate << ", measured " << measured;
        }
  }
}

TEST(Errors, ReferenceRefusesNonFiniteInputs) {
  // std::max drops a NaN from the row maximum, so an unchecked oracle would call a NaN row "fully masked" and
  // expect zeros, agreeing with a variant that made the same mistake.
  Tensor q = rnd({1, 2, 8, 16}), k = rnd({1, 2, 8, 16}), v = rnd({1, 2, 8, 16});
  k.set(0, 1, 4, 3, std::numeric_limits<float>::quiet_NaN());
  AttnOptions o{.is_causal = true};
  expect_error([&] { reference_attention(q, k, v, o); },
               {"k holds non-finite values (1 NaN and 0 Inf, the first at [0, 1, 4, 3])", "no reference"});
  // An additive mask may hold -inf (masked out), not +inf or NaN.
  Tensor q2 = rnd({1, 2, 8, 16});
  AttnOptions add;
  add.attn_mask = Tensor::zeros({1, 1, 8, 8}, DType::F32);
  add.attn_mask.set(0, 0, 1, 2, -std::numeric_limits<float>::infinity());
  Tensor k2 = rnd({1, 2, 8, 16});
  EXPECT_NO_THROW(reference_attention(q2, k2, k2, add));
  add.attn_mask.set(0, 0, 5, 6, std::numeric_limits<float>::infinity());
  expect_error([&] { reference_attention(q2, k2, k2, add); },
               {"additive attn_mask holds values other than finite numbers and -inf (0 NaN and 1 Inf, the first at "
                "[0, 0, 5, 6])"});
}

TEST(Errors, UnknownVariantAndBackend) {
  expect_error([] { find_variant("fast"); }, {"unknown variant 'fast'", "naive", "flash"});
  expect_error([] { parse_sdpa_backend("cudnn"); }, {"unknown SDPA backend 'cudnn'"});
}

TEST(Errors, ExplicitBackendThatCannotServe) {
  Tensor q = rnd({1, 1, 4, 288}), k = rnd({1, 1, 4, 288}), v = rnd({1, 1, 4, 288});
  expect_error([&] { scaled_dot_product_attention(q, k, v, {}, SdpaBackend::Flash); },
               {"SDPA backend 'flash' cannot serve", "D=288"});
  // auto falls back to math, which serves any head dim.
  Tensor o = scaled_dot_product_attention(q, k, v, {}, SdpaBackend::Auto);
  EXPECT_EQ(o.shape(3), 288);
}

TEST(Errors, OpsCheckTheirInputs) {
  Tensor a = rnd({1, 1, 4, 8}), b = rnd({1, 1, 5, 8});
  expect_error([&] { ops::matmul(a, b); }, {"inner dims differ"});
  expect_error([&] { ops::masked_fill(a, a, 0.0f); }, {"bool mask"});
  expect_error([&] { ops::set_num_threads(0); }, {"thread count"});
}

// The error figures of a validation, on four elements with known errors: max_rel divides by |ref| (large
// where ref is near 0), tol_used by the tolerance each element is held to, so it is the margin (OK at <= 1).
TEST(Errors, ValidationFiguresAgainstTheReference) {
  Reference ref;
  ref.shape = {1, 1, 1, 4};
  ref.out = {1.0, -2.0, 1e-9, 0.5};
  Tensor out = Tensor::empty({1, 1, 1, 4}, DType::F32);
  for (int64_t j = 0; j < 4; ++j) out.set(0, 0, 0, j, float(ref.out[size_t(j)]));
  out.set(0, 0, 0, 1, -2.25f);   // |err| 0.25 against atol + rtol·2 = 0.3: 0.833 of its tolerance
  out.set(0, 0, 0, 2, 0.05f);    // |err| 0.05 against 0.1: half of it, but 5e7 relative to the tiny ref
  const ErrorStats e = compare_to_reference(out, ref, {0.1, 0.1});
  EXPECT_TRUE(e.ok());
  EXPECT_NEAR(e.max_abs, 0.25, 1e-7);
  EXPECT_NEAR(e.tol_used, 0.25 / 0.3, 1e-6);
  EXPECT_GT(e.max_rel, 1e4);
  out.set(0, 0, 0, 3, 0.7f);     // |err| 0.2 against 0.15: over it
  const ErrorStats bad = compare_to_reference(out, ref, {0.1, 0.1});
  EXPECT_EQ(bad.violations, 1);
  EXPECT_NEAR(bad.tol_used, 0.2 / 0.15, 1e-6);
  out.set(0, 0, 0, 0, std::numeric_limits<float>::quiet_NaN());
  // A NaN output: no figure over the finite rest stands for it (a finite NMSE beside it would read as a fit).
  const ErrorStats nan = compare_to_reference(out, ref, {0.1, 0.1});
  EXPECT_EQ(nan.non_finite, 1);
  EXPECT_EQ(nan.violations, 2);
  for (const double f : {nan.tol_used, nan.max_abs, nan.max_rel, nan.nmse}) EXPECT_TRUE(std::isinf(f)) << f;
  EXPECT_EQ(bad.non_finite, 0);
}

TEST(Errors, SizesInMessagesReadInTheirOwnUnit) {
  EXPECT_EQ(binary_size(512), "512 B");
  EXPECT_EQ(binary_size(1536), "1.50 KiB");
  EXPECT_EQ(binary_size(5.0 * 1024 * 1024), "5.00 MiB");
  EXPECT_EQ(binary_size(8650752), "8.25 MiB");
  EXPECT_EQ(binary_size(3.0 * (int64_t(1) << 40)), "3.00 TiB");
  EXPECT_EQ(binary_size(std::ldexp(1.0, 65)), "32.00 EiB");
  // Exact while a double holds the integer exactly; past 2^53 its digits would be invented.
  EXPECT_EQ(byte_count(34426847232.0), "34426847232");
  EXPECT_EQ(byte_count(std::ldexp(1.0, 53) - 1), "9007199254740991");
  EXPECT_EQ(byte_count(2400008000000000000000.0), "2.400e+21");
}
