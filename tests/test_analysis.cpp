// Analysis: power-law fits on exact and noisy power laws, the median, roofline verdicts, and the machine-peaks cache.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <tuple>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "analysis/peak_loops.h"
#include "analysis/peaks_cache.h"
#include "attnprof/analysis.h"
#include "attnprof/error.h"
#include "attnprof/isa.h"
#include "io/file.h"

using namespace attnprof;
using namespace attnprof::analysis;

TEST(FitPowerLaw, RecoversExactPowerLaws) {
  for (double b : {1.0, 2.0, 0.5, -1.0}) {
    std::vector<double> x, y;
    for (double n = 256; n <= 8192; n *= 2) {
      x.push_back(n);
      y.push_back(3.5e-6 * std::pow(n, b));
    }
    const PowerFit f = fit_power_law(x, y);
    EXPECT_NEAR(f.exponent, b, 1e-9);
    EXPECT_NEAR(f.coefficient, 3.5e-6, 3.5e-6 * 1e-6);
    EXPECT_NEAR(f.r2, 1.0, 1e-12);
    EXPECT_NEAR(f.exponent_stderr, 0.0, 1e-9);
    EXPECT_NEAR(f.rms_log_error, 0.0, 1e-9);
  }
}

TEST(FitPowerLaw, NoiseLowersR2AndRaisesStderr) {
  // y = n^2 with a deterministic ±10 % wiggle: exponent stays near 2, the fit reports its error.
  std::vector<double> x, y;
  int i = 0;
  for (double n = 128; n <= 16384; n *= 2, ++i) {
    x.push_back(n);
    y.push_back(n * n * (i % 2 ? 1.1 : 0.9));
  }
  const PowerFit f = fit_power_law(x, y);
  EXPECT_NEAR(f.exponent, 2.0, 0.05);
  EXPECT_LT(f.r2, 1.0);
  EXPECT_GT(f.r2, 0.99);
  EXPECT_GT(f.exponent_stderr, 0.0);
  EXPECT_LT(f.exponent_stderr, 0.05);
  EXPECT_FALSE(f.weak()) << "a ±10 % wiggle around N² is still a power law";
}

// A fit through points that follow no power law is flagged weak: timings of small N dominated by fixed costs
// and disturbed (the shape of a sweep on a shared machine: 15.8, 7.0, 30.0, 9.1 ms), or scattered about a
// flat line. An exact power law, a flat series (flash's memory at small N) and two points are not.
TEST(FitPowerLaw, WeakWhenThePointsFollowNoPowerLaw) {
  const PowerFit disturbed = fit_power_law({256, 512, 1024, 2048}, {15.8, 7.0, 30.0, 9.1});
  EXPECT_TRUE(disturbed.weak()) << disturbed.exponent << " ± " << disturbed.exponent_stderr;
  EXPECT_EQ(disturbed.points, 4u);
  const PowerFit flat = fit_power_law({256, 512, 1024, 2048}, {5.0e5, 5.0e5, 5.0e5, 5.0e5});
  EXPECT_FALSE(flat.weak());
  const PowerFit quadratic = fit_power_law({256, 512, 1024}, {1.0, 4.0, 16.0});
  EXPECT_FALSE(quadratic.weak());
  const PowerFit two = fit_power_law({256, 512}, {1.0, 30.0});
  EXPECT_FALSE(two.weak()) << "two points fix a line: nothing to judge";
}

TEST(FitPowerLaw, RejectsBadInput) {
  EXPECT_THROW(fit_power_law({1.0}, {1.0}), Error);
  EXPECT_THROW(fit_power_law({1.0, 2.0}, {1.0}), Error);
  EXPECT_THROW(fit_power_law({1.0, 2.0}, {1.0, 0.0}), Error);
  EXPECT_THROW(fit_power_law({2.0, 2.0}, {1.0, 3.0}), Error);
}

// One median for every timing: the middle value, the mean of the two middle ones for an even count.
TEST(Median, MiddleValueOrMeanOfTheTwoMiddleOnes) {
  EXPECT_EQ(median({}), 0.0);
  EXPECT_EQ(median({4.0}), 4.0);
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median({5.0, 5.0, 1.0, 9.0}), 5.0);
}

TEST(Roofline, VerdictsFollowTheRidge) {
  MachinePeaks m;
  m.fp32_gflops = 200.0;
  m.bf16_gflops = 400.0;
  m.bandwidth_gbs = 40.0;  // ridge: 5 FLOP/B fp32, 10 FLOP/B bf16
  // Elementwise scale: 1 FLOP per 8 bytes -> memory-bound; attainable = 0.125 × 40 = 5 GFLOP/s.
  const OpCost mul{1e9, 4e9, 4e9};
  RooflinePoint p = place(mul, 0.4e9, m);  // 1e9 FLOP in 0.4 s = 2.5 GFLOP/s
  EXPECT_TRUE(p.memory_bound);
  EXPECT_DOUBLE_EQ(p.intensity, 0.125);
  EXPECT_DOUBLE_EQ(p.attainable_gflops, 5.0);
  EXPECT_DOUBLE_EQ(p.achieved_gflops, 2.5);
  EXPECT_DOUBLE_EQ(p.ridge_intensity, 5.0);
  EXPECT_DOUBLE_EQ(p.fraction_of_attainable, 0.5);
  // A big matmul: 2·1024³ FLOP over 3·4·1024² bytes ≈ 170 FLOP/B -> compute-bound at the FMA peak.
  const double n = 1024;
  const OpCost mm{2 * n * n * n, 2 * 4 * n * n, 4 * n * n};
  p = place(mm, 2 * n * n * n / 100.0, m);
  EXPECT_FALSE(p.memory_bound);
  EXPECT_DOUBLE_EQ(p.attainable_gflops, 200.0);
  EXPECT_NEAR(p.achieved_gflops, 100.0, 1e-9);
  // FLOPs on bf16 units use the bf16 ceiling, which moves the ridge: 7 FLOP/B is compute-bound in fp32,
  // memory-bound in bf16.
  const OpCost mid{7e9, 1e9, 0};
  OpCost mid_bf16 = mid;
  mid_bf16.bf16_flops = mid.flops;
  EXPECT_FALSE(place(mid, 1e9, m).memory_bound);
  EXPECT_TRUE(place(mid_bf16, 1e9, m).memory_bound);
  EXPECT_DOUBLE_EQ(place(mid_bf16, 1e9, m).attainable_gflops, 280.0);
  // Half on each: the time all FLOPs take at their rates, 3.5e9/400 + 3.5e9/200 s per 1e9, = 266.7 GFLOP/s;
  // the ridge at 6.67 FLOP/B, so 7 FLOP/B is just compute-bound.
  OpCost half = mid;
  half.bf16_flops = mid.flops / 2;
  EXPECT_NEAR(compute_ceiling_gflops(half, m), 800.0 / 3.0, 1e-9);
  EXPECT_FALSE(place(half, 1e9, m).memory_bound);
  // A cost re-counted under another FLOP convention keeps its bf16 share.
  EXPECT_DOUBLE_EQ(half.with_flops(1e9).bf16_flops, 0.5e9);
  // Without a bf16 unit the fp32 ceiling applies.
  m.bf16_gflops = 0;
  EXPECT_FALSE(place(mid_bf16, 1e9, m).memory_bound);
  EXPECT_DOUBLE_EQ(compute_ceiling_gflops(mid_bf16, m), 200.0);
  // A copy does no arithmetic: intensity 0, memory-bound, nothing attainable in FLOP terms.
  p = place(OpCost{0, 1e6, 1e6}, 1e5, m);
  EXPECT_TRUE(p.memory_bound);
  EXPECT_EQ(p.achieved_gflops, 0.0);
}

