// Attention benchmark over the registry (issue 5): every variant × shape × mask × dtype × threads.
//
//   ./build/bench/bench_attention --benchmark_filter='^flash/fp32/none/B1H16N4096D128/t2$'
//   ./build/bench/bench_attention --benchmark_filter='/B1H16N4096D64/'       # every variant at one shape
//   ./build/bench/bench_attention --benchmark_filter='smoke' --benchmark_min_time=0   # CI: one tiny run
//   ./build/bench/bench_attention --benchmark_filter='^ops/'                 # elementwise ops, GB/s
//
// Names: VARIANT/DTYPE/MASK/BxHxNxD/tTHREADS with MASK in {none, causal}. Counters:
//   GFLOPs     attention FLOPs per second (4·B·H·Nq·Nk·D, halved when causal: attention_flops())
//   pct_sgemm  that rate as % of OpenBLAS sgemm 2048³ measured at start-up in this process, same threads
//   peak_MiB   tracked peak during one forward (inputs + outputs + everything the variant allocates)
//   extra_MiB  peak minus the live inputs before the call (what the variant allocates, output included)
//   cpu_GFLOPs, cpu_pct_sgemm  the same per CPU-second of the process (all threads), against sgemm's
//              FLOP per CPU-second: the per-core efficiency, meaningful when other processes share the cores
// Each (variant, dtype, mask, D) is validated against the fp64 reference on a small problem of the same
// configuration before anything is timed; a variant that fails validation is not timed (SkipWithError).
// When CMake found libtorch, `torch-sdpa/...` runs at::_scaled_dot_product_attention (libtorch 1.13) on the
// same buffers, validated the same way. `ops/...` times the elementwise ops the naive variants are made of
// (GBs = bytes of the op's cost model per second; STREAM on this VM is ~25 GB/s on 1 core, ~35 on 2).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "attnprof/allocator.h"
#include "attnprof/attention.h"
#include "attnprof/ops.h"
#include "ops/blas_loader.h"
#if ATTNPROF_HAVE_TORCH
#include "torch_peer.h"
#endif

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

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// sgemm FLOP per second of process CPU time (all threads): robust to other processes sharing the cores.
std::map<int, double>& sgemm_cpu_rates() {
  static std::map<int, double> m;
  return m;
}

// Best of a few OpenBLAS sgemm 2048³ runs at `threads` threads, in FLOP/s (wall clock); also records the
// best rate per CPU-second in sgemm_cpu_rates().
double sgemm_rate(int threads) {
  static std::map<int, double> cache;
  if (auto it = cache.find(threads); it != cache.end()) return it->second;
  // The OpenBLAS the ops load (not a copy linked here: ATTNPROF_OPENBLAS_LIBRARY may name another build), so
  // "% of sgemm" compares the ops with the library they call.
  const auto sgemm = ops::detail::blas_api().cblas_sgemm;
  ops::set_num_threads(threads);
  const int n = 2048;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n, 0.0f);
  double best = 1e30, best_cpu = 1e30;
  for (int i = 0; i < 4; ++i) {  // the first run also warms up fresh memory and BLAS buffers
    const double t0 = wall_seconds(), c0 = process_cpu_seconds();
    sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double s = wall_seconds() - t0;
    if (i > 0) best = std::min(best, s), best_cpu = std::min(best_cpu, process_cpu_seconds() - c0);
  }
  sgemm_cpu_rates()[threads] = 2.0 * double(n) * n * n / best_cpu;
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

// cpu_s, wall_s: process CPU seconds (all threads) and wall seconds spent in the timed loop. The cpu_* counters
// are FLOP per CPU-second, compared with sgemm's FLOP per CPU-second at the same thread count: on a shared
// machine they measure the kernel's efficiency per core, which wall-clock rates cannot. GFLOPs and pct_sgemm are
// plain numbers from the loop's wall time, so that one is the other over sgemm's rate (as rate counters the
// harness printed the percentage as "97.4/s").
void report(benchmark::State& state, const AttnProblem& p, double sgemm, int64_t peak, int64_t live, double cpu_s,
            double wall_s, int threads) {
  const double flops = attention_flops(p);
  const double cpu_rate = flops * double(state.iterations()) / cpu_s;
  state.counters["cpu_GFLOPs"] = cpu_rate * 1e-9;
  state.counters["cpu_pct_sgemm"] = cpu_rate / sgemm_cpu_rates()[threads] * 100.0;
  const double wall_rate = wall_s > 0 ? flops * double(state.iterations()) / wall_s : 0.0;
  state.counters["GFLOPs"] = wall_rate * 1e-9;
  state.counters["pct_sgemm"] = wall_rate / sgemm * 100.0;
  state.counters["sgemm_GFLOPs"] = sgemm * 1e-9;
  state.counters["peak_MiB"] = double(peak) / (1 << 20);
  state.counters["extra_MiB"] = double(peak - live) / (1 << 20);
  state.counters["io_MiB"] = attention_io_bytes(p) / (1 << 20);
}

#if ATTNPROF_HAVE_TORCH
std::string validate_torch(DType t, bool causal, int64_t D) {
  static std::map<std::string, std::string> cache;
  const std::string key = fmt::format("{}/{}/{}", dtype_name(t), causal, D);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  Inputs in = make_inputs(1, 2, 301, D, t, causal);
  const Tensor o = bench::torch_sdpa(in.q, in.k, in.v, causal);
  // libtorch's math path rounds scores and probabilities like our unfused variants: their tolerance.
  const ErrorStats e = compare_to_reference(o, reference_attention(in.q, in.k, in.v, in.opt),
                                            find_variant("naive").tolerance(t));
  std::string why;
  if (!e.ok()) why = fmt::format("torch SDPA failed validation: {} of {} out of tolerance", e.violations, e.count);
  return cache[key] = why;
}

