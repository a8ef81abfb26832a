// The profiler core and key_averages: nesting and self-time arithmetic, cost models, memory attribution
// and peaks, the schedule, OpenMP worker threads, software counters.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>
#include <sys/wait.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "attnprof/allocator.h"
#include "attnprof/analysis.h"
#include "attnprof/attention.h"
#include "attnprof/error.h"
#include "attnprof/ops.h"
#include "attnprof/isa.h"
#include "attnprof/profiler.h"
#include "attnprof/report.h"
#include "child_process.h"
#include "profiler/recorder.h"

using namespace attnprof;

namespace {

// ThreadSanitizer keeps shadow memory beside every byte a thread writes (twice its size with clang 14): the
// first write to a page first-touches its shadow pages too, and those faults count like the page's own.
#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
#else
constexpr bool kThreadSanitizer = false;
#endif
constexpr int64_t kShadowPagesPerPage = kThreadSanitizer ? 2 : 0;

// Busy work the compiler cannot remove; roughly `us` microseconds.
void spin_us(double us) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(int64_t(us * 1000));
  volatile uint64_t x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1;
}

const analysis::OpStats* row(const analysis::KeyAverages& ka, std::string_view name) {
  for (const auto& r : ka.rows)
    if (r.name == name) return &r;
  return nullptr;
}

// A hand-built profile (1 ns per tick) for exact arithmetic.
prof::ZoneEvent zone(const char* name, uint64_t t0, uint64_t t1, int32_t parent, uint16_t depth, double flops = 0) {
  prof::ZoneEvent e;
  e.name = name;
  e.category = "cpu_op";
  e.t0 = t0;
  e.t1 = t1;
  e.parent = parent;
  e.depth = depth;
  e.cost.flops = flops;
  return e;
}

}  // namespace

TEST(KeyAverages, OverheadComesOffSelfAndTotalTimesExactly) {
  prof::ProfileResult r;
  r.ns_per_tick = 1.0;
  r.zone_overhead_ns = 10.0;
  prof::ThreadTrace t;
  t.zones = {zone("outer", 0, 1000, -1, 0),  // 3 nested zones: total 970; children 190 + 300 -> self 480
             zone("a", 100, 300, 0, 1, 5),   // 1 nested zone: total 190; child 50 -> self 140
             zone("leaf", 120, 170, 1, 2, 7),
             zone("b", 400, 700, 0, 1, 11),
             zone("tiny", 800, 805, -1, 0)};  // a second root
  t.zones[4].parent = -1;
  // A zone whose children plus overhead exceed it is clamped at 0, never negative.
  t.zones.push_back(zone("crowded", 2000, 2015, -1, 0));
  t.zones.push_back(zone("leaf", 2001, 2011, 5, 1));
  r.threads.push_back(t);
  const analysis::KeyAverages ka = analysis::key_averages(r);
  const auto* outer = row(ka, "outer");
  const auto* a = row(ka, "a");
  const auto* b = row(ka, "b");
  const auto* leaf = row(ka, "leaf");
  const auto* crowded = row(ka, "crowded");
  ASSERT_TRUE(outer && a && b && leaf && crowded);
  EXPECT_DOUBLE_EQ(outer->total_ns, 1000.0 - 3 * 10.0);
  EXPECT_DOUBLE_EQ(outer->self_ns, 1000.0 - 200.0 - 300.0 - 2 * 10.0);
  EXPECT_DOUBLE_EQ(a->total_ns, 200.0 - 10.0);
  EXPECT_DOUBLE_EQ(a->self_ns, 200.0 - 50.0 - 10.0);
  EXPECT_DOUBLE_EQ(b->total_ns, 300.0);
  EXPECT_DOUBLE_EQ(b->self_ns, 300.0);
  EXPECT_DOUBLE_EQ(leaf->total_ns, 50.0 + 10.0);
  EXPECT_EQ(leaf->calls, 2);
  EXPECT_DOUBLE_EQ(crowded->self_ns, 0.0);  // 15 - 10 - 10 < 0
  // Its total is its clamped self plus its child's total: never below the child's (an overhead calibrated high
  // on a loaded machine had put masked_fill's total under its copy_'s).
  EXPECT_DOUBLE_EQ(crowded->total_ns, 0.0 + 10.0);
  // Self + children's totals = total at every level, so Self CPU % sums to 100% and no CPU total % passes it.
  EXPECT_DOUBLE_EQ(a->self_ns + 50.0, a->total_ns);
  EXPECT_DOUBLE_EQ(outer->self_ns + a->total_ns + b->total_ns, outer->total_ns);
  // Inclusive costs: own plus children's.
  EXPECT_DOUBLE_EQ(outer->cost.flops, 5 + 7 + 11);
  EXPECT_DOUBLE_EQ(outer->self_cost.flops, 0.0);
  EXPECT_DOUBLE_EQ(a->cost.flops, 12.0);
  // Self CPU time total is the sum of self times; the overhead subtracted is reported.
  double sum = 0;
  for (const auto& s : ka.rows) sum += s.self_ns;
  EXPECT_DOUBLE_EQ(ka.self_total_ns, sum);
  EXPECT_EQ(ka.zones, 7);
  EXPECT_DOUBLE_EQ(ka.overhead_subtracted_ns, 20.0 + 10.0 + 5.0);  // outer, a, crowded (clamped: 15-10 = 5)
}

TEST(KeyAverages, RecursionCountsTotalOnceAndThreadsAreIndependentTrees) {
  prof::ProfileResult r;
  r.ns_per_tick = 1.0;
  prof::ThreadTrace t0, t1;
  t0.zones = {zone("f", 0, 100, -1, 0, 1), zone("f", 10, 50, 0, 1, 1)};
  t1.tid = 1;
  t1.zones = {zone("f", 20, 60, -1, 0, 1)};  // overlaps in time, but on its own thread: no parent
  r.threads = {t0, t1};
  const auto ka = analysis::key_averages(r);
  const auto* f = row(ka, "f");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->calls, 3);
  EXPECT_DOUBLE_EQ(f->total_ns, 100.0 + 40.0);   // the nested call is inside the outer one
  EXPECT_DOUBLE_EQ(f->self_ns, 60.0 + 40.0 + 40.0);
  EXPECT_DOUBLE_EQ(f->cost.flops, 2.0 + 1.0);
  EXPECT_EQ(analysis::zone_durations_ns(r, "f"), (std::vector<double>{100.0, 40.0}));
  // Their share on a CPU, in the same order: -1 where no task-clock was read, else task-clock over the wall
  // (capped at 1: the counter and the clock are read a few ns apart).
  EXPECT_EQ(analysis::zone_on_cpu_shares(r, "f"), (std::vector<double>{-1.0, -1.0}));
  r.threads[0].zones[0].task_clock_ns = 25;
  r.threads[1].zones[0].task_clock_ns = 45;
  EXPECT_EQ(analysis::zone_on_cpu_shares(r, "f"), (std::vector<double>{0.25, 1.0}));
}

TEST(KeyAverages, GroupByInputShapeSplitsRows) {
  prof::ProfileResult r;
  r.ns_per_tick = 1.0;
  prof::ThreadTrace t;
  auto mm = [&](uint64_t t0, int64_t n) {
    prof::ZoneEvent e = zone("matmul", t0, t0 + 10, -1, 0, double(n));
    e.n_shapes = 2;
    e.shapes[0] = {1, 2, n, 8};
    e.shapes[1] = {1, 2, 8, n};
    return e;
  };
  t.zones = {mm(0, 16), mm(20, 32), mm(40, 16)};
  r.threads.push_back(t);
  const auto flat = analysis::key_averages(r);
  ASSERT_EQ(flat.rows.size(), 1u);
  EXPECT_EQ(flat.rows[0].calls, 3);
  EXPECT_EQ(flat.rows[0].input_shapes, "");
  const auto grouped = analysis::key_averages(r, {.group_by_input_shape = true});
  ASSERT_EQ(grouped.rows.size(), 2u);
  EXPECT_EQ(grouped.rows[0].input_shapes, "[[1, 2, 16, 8], [1, 2, 8, 16]]");
  EXPECT_EQ(grouped.rows[0].calls, 2);
  EXPECT_DOUBLE_EQ(grouped.rows[0].cost.flops, 32.0);
  EXPECT_EQ(grouped.rows[1].input_shapes, "[[1, 2, 32, 8], [1, 2, 8, 32]]");
  EXPECT_EQ(grouped.rows[1].calls, 1);
}

TEST(Profiler, RecordedNestingAddsUp) {
  prof::Profiler p;
  p.start();
  {
    ATTNPROF_ANNOTATE("outer");
    spin_us(50);
    for (int i = 0; i < 3; ++i) {
      ATTNPROF_OP_ZONE(z, "child");
      spin_us(30);
    }
  }
  p.stop();
  const prof::ProfileResult r = p.result();
  EXPECT_GT(r.zone_overhead_ns, 0.0);
  const auto ka = analysis::key_averages(r);
  const auto* outer = row(ka, "outer");
  const auto* child = row(ka, "child");
  ASSERT_TRUE(outer && child);
  EXPECT_EQ(outer->calls, 1);
  EXPECT_EQ(child->calls, 3);
  EXPECT_EQ(outer->category, "user_annotation");
  EXPECT_EQ(child->category, "cpu_op");
  // children's totals + self = parent total (no clamping at these durations); the parent's total is its
  // measured duration less the three children's calibrated overhead.
  EXPECT_NEAR(child->total_ns + outer->self_ns, outer->total_ns, 1e-6 * outer->total_ns);
  const std::vector<double> measured = analysis::zone_durations_ns(r, "outer");
  ASSERT_EQ(measured.size(), 1u);
  EXPECT_NEAR(measured[0] - 3 * r.zone_overhead_ns, outer->total_ns, 1e-6 * outer->total_ns);
  for (const auto& s : ka.rows) EXPECT_LE(s.total_ns, ka.self_total_ns * (1.0 + 1e-12)) << s.name;  // <= 100%
  EXPECT_GE(outer->self_ns, 40'000.0);
  // A plain start()/stop() run records no ProfilerStep zone (torch records steps only with a schedule).
  for (const auto& s : ka.rows) EXPECT_EQ(s.name.rfind("ProfilerStep", 0), std::string::npos) << s.name;
}

namespace {

struct NaiveRun {
  prof::ProfileResult result;
  AttnProblem problem;
  int64_t allocator_peak = 0;
};

// One forward of a prepared variant under its annotation, as the CLI records it.
prof::ProfileResult profile_forward(const Variant& var, Runner& runner, const Tensor& q, const Tensor& k,
                                    const Tensor& v) {
  prof::Profiler p;
  p.start();
  {
    prof::VariantScope vs(var.name);
    ATTNPROF_ANNOTATE_DYN(z, var.annotation);
    AttnOutput out = runner.run(q, k, v);
  }
  p.stop();
  return p.result();
}

// Queries, keys and values of [B, H, N, D], each N(0, 1) with seeds 1, 2 and 3.
struct Qkv {
  Tensor q, k, v;
};
Qkv random_qkv(int64_t B, int64_t H, int64_t N, int64_t D, DType dt) {
  Qkv x{Tensor::empty({B, H, N, D}, dt), Tensor::empty({B, H, N, D}, dt), Tensor::empty({B, H, N, D}, dt)};
  fill_randn(x.q, 1);
  fill_randn(x.k, 2);
  fill_randn(x.v, 3);
  return x;
}

NaiveRun profile_variant(const char* name, DType dt, int64_t B, int64_t H, int64_t N, int64_t D) {
  const auto [q, k, v] = random_qkv(B, H, N, D, dt);
  AttnOptions opt{.is_causal = true};
  const Variant& var = find_variant(name);
  NaiveRun run;
  run.problem = AttnProblem::from(q, k, v, opt);
  auto runner = var.prepare(run.problem, opt);
  reset_peak_memory();
  run.result = profile_forward(var, *runner, q, k, v);
  run.allocator_peak = memory_stats().peak_bytes;
  return run;
}

}  // namespace

TEST(Profiler, NaiveFlopsAndBytesEqualTheCostModels) {
  const int64_t B = 1, H = 2, N = 48, D = 32;
  const NaiveRun run = profile_variant("naive", DType::F32, B, H, N, D);
  const auto ka = analysis::key_averages(run.result);
  const Shape4 q{B, H, N, D}, kt{B, H, D, N}, s{B, H, N, N}, v{B, H, N, D};
  const auto* mm = row(ka, "matmul");
  ASSERT_TRUE(mm);
  EXPECT_EQ(mm->calls, 2);
  // 2·M·N·K per batch, for Q·Kᵀ and P·V
  EXPECT_DOUBLE_EQ(mm->cost.flops, 2.0 * B * H * (N * N * D) + 2.0 * B * H * (N * D * N));
  const OpCost mm_model = [&] {
    OpCost c = ops::matmul_cost(q, kt, DType::F32);
    c += ops::matmul_cost(s, v, DType::F32);
    return c;
  }();
  EXPECT_DOUBLE_EQ(mm->cost.bytes(), mm_model.bytes());
  EXPECT_DOUBLE_EQ(row(ka, "mul")->cost.flops, ops::mul_cost(s, DType::F32).flops);
  EXPECT_DOUBLE_EQ(row(ka, "softmax")->cost.flops, ops::softmax_cost(s, DType::F32).flops);
  EXPECT_DOUBLE_EQ(row(ka, "masked_fill_")->cost.flops, ops::masked_fill_cost(s, DType::F32, {1, 1, N, N}).flops);
  // The composite masked_fill carries its children's costs (torch prints `--` here).
  const auto* mf = row(ka, "masked_fill");
  ASSERT_TRUE(mf);
  OpCost composite = ops::copy_cost(s, DType::F32, DType::F32);
  composite += ops::masked_fill_cost(s, DType::F32, {1, 1, N, N});
  EXPECT_DOUBLE_EQ(mf->cost.flops, composite.flops);
  EXPECT_DOUBLE_EQ(mf->cost.bytes(), composite.bytes());
  EXPECT_DOUBLE_EQ(mf->self_cost.bytes(), 0.0);
  // The annotation's inclusive bytes are exactly what the variant's cost model says the forward moves.
  const auto* fwd = row(ka, "attn_fwd");
  ASSERT_TRUE(fwd);
  EXPECT_DOUBLE_EQ(fwd->cost.bytes(), find_variant("naive").cost(run.problem).bytes());
}

// Every CPU variant's cost model moves the bytes its ops record, for every kind of mask and dtype and on every
// ISA: compare's "Bytes moved" and the roofline read the model, the tables and traces the ops. (FLOPs are the
// attention convention by design, so only the bytes must agree.)
TEST(Profiler, EveryVariantsCostModelMovesTheBytesItsOpsRecord) {
  const int64_t B = 2, H = 2, Nq = 40, Nk = 56, D = 16;
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    struct MaskCase {
      std::string what;
      AttnOptions o;
    };
    std::vector<MaskCase> masks{{"none", {}}, {"causal", AttnOptions{.is_causal = true}}};
    auto with_mask = [&](std::string what, const Shape4& shape, DType mdt) {
      AttnOptions o;
      o.attn_mask = Tensor::empty(shape, mdt);
      fill_randn(o.attn_mask, 5);  // bool: nonzero keeps
      masks.push_back({std::move(what), o});
    };
    with_mask("bool [B,1,Nq,Nk]", {B, 1, Nq, Nk}, DType::Bool);
    with_mask("bool [1,1,1,Nk]", {1, 1, 1, Nk}, DType::Bool);
    with_mask("additive fp32 [1,H,Nq,Nk]", {1, H, Nq, Nk}, DType::F32);
    if (is_half(dt)) with_mask(fmt::format("additive {} [B,1,1,Nk]", dtype_name(dt)), {B, 1, 1, Nk}, dt);
    Tensor q = Tensor::empty({B, H, Nq, D}, dt), k = Tensor::empty({B, H, Nk, D}, dt), v = Tensor::empty({B, H, Nk, D}, dt);
    fill_randn(q, 1);
    fill_randn(k, 2);
    fill_randn(v, 3);
    for (const MaskCase& m : masks)
      for (const Variant& var : registry())
        for (Isa isa : available_isas()) {
          IsaOverride use(isa);
          const std::string what = fmt::format("{} {} {} {}", var.name, dtype_name(dt), m.what, isa_name(isa));
          const AttnProblem p = AttnProblem::from(q, k, v, m.o);
          if (var.unsupported(p)) continue;
          auto runner = var.prepare(p, m.o);
          const auto ka = analysis::key_averages(profile_forward(var, *runner, q, k, v));
          const auto* fwd = row(ka, var.annotation);
          ASSERT_TRUE(fwd) << what;
          EXPECT_DOUBLE_EQ(fwd->cost.bytes(), var.cost(p).bytes()) << what;
          // ... and runs the same shares of its FLOPs on bf16 units and inside the GEMM libraries.
          const OpCost vc = var.cost(p), &rc = fwd->cost;
          EXPECT_NEAR(vc.bf16_flops / vc.flops, rc.bf16_flops / rc.flops, 1e-12) << what;
          EXPECT_NEAR(vc.library_flops / vc.flops, rc.library_flops / rc.flops, 1e-12) << what;
          EXPECT_NEAR(vc.library_bf16_flops / vc.flops, rc.library_bf16_flops / rc.flops, 1e-12) << what;
        }
  }
}