TEST(Roofline, LibraryFlopsAreBilledAtTheLibrarysPeaks) {
  // Our kernels dispatched at scalar; OpenBLAS and oneDNN at avx512, four times as fast.
  MachinePeaks m;
  m.isa = "scalar";
  m.fp32_gflops = 200.0;
  m.bf16_gflops = 400.0;
  m.bandwidth_gbs = 40.0;
  m.library_isa = "avx512";
  m.library_fp32_gflops = 800.0;
  m.library_bf16_gflops = 1600.0;
  EXPECT_TRUE(m.library_isa_differs());
  const OpCost sgemm{.flops = 8e9, .bytes_read = 1e8, .library_flops = 8e9};
  EXPECT_DOUBLE_EQ(compute_ceiling_gflops(sgemm, m), 800.0);
  const OpCost onednn{
      .flops = 8e9, .bytes_read = 1e8, .bf16_flops = 8e9, .library_flops = 8e9, .library_bf16_flops = 8e9};
  EXPECT_DOUBLE_EQ(compute_ceiling_gflops(onednn, m), 1600.0);
  // The ridge moves with the ceiling: 10 FLOP/B is compute-bound under the scalar FMA peak (ridge 5), memory-
  // bound under the library's (ridge 20), and the library's FLOPs are no longer judged against the scalar peak.
  const OpCost at10{.flops = 1e9, .bytes_read = 1e8, .library_flops = 1e9};
  RooflinePoint p = place(at10, 1e9 / 300.0, m);  // 300 GFLOP/s: above the scalar peak
  EXPECT_DOUBLE_EQ(p.ridge_intensity, 20.0);
  EXPECT_TRUE(p.memory_bound);
  EXPECT_DOUBLE_EQ(p.attainable_gflops, 400.0);
  EXPECT_NEAR(p.fraction_of_attainable, 0.75, 1e-12);
  // One of each quarter: our bf16 and fp32 FLOPs, the library's bf16 and fp32 ones, each at its own rate:
  // 4e9 / (1e9/400 + 1e9/200 + 1e9/1600 + 1e9/800) = 1280/3 GFLOP/s.
  const OpCost mixed{
      .flops = 4e9, .bytes_read = 1e8, .bf16_flops = 2e9, .library_flops = 2e9, .library_bf16_flops = 1e9};
  EXPECT_NEAR(compute_ceiling_gflops(mixed, m), 1280.0 / 3.0, 1e-9);
  // Re-counted under another FLOP convention, a cost keeps its shares, and so its ceiling.
  const OpCost halved = mixed.with_flops(2e9);
  EXPECT_DOUBLE_EQ(halved.library_flops, 1e9);
  EXPECT_DOUBLE_EQ(halved.library_bf16_flops, 0.5e9);
  EXPECT_NEAR(compute_ceiling_gflops(halved, m), 1280.0 / 3.0, 1e-9);
  // Summed costs add their shares.
  OpCost sum = sgemm;
  sum += onednn;
  EXPECT_DOUBLE_EQ(sum.library_flops, 16e9);
  EXPECT_DOUBLE_EQ(sum.library_bf16_flops, 8e9);
  EXPECT_NEAR(compute_ceiling_gflops(sum, m), 16e9 / (8e9 / 800.0 + 8e9 / 1600.0), 1e-9);
  // No bf16 units at the library's ISA: its bf16 FLOPs at its fp32 peak.
  MachinePeaks no_bf16 = m;
  no_bf16.library_bf16_gflops = 0;
  EXPECT_DOUBLE_EQ(compute_ceiling_gflops(onednn, no_bf16), 800.0);
  // Peaks without library figures (written before them): the libraries at the dispatched ISA's peaks.
  MachinePeaks unknown = m;
  unknown.library_isa.clear();
  unknown.library_fp32_gflops = unknown.library_bf16_gflops = 0;
  EXPECT_FALSE(unknown.library_isa_differs());
  EXPECT_DOUBLE_EQ(compute_ceiling_gflops(sgemm, unknown), 200.0);
  EXPECT_DOUBLE_EQ(compute_ceiling_gflops(onednn, unknown), 400.0);
  // Library peaks equal to the dispatched ones (no ISA forced) give an op whose FLOPs are all the library's the
  // ceiling it had before the split, bit for bit.
  MachinePeaks same = m;
  same.library_isa = same.isa;
  same.library_fp32_gflops = same.fp32_gflops;
  same.library_bf16_gflops = same.bf16_gflops;
  for (const OpCost& c : {sgemm, onednn, OpCost{.flops = 51.6e9, .bf16_flops = 51.6e9 / 3, .library_flops = 51.6e9,
                                                .library_bf16_flops = 51.6e9 / 3}}) {
    OpCost plain = c;
    plain.library_flops = plain.library_bf16_flops = 0;
    EXPECT_EQ(compute_ceiling_gflops(c, same), compute_ceiling_gflops(plain, same));
  }
  // The floor bills each op at its own ceiling: a matmul row (all library FLOPs) and an elementwise one.
  KeyAverages ka;
  ka.rows.resize(2);
  ka.rows[0].name = "matmul";
  ka.rows[0].category = "cpu_op";
  ka.rows[0].self_cost = sgemm;  // 8e9 FLOP at 800 = 1e7 ns; 1e8 B at 40 GB/s = 2.5e6 ns
  ka.rows[1].name = "mul";
  ka.rows[1].category = "cpu_op";
  ka.rows[1].self_cost = OpCost{.flops = 1e9, .bytes_read = 4e9};  // 1e9 FLOP at 200 = 5e6 ns; 1e8 ns of bytes
  const RooflineFloor f = roofline_floor(ka, m);
  EXPECT_DOUBLE_EQ(f.ns, 1e7 + 1e8);
  EXPECT_DOUBLE_EQ(f.memory_ns, 1e8);
}

