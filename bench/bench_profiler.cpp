// The profiler measured by itself (issue 3's targets):
//   BM_Zone_Enabled          ns per zone while recording (target <= 50 ns), plain and with cost + shapes
//   BM_Zone_RuntimeOff       ns per zone when the library has zones compiled in but nothing records
//   BM_Zone_CompiledOut      the same loop with the macros compiled out (ATTNPROF_PROFILER_ENABLED=0)
//   BM_Loop_Empty            the bare loop, for reference
//   BM_Profiler_Step         time per Profiler::step() between forwards (buffers grown ahead; the workers' in an OpenMP region when one may need room)
//   BM_TraceExport*          events per second for Chrome trace export (target >= 1 M events/s)
//   BM_ProfilingOverhead     a variant at the blog's shape [8,16,1024,64] bf16 causal, timed with and without
//                            the profiler recording; counter `ratio` = profiled / unprofiled (target < 1.02)
//
//   build-prof/bench/bench_profiler --benchmark_filter=Zone
//   build-prof/bench/bench_profiler --benchmark_filter=Overhead   # ATTNPROF_BENCH_VARIANT=naive,
//                                                                  # ATTNPROF_BENCH_PAIRS=20 (default)
//
// This translation unit compiles the macros out: it defines ATTNPROF_PROFILER_ENABLED 0 before including
// profiler.h, so ATTNPROF_OP_ZONE below is the NullZone the library's users get with ATTNPROF_PROFILER=OFF.
// The enabled benchmarks spell out what the enabled macro expands to (a static ZoneSite and a Zone), so both
// are measured from one file.
#undef ATTNPROF_PROFILER_ENABLED
#define ATTNPROF_PROFILER_ENABLED 0
#include "attnprof/profiler.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "attnprof/attention.h"
#include "attnprof/report.h"

using namespace attnprof;

static_assert(!ATTNPROF_PROFILER_ENABLED, "this TU measures the compiled-out macros");

namespace {

constexpr int kBatch = 1 << 14;  // zones per timed batch; buffers are reset between batches (untimed)

// What ATTNPROF_OP_ZONE expands to when the profiler is compiled in.
#define BENCH_ENABLED_ZONE(var, name)                                                  \
  static constexpr prof::ZoneSite var##_site{name, "cpu_op"};                          \
  prof::Zone var(var##_site)

void per_zone_counter(benchmark::State& state) {
  state.counters["ns_per_zone"] =
      benchmark::Counter(double(kBatch), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_Zone_Enabled(benchmark::State& state) {
  prof::Profiler p;
  p.start();
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      BENCH_ENABLED_ZONE(z, "bench_zone");
      benchmark::DoNotOptimize(z);
    }
    state.PauseTiming();
    p.stop();
    p.start();
    state.ResumeTiming();
  }
  p.stop();
  per_zone_counter(state);
}
BENCHMARK(BM_Zone_Enabled);

void BM_Zone_Enabled_CostAndShapes(benchmark::State& state) {
  // What an op records: two input shapes and its cost model.
  prof::Profiler p;
  p.start();
  const std::array<int64_t, 4> a{8, 16, 1024, 64}, b{8, 16, 64, 1024};
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      BENCH_ENABLED_ZONE(z, "matmul");
      z.add_shape(a);
      z.add_shape(b);
      z.set_cost(OpCost{double(i), 2.0, 3.0});
      benchmark::DoNotOptimize(z);
    }
    state.PauseTiming();
    p.stop();
    p.start();
    state.ResumeTiming();
  }
  p.stop();
  per_zone_counter(state);
}
BENCHMARK(BM_Zone_Enabled_CostAndShapes);

// What Profiler::step() costs between two forwards: closing ProfilerStep#N, growing every buffer ahead of need
// (the calling thread's, then each OpenMP worker's in one parallel region) and opening ProfilerStep#N+1, as a
// scheduled profile (`attnprof profile`) does. Each step first records what a forward leaves in the buffers: 6
// op zones on this thread, one of them running a parallel region in which every thread of the team records its
// work share; only step() itself is timed. The session restarts every kSteps steps (untimed), so the buffers
// stay the size a long profile reaches.
void BM_Profiler_Step(benchmark::State& state) {
  constexpr int kSteps = 1024;
  prof::ProfilerOptions opts;
  opts.schedule = prof::Schedule{.wait = 0, .warmup = 0, .active = kSteps + 1};  // given: ProfilerStep#N zones
  prof::Profiler p(opts);
  p.start();
  int n = 0;
  for (auto _ : state) {
    for (int op = 0; op < 6; ++op) {
      BENCH_ENABLED_ZONE(z, "matmul");
      if (op == 0) {
        const prof::ParallelRegion region;
#pragma omp parallel
        {
          prof::WorkShare share(region);
          benchmark::DoNotOptimize(share);
        }
      }
      benchmark::DoNotOptimize(z);
    }
    const auto t0 = std::chrono::steady_clock::now();
    p.step();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (++n == kSteps) {
      p.stop();
      p.start();
      n = 0;
    }
  }
  p.stop();
}
BENCHMARK(BM_Profiler_Step)->UseManualTime();