namespace {
// Ceilings with round ridges for the roofline tests: fp32 2 FLOP/B, bf16 8 FLOP/B.
analysis::MachinePeaks round_peaks() {
  analysis::MachinePeaks m;
  m.fp32_gflops = 100.0;
  m.bf16_gflops = 400.0;
  m.bandwidth_gbs = 50.0;
  return m;
}

// A key_averages row with its own cost, its cost with its children's, and its self time (device time half).
analysis::OpStats stats_row(std::string name, std::string cat, OpCost self, OpCost incl, double self_ns = 0) {
  analysis::OpStats s;
  s.name = std::move(name);
  s.category = std::move(cat);
  s.self_cost = self;
  s.cost = incl;
  s.self_ns = self_ns;
  s.self_device_ns = self_ns / 2;
  return s;
}
}  // namespace

// The roofline floor: each op's own cost at the larger of its two ceilings, summed once. A composite op's
// children count, not the composite again; annotations and steps not at all; on a device profile only the
// activities, not the zones that launched them.
TEST(Profiler, RooflineFloorSumsEachOpAtItsOwnCeilingOnce) {
  analysis::MachinePeaks m = round_peaks();
  analysis::KeyAverages ka;
  auto add = [&](std::string name, std::string cat, OpCost self, OpCost incl) {
    ka.rows.push_back(stats_row(std::move(name), std::move(cat), self, incl));
  };
  const OpCost gemm{2e9, 1e8, 1e8, 2e9};   // 2 GFLOP on bf16 units: 5 ms; 0.2 GB: 4 ms -> compute, 5 ms
  const OpCost copy{0, 5e8, 5e8, 0};       // 1 GB: 20 ms -> memory
  const OpCost soft{1e9, 2e8, 2e8, 0};     // 1 GFLOP fp32: 10 ms; 0.4 GB: 8 ms -> compute, 10 ms
  add("attn_fwd", "user_annotation", {}, OpCost{3e9, 8e8, 8e8, 2e9});
  add("ProfilerStep#0", "cpu_op", {}, OpCost{3e9, 8e8, 8e8, 2e9});
  add("matmul", "cpu_op", gemm, gemm);
  add("masked_fill", "cpu_op", {}, copy);  // composite: its cost is its child's
  add("copy_", "cpu_op", copy, copy);
  add("softmax", "cpu_op", soft, soft);
  const analysis::RooflineFloor f = analysis::roofline_floor(ka, m);
  EXPECT_DOUBLE_EQ(f.ns, 5e6 + 20e6 + 10e6);
  EXPECT_DOUBLE_EQ(f.memory_ns, 20e6);
  EXPECT_STREQ(analysis::floor_bound_kind(f.memory_share()), "mixed");
  EXPECT_STREQ(analysis::floor_bound_kind(0.75), "memory");
  EXPECT_STREQ(analysis::floor_bound_kind(0.25), "compute");
  // Without a bf16 ceiling the GEMM runs at the fp32 one: 20 ms.
  m.bf16_gflops = 0.0;
  EXPECT_DOUBLE_EQ(analysis::roofline_floor(ka, m).ns, 20e6 + 20e6 + 10e6);
  // A device profile: the kernel rows count, their launching zones (same cost) do not.
  m.bf16_gflops = 400.0;
  ka.has_device = true;
  add("ampere_bf16_gemm", "kernel", gemm, gemm);
  add("Memcpy DtoD", "gpu_memcpy", copy, copy);
  EXPECT_DOUBLE_EQ(analysis::roofline_floor(ka, m).ns, 5e6 + 20e6);
  EXPECT_DOUBLE_EQ(analysis::roofline_floor(ka, m).memory_ns, 20e6);
}

// Where the measured time went by each placed op's verdict: the copy below its ridge, the GEMM and the
// softmax above theirs (2.5 FLOP/B against an fp32 ridge of 2); annotations and wrappers not at all; rows of
// one name (grouped by input shape) summed under it, longest first; a device profile's activities only.
TEST(Profiler, BoundTimeSplitsMeasuredTimeByEachOpsVerdict) {
  const analysis::MachinePeaks m = round_peaks();
  analysis::KeyAverages ka;
  auto add = [&](std::string name, std::string cat, OpCost self, double self_ns) {
    ka.rows.push_back(stats_row(std::move(name), std::move(cat), self, self, self_ns));
  };
  const OpCost gemm{2e9, 1e8, 1e8, 2e9}, copy{0, 5e8, 5e8, 0}, soft{1e9, 2e8, 2e8, 0};
  add("attn_fwd", "user_annotation", OpCost{3e9, 8e8, 8e8, 2e9}, 1e6);
  add("masked_fill", "cpu_op", {}, 5e5);
  add("matmul", "cpu_op", gemm, 2e6);
  add("copy_", "cpu_op", copy, 3e6);
  add("softmax", "cpu_op", soft, 4e6);
  add("copy_", "cpu_op", copy, 1e6);  // the same op at another input shape
  ka.self_total_ns = 11.5e6;           // the rows' self times: attn_fwd's and masked_fill's own 1.5 ms among them
  analysis::BoundTime t = analysis::bound_time(ka, m);
  EXPECT_DOUBLE_EQ(t.memory_ns, 4e6);
  EXPECT_DOUBLE_EQ(t.compute_ns, 6e6);
  EXPECT_DOUBLE_EQ(t.other_ns(), 1.5e6);
  EXPECT_DOUBLE_EQ(t.memory_share(), 4e6 / 11.5e6);  // of the whole self time, as the table's Self CPU %
  ASSERT_EQ(t.memory_ops.size(), 1u);
  EXPECT_EQ(t.memory_ops[0].name, "copy_");
  EXPECT_DOUBLE_EQ(t.memory_ops[0].ns, 4e6);
  ASSERT_EQ(t.compute_ops.size(), 2u);
  EXPECT_EQ(t.compute_ops[0].name, "softmax");
  EXPECT_EQ(t.compute_ops[1].name, "matmul");
  EXPECT_EQ(report::bound_time_line(t, false),
            "Time by bound, of the Self CPU time total: memory-bound ops 34.8 % (copy_ 34.8 %); compute-bound ops "
            "52.2 % (softmax 34.8 %, matmul 17.4 %); annotations', steps' and wrappers' own time 13.0 %. Each op is "
            "judged by its FLOP/B against its ridge (the Bound column): a memory-bound one's % roof says how near the "
            "bandwidth it ran, and --counters counts the fresh pages it faulted in.");
  // One kind took it all: "no memory-bound ops", not a 0.0 % beside an empty list. A profile of views alone
  // has no split.
  EXPECT_EQ(report::bound_time_line(analysis::BoundTime{0, 5e6, 5e6, {}, {{"flash_attention_fwd", 5e6}}}, false)
                .rfind("Time by bound, of the Self CPU time total: no memory-bound ops; compute-bound ops 100.0 % "
                       "(flash_attention_fwd 100.0 %). ", 0),
            0u);
  EXPECT_LT(analysis::BoundTime{}.memory_share(), 0.0);
  EXPECT_EQ(report::bound_time_line(analysis::BoundTime{}, false), "");
  // A device profile: the activities in device time, not the host zones that launched them.
  ka.has_device = true;
  add("Memcpy DtoD", "gpu_memcpy", copy, 6e6);
  add("ampere_bf16_gemm", "kernel", gemm, 2e6);
  t = analysis::bound_time(ka, m);
  EXPECT_DOUBLE_EQ(t.memory_ns, 3e6);
  EXPECT_DOUBLE_EQ(t.compute_ns, 1e6);
  // compare's line, over the rows that know their split.
  std::vector<report::RowTime> rows(3);
  rows[0].name = "naive", rows[0].memory_time_share = 0.634, rows[0].floor_memory_share = 0.5;
  rows[1].name = "skipped";
  rows[2].name = "flash", rows[2].memory_time_share = 0.0, rows[2].floor_memory_share = 0.0;
  EXPECT_EQ(report::memory_time_line(rows),
            "Time in memory-bound ops (each row's share of its self time in ops whose FLOP/B is below their ridge, "
            "beside its floor's memory share, which Bound reads): naive 63 % (floor 50 %), flash 0 % (floor 0 %). "
            "naive spent more of its time there than its floor: those ops ran further below the bandwidth than the "
            "others below their peak (fresh pages each forward: `attnprof profile --counters`).");
  EXPECT_EQ(report::memory_time_line({rows[1]}), "");
  // Ten points over counts (0.6 against 0.5, whose sum is not exactly 0.6 in binary); a GPU row's kernels are
  // not sent to the host's page-fault counters.
  rows[0].memory_time_share = 0.6;
  EXPECT_NE(report::memory_time_line(rows).find("naive spent more of its time there"), std::string::npos);
  EXPECT_EQ(report::memory_time_line(rows, /*gpu=*/true).find("--counters"), std::string::npos);
  EXPECT_NE(report::memory_time_line(rows, /*gpu=*/true).find("those kernels ran further below the bandwidth"),
            std::string::npos);
  // Three rows over their floors are a list, not "a and b and c".
  rows[1].memory_time_share = 0.4, rows[1].floor_memory_share = 0.2;
  rows[2].memory_time_share = 0.3, rows[2].floor_memory_share = 0.1;
  EXPECT_NE(report::memory_time_line(rows).find(" naive, skipped and flash spent more of their time there"),
            std::string::npos)
      << report::memory_time_line(rows);
}