// The timed measurement, on this machine: plausible figures, cached, and under a forced lower ISA the
// libraries' peaks at the CPU's best. The cache's rules are tested without timing below.
TEST(MachinePeaks, MeasuresPlausibleFiguresAndCachesThem) {
  const auto dir = std::filesystem::temp_directory_path() / "attnprof_test_peaks_measured";
  std::filesystem::remove_all(dir);
  ::setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  const MachinePeaks a = machine_peaks(1);
  EXPECT_FALSE(a.cpu.empty());
  EXPECT_EQ(a.threads, 1);
  EXPECT_GT(a.fp32_gflops, 1.0);
  EXPECT_GT(a.bandwidth_gbs, 0.5);
  // The bandwidth is the best of the memory loops, each of which measured something.
  EXPECT_GT(a.bandwidth_loops.update, 0.5);
  EXPECT_GT(a.bandwidth_loops.copy, 0.5);
  EXPECT_GT(a.bandwidth_loops.triad, 0.5);
  EXPECT_EQ(a.bandwidth_gbs, a.bandwidth_loops.best());
  EXPECT_GT(a.sgemm_gflops, 1.0);
  EXPECT_GE(a.bf16_gflops, 0.0);
  EXPECT_EQ(a.bf16_gflops > 0, a.isa == "avx512" && cpu_has_avx512_bf16());
  // The libraries' ISA is the CPU's best; measured here at that ISA, the same figures serve both.
  EXPECT_EQ(a.library_isa, isa_name(available_isas().back()));
  if (a.isa == a.library_isa) {
    EXPECT_EQ(a.library_fp32_gflops, a.fp32_gflops);
    EXPECT_EQ(a.library_bf16_gflops, a.bf16_gflops);
  }
  // The FMA ceiling bounds what sgemm (OpenBLAS, optimised in every build) can reach; a timed loop built at
  // -O0 or under a sanitizer falls to a few percent of it, and that figure would be cached for every build.
  if (a.isa != "scalar") EXPECT_GT(a.fp32_gflops, 0.5 * a.sgemm_gflops) << "peak loops not optimised?";
  const auto file = dir / "attnprof" / analysis::kPeaksCacheFile;
  ASSERT_TRUE(std::filesystem::exists(file));
  // The second call reads the cache: identical figures, bit for bit.
  const MachinePeaks b = machine_peaks(1);
  EXPECT_EQ(a.fp32_gflops, b.fp32_gflops);
  EXPECT_EQ(a.bandwidth_gbs, b.bandwidth_gbs);
  EXPECT_EQ(a.bandwidth_loops.update, b.bandwidth_loops.update);
  EXPECT_EQ(a.bandwidth_loops.triad, b.bandwidth_loops.triad);
  EXPECT_EQ(a.library_bf16_gflops, b.library_bf16_gflops);
  // Dispatch forced to scalar: the FMA peak is the scalar loop's, the library peaks the best ISA's (OpenBLAS
  // and oneDNN never see the override), and both are cached with the scalar entry.
  {
    IsaOverride use(Isa::Scalar);
    const MachinePeaks s = machine_peaks(1);
    EXPECT_EQ(s.isa, "scalar");
    EXPECT_EQ(s.bf16_gflops, 0.0);
    // The scalar target's ceiling is SSE2's 4-lane mulps + addps, what its kernels compile to: an eighth (Intel
    // with two AVX-512 FMA units) to a half (Zen 4) of the best ISA's FMA peak. Timed through memory, as an
    // earlier loop was, it measured a fortieth, below what the scalar-target flash kernel ran at.
    if (a.isa != "scalar") EXPECT_GT(s.fp32_gflops, 0.08 * a.fp32_gflops) << s.fp32_gflops << " vs " << a.fp32_gflops;
    EXPECT_EQ(s.library_isa, isa_name(available_isas().back()));
    EXPECT_EQ(s.library_isa_differs(), available_isas().back() != Isa::Scalar);
    EXPECT_GT(s.library_fp32_gflops, 1.0);
    EXPECT_EQ(s.library_bf16_gflops > 0, available_isas().back() == Isa::AVX512 && cpu_has_avx512_bf16());
    const MachinePeaks cached = machine_peaks(1);
    EXPECT_EQ(cached.fp32_gflops, s.fp32_gflops);
    EXPECT_EQ(cached.library_fp32_gflops, s.library_fp32_gflops);
    EXPECT_EQ(cached.library_bf16_gflops, s.library_bf16_gflops);
  }
  // Both entries are in the file, each under its ISA; the best ISA's still reads back as measured.
  const nlohmann::json cached = nlohmann::json::parse(attnprof::io::read_file(file.string()));
  EXPECT_EQ(cached["entries"].size(), a.isa == "scalar" ? 1u : 2u);
  EXPECT_EQ(machine_peaks(1).fp32_gflops, a.fp32_gflops);
  ::unsetenv("XDG_CACHE_HOME");
  std::filesystem::remove_all(dir);
}

// A measurement's figures: the libraries' ISA is the CPU's best, measured with the same peaks.
static MachinePeaks peak_figures(double fp32, double bf16, double bandwidth) {
  MachinePeaks m;
  m.fp32_gflops = fp32;
  m.bf16_gflops = bf16;
  m.bandwidth_gbs = bandwidth;
  m.bandwidth_loops = {.update = bandwidth, .copy = 0.7 * bandwidth, .triad = 0.6 * bandwidth};
  m.sgemm_gflops = 90.0;
  m.library_isa = isa_name(available_isas().back());
  m.library_fp32_gflops = fp32;
  m.library_bf16_gflops = bf16;
  return m;
}

