// Attention benchmark over the registry (issue 5): every variant × shape × mask × dtype × threads.
//
//   ./build/bench/bench_attention --benchmark_filter='^flash/fp32/none/B1H16N4096D128/t2$'
//   ./build/bench/bench_attention --benchmark_filter='/B1H16N4096D64/'       # every variant at one shape
//   ./build/bench/bench_attention --benchmark_filter='smoke' --benchmark_min_time=0   # CI: one tiny run
//
// Names: VARIANT/DTYPE/MASK/BxHxNxD/tTHREADS with MASK in {none, causal}. Counters:
//   GFLOPs     attention FLOPs per second (4·B·H·Nq·Nk·D, halved when causal: attention_flops())
//   pct_sgemm  that rate as % of OpenBLAS sgemm 2048³ measured at start-up in this process, same threads
//   peak_MiB   tracked peak during one forward (inputs + outputs + everything the variant allocates)
//   extra_MiB  peak minus the live inputs before the call (what the variant allocates, output included)
// Each (variant, dtype, mask, D) is validated against the fp64 reference on a small problem of the same
// configuration before anything is timed; a variant that fails validation is not timed (SkipWithError).
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "attnprof/allocator.h"
#include "attnprof/attention.h"
#include "attnprof/ops.h"

using namespace attnprof;

namespace {

struct ShapeCfg {
  int64_t B, H, N, D;
  bool flash_only;
  const char* tag;  // extra name component ("smoke" for the CI shape)
};

const std::vector<ShapeCfg> kShapes = {
    {1, 2, 128, 64, false, "smoke"},     // CI: proves the suite runs, in milliseconds
    {8, 16, 1024, 64, false, ""},        // the blog's shape
    {1, 16, 4096, 64, false, ""},  {1, 16, 4096, 128, false, ""},
    {1, 32, 8192, 128, true, ""},        // flash only: naive would need 8 GB of scores
};

// Best of a few OpenBLAS sgemm 2048³ runs at `threads` threads, in FLOP/s.
double sgemm_rate(int threads) {
  static std::map<int, double> cache;
  if (auto it = cache.find(threads); it != cache.end()) return it->second;
  ops::set_num_threads(threads);
  const int n = 2048;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n, 0.0f);
  double best = 1e30;
  for (int i = 0; i < 4; ++i) {  // the first run also warms up fresh memory and BLAS buffers
    const auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) best = std::min(best, s);
  }
  return cache[threads] = 2.0 * double(n) * n * n / best;
}

struct Inputs {
  Tensor q, k, v;
  AttnOptions opt;
};

Inputs make_inputs(int64_t B, int64_t H, int64_t N, int64_t D, DType t, bool causal) {
  Inputs in;
  in.q = Tensor::empty({B, H, N, D}, t);
  in.k = Tensor::empty({B, H, N, D}, t);
  in.v = Tensor::empty({B, H, N, D}, t);
  fill_randn(in.q, 1);
  fill_randn(in.k, 2);
  fill_randn(in.v, 3);
  in.opt.is_causal = causal;
  return in;
}

// Validation on a small problem of the same configuration (same variant, dtype, mask and head dim; N not a
// multiple of any tile, two heads). Cached per configuration; "" when it passed, else the reason.
std::string validate(const Variant& var, DType t, bool causal, int64_t D) {
  static std::map<std::string, std::string> cache;
  const std::string key = fmt::format("{}/{}/{}/{}", var.name, dtype_name(t), causal, D);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  Inputs in = make_inputs(1, 2, 301, D, t, causal);
  const AttnProblem p = AttnProblem::from(in.q, in.k, in.v, in.opt);
  std::string why;
  if (auto u = var.unsupported(p)) {
    why = "unsupported: " + *u;
  } else {
    auto runner = var.prepare(p, in.opt);
    const AttnOutput out = runner->run(in.q, in.k, in.v);
    const ErrorStats e = compare_to_reference(out.out, reference_attention(in.q, in.k, in.v, in.opt), var.tolerance(t));
    if (!e.ok())
      why = fmt::format("failed validation on {}: {} of {} elements out of tolerance, max abs error {:.3g}", p.str(),
                        e.violations, e.count, e.max_abs);
  }
  return cache[key] = why;
}

void run_case(benchmark::State& state, const Variant* var, ShapeCfg s, DType t, bool causal, int threads) {
  if (const std::string why = validate(*var, t, causal, s.D); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  const double sgemm = sgemm_rate(threads);
  ops::set_num_threads(threads);
  Inputs in = make_inputs(s.B, s.H, s.N, s.D, t, causal);
  const AttnProblem p = AttnProblem::from(in.q, in.k, in.v, in.opt);
  if (auto u = var->unsupported(p)) {
    state.SkipWithError(("unsupported: " + *u).c_str());
    return;
  }
  std::unique_ptr<Runner> runner;
  try {
    runner = var->prepare(p, in.opt);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  benchmark::DoNotOptimize(runner->run(in.q, in.k, in.v).out.raw());  // warm-up: first touch of fresh pages
  const int64_t live = memory_stats().current_bytes;
  reset_peak_memory();
  benchmark::DoNotOptimize(runner->run(in.q, in.k, in.v).out.raw());
  const int64_t peak = memory_stats().peak_bytes;
  for (auto _ : state) {
    AttnOutput o = runner->run(in.q, in.k, in.v);
    benchmark::DoNotOptimize(o.out.raw());
  }
  const double flops = attention_flops(p);
  using C = benchmark::Counter;
  state.counters["GFLOPs"] = C(flops * 1e-9, C::kIsIterationInvariantRate);
  state.counters["pct_sgemm"] = C(flops / sgemm * 100.0, C::kIsIterationInvariantRate);
  state.counters["sgemm_GFLOPs"] = sgemm * 1e-9;
  state.counters["peak_MiB"] = double(peak) / (1 << 20);
  state.counters["extra_MiB"] = double(peak - live) / (1 << 20);
  state.counters["io_MiB"] = attention_io_bytes(p) / (1 << 20);
}

void register_all() {
  for (const Variant& var : registry()) {
    for (const ShapeCfg& s : kShapes) {
      if (s.flash_only && var.name != "flash") continue;
      for (DType t : {DType::F32, DType::BF16})
        for (bool causal : {false, true})
          for (int threads : {1, 2}) {
            const std::string name = fmt::format("{}/{}/{}/B{}H{}N{}D{}/t{}{}", var.name, dtype_name(t),
                                                 causal ? "causal" : "none", s.B, s.H, s.N, s.D, threads,
                                                 *s.tag ? fmt::format("/{}", s.tag) : std::string());
            benchmark::RegisterBenchmark(name.c_str(), run_case, &var, s, t, causal, threads)
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);
          }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