// The roofline judges each op against the units it runs on: a bf16 matmul and the flash kernel's GEMMs on
// bf16 dot-product units, the elementwise ops (which compute in fp32) and SDPA math's upcast matmuls at the
// fp32 rate. The bf16 split rides on the cost models through the profile into the placement.
TEST(Profiler, RooflineCeilingPerOpFollowsTheUnitsItRunsOn) {
  analysis::MachinePeaks m;
  m.fp32_gflops = 100.0;
  m.bf16_gflops = 400.0;
  m.bandwidth_gbs = 50.0;
  auto ceilings = [&](const char* variant) {
    const NaiveRun run = profile_variant(variant, DType::BF16, 1, 2, 64, 32);
    const auto ka = analysis::key_averages(run.result);
    std::map<std::string, double> c;
    for (const analysis::PlacedOp& p : analysis::roofline_ops(ka, m))
      c[p.op->name] = p.pt.ridge_intensity * m.bandwidth_gbs;  // the op's compute ceiling
    return c;
  };
  // Below AVX-512 a bf16 matmul is widened to fp32 for sgemm: the fp32 units.
  const bool onednn = ops::bf16_matmul_uses_onednn();
  const auto naive = ceilings("naive");
  EXPECT_DOUBLE_EQ(naive.at("matmul"), onednn ? 400.0 : 100.0);
  EXPECT_DOUBLE_EQ(naive.at("mul"), 100.0);
  EXPECT_DOUBLE_EQ(naive.at("softmax"), 100.0);
  const auto math = ceilings("sdpa-math");
  EXPECT_DOUBLE_EQ(math.at("matmul"), 100.0);  // upcast to fp32 first
  const auto flash = ceilings("flash");
  EXPECT_DOUBLE_EQ(flash.at("flash_attention_fwd"), 400.0);
  // The variants' own cost models agree: naive's FLOPs are almost all its matmuls', SDPA math has none on
  // bf16 units, flash all.
  const AttnProblem p = AttnProblem::from_shapes({1, 2, 64, 32}, {1, 2, 64, 32}, {1, 2, 64, 32}, DType::BF16,
                                                 AttnOptions{.is_causal = true});
  const OpCost nc = find_variant("naive").cost(p);
  if (onednn) EXPECT_GT(nc.bf16_flops, 0.9 * nc.flops);
  else EXPECT_EQ(nc.bf16_flops, 0.0);
  EXPECT_LE(nc.bf16_flops, nc.flops);
  EXPECT_EQ(find_variant("sdpa-math").cost(p).bf16_flops, 0.0);
  EXPECT_DOUBLE_EQ(find_variant("flash").cost(p).bf16_flops, attention_flops(p));
  // fp32 problems run nothing on bf16 units.
  const AttnProblem p32 = AttnProblem::from_shapes({1, 2, 64, 32}, {1, 2, 64, 32}, {1, 2, 64, 32}, DType::F32,
                                                   AttnOptions{.is_causal = true});
  for (const char* v : {"naive", "inplace", "sdpa-math", "flash"}) EXPECT_EQ(find_variant(v).cost(p32).bf16_flops, 0.0) << v;
}

// OpenBLAS and oneDNN choose their ISA from CPUID, whatever ATTNPROF_ISA (here IsaOverride) dispatches our
// kernels at: every matmul's FLOPs are the library's and placed under the library's peaks, every other op's
// ours and under the dispatched ISA's, at every ISA.
TEST(Profiler, MatmulIsBilledAtTheLibrarysPeaksAtEveryIsa) {
  const Isa best = available_isas().back();
  for (Isa isa : available_isas()) {
    IsaOverride use(isa);
    analysis::MachinePeaks m;
    m.isa = isa_name(isa);
    m.fp32_gflops = 100.0;
    m.bf16_gflops = isa == Isa::AVX512 && cpu_has_avx512_bf16() ? 400.0 : 0.0;
    m.bandwidth_gbs = 50.0;
    m.library_isa = isa_name(best);
    m.library_fp32_gflops = isa == best ? m.fp32_gflops : 1000.0;
    m.library_bf16_gflops = isa == best ? m.bf16_gflops : best == Isa::AVX512 && cpu_has_avx512_bf16() ? 4000.0 : 0.0;
    for (DType dt : {DType::F32, DType::BF16})
      for (const char* variant : {"naive", "sdpa-math", "flash"}) {
        const std::string what = fmt::format("{} {} {}", variant, dtype_name(dt), isa_name(isa));
        const NaiveRun run = profile_variant(variant, dt, 1, 2, 64, 32);
        const auto ka = analysis::key_averages(run.result);
        for (const analysis::PlacedOp& p : analysis::roofline_ops(ka, m)) {
          const OpCost& c = p.cost;
          const double ceiling = analysis::compute_ceiling_gflops(c, m);
          if (p.op->name == "matmul") {
            EXPECT_EQ(c.library_flops, c.flops) << what;
            // bf16 units only on oneDNN's path (sdpa-math upcasts first: fp32 matmuls).
            const bool on_bf16 = dt == DType::BF16 && std::string(variant) == "naive" && ops::bf16_matmul_uses_onednn();
            EXPECT_EQ(c.library_bf16_flops, on_bf16 ? c.flops : 0.0) << what;
            EXPECT_EQ(c.bf16_flops, c.library_bf16_flops) << what;
            const double lib = on_bf16 && m.library_bf16_gflops > 0 ? m.library_bf16_gflops : m.library_fp32_gflops;
            EXPECT_DOUBLE_EQ(ceiling, lib) << what;
          } else {
            EXPECT_EQ(c.library_flops, 0.0) << what << " " << p.op->name;
            EXPECT_EQ(c.library_bf16_flops, 0.0) << what << " " << p.op->name;
            if (c.flops > 0) EXPECT_LE(ceiling, std::max(m.fp32_gflops, m.bf16_gflops)) << what << " " << p.op->name;
          }
        }
      }
  }
}

// The roofline places each piece of work once: by its own cost and self time, so a wrapper (masked_fill, whose
// children are copy_ and masked_fill_; SDPA's entry points) is not a second point beside its children, and the
// placed bytes and FLOPs add up to the forward's cost model exactly.
TEST(Profiler, RooflinePlacesEachOpsOwnWorkOnce) {
  analysis::MachinePeaks m;
  m.fp32_gflops = 100.0;
  m.bf16_gflops = 400.0;
  m.bandwidth_gbs = 50.0;
  for (const char* name : {"naive", "inplace", "sdpa-math", "sdpa-flash", "flash"}) {
    const NaiveRun run = profile_variant(name, DType::BF16, 1, 2, 64, 32);
    const auto ka = analysis::key_averages(run.result);
    const Variant& var = find_variant(name);
    double bytes = 0, flops = 0;
    std::set<std::string> placed;
    for (const analysis::PlacedOp& p : analysis::roofline_ops(ka, m)) {
      EXPECT_TRUE(placed.insert(p.op->name).second) << name << " " << p.op->name;
      EXPECT_DOUBLE_EQ(p.cost.bytes(), p.op->self_cost.bytes()) << name << " " << p.op->name;
      EXPECT_DOUBLE_EQ(p.ns, p.op->self_ns) << name << " " << p.op->name;
      EXPECT_NE(p.op->name, var.annotation) << name;
      bytes += p.cost.bytes();
      flops += p.cost.flops;
    }
    EXPECT_DOUBLE_EQ(bytes, var.cost(run.problem).bytes()) << name;
    // The FLOPs the ops computed (the masked half of a causal product included, unlike Variant::cost's convention).
    const auto* fwd = row(ka, var.annotation);
    ASSERT_TRUE(fwd) << name;
    EXPECT_DOUBLE_EQ(flops, fwd->cost.flops) << name;
    if (std::string(name) == "naive") {
      EXPECT_FALSE(placed.count("masked_fill")) << "a wrapper: its copy_ and masked_fill_ are placed";
      EXPECT_TRUE(placed.count("copy_") && placed.count("masked_fill_"));
    }
    if (std::string(name) == "sdpa-math") EXPECT_FALSE(placed.count("scaled_dot_product_attention"));
  }
}

TEST(CostModel, CausalFlopsCountThePairsTheMaskLeavesVisible) {
  auto prob = [](int64_t nq, int64_t nk, bool causal) {
    return AttnProblem::from_shapes({1, 2, nq, 64}, {1, 2, nk, 64}, {1, 2, nk, 64}, DType::F32,
                                    AttnOptions{.is_causal = causal});
  };
  const double per_pair = 4.0 * 1 * 2 * 64;
  // Nq == Nk: FlashAttention's halving, exactly.
  EXPECT_DOUBLE_EQ(attention_flops(prob(1024, 1024, true)), per_pair * 1024.0 * 1024.0 / 2.0);
  EXPECT_DOUBLE_EQ(attention_flops(prob(1024, 1024, false)), per_pair * 1024.0 * 1024.0);
  // Top-left causal with Nk > Nq: no query sees a key past Nq, so 4096 keys cost what 128 do (half of
  // Nq·Nk would be 32× too many).
  EXPECT_DOUBLE_EQ(attention_flops(prob(128, 4096, true)), attention_flops(prob(128, 128, true)));
  // Nq > Nk: rows past Nk see every key.
  EXPECT_DOUBLE_EQ(attention_flops(prob(2048, 128, true)), per_pair * (2048.0 * 128.0 - 128.0 * 128.0 / 2.0));
  // Against a count of the visible pairs (the diagonal counted half, as the N²/2 convention does).
  for (auto [nq, nk] : {std::pair<int64_t, int64_t>{1, 1}, {17, 5}, {5, 17}, {300, 300}, {64, 1000}, {1000, 64}}) {
    double pairs = 0;
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t j = 0; j < nk; ++j) pairs += j < i ? 1.0 : j == i ? 0.5 : 0.0;
    EXPECT_DOUBLE_EQ(causal_visible_pairs(nq, nk), pairs) << nq << "x" << nk;
  }
  // The flash kernel's bytes follow the same rows: keys past Nq are never read.
  EXPECT_DOUBLE_EQ(find_variant("flash").cost(prob(128, 4096, true)).bytes(),
                   find_variant("flash").cost(prob(128, 128, true)).bytes());
  EXPECT_GT(find_variant("flash").cost(prob(128, 4096, false)).bytes(),
            find_variant("flash").cost(prob(128, 128, false)).bytes());
}

TEST(Profiler, MemoryAttributionAndPeak) {
  const int64_t B = 1, H = 2, N = 40, D = 16;
  const NaiveRun run = profile_variant("naive", DType::F32, B, H, N, D);
  const auto ka = analysis::key_averages(run.result);
  EXPECT_EQ(ka.peak_bytes, run.allocator_peak);
  const int64_t scores = B * H * N * N * 4;
  for (const auto& s : ka.rows) {
    EXPECT_GE(s.self_mem_bytes, 0) << s.name;
    EXPECT_GE(s.mem_bytes, s.self_mem_bytes) << s.name;
  }
  // masked_fill allocates nothing itself: its clone (copy_) does.
  const auto* mf = row(ka, "masked_fill");
  const auto* cp = row(ka, "copy_");
  ASSERT_TRUE(mf && cp);
  EXPECT_EQ(mf->self_mem_bytes, 0);
  EXPECT_EQ(mf->mem_bytes, scores);
  EXPECT_EQ(cp->self_mem_bytes, scores);
  // The forward allocates scores (matmul), mul's result, the clone, softmax's result and the output,
  // and frees the three intermediates it drops; nothing it allocates is netted against frees.
  const auto* fwd = row(ka, "attn_fwd");
  ASSERT_TRUE(fwd);
  EXPECT_EQ(fwd->mem_bytes, 4 * scores + B * H * N * D * 4);
  EXPECT_EQ(fwd->self_mem_bytes, 0);
  EXPECT_GE(fwd->freed_bytes, 2 * scores);
}

// `steps` profiler steps of a 5 µs "work" annotation each, from start() to stop().
static void run_work_steps(prof::Profiler& p, int steps) {
  p.start();
  for (int i = 0; i < steps; ++i) {
    {
      ATTNPROF_ANNOTATE("work");
      spin_us(5);
    }
    p.step();
  }
  p.stop();
}