// A bf16 dot-product peak measured under the fp32 FMA peak (which no CPU with vdpbf16ps runs) is measured again,
// each figure keeping its larger reading; still under it, a note says so. A cached entry like that is re-measured.
TEST(MachinePeaks, ABf16PeakUnderTheFp32PeakIsMeasuredAgain) {
  const auto dir = std::filesystem::temp_directory_path() / "attnprof_test_peaks_bf16";
  std::filesystem::remove_all(dir);
  ::setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  int calls = 0;
  bool stays_low = false;
  const detail::PeakMeasurement measure = [&](int, Isa) {
    ++calls;
    const bool low = calls == 1 || stays_low;
    return peak_figures(calls == 1 ? 210.0 : 200.0, low ? 180.0 : 420.0, calls == 1 ? 30.0 : 35.0);
  };
  const detail::OtherWorkProbe idle{[] { return 0.0; }, [](double) { return 0.0; }};
  std::vector<std::string> notes;
  MachinePeaks m = detail::machine_peaks(1, true, measure, &notes, &idle);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(m.fp32_gflops, 210.0);  // the larger of 210 and 200
  EXPECT_EQ(m.bf16_gflops, 420.0);
  EXPECT_EQ(m.bandwidth_gbs, 35.0);
  for (const std::string& n : notes) EXPECT_EQ(n.find("bf16 dot-product peak"), std::string::npos) << n;
  // Low both times: kept as measured, with a note.
  calls = 0;
  stays_low = true;
  notes.clear();
  m = detail::machine_peaks(1, true, measure, &notes, &idle);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(m.bf16_gflops, 180.0);
  std::string all;
  for (const std::string& n : notes) all += n + "\n";
  EXPECT_NE(all.find("the bf16 dot-product peak measured under 90 % of the fp32 FMA peak twice (bf16 180.0 against "
                     "fp32 210.0 GFLOP/s)"),
            std::string::npos)
      << all;
  // That entry is now in the cache: the next run does not take it, and measures again.
  calls = 0;
  stays_low = false;
  notes.clear();
  m = detail::machine_peaks(1, false, measure, &notes, &idle);
  EXPECT_EQ(calls, 2);  // the first reading is low again (calls == 1), the second not
  EXPECT_EQ(m.bf16_gflops, 420.0);
  all.clear();
  for (const std::string& n : notes) all += n + "\n";
  EXPECT_NE(all.find("the cached machine peaks have a bf16 dot-product peak under 90 % of the fp32 FMA peak (180.0 "
                     "against 210.0 GFLOP/s), a disturbed measurement; measuring them again"),
            std::string::npos)
      << all;
  // A sound entry is taken from the cache.
  calls = 0;
  m = detail::machine_peaks(1, false, measure, &notes, &idle);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(m.bf16_gflops, 420.0);
  // A tie measured with noise (Intel's AVX512-BF16 cores: the same FLOPs as the FMA) is not taken for a
  // disturbance: measured once.
  int tie_calls = 0;
  const detail::PeakMeasurement tie = [&](int, Isa) {
    ++tie_calls;
    return peak_figures(210.0, 200.0, 35.0);
  };
  m = detail::machine_peaks(1, true, tie, &notes, &idle);
  EXPECT_EQ(tie_calls, 1);
  EXPECT_EQ(m.bf16_gflops, 200.0);
  std::filesystem::remove_all(dir);
  ::unsetenv("XDG_CACHE_HOME");
}

// A libraries' peak measured below the dispatched ISA's (the machine disturbed it: the best ISA also runs the
// dispatched one's code) is taken as no lower, with a note; one above it is kept as measured.
TEST(MachinePeaks, TheLibrariesPeakIsNeverBelowTheDispatchedIsas) {
  const auto dir = std::filesystem::temp_directory_path() / "attnprof_test_peaks_library";
  std::filesystem::remove_all(dir);
  ::setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  const detail::PeakMeasurement disturbed = [](int, Isa) {
    MachinePeaks m;
    m.fp32_gflops = 220.0;
    m.bf16_gflops = 0.0;
    m.bandwidth_gbs = 50.0;
    m.bandwidth_loops = {.update = 50.0, .copy = 35.0, .triad = 30.0};
    m.sgemm_gflops = 90.0;
    m.library_isa = isa_name(available_isas().back());
    m.library_fp32_gflops = 100.0;
    m.library_bf16_gflops = 200.0;
    return m;
  };
  std::vector<std::string> notes;
  const MachinePeaks m = detail::machine_peaks(1, true, disturbed, &notes);
  EXPECT_EQ(m.fp32_gflops, 220.0);
  EXPECT_EQ(m.library_fp32_gflops, 220.0);
  EXPECT_EQ(m.library_bf16_gflops, 200.0) << "above the dispatched ISA's 0: as measured";
  std::string all;
  for (const std::string& n : notes) all += n + "\n";
  EXPECT_NE(all.find("fp32 peak of the libraries' ISA"), std::string::npos) << all;
  EXPECT_NE(all.find("measured 100.0 GFLOP/s, below the 220.0"), std::string::npos) << all;
  EXPECT_EQ(all.find("bf16 peak of the libraries'"), std::string::npos) << all;
  std::filesystem::remove_all(dir);
  ::unsetenv("XDG_CACHE_HOME");
}

