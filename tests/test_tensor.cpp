// Tensors, dtypes and the tracked allocator.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <limits>

#include "attnprof/allocator.h"
#include "attnprof/error.h"
#include "attnprof/isa.h"
#include "attnprof/ops.h"
#include "attnprof/tensor.h"

using namespace attnprof;

TEST(Tensor, ContiguousStridesAndViews) {
  Tensor t = Tensor::empty({2, 3, 4, 5}, DType::F32);
  EXPECT_EQ(t.strides(), (Shape4{60, 20, 5, 1}));
  EXPECT_TRUE(t.is_contiguous());
  Tensor tt = t.transpose();
  EXPECT_EQ(tt.shape(), (Shape4{2, 3, 5, 4}));
  EXPECT_EQ(tt.strides(), (Shape4{60, 20, 1, 5}));
  EXPECT_FALSE(tt.is_contiguous());
  t.set(1, 2, 3, 4, 42.0f);
  EXPECT_EQ(tt.get(1, 2, 4, 3), 42.0f);
  Tensor c = tt.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.get(1, 2, 4, 3), 42.0f);
}

TEST(Tensor, ExpandBroadcastsWithZeroStride) {
  Tensor m = Tensor::zeros({1, 1, 3, 3}, DType::Bool);
  m.set(0, 0, 1, 2, 1.0f);
  Tensor e = m.expand({4, 5, 3, 3});
  EXPECT_EQ(e.stride(0), 0);
  EXPECT_EQ(e.stride(1), 0);
  EXPECT_EQ(e.get(3, 4, 1, 2), 1.0f);
  EXPECT_THROW(m.expand({1, 1, 4, 3}), Error);
}

TEST(Tensor, Bf16RoundTripAndRounding) {
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.5f)), 1.5f);
  // 1 + 2^-8 is halfway between two bf16 values: ties to even (1.0).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(-INFINITY))));
  Tensor f = Tensor::empty({1, 1, 2, 3}, DType::F32);
  fill_randn(f, 3);
  Tensor b = f.to(DType::BF16);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(b.get(0, 0, 1, j), f.get(0, 0, 1, j), std::fabs(f.get(0, 0, 1, j)) / 128);
}

namespace {

// The x86 F16C conversions (vcvtps2ph with round-to-nearest-even, vcvtph2ps): the hardware's answer that
// float_to_f16 / f16_to_float must reproduce bit for bit.
__attribute__((target("f16c"))) uint16_t hw_to_f16(float f) { return uint16_t(_cvtss_sh(f, 0)); }
__attribute__((target("f16c"))) float hw_from_f16(uint16_t h) { return _cvtsh_ss(h); }
float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

TEST(Tensor, Fp16ConversionsRoundToNearestEven) {
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);                       // the largest finite half
  EXPECT_EQ(float_to_f16(65519.99f), 0x7bff);                      // below the midpoint to 2^16
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);                       // the tie rounds to even: inf
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -24)), 0x0001);          // the smallest subnormal
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000);          // half of it ties to even: zero
  EXPECT_EQ(float_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_f16(1.0f + 1.0f / 2048), 0x3c00);             // 1 + 2^-11 ties to 1
  EXPECT_EQ(float_to_f16(1.0f + 3.0f / 2048), 0x3c02);             // 1 + 3·2^-11 ties up to 1 + 2^-9
  EXPECT_EQ(f16_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_float(0x8000), -0.0f);
  EXPECT_TRUE(std::signbit(f16_to_float(0x8000)));
  EXPECT_TRUE(std::isinf(f16_to_float(0xfc00)) && f16_to_float(0xfc00) < 0);
  EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(NAN))));
  // Every half survives half -> float -> half.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_float(uint16_t(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_f16(f), h) << std::hex << h;
  }
  Tensor f = Tensor::empty({1, 1, 2, 3}, DType::F32);
  fill_randn(f, 3);
  Tensor h = f.to(DType::F16);
  EXPECT_EQ(h.dtype(), DType::F16);
  EXPECT_EQ(h.nbytes(), 12u);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(h.get(0, 0, 1, j), f.get(0, 0, 1, j), std::fabs(f.get(0, 0, 1, j)) / 1024);
  EXPECT_EQ(parse_dtype("fp16"), DType::F16);
  EXPECT_EQ(parse_dtype("half"), DType::F16);
  EXPECT_EQ(parse_dtype("FP32"), DType::F32);  // any case
  EXPECT_EQ(parse_dtype("BFloat16"), DType::BF16);
  EXPECT_THROW(parse_dtype("fp8"), Error);
}