TEST(Profiler, ScheduleRecordsOnlyActiveStepsWithStepZones) {
  prof::Profiler p({.schedule = {.wait = 1, .warmup = 1, .active = 3, .repeat = 1}});
  run_work_steps(p, 5);
  const prof::ProfileResult res = p.result();
  const auto& zones = res.threads.at(0).zones;
  std::vector<std::string> steps;
  for (const auto& z : zones)
    if (std::string_view(z.name).rfind("ProfilerStep#", 0) == 0) {
      steps.push_back(z.name);
      EXPECT_STREQ(z.category, "user_annotation") << z.name;  // as Kineto writes it (torch's record_function)
    }
  EXPECT_EQ(steps, (std::vector<std::string>{"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"}));
  // Key averages fold the steps into one row, as torch's key_averages() (ProfilerStep*, # of Calls 3).
  const auto ka = analysis::key_averages(res);
  ASSERT_TRUE(row(ka, "ProfilerStep*"));
  EXPECT_EQ(row(ka, "ProfilerStep*")->calls, 3);
  EXPECT_EQ(row(ka, "ProfilerStep*")->category, "user_annotation");
  for (const auto& s : ka.rows) EXPECT_NE(s.name.rfind("ProfilerStep#", 0), 0u) << s.name;
  ASSERT_TRUE(row(ka, "work"));
  EXPECT_EQ(row(ka, "work")->calls, 3);
  // Each step zone contains its step's work.
  for (const auto& z : zones)
    if (std::string_view(z.name) == "work") {
      ASSERT_GE(z.parent, 0);
      EXPECT_EQ(std::string_view(zones[size_t(z.parent)].name).substr(0, 13), "ProfilerStep#");
    }
}

// repeat: each cycle's active window is kept, its warm-up dropped, and the steps after the last cycle record
// nothing, as torch.profiler's schedule(wait, warmup, active, repeat).
TEST(Profiler, ScheduleRepeatKeepsEveryCyclesActiveWindow) {
  prof::Profiler p({.schedule = {.wait = 0, .warmup = 1, .active = 2, .repeat = 2}});
  run_work_steps(p, 8);  // two cycles of 3 steps, then 2 steps past them
  const prof::ProfileResult res = p.result();
  std::vector<std::string> steps;
  for (const auto& z : res.threads.at(0).zones)
    if (std::string_view(z.name).rfind("ProfilerStep#", 0) == 0) steps.push_back(z.name);
  EXPECT_EQ(steps, (std::vector<std::string>{"ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#4", "ProfilerStep#5"}));
  const auto ka = analysis::key_averages(res);
  ASSERT_TRUE(row(ka, "ProfilerStep*"));
  EXPECT_EQ(row(ka, "ProfilerStep*")->calls, 4);
  ASSERT_TRUE(row(ka, "work"));
  EXPECT_EQ(row(ka, "work")->calls, 4);
}

// A zone left open when its step's events are dropped (an annotation opened in the warm-up step and closed in
// the first active one) must not close, or write into, the zone that took its index after the drop: the
// ProfilerStep zone keeps its own end, and the ops after the stale zone's end stay inside that step.
TEST(Profiler, AZoneOpenedInADroppedStepLeavesTheNextZonesAlone) {
  prof::Profiler p({.schedule = {.wait = 0, .warmup = 1, .active = 1}});
  p.start();
  {
    prof::Zone straddling(std::string_view("straddling"), "user_annotation");
    p.step();  // the warm-up's events, this zone's among them, are dropped here; the active step begins
    straddling.set_cost(OpCost{.flops = 12345});
  }
  { prof::Zone after(std::string_view("after"), "cpu_op"); }
  p.step();
  p.stop();
  const prof::ProfileResult res = p.result();
  const auto& zones = res.threads.at(0).zones;
  const prof::ZoneEvent* step = nullptr;
  const prof::ZoneEvent* after = nullptr;
  for (const auto& z : zones) {
    if (std::string_view(z.name) == "ProfilerStep#1") step = &z;
    if (std::string_view(z.name) == "after") after = &z;
    EXPECT_NE(std::string_view(z.name), "straddling") << "a dropped step's zone came back";
    EXPECT_NE(z.cost.flops, 12345) << z.name << " took the stale zone's cost";
  }
  ASSERT_TRUE(step);
  ASSERT_TRUE(after);
  ASSERT_GE(after->parent, 0);
  EXPECT_STREQ(zones[size_t(after->parent)].name, "ProfilerStep#1");
  EXPECT_GE(step->t1, after->t1) << "the step zone was closed by the stale zone's end";
}

// A session started, then `record` run under an address-space limit `headroom` bytes above what the process
// maps by then (`before` runs first: what must exist before the limit, a thread's stack), then stopped: the
// error the session ends with, or "no error". For a child process, where the limit is set.
std::string session_under_limit(int64_t headroom, const std::function<void()>& before,
                                const std::function<void()>& record) {
  std::string said = "no error";
  try {
    prof::Profiler p({.schedule = {.wait = 0, .warmup = 0, .active = 1}, .step_annotations = false});
    p.start();  // the driving thread's 65,536 zones reserved and mapped in
    before();
    const int64_t limit = attnprof::testing::vm_size() + headroom;
    const rlimit rl{rlim_t(limit), rlim_t(limit)};
    if (setrlimit(RLIMIT_AS, &rl) != 0) said = "setrlimit failed";
    record();
    p.stop();
  } catch (const Error& e) {
    said = e.what();
  }
  return said;
}

// Events its buffers cannot grow to hold (an address-space limit leaves no room for the next mapping) are
// counted, and stop() refuses the session with the count, rather than return tables short of them.
TEST(Profiler, EventsThatCannotBeStoredFailTheSessionNotItsFigures) {
#ifdef ATTNPROF_SANITIZED
  GTEST_SKIP() << "a sanitizer's runtime reserves terabytes of address space: no address-space limit can be set";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // 100,000 zones and 65,536 stored before the growth: 34,464 dropped.
  EXPECT_EXIT(attnprof::testing::say_and_exit([] {
                return session_under_limit(int64_t(4) << 20, [] {}, [] {
                  for (int i = 0; i < 100000; ++i) {  // past the reservation: the growth needs more than 4 MiB
                    ATTNPROF_OP_ZONE(z, "op");
                  }
                });
              }),
              ::testing::ExitedWithCode(0),
              "the profiler could not store 34464 of its events: the memory its event buffers grow into was refused");
}

// A thread whose first event finds no memory for its buffer (made on first use) records nothing and counts
// what it lost, as a full buffer does: the recording paths cannot throw (a zone's constructor, a share inside
// an OpenMP region), and a throw there had ended the process.
TEST(Profiler, AThreadWhoseBufferCannotBeMadeFailsTheSessionNotTheProcess) {
#ifdef ATTNPROF_SANITIZED
  GTEST_SKIP() << "a sanitizer's runtime reserves terabytes of address space: no address-space limit can be set";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(attnprof::testing::say_and_exit([] {
                std::atomic<int> go{0};
                std::thread late;
                const std::string said = session_under_limit(
                    int64_t(64) << 10,
                    [&] {  // made before the limit (its stack), recording after it
                      late = std::thread([&] {
                        while (go.load() == 0) std::this_thread::yield();
                        for (int i = 0; i < 10; ++i) {
                          ATTNPROF_OP_ZONE(z, "op");
                        }
                      });
                    },
                    [&] {
                      go.store(1);
                      late.join();
                    });
                go.store(1);  // the session may have failed before recording: the thread must still end
                if (late.joinable()) late.join();
                return said;
              }),
              ::testing::ExitedWithCode(0), "the profiler could not store 10 of its events");
}

// What a worker's buffer did over a profiled loop: each step runs `regions(step)` parallel regions on a team of
// two, whose second thread records one work share in each.
struct WorkerSteps {
  int grew_inside = 0;    // steps in which the worker's buffer grew while recording
  int team_short = 0;     // regions the runtime ran on one thread
  int worker_shares = 0;  // shares the worker recorded
  size_t kept = 0;        // shares in the result (the worker's: the calling thread records none here)
};
WorkerSteps run_worker_steps(const prof::Schedule& schedule, int steps, const std::function<int(int)>& regions) {
  const int threads_before = omp_get_max_threads();
  omp_set_num_threads(2);
  WorkerSteps w;
  prof::Profiler p({.schedule = schedule, .step_annotations = false});
  p.start();
  for (int s = 0; s < steps; ++s) {
    size_t first_capacity = 0, last_capacity = 0;
    ATTNPROF_OP_ZONE(z, "parallel_op");
    for (int r = 0; r < regions(s); ++r) {
      ATTNPROF_PARALLEL_REGION(region);
#pragma omp parallel num_threads(2)
      {
        if (omp_get_num_threads() < 2) {
#pragma omp single
          ++w.team_short;
        }
        if (omp_get_thread_num() == 1) {
          const auto* b = prof::detail::thread_buffer();
          if (r == 0) first_capacity = b->work.capacity();
          { ATTNPROF_WORK_SHARE(share, region); }
          last_capacity = b->work.capacity();
          ++w.worker_shares;
        }
      }
    }
    if (last_capacity != first_capacity) ++w.grew_inside;
    p.step();
  }
  p.stop();
  omp_set_num_threads(threads_before);
  for (const prof::ThreadTrace& t : p.result().threads) w.kept += t.work.size();
  return w;
}

// A worker's buffer holds its work shares (4096 reserved). One that fills inside a step would grow inside an op,
// a copy onto fresh pages billed to it; between steps each thread of the team grows its own instead. Here each
// worker records 5 shares a step for 1,000 steps (5,000 shares): its capacity never changes inside a step, and
// every share is kept.
TEST(Profiler, WorkersBuffersGrowBetweenStepsNotInsideThem) {
  const WorkerSteps w = run_worker_steps({.wait = 0, .warmup = 0, .active = 1000}, 1000, [](int) { return 5; });
  ASSERT_EQ(w.team_short, 0) << "the runtime gave a team of one thread";
  ASSERT_EQ(w.worker_shares, 5000);
  EXPECT_EQ(w.grew_inside, 0) << "steps in which the worker's buffer grew while recording";
  EXPECT_EQ(w.kept, 5000u);
}

// The team's buffers are looked at only every few steps (make_room: half the steps the least of them has room for,
// at most 64). A worker whose rate rises within the guarantee (twice the larger of its mean rate since the last
// look and 16 events a step) still never grows inside a step: 1 share a step for 150 steps, then 32 a step for
// 600 (19,350 shares against 4096 reserved).
TEST(Profiler, WorkersBuffersGrowBetweenStepsWhenTheirRateRises) {
  const WorkerSteps w =
      run_worker_steps({.wait = 0, .warmup = 0, .active = 750}, 750, [](int s) { return s < 150 ? 1 : 32; });
  ASSERT_EQ(w.team_short, 0) << "the runtime gave a team of one thread";
  ASSERT_EQ(w.worker_shares, 150 + 32 * 600);
  EXPECT_EQ(w.grew_inside, 0) << "steps in which the worker's buffer grew while recording";
  EXPECT_EQ(w.kept, size_t(150 + 32 * 600));
}

// The same after a warm-up, whose events are dropped when the recorded steps begin: the rate the first recorded
// step is read at is its own, not 0 (a marker left past the truncated buffer had read it so, and a worker at a
// steady 150 shares a step grew its buffer inside step 29).
TEST(Profiler, WorkersBuffersGrowBetweenStepsAfterAWarmUp) {
  const WorkerSteps w = run_worker_steps({.wait = 1, .warmup = 1, .active = 80}, 82, [](int) { return 150; });
  ASSERT_EQ(w.team_short, 0) << "the runtime gave a team of one thread";
  EXPECT_EQ(w.grew_inside, 0) << "steps in which the worker's buffer grew while recording";
  EXPECT_EQ(w.kept, size_t(80 * 150));
}

TEST(Profiler, StepAnnotationsOffRecordsNoStepZones) {
  prof::Profiler p({.schedule = {.wait = 0, .warmup = 0, .active = 2}, .step_annotations = false});
  p.start();
  for (int i = 0; i < 2; ++i) {
    ATTNPROF_OP_ZONE(z, "op");
    p.step();
  }
  p.stop();
  const auto ka = analysis::key_averages(p.result());
  ASSERT_EQ(ka.rows.size(), 1u);
  EXPECT_EQ(ka.rows[0].name, "op");
}

TEST(Profiler, OpenMPWorkersAreSeparateThreads) {
  prof::Profiler p;
  p.start();
  {
    ATTNPROF_ANNOTATE("parallel_region");
#pragma omp parallel num_threads(2)
    {
      ATTNPROF_OP_ZONE(z, "worker_op");
      spin_us(20);
    }
  }
  p.stop();
  const prof::ProfileResult r = p.result();
  std::map<uint32_t, int> worker_zones;
  for (const auto& t : r.threads)
    for (const auto& z : t.zones)
      if (std::string_view(z.name) == "worker_op") {
        worker_zones[t.tid]++;
        // On the master thread the zone nests in the annotation; on a worker it is a root of its own tree.
        if (t.name != "main") EXPECT_EQ(z.parent, -1);
      }
  EXPECT_EQ(worker_zones.size(), 2u);  // two threads, each with its own buffer and tid
  for (const auto& t : r.threads) EXPECT_FALSE(t.name.empty());
  EXPECT_EQ(row(analysis::key_averages(r), "worker_op")->calls, 2);
}