// The cache's rules, with the timed part replaced by one that counts its calls and gives new figures each
// time (fp32 101, 102, ...): every case says whether the cached entry was used or the machine measured again.
TEST(MachinePeaks, TheCacheIsReadOnlyForThisMachinesWholePlausibleEntries) {
  // The library peaks every entry of the current version has, for the entries written by hand below.
  // The library peaks and memory loops every entry of the current version has, for the entries written by hand
  // below (their bandwidth_gbs is 1, the loops' best).
  const std::string kLibrary = R"("library_isa": "avx512", "library_fp32_gflops": 7, "library_bf16_gflops": 14, )"
                               R"("bandwidth_loops": {"update": 1, "copy": 0.5, "triad": 0.5}, )";
  const auto dir = std::filesystem::temp_directory_path() / "attnprof_test_peaks_cache";
  std::filesystem::remove_all(dir);
  ::setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  int measured = 0;
  const detail::PeakMeasurement measure = [&measured](int, Isa) {
    ++measured;
    MachinePeaks m;
    m.fp32_gflops = 100.0 + measured;
    m.bf16_gflops = 400.0;
    m.bandwidth_gbs = 50.0;
    m.bandwidth_loops = {.update = 50.0, .copy = 35.0, .triad = 30.0};
    m.sgemm_gflops = 90.0;
    m.library_isa = isa_name(available_isas().back());
    m.library_fp32_gflops = m.fp32_gflops;
    m.library_bf16_gflops = m.bf16_gflops;
    return m;
  };
  // What the calls had to tell the user since the last notes.clear(): the library prints nothing itself.
  std::vector<std::string> notes;
  const auto said = [&notes] {
    std::string all;
    for (const std::string& n : notes) all += n + "\n";
    return all;
  };
  // The machine as idle, whatever else runs beside the test (a busy reading would have the cache measure an
  // entry again once idle: a rule of its own, tested below with entries written by hand).
  const detail::OtherWorkProbe idle{[] { return 0.0; }, [](double) { return 0.0; }};
  const auto peaks = [&](bool force = false) { return detail::machine_peaks(1, force, measure, &notes, &idle); };
  // The figure a call returned and whether it measured.
  const auto call = [&](bool force = false) {
    const int before = measured;
    const MachinePeaks p = peaks(force);
    return std::pair<double, bool>{p.fp32_gflops, measured != before};
  };

  const MachinePeaks a = peaks();  // an empty cache: measured, and the entry written
  EXPECT_EQ(measured, 1);
  EXPECT_EQ(a.fp32_gflops, 101.0);
  EXPECT_FALSE(a.cpu.empty());
  EXPECT_EQ(a.isa, isa_name(best_isa()));
  EXPECT_EQ(a.threads, 1);
  const auto file = dir / "attnprof" / analysis::kPeaksCacheFile;
  ASSERT_TRUE(std::filesystem::exists(file));
  EXPECT_EQ(call(), std::make_pair(101.0, false)) << "a valid entry of this machine is read, not measured";
  // Where the figures came from, for the outputs' footnotes: measured now, then read back from the cache with
  // the time they were measured.
  EXPECT_FALSE(a.from_cache);
  EXPECT_EQ(a.measured_at.size(), std::string("2026-12-04 10:31 UTC").size()) << a.measured_at;
  EXPECT_EQ(peaks_provenance(a), "measured now (" + a.measured_at + ")");
  const MachinePeaks again = peaks();
  EXPECT_TRUE(again.from_cache);
  EXPECT_EQ(again.measured_at, a.measured_at);
  EXPECT_EQ(peaks_provenance(again).rfind("measured " + a.measured_at + ", from the peaks cache; ", 0), 0u);
  // The same in JSON (compare.json's "machine"), read back by diff, roofline --from and the report.
  const MachinePeaks back = machine_peaks_from_json(nlohmann::json(again));
  EXPECT_TRUE(back.from_cache);
  EXPECT_EQ(back.measured_at, a.measured_at);
  nlohmann::json bad = again;
  bad["from_cache"] = "yes";
  EXPECT_THROW(machine_peaks_from_json(bad), Error);
  // A file from before the library fields (all three absent) is read as if the libraries ran at `isa`; one with
  // some of them is damaged.
  nlohmann::json older = again;
  older["library_isa"] = "avx2";
  older["library_fp32_gflops"] = 999.0;
  for (const char* key : {"library_isa", "library_fp32_gflops", "library_bf16_gflops"}) older.erase(key);
  const MachinePeaks old = machine_peaks_from_json(older);
  EXPECT_EQ(old.library_isa, old.isa);
  EXPECT_EQ(old.library_fp32_gflops, old.fp32_gflops);
  EXPECT_EQ(old.library_bf16_gflops, old.bf16_gflops);
  bad = again;
  bad.erase("library_isa");
  try {
    machine_peaks_from_json(bad);
    ADD_FAILURE() << "two of the three library fields were accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "field 'library_isa' is missing");
  }
  // The memory loops the bandwidth is the best of: written when measured, read back, and held to that: each
  // figure plausible, and the bandwidth the best of them. A file from before them has the bandwidth alone.
  {
    MachinePeaks with_loops = again;
    with_loops.bandwidth_loops = {.update = 60.0, .copy = 45.0, .triad = 40.0};
    with_loops.bandwidth_gbs = 60.0;
    const nlohmann::json written = with_loops;
    EXPECT_EQ(written.at("bandwidth_loops"), (nlohmann::json{{"update", 60.0}, {"copy", 45.0}, {"triad", 40.0}}));
    const MachinePeaks read = machine_peaks_from_json(written);
    EXPECT_EQ(read.bandwidth_loops.update, 60.0);
    EXPECT_EQ(read.bandwidth_loops.copy, 45.0);
    EXPECT_EQ(read.bandwidth_loops.triad, 40.0);
    EXPECT_EQ(bandwidth_source(read), "the best of three loops over 128 MB arrays: in-place update 60.0, copy 45.0, "
                                      "STREAM triad 40.0 GB/s");
    MachinePeaks before_loops = again;  // as a compare.json from before the loops reads
    before_loops.bandwidth_loops = {};
    EXPECT_FALSE(nlohmann::json(before_loops).contains("bandwidth_loops")) << "not measured: not written";
    EXPECT_FALSE(machine_peaks_from_json(nlohmann::json(before_loops)).bandwidth_loops.measured());
    EXPECT_EQ(bandwidth_source(before_loops), "STREAM triad");
    for (const auto& [edit, why] : std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>>{
             {[](nlohmann::json& j) { j["bandwidth_gbs"] = 50.0; },
              "bandwidth_gbs 50 is not the best of bandwidth_loops (60)"},
             {[](nlohmann::json& j) { j["bandwidth_loops"].erase("copy"); }, "bandwidth_loops has no number 'copy'"},
             {[](nlohmann::json& j) { j["bandwidth_loops"]["triad"] = "40"; }, "bandwidth_loops has no number 'triad'"},
             {[](nlohmann::json& j) { j["bandwidth_loops"]["triad"] = 1e-300; },
              "bandwidth_loops.triad 1e-300 is outside 0.1..100000 GB/s"},
             {[](nlohmann::json& j) { j["bandwidth_loops"] = 60.0; }, "bandwidth_loops is not an object"},
             {[](nlohmann::json& j) { j["isa"] = "sm_90"; }, "bandwidth_loops beside a GPU's datasheet bandwidth"}}) {
      nlohmann::json damaged = written;
      edit(damaged);
      try {
        machine_peaks_from_json(damaged);
        ADD_FAILURE() << "accepted: " << damaged.dump();
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), why);
      }
    }
  }
  // Every text printed from it: an escape sequence in a hand-edited cache or compare.json never reaches the terminal.
  for (const char* key : {"cpu", "cpu_signature", "isa", "library_isa", "measured_at", "measured_busy"}) {
    bad = again;
    bad[key] = "2026\x1b[2J";
    EXPECT_THROW(machine_peaks_from_json(bad), Error) << key;
  }
  EXPECT_EQ(call(/*force=*/true), std::make_pair(102.0, true)) << "--remeasure measures";
  EXPECT_EQ(call(), std::make_pair(102.0, false)) << "and replaces the entry";
  EXPECT_EQ(nlohmann::json::parse(attnprof::io::read_file(file.string()))["entries"].size(), 1u);
  // Another thread count is another entry: measured, the first one kept.
  EXPECT_EQ(detail::machine_peaks(2, false, measure, nullptr, &idle).threads, 2);
  EXPECT_EQ(measured, 3);
  EXPECT_EQ(call(), std::make_pair(102.0, false));
  // A corrupt cache is ignored and rewritten.
  { std::ofstream(file) << "{\"version\": 6, \"entries\": [ {\"cpu\": "; }
  notes.clear();
  EXPECT_EQ(call(), std::make_pair(104.0, true));
  EXPECT_NE(said().find("ignoring corrupt machine-peaks cache"), std::string::npos);
  EXPECT_EQ(call(), std::make_pair(104.0, false)) << "from the rewritten cache";
  // Well-formed entries for this machine with figures no measurement gives are corrupt too: measured again.
  for (const char* bad : {R"("threads": 1, "fp32_gflops": 1e300)", R"("threads": 1.5, "fp32_gflops": 7)",
                          R"("threads": 1e300, "fp32_gflops": 7)"}) {
    {
      std::ofstream(file) << R"({"version": 6, "entries": [{"cpu": ")" << a.cpu << R"(", "isa": ")" << a.isa
                          << R"(", "bf16_gflops": 14, "bandwidth_gbs": 1, "sgemm_gflops": 1, )" << kLibrary << bad
                          << "}]}";
    }
    notes.clear();
    EXPECT_TRUE(call().second) << bad;
  }
  // An entry is this machine's only with its CPU signature (family, model, stepping): a hypervisor's generic
  // model name ("AMD EPYC") is shared by CPU generations whose peaks differ.
  const nlohmann::json cached = nlohmann::json::parse(attnprof::io::read_file(file.string()));
  ASSERT_EQ(cached["entries"].size(), 1u);
  const std::string signature = cached["entries"][0].at("cpu_signature").get<std::string>();
  EXPECT_NE(signature.find(" family "), std::string::npos) << signature;
  EXPECT_EQ(signature, a.cpu_signature);
  for (const std::string& sig : {signature, std::string("OtherVendor family 1 model 2 stepping 3"), std::string()}) {
    {
      std::ofstream out(file);
      out << R"({"version": 6, "entries": [{"cpu": ")" << a.cpu << R"(", "isa": ")" << a.isa
          << R"(", )" << kLibrary
          << R"("threads": 1, "fp32_gflops": 7, "bf16_gflops": 14, "bandwidth_gbs": 1, "sgemm_gflops": 1)";
      if (!sig.empty()) out << R"(, "cpu_signature": ")" << sig << '"';
      out << "}]}";
    }
    const auto [fp32, remeasured] = call();
    if (sig == signature) {
      EXPECT_EQ(fp32, 7.0) << "the matching entry is read as cached";
      EXPECT_FALSE(remeasured);
    } else {
      EXPECT_TRUE(remeasured) << "an entry of another CPU (or none recorded) is not used: '" << sig << "'";
    }
    // The new measurement replaces an unsigned entry of this machine (an older cache's), not another CPU's.
    EXPECT_EQ(nlohmann::json::parse(attnprof::io::read_file(file.string()))["entries"].size(),
              sig.rfind("OtherVendor", 0) == 0 ? 2u : 1u)
        << "'" << sig << "'";
  }
  // Figures no machine gives, in an entry that is otherwise this machine's (and so would be used), make the
  // cache corrupt: the note names the figure and the bounds, and the peaks are measured again. At the bounds,
  // and with bf16 0 (no AVX512-BF16), the entry is read as cached.
  const nlohmann::json plausible = {{"cpu", a.cpu},           {"isa", a.isa},         {"threads", 1},
                                    {"fp32_gflops", 7},       {"bf16_gflops", 14},     {"bandwidth_gbs", 1},
                                    {"sgemm_gflops", 1},      {"cpu_signature", signature},
                                    {"library_isa", "avx512"}, {"library_fp32_gflops", 70},
                                    {"library_bf16_gflops", 140},
                                    {"bandwidth_loops", {{"update", 1}, {"copy", 0.5}, {"triad", 0.5}}}};
  auto write_cache = [&](const nlohmann::json& entry) {
    nlohmann::json cache = {{"version", 6}, {"entries", nlohmann::json::array()}};
    cache["entries"].push_back(entry);
    std::ofstream(file) << cache.dump();
  };
  for (const auto& [key, value, why] :
       {std::tuple<const char*, double, const char*>{"bandwidth_gbs", 1e-300, "bandwidth_gbs 1e-300 is outside 0.1..100000 GB/s"},
        {"fp32_gflops", 2e7, "fp32_gflops 2e+07 is outside 0.1..1e+07 GFLOP/s"},
        {"bf16_gflops", 0.01, "bf16_gflops 0.01 is outside 0.1..1e+07 GFLOP/s"},
        {"library_fp32_gflops", 0.0, "library_fp32_gflops 0 is outside 0.1..1e+07 GFLOP/s"}}) {
    SCOPED_TRACE(why);
    nlohmann::json entry = plausible;
    entry[key] = value;
    write_cache(entry);
    notes.clear();
    const auto [fp32, remeasured] = call();
    const std::string err = said();
    EXPECT_NE(err.find("ignoring corrupt machine-peaks cache " + file.string() + " (" + why + "); re-measuring"),
              std::string::npos)
        << err;
    EXPECT_TRUE(remeasured) << "the implausible entry was used";
    EXPECT_NE(fp32, 7.0);
  }
  {  // A file past a megabyte, the plausible entry padded with spaces: no cache of ours, not parsed.
    nlohmann::json cache = {{"version", 6}, {"entries", nlohmann::json::array({plausible})}};
    std::ofstream(file) << cache.dump() << std::string(size_t(1) << 20, ' ');
    notes.clear();
    const auto [fp32, remeasured] = call();
    EXPECT_NE(said().find("ignoring corrupt machine-peaks cache " + file.string() + " ("), std::string::npos) << said();
    EXPECT_NE(said().find(" bytes, more than a cache of peaks holds); re-measuring"), std::string::npos) << said();
    EXPECT_TRUE(remeasured) << "a cache past a megabyte was read";
    EXPECT_NE(fp32, 7.0);
  }
  nlohmann::json at_bounds = plausible;
  at_bounds.update({{"fp32_gflops", 1e7}, {"bf16_gflops", 0}, {"bandwidth_gbs", 0.1}, {"sgemm_gflops", 0.1},
                    {"bandwidth_loops", {{"update", 0.1}, {"copy", 0.1}, {"triad", 0.1}}}});
  write_cache(at_bounds);
  int before = measured;
  const MachinePeaks edge = peaks();
  EXPECT_EQ(measured, before);
  EXPECT_EQ(edge.fp32_gflops, 1e7);
  EXPECT_EQ(edge.bf16_gflops, 0.0);
  EXPECT_EQ(edge.bandwidth_gbs, 0.1);
  // The library peaks read back as written: the entry is the JSON every output carries (`json j = peaks`).
  write_cache(plausible);
  const MachinePeaks lib = peaks();
  EXPECT_EQ(measured, before);
  EXPECT_EQ(lib.library_isa, "avx512");
  EXPECT_EQ(lib.library_fp32_gflops, 70.0);
  EXPECT_EQ(lib.library_bf16_gflops, 140.0);
  nlohmann::json round_trip = lib;
  for (const char* key : {"library_isa", "library_fp32_gflops", "library_bf16_gflops", "fp32_gflops", "isa"})
    EXPECT_EQ(round_trip.at(key), plausible.at(key)) << key;
  // An entry without them (written by hand, or half an older one) is corrupt: measured again.
  nlohmann::json no_library = plausible;
  no_library.erase("library_fp32_gflops");
  write_cache(no_library);
  notes.clear();
  EXPECT_TRUE(call().second) << "an entry without library peaks was used";
  EXPECT_NE(said().find("ignoring corrupt machine-peaks cache"), std::string::npos);
  // So is one without the memory loops, which every measurement of this version records: its bandwidth would be
  // described as STREAM triad's.
  nlohmann::json no_loops = plausible;
  no_loops.erase("bandwidth_loops");
  write_cache(no_loops);
  notes.clear();
  EXPECT_TRUE(call().second) << "an entry without memory loops was used";
  EXPECT_NE(said().find("(field 'bandwidth_loops' is missing); re-measuring"), std::string::npos) << said();
  // An entry measured beside other work (its recorded "other_cpus", before the load average at its start,
  // which lags a minute behind) is measured again once the machine is idle, and used, with a note, while it
  // is still busy. The probe says which: idle here, then busy.
  auto write_entry = [&](const std::string& busy_fields) {
    std::ofstream(file) << R"({"version": 6, "entries": [{"cpu": ")" << a.cpu << R"(", "isa": ")" << a.isa
                        << R"(", "threads": 1, "fp32_gflops": 7, "bf16_gflops": 14, "bandwidth_gbs": 1, "sgemm_gflops": 1, )"
                        << kLibrary << busy_fields << R"(, "cpu_signature": ")" << signature << R"("}]})";
  };
  write_entry(R"("load_average": 1000, "other_cpus": 0)");
  EXPECT_EQ(call(), std::make_pair(7.0, false)) << "measured beside no other work: used";
  // Other work on every CPU: busy for a one-thread measurement.
  const int hw = analysis::online_cpus();
  write_entry(fmt::format(R"("load_average": 0, "other_cpus": {})", hw));
  notes.clear();
  const auto [busy_cached, busy_remeasured] = call();
  const std::string busy_note = said();
  EXPECT_NE(busy_note.find(fmt::format("measured on a busy machine (other work used {:.1f} of", double(hw))),
            std::string::npos)
      << busy_note;
  EXPECT_TRUE(busy_remeasured) << "the machine idle now: measured again";
  EXPECT_NE(busy_cached, 7.0);
  const nlohmann::json after = nlohmann::json::parse(attnprof::io::read_file(file.string()));
  ASSERT_EQ(after["entries"].size(), 1u);
  EXPECT_EQ(after["entries"][0]["fp32_gflops"].get<double>(), busy_cached);
  if (!busy_remeasured) EXPECT_EQ(after["entries"][0]["other_cpus"].get<double>(), double(hw)) << "kept as it was";
  else EXPECT_LE(after["entries"][0]["other_cpus"].get<double>(), double(hw)) << "a fresh measurement's own figure";
  {  // Still busy now: the entry is used, with a note, and kept as it was.
    const detail::OtherWorkProbe busy{[hw] { return double(hw); }, [hw](double) { return double(hw); }};
    write_entry(fmt::format(R"("load_average": 0, "other_cpus": {})", hw));
    notes.clear();
    const int before = measured;
    const MachinePeaks kept = detail::machine_peaks(1, false, measure, &notes, &busy);
    EXPECT_EQ(kept.fp32_gflops, 7.0);
    EXPECT_EQ(measured, before) << "not measured again while the machine is busy";
    EXPECT_NE(said().find("may be low; they are measured again once it is idle"), std::string::npos) << said();
    // The outputs that rest on them say so too: the provenance, and the JSON every output carries.
    const std::string other = fmt::format("other work used {:.1f} of {} CPUs", double(hw), hw);
    EXPECT_TRUE(kept.from_cache);
    EXPECT_EQ(kept.measured_busy, other);
    EXPECT_NE(peaks_provenance(kept).find(", on a busy machine (" + other + "), so they may be low"),
              std::string::npos)
        << peaks_provenance(kept);
    EXPECT_EQ(machine_peaks_from_json(nlohmann::json(kept)).measured_busy, other);
    // A measurement taken while busy records it, and is cached with it.
    const MachinePeaks fresh = detail::machine_peaks(1, /*force=*/true, measure, &notes, &busy);
    EXPECT_FALSE(fresh.from_cache);
    EXPECT_EQ(fresh.measured_busy.rfind("other work used ", 0), 0u) << fresh.measured_busy;
    EXPECT_NE(peaks_provenance(fresh).find("on a busy machine (other work used "), std::string::npos)
        << peaks_provenance(fresh);
  }
  // Other work no measurement records (more than every CPU, or negative; a negative load average): a corrupt
  // entry, measured again with a note rather than printed as "other work used 1000000000.0 of 2 CPUs".
  for (const char* bad : {R"("load_average": 0, "other_cpus": 1e9)", R"("load_average": 0, "other_cpus": -5)",
                          R"("load_average": -1)"}) {
    write_entry(bad);
    notes.clear();
    EXPECT_TRUE(call().second) << bad;
    EXPECT_NE(said().find("ignoring corrupt machine-peaks cache"), std::string::npos) << bad << ": " << said();
  }
  // A version-1 cache summed per-thread rates (too high where threads share a core), a version-2 one has no
  // library peaks, a version-3 one timed the scalar FMA loop through memory, a version-4 one ran the AVX-512 loops
  // on 12 chains (under a Zen 5 core's bf16 peak), a version-5 one took the bandwidth from STREAM triad alone
  // (which in-place ops beat): their entries, even this machine's, are measured again, and the rewritten cache is
  // version 6.
  for (int version : {1, 2, 3, 4, 5}) {
    {
      std::ofstream(file) << R"({"version": )" << version << R"(, "entries": [{"cpu": ")" << a.cpu << R"(", "isa": ")"
                          << a.isa
                          << R"(", "threads": 1, "fp32_gflops": 7, "bf16_gflops": 14, "bandwidth_gbs": 1, "sgemm_gflops": 1, )"
                          << (version >= 3 ? kLibrary : "") << R"("cpu_signature": ")" << signature << R"("}]})";
    }
    notes.clear();
    const auto [fp32, remeasured] = call();
    EXPECT_NE(said().find("is from an older attnprof; re-measuring"),
              std::string::npos);
    EXPECT_TRUE(remeasured) << "a version-" << version << " entry was used";
    EXPECT_EQ(nlohmann::json::parse(attnprof::io::read_file(file.string())).at("version"), 6);
    EXPECT_EQ(call(), std::make_pair(fp32, false)) << "the version-6 entry written is read back";
  }
  ::unsetenv("XDG_CACHE_HOME");
  std::filesystem::remove_all(dir);
}