TEST(Tensor, Fp16ConversionsMatchTheF16cHardware) {
  // The avx2 target requires F16C (src/core/isa.cpp), so dispatch's own detection says whether it is here.
  if (!cpu_supports(Isa::AVX2)) GTEST_SKIP() << "this CPU has no AVX2 target (and so perhaps no F16C)";
  // Every half to float.
  for (uint32_t h = 0; h < 0x10000; ++h)
    ASSERT_EQ(float_bits(f16_to_float(uint16_t(h))), float_bits(hw_from_f16(uint16_t(h)))) << std::hex << h;
  // Float to half where rounding decides: each midpoint between neighbouring halves and the floats one
  // ulp either side of it, for every finite half (both signs).
  for (uint32_t h = 0; h < 0x7c00; ++h)
    for (uint32_t sign : {0u, 0x8000u}) {
      const double lo = f16_to_float(uint16_t(h)), hi = h + 1 == 0x7c00 ? 65536.0 : f16_to_float(uint16_t(h + 1));
      const uint32_t mid = float_bits(float(0.5 * (lo + hi)));  // exact in fp32
      for (uint32_t u : {mid - 1, mid, mid + 1}) {
        const float x = sign ? -bits_to_float(u) : bits_to_float(u);
        ASSERT_EQ(float_to_f16(x), hw_to_f16(x)) << x;
      }
    }
  // A sweep of all float bit patterns (NaNs, infinities, subnormals included), every 127th.
  for (uint64_t u = 0; u <= 0xffffffffull; u += 127) {
    const float x = bits_to_float(uint32_t(u));
    ASSERT_EQ(float_to_f16(x), hw_to_f16(x)) << std::hex << u;
  }
}