// Each thread's share of an op's parallel region: one WorkSpan per thread, named after the op's zone, with the
// region's id and the items the thread counted; the calling thread's share inside the op's zone. Shares are
// not zones: the op is one table row with one call, and its self time is not cut by its own shares.
TEST(Profiler, EachThreadsShareOfARegionIsRecordedBesideTheOpNotInIt) {
  prof::Profiler p;
  p.start();
  for (int call = 0; call < 2; ++call) {
    ATTNPROF_OP_ZONE(z, "parallel_op");
    ATTNPROF_PARALLEL_REGION(region);
#pragma omp parallel num_threads(2)
    {
      ATTNPROF_WORK_SHARE(share, region);
#pragma omp for schedule(static) nowait
      for (int i = 0; i < 8; ++i) {
        share.add_items(1);
        spin_us(10);
      }
    }
  }
  {
    ATTNPROF_PARALLEL_REGION(outside);  // no zone open: nothing to name the region after, so nothing recorded
#pragma omp parallel num_threads(2)
    { ATTNPROF_WORK_SHARE(share, outside); }
  }
  p.stop();
  const prof::ProfileResult r = p.result();
  std::map<uint32_t, std::vector<std::pair<uint32_t, const prof::ThreadTrace*>>> by_region;
  int64_t items = 0;
  for (const auto& t : r.threads)
    for (const prof::WorkSpan& w : t.work) {
      EXPECT_STREQ(w.name, "parallel_op");
      EXPECT_LE(w.t0, w.t1);
      by_region[w.region].push_back({t.tid, &t});
      items += w.items;
      if (t.name == "main") {  // inside the op's own zone on the calling thread
        ASSERT_GE(w.zone, 0);
        const prof::ZoneEvent& z = t.zones[size_t(w.zone)];
        EXPECT_STREQ(z.name, "parallel_op");
        EXPECT_LE(z.t0, w.t0);
        EXPECT_GE(z.t1, w.t1);
      } else {
        EXPECT_EQ(w.zone, -1);
      }
    }
  ASSERT_EQ(by_region.size(), 2u);  // two calls, two regions
  for (const auto& [id, shares] : by_region) {
    EXPECT_NE(id, 0u);
    ASSERT_EQ(shares.size(), 2u);  // one share per thread of the team
    EXPECT_NE(shares[0].first, shares[1].first);
  }
  EXPECT_EQ(items, 16);  // every iteration counted once
  const analysis::KeyAverages ka = analysis::key_averages(r);
  ASSERT_NE(row(ka, "parallel_op"), nullptr);
  EXPECT_EQ(row(ka, "parallel_op")->calls, 2);
  EXPECT_EQ(ka.rows.size(), 1u);
  const std::vector<analysis::ThreadBalance> tb = analysis::thread_balance(r);
  ASSERT_EQ(tb.size(), 1u);
  EXPECT_EQ(tb[0].name, "parallel_op");
  EXPECT_EQ(tb[0].regions, 2);
  EXPECT_EQ(tb[0].threads, 2);
  EXPECT_EQ(tb[0].items, 16);
  // The trace: one thread_work slice per share on its thread's track, the main thread's inside the op's slice.
  const nlohmann::json trace = report::chrome_trace_json(r);
  int slices = 0;
  for (const auto& e : trace["traceEvents"])
    if (e.value("cat", "") == "thread_work") {
      ++slices;
      EXPECT_EQ(e["name"], "parallel_op (share)") << "not the op's own name: summed by name, it would count twice";
      EXPECT_EQ(e["args"]["op"], "parallel_op");
      EXPECT_EQ(e["args"]["items"].get<int64_t>() > 0, true);
    }
  EXPECT_EQ(slices, 4);
}

// thread_balance's arithmetic on hand-made shares (1 ns per tick): region 1 has both threads busy from 0 to
// 100; region 2 has the worker start 30 late and finish at 60 while main runs 0..100.
TEST(ThreadBalance, BusyShareImbalanceAndLateStartPerRegion) {
  prof::ProfileResult r;
  r.ns_per_tick = 1.0;
  prof::ThreadTrace main_t, worker;
  main_t.tid = 0;
  worker.tid = 1;
  main_t.work = {{"op", 1, 0, 100, 4, -1}, {"op", 2, 200, 300, 6, -1}};
  worker.work = {{"op", 1, 0, 100, 4, -1}, {"op", 2, 230, 260, 2, -1}, {"other", 3, 400, 410, 0, -1}};
  r.threads = {main_t, worker};
  const std::vector<analysis::ThreadBalance> tb = analysis::thread_balance(r);
  ASSERT_EQ(tb.size(), 2u);
  const analysis::ThreadBalance& op = tb[0];
  EXPECT_EQ(op.name, "op");
  EXPECT_EQ(op.regions, 2);
  EXPECT_EQ(op.threads, 2);
  EXPECT_DOUBLE_EQ(op.wall_ns, 200);
  EXPECT_DOUBLE_EQ(op.capacity_ns, 400);
  EXPECT_DOUBLE_EQ(op.busy_ns, 330);
  EXPECT_DOUBLE_EQ(op.busy_share(), 330.0 / 400.0);
  EXPECT_DOUBLE_EQ(op.slowest_ns, 200);                  // 100 + 100
  EXPECT_DOUBLE_EQ(op.mean_ns, 100 + 65);                // (100 + 100) / 2 + (100 + 30) / 2
  EXPECT_DOUBLE_EQ(op.imbalance(), 200.0 / 165.0);
  EXPECT_DOUBLE_EQ(op.lag_ns, 30);
  EXPECT_EQ(op.items, 16);
  EXPECT_EQ(tb[1].name, "other");  // a one-thread region: busy throughout, perfectly balanced
  EXPECT_EQ(tb[1].threads, 1);
  EXPECT_DOUBLE_EQ(tb[1].busy_share(), 1.0);
  EXPECT_DOUBLE_EQ(tb[1].imbalance(), 1.0);
  // The table prints those figures; compare's note flags the op below 80 % busy only.
  const std::string table = report::thread_balance_table(tb);
  const std::string op_row = table.substr(table.find("\nop ") + 1, table.find('\n', table.find("\nop ") + 1) -
                                                                       table.find("\nop ") - 1);
  for (const char* figure : {" 2 ", "82.5 %", "1.21x", "0.015us", "8.0"})  // per region: lag 30/2 ns, 16/2 items
    EXPECT_NE(op_row.find(figure), std::string::npos) << figure << " in: " << op_row;
  EXPECT_TRUE(report::thread_balance_notes("v", tb).empty());  // 82.5 % busy: no note
  std::vector<analysis::ThreadBalance> idle = tb;
  idle[0].busy_ns = 300;  // 75 %
  const std::vector<std::string> notes = report::thread_balance_notes("v", idle);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].rfind("Threads: v's op op kept its 2 threads working 75 % of its parallel time", 0), 0u) << notes[0];
}

// op_phases' arithmetic on hand-made shares (1 ns per tick): two regions of one op on two threads, a step no
// share spent time in (left out), and a share of another op.
TEST(OpPhases, SumEachStepOverEveryShareOfEveryRegion) {
  static constexpr std::array<const char*, 4> kSteps{"load", "dot", "unused", "store"};
  static constexpr std::array<const char*, 1> kOther{"only"};
  auto share = [](const char* name, uint32_t region, uint64_t t0, uint64_t t1, const auto& names,
                  std::array<uint64_t, prof::kMaxPhases> ticks, std::array<double, prof::kMaxPhases> flops) {
    prof::WorkSpan w;
    w.name = name, w.region = region, w.t0 = t0, w.t1 = t1;
    w.n_phases = uint8_t(names.size());
    w.phase_names = names.data();
    w.phase_ticks = ticks;
    w.phase_flops = flops;
    return w;
  };
  prof::ProfileResult r;
  r.ns_per_tick = 1.0;
  prof::ThreadTrace main_t, worker;
  main_t.work = {share("op", 1, 0, 100, kSteps, {10, 60, 0, 30}, {0, 600, 0, 0}),
                 share("op", 2, 200, 300, kSteps, {5, 70, 0, 20}, {0, 700, 0, 0})};
  worker.work = {share("op", 1, 0, 90, kSteps, {10, 50, 0, 30}, {0, 500, 0, 0}),
                 share("other", 3, 400, 410, kOther, {10}, {0})};
  worker.work.push_back({"plain", 4, 500, 510, 0, -1});  // a share that timed no steps: not an entry
  r.threads = {main_t, worker};
  const std::vector<analysis::OpPhases> ph = analysis::op_phases(r);
  ASSERT_EQ(ph.size(), 2u);
  const analysis::OpPhases& op = ph[0];
  EXPECT_EQ(op.name, "op");
  EXPECT_EQ(op.regions, 2);
  EXPECT_EQ(op.threads, 2);
  EXPECT_DOUBLE_EQ(op.share_ns, 290);
  ASSERT_EQ(op.steps.size(), 3u);  // "unused" took no time anywhere
  EXPECT_EQ(op.steps[0].name, "load");
  EXPECT_DOUBLE_EQ(op.steps[0].ns, 25);
  EXPECT_EQ(op.steps[1].name, "dot");
  EXPECT_DOUBLE_EQ(op.steps[1].ns, 180);
  EXPECT_DOUBLE_EQ(op.steps[1].flops, 1800);
  EXPECT_EQ(op.steps[2].name, "store");
  EXPECT_DOUBLE_EQ(op.steps[2].ns, 80);
  EXPECT_DOUBLE_EQ(op.steps_ns(), 285);  // 5 ns ran after a share's last lap
  EXPECT_EQ(ph[1].name, "other");
  EXPECT_EQ(ph[1].threads, 1);
  // The table: each step's share of the steps' time, and the rate of the step that counted FLOPs, 10 per ns,
  // against the fp32 peak per thread (40 GFLOP/s measured on 2 threads: 20 a thread).
  analysis::MachinePeaks peaks;
  peaks.threads = 2;
  peaks.fp32_gflops = 40;
  peaks.bandwidth_gbs = 10;
  const std::string t = report::phase_table({op}, &peaks, DType::F32);
  EXPECT_NE(t.find("Inside op: each thread's share split by the kernel's steps (2 calls, 2 threads;"), std::string::npos) << t;
  const size_t dot = t.find("\ndot ");
  ASSERT_NE(dot, std::string::npos) << t;
  const std::string dot_row = t.substr(dot + 1, t.find('\n', dot + 1) - dot - 1);
  for (const char* figure : {"63.2 %", "10.0", "50.0 %"})  // 180 / 285; 1800 / 180; 10 / 20
    EXPECT_NE(dot_row.find(figure), std::string::npos) << figure << " in: " << dot_row;
  EXPECT_NE(t.find("The steps: 0.285us of the shares' 0.290us (98.3 %"), std::string::npos) << t;
  EXPECT_EQ(t.find("Over 100 % of peak/thread"), std::string::npos) << t;
  peaks.fp32_gflops = 10;  // 5 a thread, under the 10 measured: peaks taken on a busy machine say so
  const std::string over = report::phase_table({op}, &peaks, DType::F32);
  EXPECT_NE(over.find("200.0 %"), std::string::npos) << over;
  EXPECT_NE(over.find("Over 100 % of peak/thread: a thread that worked while the team's others idled (the Threads "
                      "table's Working) runs faster than its share of a peak measured on 2 threads; otherwise the "
                      "peaks were measured while other work shared the CPUs"),
            std::string::npos)
      << over;
  // Without its definitions (--brief): the rows, the steps' coverage and the over-peak warning, not what the
  // columns mean.
  const std::string brief = report::phase_table({op}, &peaks, DType::F32, /*definitions=*/false);
  EXPECT_NE(brief.find(over.substr(over.find("\ndot "), over.find('\n', over.find("\ndot ") + 1) - over.find("\ndot "))),
            std::string::npos)
      << brief;  // the same row as the full table's
  EXPECT_NE(brief.find("The steps: 0.285us of the shares' 0.290us (98.3 %).\n"), std::string::npos) << brief;
  EXPECT_NE(brief.find("Over 100 % of peak/thread"), std::string::npos) << brief;
  EXPECT_EQ(brief.find("Thread time is"), std::string::npos) << brief;
  EXPECT_EQ(report::phase_table({}, &peaks, DType::F32), "");
  // Peaks of one thread: no team to have idled, so no such cause.
  peaks.threads = 1;
  peaks.fp32_gflops = 5;  // under the 10 GFLOP/s the step ran at
  const std::string one = report::phase_table({op}, &peaks, DType::F32);
  EXPECT_NE(one.find("Over 100 % of peak/thread: the peaks were measured while other work shared the CPU;"),
            std::string::npos)
      << one;
  EXPECT_EQ(one.find("1 threads"), std::string::npos) << one;
}