namespace {
std::mutex g_one_at_a_time;
// A resource only one thread can use at a time, as a core's FMA units are for two threads on one core.
float one_at_a_time_loop(int64_t iters) {
  std::lock_guard<std::mutex> lock(g_one_at_a_time);
  volatile float x = 0.0f;
  for (int64_t i = 0; i < iters; ++i) x = x + 1.0f;
  return x;
}
}  // namespace

// The memory loops compute what they say at every ISA the CPU has, on [begin, end) only (each thread's share is
// its own), in whole vector rounds and the elements past them: ranges that start and end off a vector.
TEST(MachinePeaks, MemoryLoopsWriteTheirRangeOnly) {
  constexpr size_t n = 100;
  for (const Isa isa : available_isas()) {
    SCOPED_TRACE(isa_name(isa));
    const MemoryLoops loops = memory_loops(isa);
    std::vector<double> a(n, -1.0), b(n), c(n);
    for (size_t i = 0; i < n; ++i) b[i] = double(i), c[i] = 2.0 * double(i);
    loops.triad(a.data(), b.data(), c.data(), 0.5, 3, 90);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(a[i], i >= 3 && i < 90 ? 2.0 * double(i) : -1.0) << i;
    loops.copy(a.data(), b.data(), 1, 42);
    for (size_t i = 0; i < n; ++i)
      EXPECT_EQ(a[i], i >= 1 && i < 42 ? double(i) : i >= 3 && i < 90 ? 2.0 * double(i) : -1.0) << i;
    loops.update(b.data(), 0.5, 7, 99);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(b[i], i >= 7 && i < 99 ? 0.5 * double(i) : double(i)) << i;
  }
}