void BM_Zone_RuntimeOff(benchmark::State& state) {
  // Zones compiled in, no session recording: one relaxed load and a branch.
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      BENCH_ENABLED_ZONE(z, "bench_zone");
      benchmark::DoNotOptimize(z);
    }
  }
  per_zone_counter(state);
}
BENCHMARK(BM_Zone_RuntimeOff);

void BM_Zone_CompiledOut(benchmark::State& state) {
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      ATTNPROF_OP_ZONE(z, "bench_zone");  // NullZone: nothing
      z.set_cost(OpCost{double(i), 2.0, 3.0});
      benchmark::DoNotOptimize(i);
    }
  }
  per_zone_counter(state);
}
BENCHMARK(BM_Zone_CompiledOut);

void BM_Loop_Empty(benchmark::State& state) {
  for (auto _ : state)
    for (int i = 0; i < kBatch; ++i) benchmark::DoNotOptimize(i);
  per_zone_counter(state);
}
BENCHMARK(BM_Loop_Empty);

// A synthetic profile shaped like a real one: per forward, an annotation with six ops (one with two
// children), two memory events per op; spread over two threads.
prof::ProfileResult synthetic_profile(int64_t forwards) {
  prof::ProfileResult r;
  r.ns_per_tick = 0.4771;
  r.clock = "tsc";
  for (uint32_t tid = 0; tid < 2; ++tid) {
    prof::ThreadTrace t;
    t.tid = tid;
    t.name = tid == 0 ? "main" : "worker 1";
    uint64_t now = 1000;
    for (int64_t f = 0; f < forwards / 2; ++f) {
      const int32_t root = int32_t(t.zones.size());
      prof::ZoneEvent ann;
      ann.name = "attn_fwd";
      ann.category = "user_annotation";
      ann.variant = "naive";
      ann.t0 = now;
      t.zones.push_back(ann);
      for (int op = 0; op < 6; ++op) {
        prof::ZoneEvent e;
        e.name = op == 2 ? "masked_fill" : "matmul";
        e.category = "cpu_op";
        e.parent = root;
        e.depth = 1;
        e.variant = "naive";
        e.n_shapes = 2;
        e.shapes[0] = {8, 16, 1024, 64};
        e.shapes[1] = {8, 16, 64, 1024};
        e.cost = OpCost{1.7e10, 2.5e8, 2.6e8};
        e.t0 = now += 37;
        const int32_t idx = int32_t(t.zones.size());
        t.zones.push_back(e);
        t.mem.push_back(prof::MemEvent{now + 3, 1 << 20, 1 << 22, idx});
        if (op == 2)
          for (int c = 0; c < 2; ++c) {
            prof::ZoneEvent ch = e;
            ch.name = c ? "masked_fill_" : "copy_";
            ch.parent = idx;
            ch.depth = 2;
            ch.t0 = now += 11;
            ch.t1 = now += 2000;
            t.zones.push_back(ch);
          }
        t.zones[size_t(idx)].t1 = now += 5000;
        t.mem.push_back(prof::MemEvent{now - 2, -(1 << 20), 1 << 21, idx});
      }
      t.zones[size_t(root)].t1 = now += 50;
    }
    r.threads.push_back(std::move(t));
  }
  return r;
}

int64_t event_count(const prof::ProfileResult& r, const report::TraceOptions& o) {
  int64_t n = 0;
  for (const auto& t : r.threads)
    n += int64_t(t.zones.size()) + int64_t(t.mem.size()) * (int(o.memory_counters) + int(o.memory_instants));
  return n;
}