// The flash kernel times its steps on every thread, in every body: Q·Kᵀ counts the scores flash_tiles says it
// computes, the steps add up to the shares, an explicit mask is a step of its own, and nothing is timed when
// the profiler is off (the kernel then runs as it does anyway).
TEST(OpPhases, FlashTimesItsStepsInEveryBody) {
  const int64_t B = 1, H = 2, N = 300, D = 64;  // 300 rows: a last block of queries that is not whole
  const auto [q, k, v] = random_qkv(B, H, N, D, DType::BF16);
  AttnOptions masked;
  masked.attn_mask = Tensor::empty({1, 1, N, N}, DType::Bool);
  fill_randn(masked.attn_mask, 4);
  const Variant& var = find_variant("flash");
  for (Isa isa : available_isas())
    for (const AttnOptions& o : {AttnOptions{.is_causal = true}, masked}) {
      IsaOverride use(isa);
      const AttnProblem p = AttnProblem::from(q, k, v, o);
      const std::string what = fmt::format("{} {}", isa_name(isa), mask_kind_name(p.mask));
      auto runner = var.prepare(p, o);
      const std::vector<analysis::OpPhases> ph = analysis::op_phases(profile_forward(var, *runner, q, k, v));
      ASSERT_EQ(ph.size(), 1u) << what;
      EXPECT_EQ(ph[0].name, "flash_attention_fwd") << what;
      EXPECT_EQ(ph[0].regions, 1) << what;
      std::vector<std::string> names;
      std::map<std::string, analysis::OpPhases::Step> by;
      for (const auto& st : ph[0].steps) {
        names.push_back(st.name);
        by[st.name] = st;
        EXPECT_GE(st.ns, 0.0) << what << " " << st.name;
      }
      const std::vector<std::string> want =
          p.mask == MaskKind::Causal
              ? std::vector<std::string>{"load Q, K, V", "Q·Kᵀ", "online softmax", "P·V", "store O"}
              : std::vector<std::string>{"load Q, K, V", "Q·Kᵀ", "mask", "online softmax", "P·V", "store O"};
      EXPECT_EQ(names, want) << what;
      EXPECT_DOUBLE_EQ(by["Q·Kᵀ"].flops, 2.0 * D * flash_tiles(p).scores * B * H) << what;
      EXPECT_GT(by["P·V"].flops, 0.0) << what;
      EXPECT_LE(by["P·V"].flops, 2.0 * D * N * N * B * H) << what;
      EXPECT_EQ(by["online softmax"].flops, 0.0) << what;
      EXPECT_LE(ph[0].steps_ns(), ph[0].share_ns * (1 + 1e-12)) << what;
      EXPECT_GT(ph[0].steps_ns(), 0.5 * ph[0].share_ns) << what;  // the shares are their steps but for a tail
    }
  EXPECT_TRUE(analysis::op_phases(prof::ProfileResult{}).empty());
}

// A share's items (WorkShare::begin_item .. end_item): each from the lap before it to its last lap, so one thread's
// items follow each other without gaps; their step ticks add up to their length and to what the share's steps
// gained meanwhile; they are kept only in recorded steps, only while the share times its steps; and the trace
// nests each in its share's slice, named after its last key.
TEST(Profiler, WorkItemsAreTheLapsBetweenBeginAndEnd) {
  static constexpr std::array<const char*, 2> kSteps{"load", "dot"};
  static constexpr prof::ItemNames kNames{"tile", {"row", "col", nullptr}, "blocks"};
  prof::Profiler p({.schedule = {.wait = 0, .warmup = 1, .active = 1}});
  p.start();
  for (int step = 0; step < 2; ++step) {  // step 0 is the warm-up: its items go with its shares
    ATTNPROF_OP_ZONE(z, "tiled_op");
    ATTNPROF_PARALLEL_REGION(region);
#pragma omp parallel num_threads(2)
    {
      ATTNPROF_WORK_SHARE(share, region);
      share.phases(kSteps);
#pragma omp for schedule(dynamic, 1) nowait
      for (int t = 0; t < 6; ++t) {
        share.add_items(1);
        share.begin_item(kNames, step, t);
        for (int b = 0; b <= t % 3; ++b) {
          spin_us(5);
          share.lap(0);
          spin_us(10);
          share.lap(1, 100.0);
        }
        share.end_item(t % 3 + 1);
      }
    }
    {
      ATTNPROF_PARALLEL_REGION(plain);  // a share that times no steps marks no items
#pragma omp parallel num_threads(2)
      {
        ATTNPROF_WORK_SHARE(share, plain);
        share.begin_item(kNames, 9, 9);
        share.end_item(1);
      }
    }
    p.step();
  }
  p.stop();
  const prof::ProfileResult r = p.result();
  int64_t items = 0;
  std::set<int32_t> tasks;
  for (const prof::ThreadTrace& t : r.threads) {
    std::array<uint64_t, prof::kMaxPhases> share_ticks{}, item_ticks{};
    for (const prof::WorkSpan& w : t.work)
      for (size_t k = 0; k < size_t(prof::kMaxPhases); ++k) share_ticks[k] += w.phase_ticks[k];
    for (size_t i = 0; i < t.items.size(); ++i) {
      const prof::WorkItem& it = t.items[i];
      ++items;
      EXPECT_EQ(it.keys[0], 1) << "an item of the warm-up step was kept";
      tasks.insert(it.keys[1]);
      EXPECT_EQ(it.names, &kNames);
      EXPECT_EQ(it.inner, it.keys[1] % 3 + 1);
      EXPECT_DOUBLE_EQ(it.flops, 100.0 * it.inner);
      uint64_t sum = 0;
      for (size_t k = 0; k < size_t(prof::kMaxPhases); ++k) {
        sum += it.phase_ticks[k];
        item_ticks[k] += it.phase_ticks[k];
      }
      EXPECT_EQ(sum, it.t1 - it.t0);  // its steps are its length
      EXPECT_GE(r.ns(it.t1 - it.t0), 15e3 * it.inner * 0.9);
      if (i > 0 && t.items[i - 1].region == it.region) EXPECT_EQ(t.items[i - 1].t1, it.t0) << "a gap between items";
      const auto share = std::find_if(t.work.begin(), t.work.end(),
                                      [&](const prof::WorkSpan& w) { return w.region == it.region; });
      ASSERT_NE(share, t.work.end());
      EXPECT_EQ(share->t0 <= it.t0 && it.t1 <= share->t1, true);
    }
    EXPECT_EQ(item_ticks, share_ticks) << "every lap fell in an item";
  }
  EXPECT_EQ(items, 6);
  EXPECT_EQ(tasks, (std::set<int32_t>{0, 1, 2, 3, 4, 5}));
  // The trace: a work_item slice per item, named after its last key, inside a thread_work slice on its track.
  const nlohmann::json trace = report::chrome_trace_json(r);
  std::vector<nlohmann::json> shares, slices;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("cat", "") == "thread_work") shares.push_back(e);
    if (e.value("cat", "") == "work_item") slices.push_back(e);
  }
  ASSERT_EQ(slices.size(), 6u);
  for (const auto& e : slices) {
    const int64_t col = e["args"]["col"].get<int64_t>();
    EXPECT_EQ(e["name"], fmt::format("tile {}", col));
    EXPECT_EQ(e["args"]["op"], "tiled_op");
    EXPECT_EQ(e["args"]["row"], 1);
    EXPECT_EQ(e["args"]["blocks"], col % 3 + 1);
    EXPECT_EQ(e["args"]["FLOPs"], 100 * (col % 3 + 1));
    ASSERT_TRUE(e["args"].contains("steps_us")) << e;
    EXPECT_EQ(e["args"]["steps_us"].size(), 2u) << e;
    const double ts = e["ts"].get<double>(), end = ts + e["dur"].get<double>();
    const auto in = std::find_if(shares.begin(), shares.end(), [&](const nlohmann::json& sh) {
      return sh["tid"] == e["tid"] && sh["args"]["op"] == "tiled_op" && sh["ts"].get<double>() <= ts &&
             end <= sh["ts"].get<double>() + sh["dur"].get<double>();
    });
    EXPECT_NE(in, shares.end()) << "outside every share on its track: " << e;
  }
  // Grouped by inner count: three groups of two, a line through them.
  const std::vector<analysis::OpItems> oi = analysis::op_items(r);
  ASSERT_EQ(oi.size(), 1u);
  EXPECT_EQ(oi[0].name, "tiled_op");
  EXPECT_EQ(oi[0].items, 6);
  EXPECT_EQ(oi[0].regions, 1);
  ASSERT_EQ(oi[0].groups.size(), 3u);
  for (size_t g = 0; g < 3; ++g) {
    EXPECT_EQ(oi[0].groups[g].inner, int32_t(g + 1));
    EXPECT_EQ(oi[0].groups[g].count, 2);
  }
  // FLOPs per item rise with the inner count, so medians that rise with it too (spun 15, 30 and 45 us) make a
  // line with a positive slope. A tile the machine preempted can lift a group's median past the next one's (the
  // sanitizer build on a busy 2-core machine did): then the slope may fall, and no line is the right answer, so
  // the check follows the medians measured, not the ones spun.
  const auto& gs = oi[0].groups;
  if (gs[0].median_ns < gs[1].median_ns && gs[1].median_ns < gs[2].median_ns) {
    EXPECT_TRUE(oi[0].fitted);
    EXPECT_GT(oi[0].marginal_gflops, 0.0);
  }
}