TEST(MachinePeaks, ThreadsThatShareOneResourceMeasureItOnce) {
  // The peak of 4 threads taking turns on one resource is that resource's rate, not 4 times it: each thread
  // alone finds moments the resource is free, so adding per-thread best rates would say ~4x.
  const double one = attnprof::analysis::team_gflops(1, one_at_a_time_loop, 1 << 20, 5, 1.0);
  const double four = attnprof::analysis::team_gflops(4, one_at_a_time_loop, 1 << 20, 5, 1.0);
  ASSERT_GT(one, 0.0);
  EXPECT_LT(four, 2.5 * one) << "one thread " << one << " GFLOP/s, four sharing it " << four;
  EXPECT_GT(four, 0.25 * one) << "one thread " << one << " GFLOP/s, four sharing it " << four;
}

// Free page reporting is read from the balloon driver's feature bits (bit 5) in a sysfs tree; this one is
// fake, so the test says the same on every machine.
TEST(MachineMemory, ReclaimNoteFollowsTheBalloonsReportingBit) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / "attnprof_test_fake_sysfs";
  fs::remove_all(root);
  EXPECT_FALSE(memory_reclaim_note(root.string()).has_value());  // no sysfs at all

  const fs::path drv = root / "bus/virtio/drivers/virtio_balloon";
  fs::create_directories(drv / "virtio0");
  fs::create_directories(drv / "bind-like-entry");  // not a device: ignored
  auto write = [](const fs::path& p, const std::string& s) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << s << "\n";
  };
  write(drv / "bind-like-entry/features", "11111111");
  write(drv / "virtio0/features", "0110000100000000");  // stats, deflate-on-OOM; no reporting
  EXPECT_FALSE(memory_reclaim_note(root.string()).has_value());
  write(drv / "virtio0/features", "garbage!");
  EXPECT_FALSE(memory_reclaim_note(root.string()).has_value());
  write(drv / "virtio0/features", "0110");  // too short to hold bit 5
  EXPECT_FALSE(memory_reclaim_note(root.string()).has_value());

  write(drv / "virtio0/features", "0110010100000000");  // as the development VM's balloon
  std::optional<std::string> note = memory_reclaim_note(root.string());
  ASSERT_TRUE(note.has_value());
  EXPECT_NE(note->find("free page reporting"), std::string::npos) << *note;
  EXPECT_EQ(note->find("blocks of"), std::string::npos) << *note;  // order unknown: no block size

  write(root / "module/page_reporting/parameters/page_reporting_order", "9");
  note = memory_reclaim_note(root.string());
  ASSERT_TRUE(note.has_value());
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page == 4096) EXPECT_NE(note->find("in blocks of 2 MiB"), std::string::npos) << *note;
  write(root / "module/page_reporting/parameters/page_reporting_order", "-1");  // nonsense: no block size
  note = memory_reclaim_note(root.string());
  ASSERT_TRUE(note.has_value());
  EXPECT_EQ(note->find("blocks of"), std::string::npos) << *note;
  fs::remove_all(root);
}