void run_torch(benchmark::State& state, ShapeCfg s, DType t, bool causal, int threads) {
  if (const std::string why = validate_torch(t, causal, s.D); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  const double sgemm = sgemm_rate(threads);
  bench::torch_set_num_threads(threads);
  Inputs in = make_inputs(s.B, s.H, s.N, s.D, t, causal);
  const AttnProblem p = AttnProblem::from(in.q, in.k, in.v, in.opt);
  bench::torch_sdpa_run(in.q, in.k, in.v, causal);  // warm-up
  const double c0 = process_cpu_seconds(), w0 = wall_seconds();
  for (auto _ : state) bench::torch_sdpa_run(in.q, in.k, in.v, causal);
  report(state, p, sgemm, 0, 0, process_cpu_seconds() - c0, wall_seconds() - w0, threads);  // torch's allocations are not tracked: no memory counters
  state.counters.erase("peak_MiB");
  state.counters.erase("extra_MiB");
  state.SetLabel(fmt::format("libtorch {}", bench::torch_version()));
}
#endif

// Elementwise ops at [B,H,N,N] (the naive variants' score tensors).
enum class OpKind { Softmax, SoftmaxInplace, MulInplace, MaskedFillInplace, AddInplace, Clone };
const char* op_name(OpKind k) {
  switch (k) {
    case OpKind::Softmax: return "softmax";
    case OpKind::SoftmaxInplace: return "softmax_";
    case OpKind::MulInplace: return "mul_";
    case OpKind::MaskedFillInplace: return "masked_fill_";
    case OpKind::AddInplace: return "add_";
    case OpKind::Clone: return "copy_";
  }
  return "?";
}

void run_op(benchmark::State& state, OpKind kind, Shape4 shape, DType t, int threads) {
  ops::set_num_threads(threads);
  Tensor a = Tensor::empty(shape, t);
  fill_randn(a, 4);
  const Tensor mask = ops::triu_mask(shape[2], shape[3], 1);
  Tensor add_mask = Tensor::empty({1, 1, shape[2], shape[3]}, DType::F32);
  fill_randn(add_mask, 5);
  OpCost cost;
  auto once = [&] {
    switch (kind) {
      case OpKind::Softmax: benchmark::DoNotOptimize(ops::softmax(a).raw()); cost = ops::softmax_cost(shape, t); break;
      case OpKind::SoftmaxInplace: ops::softmax_(a); cost = ops::softmax_cost(shape, t); break;
      case OpKind::MulInplace: ops::mul_(a, 1.0); cost = ops::mul_cost(shape, t); break;
      case OpKind::MaskedFillInplace:
        ops::masked_fill_(a, mask, 0.0f);
        cost = ops::masked_fill_cost(shape, t, mask.shape());
        break;
      case OpKind::AddInplace: ops::add_(a, add_mask); cost = ops::add_cost(shape, t, add_mask.shape(), DType::F32); break;
      case OpKind::Clone: benchmark::DoNotOptimize(ops::clone(a).raw()); cost = ops::copy_cost(shape, t, t); break;
    }
  };
  once();  // warm-up (first touch of the output pages)
  for (auto _ : state) once();
  state.counters["GBs"] = benchmark::Counter(cost.bytes() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
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
  const double c0 = process_cpu_seconds(), w0 = wall_seconds();
  for (auto _ : state) {
    AttnOutput o = runner->run(in.q, in.k, in.v);
    benchmark::DoNotOptimize(o.out.raw());
  }
  report(state, p, sgemm, peak, live, process_cpu_seconds() - c0, wall_seconds() - w0, threads);
}

std::string shape_name(const ShapeCfg& s) {
  return fmt::format("B{}H{}N{}D{}", s.B, s.H, s.N, s.D);
}

void register_all() {
#if ATTNPROF_HAVE_TORCH
  for (const ShapeCfg& s : kShapes) {
    if (s.flash_only) continue;
    for (DType t : {DType::F32, DType::BF16})
      for (bool causal : {false, true})
        for (int threads : {1, 2}) {
          const std::string name = fmt::format("torch-sdpa/{}/{}/{}/t{}{}", dtype_name(t), causal ? "causal" : "none",
                                               shape_name(s), threads, *s.tag ? fmt::format("/{}", s.tag) : "");
          benchmark::RegisterBenchmark(name.c_str(), run_torch, s, t, causal, threads)
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
        }
  }
#endif
  for (OpKind k : {OpKind::Softmax, OpKind::SoftmaxInplace, OpKind::MulInplace, OpKind::MaskedFillInplace,
                   OpKind::AddInplace, OpKind::Clone})
    for (DType t : {DType::F32, DType::BF16, DType::F16})
      for (int threads : {1, 2}) {
        const std::string name = fmt::format("ops/{}/{}/B8H16N1024N1024/t{}", op_name(k), dtype_name(t), threads);
        benchmark::RegisterBenchmark(name.c_str(), run_op, k, Shape4{8, 16, 1024, 1024}, t, threads)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
  for (const Variant& var : registry()) {
    for (const ShapeCfg& s : kShapes) {
      if (s.flash_only && var.name != "flash") continue;
      for (DType t : {DType::F32, DType::BF16, DType::F16})
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