TEST(Tensor, NonfiniteSummaryCountsAndLocates) {
  Tensor t = Tensor::zeros({2, 3, 4, 5}, DType::BF16);
  EXPECT_EQ(nonfinite_summary(t), "");
  t.set(1, 2, 0, 4, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(nonfinite_summary(t), "0 NaN and 1 Inf, the first at [1, 2, 0, 4]");
  EXPECT_EQ(nonfinite_summary(t, /*allow_neg_inf=*/true), "");
  t.set(0, 1, 3, 0, std::numeric_limits<float>::quiet_NaN());
  t.set(1, 0, 0, 0, std::numeric_limits<float>::infinity());
  EXPECT_EQ(nonfinite_summary(t), "1 NaN and 2 Inf, the first at [0, 1, 3, 0]");
  EXPECT_EQ(nonfinite_summary(t, true), "1 NaN and 1 Inf, the first at [0, 1, 3, 0]");
  // A strided view is read through its strides: the transpose moves the first one.
  EXPECT_EQ(nonfinite_summary(t.transpose()), "1 NaN and 2 Inf, the first at [0, 1, 0, 3]");
}

TEST(Tensor, RandnIsReproducibleAndStandard) {
  Tensor a = Tensor::empty({1, 1, 100, 100}, DType::F32), b = Tensor::empty({1, 1, 100, 100}, DType::F32);
  fill_randn(a, 5);
  fill_randn(b, 5);
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
  double sum = 0, sq = 0;
  for (int i = 0; i < 10000; ++i) {
    double x = a.data<float>()[i];
    sum += x;
    sq += x * x;
  }
  EXPECT_NEAR(sum / 10000, 0.0, 0.05);
  EXPECT_NEAR(sq / 10000, 1.0, 0.05);
}

// Drawn in blocks of 2^16 elements, in parallel: the bits depend on the seed only, not on the thread count, and
// the blocks (and the seeds q, k and v take: seed, seed + 1, seed + 2) are independent streams, not copies.
TEST(Tensor, RandnBlocksAreTheSameAtEveryThreadCountAndIndependent) {
  constexpr int64_t kBlock = int64_t(1) << 16;
  const Shape4 shape{1, 1, 900, 256};  // 3.5 blocks: a short last one
  const int threads = ops::num_threads();
  ops::set_num_threads(1);
  Tensor one = Tensor::empty(shape, DType::F32);
  fill_randn(one, 7);
  ops::set_num_threads(2);
  Tensor two = Tensor::empty(shape, DType::F32);
  fill_randn(two, 7);
  ops::set_num_threads(threads);
  EXPECT_EQ(std::memcmp(one.raw(), two.raw(), one.nbytes()), 0);
  Tensor next = Tensor::empty(shape, DType::F32);
  fill_randn(next, 8);
  const float* x = one.data<float>();
  const float* y = next.data<float>();
  // Pearson correlation of two runs of kBlock / 2 elements: about N(0, 1/sqrt(32768)), sd 0.0055.
  auto correlation = [](const float* a, const float* b, int64_t n) {
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    for (int64_t i = 0; i < n; ++i) {
      sa += a[i], sb += b[i], saa += double(a[i]) * a[i], sbb += double(b[i]) * b[i], sab += double(a[i]) * b[i];
    }
    const double cov = sab / n - sa / n * sb / n;
    return cov / std::sqrt((saa / n - sa / n * sa / n) * (sbb / n - sb / n * sb / n));
  };
  const int64_t half = kBlock / 2;
  for (int64_t b = 0; b + 1 < 3; ++b) {
    SCOPED_TRACE(b);
    EXPECT_LT(std::fabs(correlation(x + b * kBlock, x + (b + 1) * kBlock, half)), 0.03) << "neighbouring blocks";
    EXPECT_LT(std::fabs(correlation(x + b * kBlock, y + b * kBlock, half)), 0.03) << "seeds 7 and 8";
    EXPECT_LT(std::fabs(correlation(x + b * kBlock, y + (b + 1) * kBlock, half)), 0.03) << "seed 8 one block on";
  }
  // Every element drawn, the short last block included, and standard throughout.
  const int64_t n = one.numel();
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(std::isfinite(x[i])) << i;
    sum += x[i];
    sq += double(x[i]) * x[i];
  }
  EXPECT_NEAR(sum / double(n), 0.0, 0.01);
  EXPECT_NEAR(sq / double(n), 1.0, 0.01);
  double tail = 0;
  for (int64_t i = 3 * kBlock; i < n; ++i) tail += double(x[i]) * x[i];
  EXPECT_NEAR(tail / double(n - 3 * kBlock), 1.0, 0.05);
}

TEST(Allocator, TracksLiveAndPeakAndAligns) {
  const MemoryStats s0 = memory_stats();
  reset_peak_memory();
  {
    Tensor a = Tensor::empty({1, 1, 1000, 1000}, DType::F32);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.raw()) % kTensorAlignment, 0u);
    EXPECT_EQ(memory_stats().current_bytes, s0.current_bytes + 4000000);
    Tensor b = Tensor::empty({1, 1, 10, 10}, DType::BF16);
    EXPECT_EQ(memory_stats().current_bytes, s0.current_bytes + 4000200);
  }
  const MemoryStats s1 = memory_stats();
  EXPECT_EQ(s1.current_bytes, s0.current_bytes);
  EXPECT_EQ(s1.peak_bytes, s0.current_bytes + 4000200);
  EXPECT_EQ(s1.allocations - s0.allocations, 2);
  EXPECT_EQ(s1.frees - s0.frees, 2);
}