void BM_TraceExport_Text(benchmark::State& state) {
  const prof::ProfileResult r = synthetic_profile(state.range(0));
  const report::TraceOptions o;
  size_t bytes = 0;
  for (auto _ : state) {
    std::string s = report::chrome_trace_text(r, o);
    bytes = s.size();
    benchmark::DoNotOptimize(s.data());
  }
  state.counters["events_per_s"] = benchmark::Counter(double(event_count(r, o)), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["events"] = double(event_count(r, o));
  state.counters["bytes_per_event"] = double(bytes) / double(event_count(r, o));
}
BENCHMARK(BM_TraceExport_Text)->Arg(20000)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TraceExport_File(benchmark::State& state) {
  // Text + atomic write to the temp directory; Arg(1) writes .json.gz.
  const prof::ProfileResult r = synthetic_profile(20000);
  const std::string path =
      (std::filesystem::temp_directory_path() / (state.range(0) ? "attnprof-bench.json.gz" : "attnprof-bench.json"))
          .string();
  for (auto _ : state) report::write_chrome_trace(r, path);
  std::filesystem::remove(path);
  state.counters["events_per_s"] =
      benchmark::Counter(double(event_count(r, {})), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TraceExport_File)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_KeyAverages(benchmark::State& state) {
  const prof::ProfileResult r = synthetic_profile(20000);
  for (auto _ : state) benchmark::DoNotOptimize(analysis::key_averages(r).rows.size());
  state.counters["zones_per_s"] = benchmark::Counter(double(event_count(r, {false, false})),
                                                     benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_KeyAverages)->Unit(benchmark::kMillisecond)->UseRealTime();

// One forward at the blog's shape, timed with and without the profiler recording it (zones, shapes, costs,
// memory events). Runs alternate (unprofiled, profiled) so drift and noisy neighbours hit both alike;
// `ratio` is the median of the per-pair ratios, `ratio_of_means` the ratio of the mean times.
void BM_ProfilingOverhead(benchmark::State& state) {
  const char* env = std::getenv("ATTNPROF_BENCH_VARIANT");
  const Variant& var = find_variant(env ? env : "flash");
  const int64_t B = 8, H = 16, N = 1024, D = 64;
  Tensor q = Tensor::empty({B, H, N, D}, DType::BF16), k = Tensor::empty({B, H, N, D}, DType::BF16),
         v = Tensor::empty({B, H, N, D}, DType::BF16);
  fill_randn(q, 1);
  fill_randn(k, 2);
  fill_randn(v, 3);
  AttnOptions opt{.is_causal = true};
  const AttnProblem problem = AttnProblem::from(q, k, v, opt);
  if (auto why = var.unsupported(problem)) {
    state.SkipWithError(why->c_str());
    return;
  }
  auto runner = var.prepare(problem, opt);
  runner->run(q, k, v);  // warm-up: page in, first-touch, oneDNN primitive caches
  using clk = std::chrono::steady_clock;
  // Process CPU time as well: on a machine shared with other jobs it is far less noisy than wall time.
  auto cpu_ns = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
  };
  std::vector<double> ratios;
  double sum_off = 0, sum_on = 0, sum_zone = 0, cpu_off = 0, cpu_on = 0;
  prof::Profiler p;
  auto unprofiled = [&](double& wall, double& cpu) {
    const double c0 = cpu_ns();
    const auto t0 = clk::now();
    runner->run(q, k, v);
    wall = std::chrono::duration<double, std::nano>(clk::now() - t0).count();
    cpu = cpu_ns() - c0;
  };
  int64_t events = 0;
  auto profiled = [&](double& wall, double& cpu, double& zone) {
    p.start();
    const double c0 = cpu_ns();
    const auto t0 = clk::now();
    {
      prof::VariantScope vs(var.name);
      prof::Zone ann(var.annotation, "user_annotation");
      runner->run(q, k, v);
    }
    wall = std::chrono::duration<double, std::nano>(clk::now() - t0).count();
    cpu = cpu_ns() - c0;
    p.stop();
    const prof::ProfileResult r = p.result();
    const auto d = analysis::zone_durations_ns(r, var.annotation);
    zone = d.empty() ? 0.0 : d[0];
    events = 0;
    for (const auto& t : r.threads) events += int64_t(t.zones.size() + t.mem.size());
  };
  int64_t pair = 0;
  for (auto _ : state) {
    double off = 0, on = 0, coff = 0, con = 0, zone = 0;
    // Alternate which run goes first, so order effects (caches, frequency) cancel.
    if (pair++ % 2 == 0) {
      unprofiled(off, coff);
      profiled(on, con, zone);
    } else {
      profiled(on, con, zone);
      unprofiled(off, coff);
    }
    sum_off += off;
    sum_on += on;
    cpu_off += coff;
    cpu_on += con;
    sum_zone += zone;
    ratios.push_back(on / off);
  }
  std::sort(ratios.begin(), ratios.end());
  const double n = double(ratios.size());
  state.counters["ratio"] = ratios[ratios.size() / 2];
  state.counters["ratio_of_means"] = sum_on / sum_off;
  state.counters["cpu_time_ratio"] = cpu_on / cpu_off;
  state.counters["unprofiled_ms"] = sum_off / n * 1e-6;
  state.counters["profiled_ms"] = sum_on / n * 1e-6;
  state.counters["annotation_zone_ms"] = sum_zone / n * 1e-6;  // what the profile itself reports
  // What the recorded events should cost: events per forward × the calibrated per-zone overhead.
  state.counters["events_per_forward"] = double(events);
  state.counters["predicted_ratio"] = 1.0 + double(events) * prof::calibrated_zone_overhead_ns() / (sum_off / n);
  state.SetLabel(var.name + " [8,16,1024,64] bf16 causal");
}
int64_t overhead_pairs() {
  const char* env = std::getenv("ATTNPROF_BENCH_PAIRS");
  return env ? std::max<int64_t>(1, std::atoll(env)) : 20;
}
BENCHMARK(BM_ProfilingOverhead)->Iterations(overhead_pairs())->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