// op_items' arithmetic on hand-made items (1 ns per tick): groups by inner count with their median, mean and
// max; the line through the medians against FLOPs per item; the slowest item and the step it spent most in; and
// the texts profile and compare print.
TEST(OpItems, GroupFitAndSlowestOnHandMadeItems) {
  static constexpr std::array<const char*, 2> kSteps{"load", "dot"};
  static constexpr prof::ItemNames kNames{"Q block", {"batch", "head", "Q block"}, "K/V blocks"};
  prof::ProfileResult r;
  r.ns_per_tick = 1.0;
  prof::WorkSpan share;
  share.name = "op", share.region = 1, share.t0 = 0, share.t1 = 100000;
  share.n_phases = 2, share.phase_names = kSteps.data();
  auto item = [](int32_t qb, int32_t inner, uint64_t t0, uint64_t ns, double flops, uint64_t load) {
    prof::WorkItem w;
    w.t0 = t0, w.t1 = t0 + ns, w.region = 1, w.inner = inner, w.keys = {0, 3, qb}, w.names = &kNames;
    w.phase_ticks = {load, ns - load};
    w.flops = flops;
    return w;
  };
  // time = 100 + flops / 2 (2 FLOPs a ns: 2 GFLOP/s): 1000 FLOPs a block; the middle group has a slow item.
  prof::ThreadTrace t;
  t.work = {share};
  t.items = {item(0, 1, 0, 600, 1000, 10),    item(0, 1, 600, 600, 1000, 10),  item(1, 2, 1200, 1100, 2000, 10),
             item(1, 2, 2300, 1100, 2000, 10), item(1, 2, 3400, 9000, 2000, 8000), item(2, 3, 12400, 1600, 3000, 10)};
  prof::WorkItem orphan = item(5, 1, 20000, 50, 1000, 0);
  orphan.region = 7;  // its share was not kept: left out, as the trace leaves it out
  t.items.push_back(orphan);
  r.threads = {t};
  const std::vector<analysis::OpItems> oi = analysis::op_items(r);
  ASSERT_EQ(oi.size(), 1u);
  const analysis::OpItems& o = oi[0];
  EXPECT_EQ(o.items, 6);
  EXPECT_EQ(o.noun, "Q block");
  EXPECT_EQ(o.inner, "K/V blocks");
  ASSERT_EQ(o.groups.size(), 3u);
  EXPECT_DOUBLE_EQ(o.groups[1].median_ns, 1100);
  EXPECT_DOUBLE_EQ(o.groups[1].mean_ns, 11200.0 / 3);
  EXPECT_DOUBLE_EQ(o.groups[1].max_ns, 9000);
  EXPECT_DOUBLE_EQ(o.groups[1].flops, 6000);
  ASSERT_TRUE(o.fitted);
  EXPECT_NEAR(o.fixed_ns, 100, 1e-9);
  EXPECT_NEAR(o.marginal_gflops, 2.0, 1e-12);
  EXPECT_NEAR(o.r2, 1.0, 1e-12);
  EXPECT_EQ(o.slowest.keys, (std::array<int32_t, 3>{0, 3, 1}));
  EXPECT_DOUBLE_EQ(o.slowest.ns, 9000);
  EXPECT_DOUBLE_EQ(o.slowest.group_median_ns, 1100);
  EXPECT_EQ(o.slowest.step, "load");
  EXPECT_DOUBLE_EQ(o.slowest.step_ns, 8000);
  EXPECT_EQ(o.item_label(o.slowest.keys), "Q block 1 (batch 0, head 3)");
  const std::string table = report::item_table(oi);
  EXPECT_NE(table.find("Tasks of op: 6 Q blocks in 1 call (6 a call), by the K/V blocks each visited\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("Per Q block: 0.100us + its FLOPs at 2.0 GFLOP/s (the line through the 3 medians against "
                       "their FLOPs, r² 1.000): 0.100us whatever its size"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("Slowest Q block: Q block 1 (batch 0, head 3) at 9.000us, 8.2x the median of the Q blocks "
                       "with 2 K/V blocks, 89 % of it in load.\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("Under a causal mask"), std::string::npos) << table;
  const std::string brief = report::item_table(oi, /*definitions=*/false);
  EXPECT_EQ(brief.find("Under a causal mask"), std::string::npos) << brief;
  EXPECT_EQ(brief.find("whatever its size"), std::string::npos) << brief;
  EXPECT_EQ(report::item_line("flash", o),
            "flash's tasks (op's 6 Q blocks): 0.100us + its FLOPs at 2.0 GFLOP/s (r² 1.000); the slowest, Q block 1 "
            "(batch 0, head 3) at 9.000us, 8.2x the median of the Q blocks with 2 K/V blocks, 89 % of it in load.");
  // Laps a clock stepped back across add nothing, so a tile's steps can sum past its length: the step it spent
  // most in is then the whole tile, never more (diff and the report read an older summary so too).
  {
    prof::ProfileResult back = r;
    back.threads[0].items[4].phase_ticks = {9500, 100};
    EXPECT_DOUBLE_EQ(analysis::op_items(back)[0].slowest.step_ns, 9000);
  }
  // Two groups make any line: no fit, and the texts say only what was measured.
  r.threads[0].items.resize(4);
  const std::vector<analysis::OpItems> two = analysis::op_items(r);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_FALSE(two[0].fitted);
  EXPECT_EQ(report::item_table(two).find("Per Q block"), std::string::npos);
  EXPECT_EQ(report::item_line("flash", two[0]).find("GFLOP/s"), std::string::npos);
  // A line that meets zero FLOPs below zero time is no fixed cost.
  analysis::OpItems neg = o;
  neg.fixed_ns = -250;
  EXPECT_NE(report::item_line("flash", neg).find("its FLOPs at 2.0 GFLOP/s and no fixed cost that shows (the line "
                                                 "meets zero FLOPs at -0.250us)"),
            std::string::npos)
      << report::item_line("flash", neg);
  // One tile: a noun in the singular, and no median to set it against (it would be its own).
  r.threads[0].items.resize(1);
  const std::vector<analysis::OpItems> one = analysis::op_items(r);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_NE(report::item_table(one).find("Tasks of op: 1 Q block in 1 call (1 a call), by the K/V blocks each "
                                         "visited\n"),
            std::string::npos)
      << report::item_table(one);
  EXPECT_EQ(report::item_line("flash", one[0]),
            "flash's tasks (op's 1 Q block): the slowest, Q block 0 (batch 0, head 3) at 0.600us, 98 % of it in dot.");
  // An op that names no inner count: its blocks are "inner blocks", never an empty word.
  static constexpr prof::ItemNames kNoInner{"tile", {"row", nullptr, nullptr}, nullptr};
  r.threads[0].items = {item(0, 1, 0, 600, 1000, 10), item(1, 1, 600, 900, 1000, 10)};
  for (prof::WorkItem& w : r.threads[0].items) w.names = &kNoInner;
  const std::string unnamed = report::item_table(analysis::op_items(r));
  EXPECT_NE(unnamed.find("Tasks of op: 2 tiles in 1 call (2 a call), by the inner blocks each visited"),
            std::string::npos)
      << unnamed;
  EXPECT_NE(unnamed.find("Slowest tile: tile 0 at 0.900us, 1.2x the median of the tiles with 1 inner blocks"),
            std::string::npos)
      << unnamed;
  // Two items a clock read that stepped back put out of order: the trace places the second after the first, so
  // siblings on one track never overlap.
  r.threads[0].items = {item(0, 1, 100, 500, 1000, 10), item(1, 1, 400, 300, 1000, 10)};
  const nlohmann::json trace = report::chrome_trace_json(r);
  std::vector<std::pair<double, double>> placed;
  for (const auto& e : trace["traceEvents"])
    if (e.value("cat", "") == "work_item") placed.push_back({e["ts"].get<double>(), e["dur"].get<double>()});
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_GE(placed[1].first, placed[0].first + placed[0].second);
  EXPECT_TRUE(analysis::op_items(prof::ProfileResult{}).empty());
  EXPECT_EQ(report::item_table({}), "");
}

// The flash kernel marks each (batch, head, Q block) task as an item in every body: one per task a forward,
// each visiting the K/V blocks left of the diagonal and the diagonal's own, its FLOPs what its steps counted,
// and every lap inside an item.
TEST(OpItems, FlashMarksEveryTileInEveryBody) {
  const int64_t B = 2, H = 2, N = 300, D = 64;  // 300 rows: a last block of queries that is not whole
  const auto [q, k, v] = random_qkv(B, H, N, D, DType::BF16);
  const Variant& var = find_variant("flash");
  for (Isa isa : available_isas())
    for (bool causal : {true, false}) {
      IsaOverride use(isa);
      const AttnOptions o{.is_causal = causal};
      const AttnProblem p = AttnProblem::from(q, k, v, o);
      const std::string what = fmt::format("{} {}", isa_name(isa), mask_kind_name(p.mask));
      const FlashBlock blk = flash_block();  // the defaults of the body the override chose
      auto runner = var.prepare(p, o);
      const prof::ProfileResult r = profile_forward(var, *runner, q, k, v);
      const int64_t q_blocks = (N + blk.rows - 1) / blk.rows, kv_blocks = (N + blk.cols - 1) / blk.cols;
      std::set<std::array<int32_t, 3>> seen;
      double item_flops = 0, step_flops = 0;
      for (const prof::ThreadTrace& t : r.threads) {
        std::array<uint64_t, prof::kMaxPhases> share_ticks{}, item_ticks{};
        for (const prof::WorkSpan& w : t.work)
          for (size_t s = 0; s < size_t(prof::kMaxPhases); ++s) {
            share_ticks[s] += w.phase_ticks[s];
            step_flops += w.phase_flops[s];
          }
        for (const prof::WorkItem& it : t.items) {
          EXPECT_TRUE(seen.insert(it.keys).second) << what << ": a tile marked twice";
          const int64_t last_row = std::min<int64_t>(N, (it.keys[2] + 1) * blk.rows);
          EXPECT_EQ(it.inner, causal ? (last_row + blk.cols - 1) / blk.cols : kv_blocks) << what;
          item_flops += it.flops;
          for (size_t s = 0; s < size_t(prof::kMaxPhases); ++s) item_ticks[s] += it.phase_ticks[s];
        }
        EXPECT_EQ(item_ticks, share_ticks) << what << ": a lap outside the tiles";
      }
      EXPECT_EQ(int64_t(seen.size()), B * H * q_blocks) << what;
      EXPECT_DOUBLE_EQ(item_flops, step_flops) << what;
      const std::vector<analysis::OpItems> oi = analysis::op_items(r);
      ASSERT_EQ(oi.size(), 1u) << what;
      EXPECT_EQ(oi[0].name, "flash_attention_fwd") << what;
      EXPECT_EQ(oi[0].noun, "Q block") << what;
      EXPECT_EQ(oi[0].groups.size(), causal ? size_t(q_blocks) : 1u) << what;
    }
}

TEST(Profiler, MemoryOnAThreadWithNoOpenZoneIsNamedNotLost) {
  // A worker of a parallel region opened by an op has no zone of its own: what it allocates is in no row,
  // and key_averages says how much instead of dropping it.
  prof::Profiler p;
  p.start();
  {
    ATTNPROF_ANNOTATE("parallel_region");
#pragma omp parallel num_threads(2)
    {
      void* b = tracked_alloc(4096);
      tracked_free(b, 4096);
    }
  }
  p.stop();
  const prof::ProfileResult r = p.result();
  const auto ka = analysis::key_averages(r);
  const auto* region = row(ka, "parallel_region");
  ASSERT_TRUE(region);
  int64_t on_workers = 0;  // a team of two may still run on one thread; then the master's block is billed
  for (const auto& t : r.threads)
    for (const auto& m : t.mem)
      if (m.delta > 0 && m.zone < 0) on_workers += m.delta;
  EXPECT_EQ(ka.outside_zones_bytes, on_workers);
  EXPECT_EQ(region->mem_bytes + ka.outside_zones_bytes, 2 * 4096);
  const std::string table = report::table(ka);
  EXPECT_EQ(table.find("Memory outside zones") != std::string::npos, on_workers > 0) << table;
}

TEST(Profiler, FlashScratchIsBilledToTheKernelOnEveryIsa) {
  // The flash kernel's per-thread scratch is allocated by the calling thread (ThreadScratch), so its zone
  // holds all of it and nothing is left outside zones, whichever body runs.
  for (Isa isa : available_isas()) {
    IsaOverride use(isa);
    const NaiveRun run = profile_variant("flash", DType::BF16, 1, 4, 300, 64);
    const auto ka = analysis::key_averages(run.result);
    const auto* k = row(ka, "flash_attention_fwd");
    ASSERT_TRUE(k) << isa_name(isa);
    EXPECT_EQ(ka.outside_zones_bytes, 0) << isa_name(isa);
    const int64_t out = 4 * 300 * 64 * 2 + 4 * 300 * 4;  // O in bf16 and the fp32 logsumexp
    EXPECT_GT(k->self_mem_bytes, out) << isa_name(isa);  // the outputs and the scratch
    EXPECT_EQ(ka.peak_bytes - ka.start_bytes, k->self_mem_bytes) << isa_name(isa);
  }
}

TEST(Profiler, SdpaEntryPointsRecordQueryKeyAndValueShapes) {
  // torch records every input of _scaled_dot_product_*; so does attnprof (v was missing from math, all three
  // from the flash entry point, so --group-by-input-shape showed [] for it).
  for (const char* name : {"sdpa-math", "sdpa-flash"}) {
    const NaiveRun run = profile_variant(name, DType::F32, 1, 2, 48, 16);
    const auto ka = analysis::key_averages(run.result, {.group_by_input_shape = true});
    const std::string zone = std::string(name) == "sdpa-math" ? "_scaled_dot_product_attention_math"
                                                              : "_scaled_dot_product_flash_attention";
    const auto* r = row(ka, zone);
    ASSERT_TRUE(r) << name;
    EXPECT_EQ(r->input_shapes, "[[1, 2, 48, 16], [1, 2, 48, 16], [1, 2, 48, 16]]") << name;
  }
}

TEST(Profiler, SoftwareCountersNeverCrashAndTaskClockIsOnAnnotationsOnly) {
  prof::Profiler p({.software_counters = true});
  p.start();
  {
    ATTNPROF_ANNOTATE("annotated");
    ATTNPROF_OP_ZONE(z, "plain_op");
    Tensor t = Tensor::zeros({1, 1, 256, 1024}, DType::F32);  // touches fresh pages
  }
  p.stop();
  const prof::ProfileResult r = p.result();
  EXPECT_NE(r.counters_note.find("hardware counters"), std::string::npos) << r.counters_note;
  ASSERT_TRUE(r.counters_recorded) << r.counters_note;  // page faults come from getrusage, always there
  const auto ka = analysis::key_averages(r);
  EXPECT_EQ(row(ka, "plain_op")->task_clock_ns, -1);
  EXPECT_GE(row(ka, "plain_op")->page_faults, 0);
  EXPECT_GE(row(ka, "annotated")->page_faults, row(ka, "plain_op")->page_faults);  // inclusive of its op
  EXPECT_EQ(r.task_clock_recorded, r.counters_note.find("no task-clock") == std::string::npos) << r.counters_note;
  if (r.task_clock_recorded)
    EXPECT_GE(row(ka, "annotated")->task_clock_ns, 0);
  else
    EXPECT_EQ(row(ka, "annotated")->task_clock_ns, -1);
}

TEST(Profiler, AnOpsPageFaultsCountEveryThreadsFirstTouches) {
  // An op whose OpenMP workers first-touch a fresh mapping: every 4 KiB page faults once, on whichever thread
  // touches it, and the op's count must hold them all (the calling thread's own count would hold about half).
  constexpr size_t kPages = 4096, kPage = 4096;
  void* m = ::mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  ::madvise(m, kPages * kPage, MADV_NOHUGEPAGE);  // one fault per page, not one per 2 MiB
  auto* bytes = static_cast<volatile char*>(m);
  prof::Profiler p({.software_counters = true});
  p.start();
  {
    ATTNPROF_OP_ZONE(w, "wrapper");  // a composite op: its faults are its child's, none its own
    ATTNPROF_OP_ZONE(z, "first_touch");
#pragma omp parallel for num_threads(2) schedule(static)
    for (int64_t i = 0; i < int64_t(kPages); ++i) bytes[size_t(i) * kPage] = 1;
  }
  p.stop();
  ::munmap(m, kPages * kPage);
  const prof::ProfileResult r = p.result();
  ASSERT_TRUE(r.counters_recorded) << r.counters_note;
  const auto ka = analysis::key_averages(r);
  const auto* op = row(ka, "first_touch");
  const auto* wrapper = row(ka, "wrapper");
  ASSERT_TRUE(op && wrapper);
  EXPECT_GE(op->page_faults, int64_t(kPages));
  // The op's own, counted once: the few hundred over are thread stacks and, under AddressSanitizer, the shadow
  // pages its checks of the stores touch (4652 seen there); ThreadSanitizer's shadow pages on top (8301 seen).
  EXPECT_LT(op->page_faults, int64_t(kPages) * (1 + kShadowPagesPerPage) + int64_t(kPages) / 4);
  EXPECT_EQ(op->self_page_faults, op->page_faults);   // a leaf's faults are all its own
  EXPECT_GE(wrapper->page_faults, op->page_faults);
  EXPECT_LT(wrapper->self_page_faults, 64);  // what ran between the two zones' edges, not the child's thousands
}

TEST(Profiler, TaskClockNeverExceedsTheZonesOwnTime) {
  // One thread's CPU time over an interval cannot exceed the interval. Short annotations show a counter read
  // outside [t0, t1] at once: the read costs about a microsecond, as much as the zone itself.
  prof::Profiler p({.software_counters = true});
  p.start();
  for (int i = 0; i < 200; ++i) {
    ATTNPROF_ANNOTATE("short");
    ATTNPROF_OP_ZONE(z, "inner_op");
  }
  p.stop();
  const prof::ProfileResult r = p.result();
  if (!r.task_clock_recorded) GTEST_SKIP() << r.counters_note;
  int64_t measured = 0;
  for (const prof::ZoneEvent& e : r.threads.at(0).zones) {
    if (std::string(e.name) != "short") continue;
    ASSERT_GE(e.task_clock_ns, 0);
    // Task-clock and the zone's timestamps come from different clocks: allow 100 ns between them.
    EXPECT_LE(double(e.task_clock_ns), r.ns(e.t1 - e.t0) + 100.0);
    ++measured;
  }
  EXPECT_EQ(measured, 200);
  const auto ka = analysis::key_averages(r);
  EXPECT_LE(double(row(ka, "short")->task_clock_ns), row(ka, "short")->total_ns + 200 * 100.0);
}

TEST(Profiler, CountersAreReadOutsideAnOpsTimeAndTheirCostIsCalibrated) {
  // Each zone's two getrusage calls (about a microsecond each) sit outside its [t0, t1]: an empty op zone
  // stays as short as it is without counters, instead of carrying microseconds of its own counting into its
  // self time. The reads land in the parent's time, and the session's calibration, made with counters on,
  // is what the aggregation takes off per nested zone.
  // A preemption inside the loop lands in the parent's self time (milliseconds on a loaded machine): of up to
  // three recordings, the first whose parent kept less than its zones' counting is checked.
  auto record = [] {
    prof::Profiler p({.software_counters = true});
    p.start();
    {
      ATTNPROF_OP_ZONE(parent, "parent_op");
      for (int i = 0; i < 200; ++i) {
        ATTNPROF_OP_ZONE(z, "empty_op");
      }
    }
    p.stop();
    return p.result();
  };
  prof::ProfileResult r = record();
  for (int attempt = 1; attempt < 3; ++attempt) {
    const auto ka = analysis::key_averages(r);
    if (row(ka, "parent_op")->self_ns < 200 * r.zone_overhead_ns / 2) break;
    r = record();
  }
  ASSERT_TRUE(r.counters_recorded) << r.counters_note;
  EXPECT_GT(r.zone_overhead_ns, prof::calibrated_zone_overhead_ns(false));  // the counting calibration's
  std::vector<double> own;
  for (const prof::ZoneEvent& e : r.threads.at(0).zones)
    if (std::string(e.name) == "empty_op") {
      EXPECT_GE(e.page_faults, 0);  // measured, as a delta
      own.push_back(r.ns(e.t1 - e.t0));
    }
  ASSERT_EQ(own.size(), 200u);
  std::sort(own.begin(), own.end());
  // A ratio within one run, not a time: the median empty zone against what one zone's counting costs.
  EXPECT_LT(own[own.size() / 2] * 4, r.zone_overhead_ns)
      << "median empty zone " << own[own.size() / 2] << " ns, counted zone overhead " << r.zone_overhead_ns << " ns";
#ifndef ATTNPROF_SANITIZED  // a sanitizer intercepts getrusage, and its cost varies several-fold call to call
  const auto ka = analysis::key_averages(r);
  // The parent's self time keeps what ran between its children, not 200 zones' counting.
  EXPECT_LT(row(ka, "parent_op")->self_ns, 200 * r.zone_overhead_ns / 2);
#endif

  prof::Profiler off;
  off.start();
  { ATTNPROF_OP_ZONE(z, "empty_op"); }
  off.stop();
  EXPECT_EQ(off.result().zone_overhead_ns, prof::calibrated_zone_overhead_ns(false));
}

TEST(Profiler, RecordShapesOption) {
  Tensor a = Tensor::zeros({1, 1, 8, 4}, DType::F32), b = Tensor::zeros({1, 1, 4, 8}, DType::F32);
  for (bool shapes : {true, false}) {
    prof::Profiler p({.record_shapes = shapes});
    p.start();
    ops::matmul(a, b);
    p.stop();
    const prof::ProfileResult r = p.result();
    const prof::ZoneEvent& z = r.threads.at(0).zones.at(0);
    EXPECT_STREQ(z.name, "matmul");
    EXPECT_EQ(z.n_shapes, shapes ? 2 : 0);
    EXPECT_DOUBLE_EQ(z.cost.flops, 2.0 * 8 * 8 * 4);  // the cost model is recorded either way
  }
}

TEST(Profiler, CountersOffByDefault) {
  prof::Profiler p;
  p.start();
  { ATTNPROF_ANNOTATE("a"); }
  p.stop();
  EXPECT_FALSE(p.result().counters_recorded);
  EXPECT_EQ(p.result().threads.at(0).zones.at(0).task_clock_ns, -1);
}

namespace {
std::vector<std::string> g_listened;
void listen_open(const char* name, const char*) noexcept { g_listened.push_back(std::string("+") + name); }
void listen_close() noexcept { g_listened.push_back("-"); }
constexpr prof::ZoneListener kListener{listen_open, listen_close};
}  // namespace

TEST(Profiler, ZoneListenerSeesEveryRecordedZoneInOrder) {
  g_listened.clear();
  prof::set_zone_listener(&kListener);
  ASSERT_EQ(prof::zone_listener(), &kListener);
  { ATTNPROF_ANNOTATE("not_recorded"); }  // the profiler is not recording: no zone, no call
  prof::Profiler p;
  p.start();
  {
    ATTNPROF_ANNOTATE("outer");
    { ATTNPROF_OP_ZONE(z, "inner"); }
    ATTNPROF_ANNOTATE_DYN(d, std::string("dynamic"));
  }
  p.stop();
  prof::set_zone_listener(nullptr);
  { ATTNPROF_ANNOTATE("after"); }
  EXPECT_EQ(g_listened, (std::vector<std::string>{"+outer", "+inner", "-", "+dynamic", "-", "-"}));
  // The listener does not change what is recorded.
  const prof::ProfileResult r = p.result();
  size_t zones = 0;
  for (const auto& t : r.threads) zones += t.zones.size();
  EXPECT_EQ(zones, 3u);
  EXPECT_EQ(prof::zone_listener(), nullptr);
}

TEST(Profiler, WorkerBuffersAreMadeAndMappedInAtStartNotInTheFirstOp) {
  // OpenMP workers that have never recorded (a team size no other test uses, its threads made before the
  // session): start() makes and maps in each one's buffer, so their first shares inside an op fault nothing of
  // the profiler's there. Made on first use instead, each worker's zone, work and stack vectors fault in the op.
  constexpr int kTeam = 7;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(kTeam);
#pragma omp parallel
  { (void)omp_get_thread_num(); }
  prof::Profiler p({.software_counters = true});
  p.start();
  const size_t buffers_at_start = prof::detail::all_buffers().size();
  for (int round = 0; round < 3; ++round) {
    ATTNPROF_OP_ZONE(op, "op");
    ATTNPROF_PARALLEL_REGION(region);
#pragma omp parallel
    {
      ATTNPROF_WORK_SHARE(share, region);
      share.add_items(1);
    }
  }
  p.stop();
  omp_set_num_threads(threads);
  EXPECT_EQ(prof::detail::all_buffers().size(), buffers_at_start) << "no buffer made inside the op";
  const prof::ProfileResult r = p.result();
  ASSERT_TRUE(r.counters_recorded) << r.counters_note;
  size_t workers = 0;
  for (const prof::ThreadTrace& t : r.threads) workers += !t.work.empty();
  EXPECT_EQ(workers, size_t(kTeam)) << "every thread of the team recorded its shares";
  const auto ka = analysis::key_averages(r);
  const auto* op = row(ka, "op");
  ASSERT_TRUE(op);
  EXPECT_LE(op->page_faults, (kTeam - 1) * (kThreadSanitizer ? 4 : 1)) << "over 3 calls of a 7-thread region";
}

TEST(Profiler, EventBufferPagesAreNotBilledToTheZonesThatFillThem) {
  // Each zone's event is written into a buffer reserved at start(). Were its pages first touched by the events
  // themselves, every ~17th zone would fault inside its parent (the event is written before the child's t0),
  // and the parent's self time and self page faults would hold faults that are the profiler's, not the op's.
  constexpr int kZones = 4000;
  prof::Profiler p({.software_counters = true});
  p.start();
  {
    ATTNPROF_OP_ZONE(parent, "parent");
    for (int i = 0; i < kZones; ++i) {
      ATTNPROF_OP_ZONE(leaf, "leaf");
    }
  }
  p.stop();
  const prof::ProfileResult r = p.result();
  ASSERT_TRUE(r.counters_recorded) << r.counters_note;
  const auto ka = analysis::key_averages(r);
  const auto* parent = row(ka, "parent");
  ASSERT_TRUE(parent);
  // The pages the events fill, had each faulted on its first event (4 KiB pages: the buffer is not a huge-page
  // candidate unless THP is "always"); under AddressSanitizer its checks may read shadow pages of up to an
  // eighth as many. Under ThreadSanitizer the events' writes still first-touch its shadow of those pages, which
  // nothing maps in ahead (468 faults seen, against 702 had the pages themselves faulted too).
  const int64_t event_pages = int64_t(kZones) * int64_t(sizeof(prof::ZoneEvent)) / 4096;
  ASSERT_GT(event_pages, 100);
  EXPECT_LT(parent->self_page_faults, event_pages * kShadowPagesPerPage + event_pages / 4)
      << "of " << event_pages << " pages the events filled";
}

// The calling thread's buffers grow between steps, never inside one: after each step() they hold at least two
// more steps like the last. A step of 3,000 zones outgrows the 65,536 reserved up front by the 22nd step.
TEST(Profiler, BuffersGrowBetweenStepsNotInsideThem) {
  prof::Profiler p;
  p.start();
  prof::detail::ThreadBuffer* b = prof::detail::thread_buffer();
  const size_t reserved = b->zones.capacity();
  constexpr size_t kPerStep = 3000;
  for (int step = 0; step < 40; ++step) {
    const size_t before = b->zones.size();
    const void* data = b->zones.data();
    for (size_t i = 0; i < kPerStep; ++i) {
      ATTNPROF_OP_ZONE(z, "op");
    }
    ASSERT_EQ(b->zones.data(), data) << "the buffer moved inside step " << step;
    ASSERT_EQ(b->zones.size(), before + kPerStep);
    p.step();
    ASSERT_GE(b->zones.capacity() - b->zones.size(), 2 * kPerStep) << "after step " << step;
  }
  EXPECT_GT(b->zones.capacity(), reserved) << "grown past what was reserved up front";
  p.stop();
  const auto ka = analysis::key_averages(p.result());
  ASSERT_TRUE(row(ka, "op"));
  EXPECT_EQ(row(ka, "op")->calls, int64_t(40 * kPerStep));
}

TEST(Profiler, PrepareMakesTheBuffersOutsideTheHeapAndHoldsTheSession) {
  // prepare() does what start() allocates, ahead of a caller's warm-up forwards, and its event buffers are
  // mapped pages of their own (page-aligned, as no heap block is): reserved in the malloc heap, they would
  // take the holes the program's freed buffers left there, and the first recorded forwards would get fresh
  // pages (and their faults) that the unprofiled program does not.
  const long page = ::sysconf(_SC_PAGESIZE);
  {
    prof::Profiler p({.schedule = {.wait = 1, .warmup = 1, .active = 2}});
    p.prepare();
    p.prepare();  // once is enough; again is a no-op
    prof::Profiler other;
    EXPECT_THROW(other.start(), attnprof::Error) << "a prepared session is held";
    for (prof::detail::ThreadBuffer* b : prof::detail::all_buffers()) {
      SCOPED_TRACE(b->name);
      for (const void* data : {static_cast<const void*>(b->zones.data()), static_cast<const void*>(b->mem.data()),
                               static_cast<const void*>(b->work.data())})
        if (data) EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % uintptr_t(page), 0u);
      EXPECT_GE(b->zones.capacity(), 4096u);
    }
    // Recording begins at start(), not at prepare(): a zone in between is not kept.
    { ATTNPROF_OP_ZONE(before, "before_start"); }
    p.start();
    for (int i = 0; i < 4; ++i) {
      { ATTNPROF_OP_ZONE(op, "op"); }
      p.step();
    }
    p.stop();
    const auto ka = analysis::key_averages(p.result());
    EXPECT_FALSE(row(ka, "before_start"));
    ASSERT_TRUE(row(ka, "op"));
    EXPECT_EQ(row(ka, "op")->calls, 2);
  }
  {  // A session prepared and never started is released when its profiler goes.
    prof::Profiler p;
    p.prepare();
  }
  prof::Profiler again;
  EXPECT_NO_THROW(again.start());
  again.stop();
}