TEST(Allocator, BudgetCheck) {
  set_memory_budget(memory_stats().current_bytes + 1000);
  EXPECT_NO_THROW(check_memory_budget(1000, "small"));
  EXPECT_THROW(check_memory_budget(1001, "big"), OutOfBudget);
  // The message names what is live only when something is: "with 0 bytes (0 B) already live" says nothing.
  auto message = [](double bytes) {
    try {
      check_memory_budget(bytes, "big");
    } catch (const OutOfBudget& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const int64_t live = memory_stats().current_bytes;
  EXPECT_EQ(message(1001).find("already live") != std::string::npos, live > 0) << message(1001);
  {
    Tensor held = Tensor::empty({1, 1, 10, 10}, DType::F32);
    set_memory_budget(memory_stats().current_bytes + 1000);
    EXPECT_NE(message(1001).find(fmt::format("with {} bytes", live + 400)), std::string::npos) << message(1001);
  }
  // Memory held outside the tensors (the fp64 reference) counts while reserved, and not in memory_stats().
  set_memory_budget(memory_stats().current_bytes + 1000);
  {
    const MemoryReservation held(600);
    EXPECT_EQ(memory_stats().current_bytes, live);
    EXPECT_NO_THROW(check_memory_budget(400, "small"));
    EXPECT_THROW(check_memory_budget(401, "big"), OutOfBudget);
  }
  EXPECT_NO_THROW(check_memory_budget(1000, "small"));
  set_memory_budget(0);
  EXPECT_THROW(set_memory_budget(-1), Error);
}

// A cgroup's memory limit bounds the default budget: past it the kernel kills the process without a message.
// On trees laid out as /sys/fs/cgroup is: the smallest limit from the process's cgroup up to the root counts.
TEST(Allocator, CgroupMemoryLimitIsFoundOnV1AndV2) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("attnprof_cgroup_" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto put = [&](const fs::path& rel, const std::string& text) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text << "\n";
  };
  // v1: the memory controller's own hierarchy, a limit on the job and a smaller one on its parent.
  put("memory/memory.limit_in_bytes", "9223372036854771712");  // v1's "no limit"
  put("memory/batch/memory.limit_in_bytes", "629145600");
  put("memory/batch/job7/memory.limit_in_bytes", "1073741824");
  const CgroupMemoryLimit v1 = cgroup_memory_limit("5:devices:/\n4:memory:/batch/job7\n0::/\n", root.string());
  EXPECT_EQ(v1.bytes, 629145600);
  EXPECT_EQ(v1.file, (root / "memory/batch/memory.limit_in_bytes").string());
  // A controller list holding memory among others ("4:cpu,memory:/...") counts too.
  EXPECT_EQ(cgroup_memory_limit("4:cpu,memory:/batch/job7\n", root.string()).bytes, 629145600);
  // v2: one tree, memory.max; "max" limits nothing.
  put("system.slice/memory.max", "max");
  put("system.slice/app.service/memory.max", "2147483648");
  const CgroupMemoryLimit v2 = cgroup_memory_limit("0::/system.slice/app.service\n", root.string());
  EXPECT_EQ(v2.bytes, 2147483648);
  EXPECT_EQ(v2.file, (root / "system.slice/app.service/memory.max").string());
  // No limit anywhere, no such cgroup, a line that is not one, garbage in the file: none.
  EXPECT_EQ(cgroup_memory_limit("0::/system.slice\n", root.string()).bytes, -1);
  EXPECT_EQ(cgroup_memory_limit("0::/nowhere\n", (root / "absent").string()).bytes, -1);
  EXPECT_EQ(cgroup_memory_limit("garbage", root.string()).bytes, -1);
  put("bad/memory.max", "12abc");
  EXPECT_EQ(cgroup_memory_limit("0::/bad\n", root.string()).bytes, -1);
  // A container's own cgroup is "/": the root's limit. One of another namespace ("/../x") is not under this mount.
  put("memory.max", "3221225472");
  const CgroupMemoryLimit own_root = cgroup_memory_limit("0::/\n", root.string());
  EXPECT_EQ(own_root.bytes, 3221225472);
  EXPECT_EQ(own_root.file, (root / "memory.max").string());
  EXPECT_EQ(cgroup_memory_limit("0::/../other\n", root.string()).bytes, -1);
  fs::remove_all(root);
  // The default budget is never above this process's own limit, nor above physical memory.
  set_memory_budget(0);
  const CgroupMemoryLimit& own = process_cgroup_memory_limit();
  EXPECT_LE(memory_budget(), physical_memory_bytes());
  if (own.bytes > 0) EXPECT_LE(memory_budget(), own.bytes);
}

TEST(Ops, TriuMaskIsTheBlogsCausalMask) {
  Tensor m = ops::triu_mask(3, 5, 1);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) EXPECT_EQ(m.get(0, 0, i, j), j > i ? 1.0f : 0.0f);
}
