// Reporters over one profile: the torch-layout table (golden against a real torch 1.13 table), the Chrome
// trace (parsed and checked against the Trace Event rules), gzip, atomic writes, the JSON summary.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <filesystem>
#include <functional>
#include <regex>
#include <set>
#include <sstream>

#include "attnprof/allocator.h"
#include "attnprof/analysis.h"
#include "attnprof/attention.h"
#include "attnprof/error.h"
#include "attnprof/profiler.h"
#include "attnprof/report.h"
#include "io/atomic_file.h"
#include "io/file.h"
#include "child_process.h"
#include "csv_reader.h"
#include "trace_checker.h"

using namespace attnprof;
namespace fs = std::filesystem;

namespace {

analysis::OpStats op(const char* name, double self_us, double total_us, int64_t calls, int64_t mem, int64_t self_mem,
                     double flops = 0) {
  analysis::OpStats s;
  s.name = name;
  s.category = "cpu_op";
  s.self_ns = self_us * 1e3;
  s.total_ns = total_us * 1e3;
  s.calls = calls;
  s.mem_bytes = mem;
  s.self_mem_bytes = self_mem;
  s.cost.flops = flops;
  return s;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// A small real profile: the naive variant at [1,2,32,16] fp32 causal, inside an annotation.
prof::ProfileResult naive_profile() {
  const Variant& var = find_variant("naive");
  Tensor q = Tensor::empty({1, 2, 32, 16}, DType::F32), k = q.clone(), v = q.clone();
  fill_randn(q, 1);
  fill_randn(k, 2);
  fill_randn(v, 3);
  AttnOptions opt{.is_causal = true};
  auto runner = var.prepare(AttnProblem::from(q, k, v, opt), opt);
  prof::Profiler p;
  p.set_metadata("variant", var.name);
  p.start();
  {
    prof::VariantScope vs(var.name);
    ATTNPROF_ANNOTATE_DYN(z, var.annotation);
    runner->run(q, k, v);
  }
  p.stop();
  return p.result();
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "attnprof-report-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, ec);
    fs::remove_all(path, ec);
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
    return out;
  }
};

std::string gunzip_file(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  EXPECT_TRUE(f);
  if (!f) return {};
  std::string out;
  char buf[1 << 14];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  gzclose(f);
  return out;
}

}  // namespace

TEST(Format, TimesAndBytesAsTorchPrintsThem) {
  EXPECT_EQ(report::format_time_ns(521'000), "521.000us");
  EXPECT_EQ(report::format_time_ns(4'280'000), "4.280ms");
  EXPECT_EQ(report::format_time_ns(1.5e9), "1.500s");
  EXPECT_EQ(report::format_time_ns(0), "0.000us");
  EXPECT_EQ(report::format_bytes(1310720), "1.25 Mb");
  EXPECT_EQ(report::format_bytes(1048575), "1024.00 Kb");
  EXPECT_EQ(report::format_bytes(0), "0 b");
  EXPECT_EQ(report::format_bytes(1023), "1023 b");
  EXPECT_EQ(report::format_bytes(-2097152), "-2.00 Mb");
  EXPECT_EQ(report::format_bytes(int64_t(3) << 30), "3.00 Gb");
}

// The ratios the blog reads off one run, against naive where it ran (else the first row); rows more than 4x their
// roofline floor are named with where their time may have gone.
TEST(Format, ExponentsNeverRoundToASignedZero) {
  EXPECT_EQ(report::format_exponent(1.98731), "1.987");
  EXPECT_EQ(report::format_exponent(0.0), "0.000");
  EXPECT_EQ(report::format_exponent(-0.00012), "-1.2e-04");
  EXPECT_EQ(report::format_exponent(0.0004), "4.0e-04");
  EXPECT_EQ(report::format_exponent(-0.0005), "-0.001");  // 3 decimals keep its sign
  EXPECT_EQ(report::format_exponent(1.98731, 2), "1.99");
  EXPECT_EQ(report::format_exponent(-0.0012, 2), "-1.2e-03");
}

TEST(Format, SpeedUpsAndRowsFarFromTheirFloor) {
  using report::RowTime;
  EXPECT_EQ(report::speedup_line({{"naive", 148.5, 82.5}, {"inplace", 101.7, 72.7}, {"sdpa-math", 325.4, 145.2},
                                  {"flash", 38.4, 21.6}}),
            "Speed-up over naive (its ms per forward over each row's): inplace 1.46x, sdpa-math 0.46x, flash 3.87x.");
  // Without naive: the first row; ten and more with one decimal.
  EXPECT_EQ(report::speedup_line({{"inplace", 3.1, 1}, {"flash", 0.155, 0.075}}),
            "Speed-up over inplace (its ms per forward over each row's): flash 20.0x.");
  EXPECT_EQ(report::speedup_line({{"flash", 1, 1}}), "");
  // Under a tenth with three decimals: an 84x slowdown is not 0.01x.
  EXPECT_EQ(report::speedup_line({{"naive", 1, 1}, {"sdpa-math", 84, 1}}),
            "Speed-up over naive (its ms per forward over each row's): sdpa-math 0.012x.");
  // A ratio standing on a disturbed row (Busy, Noisy or off the CPU) is marked, and the mark explained once.
  EXPECT_EQ(report::speedup_line({{"naive", 10, 1}, {"inplace", 8, 1, -1, true}, {"flash", 2, 1}}),
            "Speed-up over naive (its ms per forward over each row's): inplace 1.25x*, flash 5.00x. *: either side's "
            "forwards shared the CPUs with other work, disagreed or ran off the CPU (the Busy, Noisy and Off the CPU "
            "lines): a ratio to re-measure before trusting.");
  EXPECT_EQ(report::speedup_line({}), "");
  // The blog's headline ratio, SDPA math against in-place, which the ratios over naive leave to the reader.
  EXPECT_EQ(report::blog_ratio_line({{"naive", 148.5, 82.5}, {"inplace", 101.7, 72.7}, {"sdpa-math", 325.4, 145.2}}),
            "Blog's ratio: sdpa-math 3.20x slower than inplace (on its A100: 3.7x slower).");
  // A disturbed side marks it; the speed-up line above it explains the mark, once.
  EXPECT_EQ(report::blog_ratio_line({{"inplace", 100, 1}, {"sdpa-math", 50, 1, -1, true}}),
            "Blog's ratio: sdpa-math 2.00x* faster than inplace (on its A100: 3.7x slower).");
  EXPECT_NE(report::speedup_line({{"inplace", 100, 1}, {"sdpa-math", 50, 1, -1, true}}).find("*: either side's"),
            std::string::npos);
  EXPECT_EQ(report::blog_ratio_line({{"naive", 1, 1}, {"sdpa-math", 3, 1}}), "");
  // The kernel's steps in one line; on disturbed forwards it says the split is wall time, to re-measure.
  analysis::OpPhases op;
  op.name = "flash_attention_fwd";
  op.steps = {{"load", 1e6, 0}, {"Q·Kᵀ", 3e6, 3e8}};
  EXPECT_EQ(report::phase_line("flash", op),
            "Inside flash's flash_attention_fwd (its threads' time): load 25 %, Q·Kᵀ 75 % at 100 GFLOP/s a thread.");
  EXPECT_NE(report::phase_line("flash", op, true).find("75 % at 100 GFLOP/s a thread. Its forwards were disturbed"),
            std::string::npos);
  const auto far = report::far_from_floor_notes(
      {{"naive", 2.574, 0.28759}, {"inplace", 0.310, 0.254}, {"flash", 1.0, std::nan("")}, {"x", 1.0, 0.0}}, false);
  ASSERT_EQ(far.size(), 1u);
  EXPECT_EQ(far[0].rfind("Far from the floor: naive took 2.574ms per forward, 9.0x its roofline floor of 287.590us: ", 0),
            0u)
      << far[0];
  EXPECT_NE(far[0].find("`attnprof profile --counters`"), std::string::npos);
  // Fixed costs are a cause only where the floor is small (under a millisecond), not at the blog's shape.
  EXPECT_NE(far[0].find("; fixed costs at a small shape; "), std::string::npos) << far[0];
  EXPECT_EQ(report::far_from_floor_notes({{"naive", 300, 70}}, false)[0].find("fixed costs"), std::string::npos);
  EXPECT_NE(report::far_from_floor_notes({{"naive", 5, 1}}, true)[0].find("too small to fill the GPU"),
            std::string::npos);
  EXPECT_TRUE(report::far_from_floor_notes({{"naive", 4, 1}}, false).empty()) << "4x is not past 4x";
  // The report's one line for a table that shows each row's ratio: the same rows, the same causes.
  EXPECT_EQ(report::far_from_floor_summary({{"naive", 9, 1}, {"inplace", 3, 1}, {"sdpa-math", 12.5, 2}}, false),
            "Far from the floor (past 4x its roofline floor, the × floor column): naive 9.0x, sdpa-math 6.2x. Their "
            "time went where the cost model does not look (fresh pages faulted in by the ops that allocate, which "
            "`attnprof profile --counters` counts per op; threads waiting on each other or on other work).");
  EXPECT_NE(report::far_from_floor_summary({{"naive", 9, 1}, {"sdpa-math", 12.5, 0.5}}, false)
                .find("counts per op; fixed costs at a small shape; threads"),
            std::string::npos);
  EXPECT_EQ(report::far_from_floor_summary({{"naive", 4, 1}}, true), "");
  // A row whose floor is compute (at most 1/4 of it memory time) computed below the peak: its own cause, and
  // with rows of both kinds each sentence names its rows.
  const auto compute = report::far_from_floor_notes({{"flash", 90, 19, 0.02}}, false);
  ASSERT_EQ(compute.size(), 1u);
  EXPECT_NE(compute[0].find("its time went to arithmetic below the peak (the work between its products, a fused "
                            "kernel's softmax and loads, which the Inside line of a flash row times"),
            std::string::npos) << compute[0];
  EXPECT_EQ(compute[0].find("faulted"), std::string::npos) << compute[0];
  EXPECT_NE(report::far_from_floor_notes({{"flash", 90, 19, 0.02}}, true)[0].find("tensor-core peak"), std::string::npos);
  EXPECT_EQ(report::far_from_floor_summary({{"naive", 9, 1, 0.6}, {"flash", 90, 19, 0.02}, {"sdpa-flash", 95, 19, 0.25}},
                                           false),
            "Far from the floor (past 4x its roofline floor, the × floor column): naive 9.0x, flash 4.7x, sdpa-flash "
            "5.0x. The time of naive went where the cost model does not look (fresh pages faulted in by the ops that "
            "allocate, which `attnprof profile --counters` counts per op; threads waiting on each other or on other "
            "work). The time of flash, sdpa-flash went to arithmetic below the peak "
            "(the work between its products, a fused kernel's softmax and loads, which the chart of the kernel's "
            "steps times; the products' own efficiency; threads waiting on other work).");
}

// A forward whose thread ran on a CPU for under 80 % of its wall was descheduled (or slept waiting): named, the
// worst three first, and counted as disturbed, as a Busy or Noisy one is; the shares survive a round trip
// through the JSON outputs, where a forward without its task-clock is null.
TEST(Format, OffCpuForwardsAreNamedAndDisturbTheirRatios) {
  using nlohmann::json;
  EXPECT_EQ(report::off_cpu_line("naive", {}, {3.0, 7.4}), "");
  EXPECT_EQ(report::off_cpu_line("naive", {0.99, -1.0}, {3.0, 7.4}), "");
  EXPECT_EQ(report::off_cpu_line("naive", {0.99, 0.41, 0.53, 0.54, 0.7}, {3.0, 7.419, 5.384, 5.536, 4.0}),
            "Off the CPU: naive's calling thread ran on a CPU for 41 % of forward 2's 7.419ms, 53 % of forward 3's "
            "5.384ms, 54 % of forward 4's 5.536ms and 1 more (its task-clock over the forward's wall; 4 of 5 "
            "forwards under 80 %): the scheduler gave its CPU to other work, or it slept waiting for its team, so "
            "those forwards' time is the machine's as much as the code's.");
  // One forward, just under the mark: rounded down, never printed as the mark itself.
  EXPECT_EQ(report::off_cpu_line("flash", {0.796}, {2.0}),
            "Off the CPU: flash's calling thread ran on a CPU for 79 % of forward 1's 2.000ms (its task-clock over "
            "the forward's wall; 1 of 1 forward under 80 %): the scheduler gave its CPU to other work, or it slept "
            "waiting for its team, so that forward's time is the machine's as much as the code's.");
  const std::vector<double> steady = {5.0, 5.1, 5.0};
  EXPECT_FALSE(report::is_disturbed(steady, std::nullopt, {0.99, 0.95, 0.9}));
  EXPECT_TRUE(report::is_disturbed(steady, std::nullopt, {0.99, 0.5, 0.9}));
  EXPECT_FALSE(report::is_disturbed(steady, std::nullopt, {-1.0, -1.0, -1.0}));
  EXPECT_TRUE(report::on_cpu_json({-1.0, -1.0}).is_null());
  const json j = report::on_cpu_json({0.5, -1.0});
  EXPECT_EQ(j, json({0.5, nullptr}));
  EXPECT_EQ(report::on_cpu_of(json{{"forward_on_cpu", j}}), (std::vector<double>{0.5, -1.0}));
  EXPECT_TRUE(report::on_cpu_of(json{{"forward_on_cpu", nullptr}}).empty());
}

// Forwards that shared the CPUs: steady, so no spread flags them, but slow. A Busy line names each subject
// whose other work took more than the CPUs its threads leave free (plus half a CPU), then the advice once; the
// figure survives a round trip through the JSON outputs, and a malformed one is no figure.
TEST(Format, BusyNotesNameEachSubjectThatSharedTheCpus) {
  using analysis::CpuSharing;
  EXPECT_DOUBLE_EQ(analysis::busy_mark(2, 2), 0.5);
  EXPECT_DOUBLE_EQ(analysis::busy_mark(1, 2), 1.5);
  EXPECT_DOUBLE_EQ(analysis::busy_mark(4, 2), 0.5);  // more threads than CPUs leave none free
  EXPECT_TRUE(report::timing_notes({{"flash", {10.0, 10.1}, CpuSharing{0.4, 2, 2}},
                                    {"naive", {5.0, 5.0}, CpuSharing{1.4, 2, 1}},
                                    {"inplace", {5.0, 5.0}, std::nullopt}},
                                   "a VM note")
                  .empty());
  const std::vector<std::string> busy =
      report::timing_notes({{"flash", {8.0, 8.0, 8.1}, CpuSharing{1.26, 2, 2}}, {"naive", {5.0}, CpuSharing{0.2, 2, 2}}},
                           "a VM note");
  ASSERT_EQ(busy.size(), 2u);
  EXPECT_EQ(busy[0], "Busy: other work used 1.3 of 2 CPUs while flash ran on 2 threads: its forwards waited for a "
                     "CPU, so its time is the machine's as much as the code's.");
  EXPECT_EQ(busy[1], "Re-run on an idle machine (or with fewer --threads, which leaves the other work a CPU) before "
                     "comparing it.");
  // More than three subjects that shared the CPUs: one line names them all, each with its figure.
  const std::vector<std::string> many = report::timing_notes(
      {{"naive at N=128", {1.0}, CpuSharing{1.04, 2, 2}}, {"naive at N=256", {1.0}, CpuSharing{1.8, 2, 2}},
       {"flash at N=128", {1.0}, CpuSharing{1.2, 2, 2}}, {"flash at N=256", {1.0}, CpuSharing{0.1, 2, 2}},
       {"flash at N=512", {1.0}, CpuSharing{1.5, 2, 2}}, {"not timed", {}, std::nullopt}},
      "");
  ASSERT_EQ(many.size(), 2u);
  // A subject with neither forwards nor a CPU-sharing figure (a run diff's side that did not run) is not counted.
  EXPECT_EQ(many[0], "Busy: other work used 1.0 to 1.8 of 2 CPUs while 4 of the 5 timed here ran on 2 threads: "
                     "naive at N=128 (1.0), naive at N=256 (1.8), flash at N=128 (1.2), flash at N=512 (1.5): their "
                     "forwards waited for a CPU, so their times are the machine's as much as the code's.");
  EXPECT_EQ(many[1], "Re-run on an idle machine (or with fewer --threads, which leaves the other work a CPU) before "
                     "comparing them.");
  // Thread counts that differ go with each subject.
  const std::vector<std::string> mixed = report::timing_notes(
      {{"a", {1.0}, CpuSharing{1.6, 2, 1}}, {"b", {1.0}, CpuSharing{1.6, 2, 1}}, {"c", {1.0}, CpuSharing{1.2, 2, 2}},
       {"d", {1.0}, CpuSharing{1.6, 2, 1}}},
      "");
  EXPECT_EQ(mixed[0], "Busy: other work used 1.2 to 1.6 of 2 CPUs while 4 of the 4 timed here ran: a (1.6, 1 thread), "
                      "b (1.6, 1 thread), c (1.2, 2 threads), d (1.6, 1 thread): their forwards waited for a CPU, so "
                      "their times are the machine's as much as the code's.");
  // Busy and noisy together: both blocks, the machine's note only with the noisy one.
  const std::vector<std::string> both = report::timing_notes(
      {{"a", {1.0, 1.0}, CpuSharing{1.6, 2, 1}}, {"b", {1.0, 3.0}, std::nullopt}}, "a VM note");
  ASSERT_EQ(both.size(), 5u);
  EXPECT_EQ(both[0].rfind("Busy: other work used 1.6 of 2 CPUs while a ran on 1 thread:", 0), 0u) << both[0];
  EXPECT_EQ(both[1], "Re-run on an idle machine before comparing it.");
  EXPECT_EQ(both[2].rfind("Noisy: b took", 0), 0u) << both[2];
  EXPECT_EQ(both[4], "Note: a VM note.");
  // A stretch too short to judge is said so, once for all such subjects; a figure read back (window unknown) or a
  // long enough stretch that found nothing is silence.
  const double min_s = analysis::other_work_min_seconds();
  const std::vector<std::string> unjudged = report::timing_notes(
      {{"flash", {1.0, 1.0}, std::nullopt, 0.002}, {"naive", {1.0, 1.0}, std::nullopt, min_s / 2},
       {"inplace", {1.0, 1.0}, std::nullopt}, {"sdpa-math", {1.0, 1.0}, CpuSharing{0.1, 2, 2}, 1.0}},
      "");
  ASSERT_EQ(unjudged.size(), 1u);
  EXPECT_EQ(unjudged[0].rfind("Not judged: whether other work shared the CPUs with flash (2.000ms), naive (", 0), 0u)
      << unjudged[0];
  EXPECT_NE(unjudged[0].find("their warm-up and timed forwards took under the"), std::string::npos) << unjudged[0];
  EXPECT_TRUE(report::timing_notes({{"flash", {1.0, 1.0}, std::nullopt, min_s * 2}}, "").empty());

  const auto back = report::cpu_sharing_of({{"cpu_sharing", report::cpu_sharing_json(CpuSharing{1.25, 2, 2})}});
  ASSERT_TRUE(back);
  EXPECT_DOUBLE_EQ(back->other_cpus, 1.25);
  EXPECT_EQ(back->cpus, 2);
  EXPECT_EQ(back->threads, 2);
  EXPECT_TRUE(report::cpu_sharing_json(std::nullopt).is_null());
  for (const char* bad : {"null", "[]", R"({"other_cpus": -1, "cpus": 2, "threads": 2})",
                          R"({"other_cpus": "1", "cpus": 2, "threads": 2})", R"({"other_cpus": 1, "cpus": 0, "threads": 2})",
                          R"({"other_cpus": 1, "cpus": 2})",
                          // more other work than CPUs (a tick over every CPU is a short stretch's rounding)
                          R"({"other_cpus": 5, "cpus": 2, "threads": 2})", R"({"other_cpus": 1e300, "cpus": 2, "threads": 2})"})
    EXPECT_FALSE(report::cpu_sharing_of({{"cpu_sharing", nlohmann::json::parse(bad)}})) << bad;
  EXPECT_TRUE(report::cpu_sharing_of({{"cpu_sharing", nlohmann::json::parse(R"({"other_cpus": 2.6, "cpus": 2, "threads": 2})")}}));
  EXPECT_FALSE(report::cpu_sharing_of(nlohmann::json::object())) << "a record without the field";

  // Another process's readings (compare's peer): the machine's busy time less the process's own, per second.
  const auto peer = analysis::cpu_sharing(2.5, 1.0, 0.5, 2);
  ASSERT_TRUE(peer);
  EXPECT_DOUBLE_EQ(peer->other_cpus, 3.0);
  EXPECT_EQ(peer->threads, 2);
  EXPECT_EQ(peer->cpus, analysis::online_cpus());
  EXPECT_DOUBLE_EQ(analysis::cpu_sharing(1.0, 1.5, 1.0, 1)->other_cpus, 0.0) << "ticks, not negative work";
  EXPECT_FALSE(analysis::cpu_sharing(1.0, 0.5, 0.09, 1)) << "shorter than other_work_min_seconds()";
  EXPECT_GE(analysis::other_work_min_seconds(), 0.1);
  EXPECT_GE(analysis::other_work_min_seconds(), 2.0 * analysis::online_cpus() / double(::sysconf(_SC_CLK_TCK)) - 1e-12);
  for (const double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_FALSE(analysis::cpu_sharing(bad, 0.5, 1.0, 1)) << bad;
    EXPECT_FALSE(analysis::cpu_sharing(1.0, bad, 1.0, 1)) << bad;
    EXPECT_FALSE(analysis::cpu_sharing(1.0, 0.5, bad, 1)) << bad;
  }
  EXPECT_FALSE(analysis::cpu_sharing(1.0, 0.5, 1.0, 0)) << "no threads";
}

// Noisy forwards: one line per subject above 1.15x, the advice once (singular or plural), the machine's
// note last, and nothing at all when every subject is steady.
TEST(Format, NoisyNotesNameEachNoisySubjectOnce) {
  const std::string vm = "this VM gives freed memory back to its hypervisor";
  EXPECT_TRUE(report::timing_notes({{"flash", {10.0, 11.4, 10.2}}, {"naive", {5.0}}}, vm).empty());
  EXPECT_TRUE(report::timing_notes({}, vm).empty());

  std::vector<std::string> one = report::timing_notes({{"flash", {44.868, 82.651}}, {"naive", {10.0, 10.1}}}, "");
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one[0], "Noisy: flash took 44.868ms / 82.651ms per forward (slowest 1.84x the fastest).");
  EXPECT_EQ(one[1].rfind("Its median may stand on disturbed forwards", 0), 0u) << one[1];
  EXPECT_NE(one[1].find("re-run, or raise --iters, before comparing it."), std::string::npos) << one[1];
  // A profile under --schedule (which refuses --iters) names its own way to more forwards.
  const std::vector<std::string> scheduled =
      report::timing_notes({{"flash", {44.868, 82.651}}}, "", "raise the --schedule's ACTIVE or REPEAT");
  ASSERT_EQ(scheduled.size(), 2u);
  EXPECT_NE(scheduled[1].find("re-run, or raise the --schedule's ACTIVE or REPEAT, before comparing it."),
            std::string::npos) << scheduled[1];
  EXPECT_EQ(scheduled[1].find("--iters"), std::string::npos) << scheduled[1];
  // Many forwards: their range and median, not a line of every one.
  std::vector<double> many(20, 2.0);
  many[3] = 9.0;
  many[7] = 1.0;
  const std::vector<std::string> long_run = report::timing_notes({{"naive", many}}, "");
  ASSERT_EQ(long_run.size(), 2u);
  EXPECT_EQ(long_run[0], "Noisy: naive took 1.000ms to 9.000ms (median 2.000ms of 20) per forward (slowest 9.00x the "
                         "fastest).");
  // Just above the threshold: three decimals, so the line does not read "1.15x", which is not noisy.
  const std::vector<std::string> edge = report::timing_notes({{"flash", {10.0, 11.51}}}, "");
  ASSERT_EQ(edge.size(), 2u);
  EXPECT_EQ(edge[0], "Noisy: flash took 10.000ms / 11.510ms per forward (slowest 1.151x the fastest).");

  const std::vector<std::string> two =
      report::timing_notes({{"naive at N=512", {1.0, 2.0}}, {"flash at N=512", {1.0, 1.0}}, {"naive at N=1024", {3.0, 1.0}}}, vm);
  ASSERT_EQ(two.size(), 4u);
  EXPECT_EQ(two[0].rfind("Noisy: naive at N=512 took", 0), 0u) << two[0];
  EXPECT_EQ(two[1].rfind("Noisy: naive at N=1024 took 3.000ms / 1.000ms per forward (slowest 3.00x", 0), 0u) << two[1];
  EXPECT_EQ(two[2].rfind("Their medians may stand on disturbed forwards", 0), 0u) << two[2];
  EXPECT_EQ(two[3], "Note: " + vm + ".");
}

// The real torch 1.13 table from shared/reference, reproduced from the same numbers: every torch column,
// width, alignment, rule and the footer line. (Our own columns are switched off for this comparison.)
TEST(Table, MatchesTorchGoldenLayout) {
  const std::string golden =
      "------------------------  ------------  ------------  ------------  ------------  ------------  ------------  "
      "------------  ------------  ------------  \n"
      "                    Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg       CPU Mem  "
      "Self CPU Mem    # of Calls  Total KFLOPs  \n"
      "------------------------  ------------  ------------  ------------  ------------  ------------  ------------  "
      "------------  ------------  ------------  \n"
      "                attn_fwd        12.04%     521.000us        98.87%       4.280ms       4.280ms       2.25 Mb  "
      "    -2.00 Mb             1            --  \n"
      "            aten::matmul         3.16%     137.000us        40.84%       1.768ms     884.000us       1.25 Mb  "
      "         0 b             2            --  \n"
      "               aten::bmm        34.74%       1.504ms        35.67%       1.544ms     772.000us       1.25 Mb  "
      "     1.25 Mb             2     67108.864  \n"
      "       aten::masked_fill         0.69%      30.000us        15.41%     667.000us     667.000us       1.00 Mb  "
      "         0 b             1            --  \n"
      "           aten::softmax         0.21%       9.000us        15.02%     650.000us     650.000us       1.00 Mb  "
      "         0 b             1            --  \n"
      "          aten::_softmax        14.81%     641.000us        14.81%     641.000us     641.000us       1.00 Mb  "
      "     1.00 Mb             1            --  \n"
      "               aten::mul        12.36%     535.000us        14.07%     609.000us     609.000us       1.00 Mb  "
      "  1024.00 Kb             1       262.144  \n"
      "             aten::copy_         8.45%     366.000us         8.45%     366.000us     183.000us           0 b  "
      "         0 b             2            --  \n"
      "------------------------  ------------  ------------  ------------  ------------  ------------  ------------  "
      "------------  ------------  ------------  \n"
      "Self CPU time total: 4.329ms\n";
  analysis::KeyAverages ka;
  ka.rows = {op("aten::_reshape_alias", 10, 10, 1, 0, 0),  // below the row limit, but it sets the name width
             op("aten::copy_", 366, 366, 2, 0, 0),
             op("aten::mul", 535, 609, 1, 1048576, 1048575, 262144),
             op("aten::bmm", 1504, 1544, 2, 1310720, 1310720, 67108864),
             op("attn_fwd", 521, 4280, 1, 2359296, -2097152),  // torch's negative: we never produce one
             op("aten::matmul", 137, 1768, 2, 1310720, 0),
             op("aten::masked_fill", 30, 667, 1, 1048576, 0),
             op("aten::softmax", 9, 650, 1, 1048576, 0),
             op("aten::_softmax", 641, 641, 1, 1048576, 1048576)};
  ka.self_total_ns = 4'329'000;
  const std::string t = report::table(ka, {.sort_by = "cpu_time_total", .row_limit = 8, .extra_columns = false});
  ASSERT_GE(t.size(), golden.size());
  EXPECT_EQ(t.substr(0, golden.size()), golden);
  // Then attnprof's footer: the overhead that was subtracted.
  EXPECT_TRUE(std::regex_search(t.substr(golden.size()),
                                std::regex(R"(^Profiler overhead: [0-9.]+ ns per zone \(calibrated\), [0-9]+ zones, )"
                                           R"([0-9.]+(us|ms|s) subtracted from self and total times )"
                                           R"(\(each zone.s cost from the zones around it\)\n)")));
}

// Folded stacks from a hand-made profile (1 ns per tick, no zone overhead): each zone's self time under its
// enclosing zones, the steps an op timed inside its share as frames under it (their time off its own), a
// worker's share under its thread, ProfilerStep#N merged, ';' and line breaks out of names.
TEST(FoldedStacks, SelfTimesUnderTheirZonesAndWorkersSharesUnderTheirThread) {
  static constexpr std::array<const char*, 2> kSteps{"dot", "exp;sum"};
  prof::ProfileResult r;
  r.ns_per_tick = 1.0;
  r.zone_overhead_ns = 0.0;
  prof::ThreadTrace main_t, worker;
  main_t.name = "main";
  worker.name = "worker 1";
  auto zone = [](const char* name, uint64_t t0, uint64_t t1, int32_t parent, uint16_t depth) {
    prof::ZoneEvent e;
    e.name = name, e.category = "cpu_op", e.t0 = t0, e.t1 = t1, e.parent = parent, e.depth = depth;
    return e;
  };
  main_t.zones = {zone("ProfilerStep#3", 0, 100, -1, 0), zone("fwd", 10, 90, 0, 1), zone("op", 20, 60, 1, 2),
                  zone("ProfilerStep#4", 100, 130, -1, 0), zone("odd;name\nhere", 105, 125, 3, 1)};
  prof::WorkSpan mine{"op", 1, 20, 55, 0, 2};
  mine.n_phases = 2, mine.phase_names = kSteps.data(), mine.phase_ticks = {10, 20};
  prof::WorkSpan theirs{"op", 1, 21, 46, 0, -1};
  theirs.n_phases = 2, theirs.phase_names = kSteps.data(), theirs.phase_ticks = {5, 15};
  main_t.work = {mine};
  worker.work = {theirs, prof::WorkSpan{"softmax", 2, 70, 77, 0, -1}};
  r.threads = {main_t, worker};
  EXPECT_EQ(report::folded_stacks(r),
            "main;ProfilerStep* 30\n"          // 100 - 80 under the first step, 30 - 20 under the second
            "main;ProfilerStep*;fwd 40\n"      // 80 - 40
            "main;ProfilerStep*;fwd;op 10\n"   // 40, less its share's two steps
            "main;ProfilerStep*;fwd;op;dot 10\n"
            "main;ProfilerStep*;fwd;op;exp,sum 20\n"
            "main;ProfilerStep*;odd,name here 20\n"
            "worker 1;op 5\n"                  // the share's 25, less its steps
            "worker 1;op;dot 5\n"
            "worker 1;op;exp,sum 15\n"
            "worker 1;softmax 7\n");
  EXPECT_EQ(report::folded_stacks(prof::ProfileResult{}), "");
}

TEST(Table, OurColumnsShapesSortingLimitsAndTruncation) {
  analysis::KeyAverages ka;
  auto a = op("matmul", 100, 100, 2, 4096, 4096, 2e9);
  a.cost.bytes_read = 1e9;
  a.cost.bytes_written = 1e9;
  a.input_shapes = "[[8, 16, 1024, 64], [8, 16, 64, 1024]]";
  auto b = op(std::string(70, 'x').c_str(), 300, 300, 1, 0, 0);
  auto c = op("transpose", 1, 1, 5, 0, 0);  // no cost model: `--`
  ka.rows = {a, b, c};
  ka.self_total_ns = 401'000;
  ka.zones = 8;
  ka.zone_overhead_ns = 20.0;
  ka.overhead_subtracted_ns = 120.0;
  ka.counters_note = "hardware counters unavailable (No such file or directory: no PMU visible, e.g. a VM)";
  const std::string t = report::table(ka, {.sort_by = "self_cpu_time_total", .show_input_shapes = true});
  const auto ls = lines(t);
  ASSERT_GE(ls.size(), 9u);
  // Header order: torch's columns, Input Shapes, attnprof's Input Types, Total FLOPs (unit from the smallest
  // non-zero: 2e9 -> GFLOPs), then ours.
  EXPECT_TRUE(std::regex_search(
      ls[1], std::regex(R"(^ +Name +Self CPU % +Self CPU +CPU total % +CPU total +CPU time avg +CPU Mem +)"
                        R"(Self CPU Mem +# of Calls +Input Shapes +Input Types +Total GFLOPs +GFLOP/s +GB/s +FLOP/B  $)")))
      << ls[1];
  // Name column: capped at 55, a 70-char name cut to 52 + "...".
  EXPECT_EQ(ls[0].substr(0, 57), std::string(55, '-') + "  ");
  EXPECT_EQ(ls[3].substr(0, 55), std::string(52, 'x') + "...");  // sorted first by self time
  EXPECT_EQ(ls[3].size(), ls[0].size());
  // matmul: 2 GFLOP in 100 us = 20000 GFLOP/s; 2 GB / 100 us = 20000 GB/s; 1 FLOP/B.
  EXPECT_NE(ls[4].find("[[8, 16, 1024, 64], [8, 16, 64, 1024]]"), std::string::npos);
  EXPECT_TRUE(std::regex_search(ls[4], std::regex(R"( 2\.000 +20000\.000 +20000\.000 +1\.000  $)"))) << ls[4];
  EXPECT_TRUE(std::regex_search(ls[5], std::regex(R"(^ +transpose .* -- +-- +-- +--  $)"))) << ls[5];
  EXPECT_EQ(ls[6], ls[0]);
  EXPECT_EQ(ls[7], "Self CPU time total: 401.000us");
  EXPECT_EQ(ls[8], "Profiler overhead: 20.0 ns per zone (calibrated), 8 zones, 0.120us subtracted from self and total "
                   "times (each zone's cost from the zones around it)");
  EXPECT_EQ(ls[9], "Counters: " + ka.counters_note);
  // Every numeric column is 12 wide with two-space gaps: all rows have the rule's length.
  for (size_t i = 1; i <= 5; ++i) EXPECT_EQ(ls[i].size(), ls[0].size()) << i;

  // row_limit and sort keys
  const auto limited = lines(report::table(ka, {.sort_by = "count", .row_limit = 1}));
  EXPECT_NE(limited[3].find("transpose"), std::string::npos);
  EXPECT_EQ(limited[4], limited[0]);
  // As torch's row_limit: 0 shows no rows (the two rules meet under the header, then the totals), below 0 all.
  const auto none = lines(report::table(ka, {.sort_by = "count", .row_limit = 0}));
  EXPECT_EQ(none[3], none[0]);
  EXPECT_EQ(none[4].rfind("Self CPU time total: ", 0), 0u) << none[4];
  EXPECT_EQ(lines(report::table(ka, {.sort_by = "count", .row_limit = -1})), lines(report::table(ka, {.sort_by = "count"})));
  for (const char* key : {"cpu_time", "cpu_time_total", "self_cpu_time_total", "cpu_memory_usage",
                          "self_cpu_memory_usage", "count", "flops"})
    EXPECT_NO_THROW(report::table(ka, {.sort_by = key})) << key;
  EXPECT_THROW(report::table(ka, {.sort_by = "cuda_time_total"}), Error);
  EXPECT_THROW(report::table(ka, {.sort_by = "bogus"}), Error);
  // attnprof's columns sort too, descending; a row without a cost model sorts after every row with one.
  auto first_rows = [&](const char* key) {
    const auto ls = lines(report::table(ka, {.sort_by = key, .row_limit = 3}));
    std::vector<std::string> names;
    for (size_t i = 3; i < 6; ++i) names.push_back(ls[i].substr(ls[i].find_first_not_of(' '), 9));
    return names;
  };
  ka.rows.push_back(op("softmax", 50, 50, 1, 0, 0, 1e6));  // 20 GFLOP/s over 50 us, 1e6 bytes: 20 GB/s, 1 FLOP/B
  ka.rows.back().cost.bytes_read = 1e6;
  ka.rows.back().self_cost = ka.rows.back().cost;
  const std::vector<std::string> costed_first{"matmul   ", "softmax  "};
  for (const char* key : {"gflops", "gbs", "bytes"}) {
    const auto names = first_rows(key);
    EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 2), costed_first) << key;
  }
  EXPECT_EQ(first_rows("flop_per_byte")[0], "matmul   ");  // 2e9 / 2e9 = 1 against softmax's 1: stable, then order
  ka.rows.back().cost.flops = 1e7;  // 10 FLOP/B: now above matmul's 1
  ka.rows.back().self_cost = ka.rows.back().cost;
  EXPECT_EQ(first_rows("flop_per_byte")[0], "softmax  ");
  EXPECT_EQ(first_rows("gflops")[0], "matmul   ");  // 20000 GFLOP/s against 200
  // A costed op whose figure is 0 (a copy's GFLOP/s) still sorts before the row without a cost model.
  ka.rows.push_back(op("copy_", 50, 50, 1, 0, 0, 0));
  ka.rows.back().cost.bytes_read = 1e6;
  ka.rows.back().self_cost = ka.rows.back().cost;
  EXPECT_EQ(first_rows("gflops"), (std::vector<std::string>{"matmul   ", "softmax  ", "copy_    "}));
  try {
    report::table(ka, {.sort_by = "bogus"});
    FAIL() << "an unknown key was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gflops, gbs, flop_per_byte, bytes, page_faults, self_page_faults"),
              std::string::npos)
        << e.what();
  }
}

TEST(Table, BoundColumnFromTheRoofline) {
  analysis::KeyAverages ka;
  auto mem = op("softmax", 100, 100, 1, 0, 0, 1e6);
  mem.cost.bytes_read = 1e6;  // 1 FLOP/B: below the ridge
  mem.self_cost = mem.cost;
  auto comp = op("matmul", 100, 100, 1, 0, 0, 1e9);
  comp.cost.bytes_read = 1e6;  // 1000 FLOP/B: above it
  comp.self_cost = comp.cost;
  // The annotation holding both: 500.5 FLOP/B summed, above the ridge, yet half its ops are below it.
  auto ann = op("attn_fwd", 1, 201, 1, 0, 0, 1e9 + 1e6);
  ann.category = "user_annotation";
  ann.cost.bytes_read = 2e6;
  // A wrapper op whose cost is all its children's (as scaled_dot_product_attention over a matmul and a softmax).
  auto wrap = op("scaled_dot_product_attention", 1, 200, 1, 0, 0, 1e9 + 1e6);
  wrap.cost.bytes_read = 2e6;
  // An op that only moves bytes: 2e5 B in 100 us, 2 GB/s, held to the bandwidth alone (20 % of 10 GB/s).
  auto copy = op("copy_", 100, 100, 1, 0, 0);
  copy.cost.bytes_read = 1e5;
  copy.cost.bytes_written = 1e5;
  copy.self_cost = copy.cost;
  ka.rows = {ann, mem, comp, op("transpose", 1, 1, 1, 0, 0), wrap, copy};
  ka.self_total_ns = 203'000;
  analysis::MachinePeaks peaks;
  peaks.fp32_gflops = 100.0;
  peaks.bandwidth_gbs = 10.0;  // ridge at 10 FLOP/B
  peaks.sgemm_gflops = 90.0;
  const std::string t = report::table(ka, {.sort_by = "flops", .peaks = peaks});
  const auto ls = lines(t);
  EXPECT_TRUE(std::regex_search(ls[1], std::regex(R"(FLOP/B +Bound +% roof  $)"))) << ls[1];
  EXPECT_TRUE(std::regex_search(ls[3], std::regex(R"(^ +attn_fwd .* 500\.500 +-- +--  $)"))) << ls[3];
  EXPECT_TRUE(std::regex_search(ls[4], std::regex(R"(^ +scaled_dot_product_attention .* 500\.500 +-- +--  $)"))) << ls[4];
  // Each judged op with its GFLOP/s over the roof at its FLOP/B, the one figure here that is measured.
  for (size_t i : {5u, 6u}) {
    const analysis::OpStats& s = ka.rows[i == 5 ? 2 : 1];
    const analysis::RooflinePoint pt = analysis::place(s.cost, s.rate_ns(), peaks);
    EXPECT_NE(ls[i].find(fmt::format("{:>12}  {:>12}  ", pt.memory_bound ? "memory" : "compute",
                                     fmt::format("{:.1f}%", 100.0 * pt.fraction_of_attainable))),
              std::string::npos)
        << ls[i];
  }
  EXPECT_TRUE(std::regex_search(ls[5], std::regex(R"(^ +matmul .* compute +[0-9.]+%  $)"))) << ls[5];
  EXPECT_TRUE(std::regex_search(ls[6], std::regex(R"(^ +softmax .* memory +[0-9.]+%  $)"))) << ls[6];
  // Sorted by FLOPs, copy_ (a cost model that counts none) before transpose (no cost model), as the rate columns.
  EXPECT_TRUE(std::regex_search(ls[7], std::regex(R"(^ +copy_ .* memory +20\.0%  $)"))) << ls[7];
  EXPECT_TRUE(std::regex_search(ls[8], std::regex(R"(^ +transpose .* -- +--  $)"))) << ls[8];
  // The footer names what the verdicts were judged against, and what the FLOPs count.
  EXPECT_NE(t.find("Bound: each op's FLOP/B against the ridge of its own compute ceiling (fp32 100.0 GFLOP/s; "
                   "10.0 GB/s; ridge 10.00 FLOP/B); annotations, steps and wrappers whose cost is all their children's "
                   "(masked_fill, scaled_dot_product_attention) may hold ops of both kinds and get none. % roof: "),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("FLOPs: what each op computed"), std::string::npos) << t;
  EXPECT_EQ(t.find("measured on a busy machine"), std::string::npos) << t;
  // Peaks measured beside other work are low, which puts compute-bound ops over 100 %: the footer says why.
  peaks.measured_busy = "other work used 1.0 of 2 CPUs";
  EXPECT_NE(report::table(ka, {.sort_by = "flops", .peaks = peaks})
                .find("The peaks were measured on a busy machine (other work used 1.0 of 2 CPUs), so they may be low"),
            std::string::npos);
  // Without peaks there is no Bound column.
  EXPECT_EQ(lines(report::table(ka))[1].find("Bound"), std::string::npos);
  // The FLOPs line says by how much a matmul's count exceeds attention's convention, from the problem's share
  // of visible pairs: 2x causal with Nq = Nk, 4x at Nk = 2·Nq; nothing to exceed without a mask.
  EXPECT_NE(report::table(ka, {.peaks = peaks, .visible_share = 0.5})
                .find("counts 50.0 % of the Nq·Nk (query, key) pairs"),
            std::string::npos);
  EXPECT_NE(report::table(ka, {.peaks = peaks, .visible_share = 0.5}).find("the unfused matmuls count 2.00x"),
            std::string::npos);
  // A profile without a fused kernel is not told of one; one without a matmul (flash's) not of matmuls.
  EXPECT_EQ(report::table(ka, {.peaks = peaks, .visible_share = 0.5}).find("fused kernel"), std::string::npos);
  {
    analysis::KeyAverages fk;
    auto f = op("flash_attention_fwd", 1, 100, 1, 0, 0, 1e6);
    f.cost.bytes_read = 1e4;
    f.self_cost = f.cost;
    fk.rows = {f};
    fk.self_total_ns = 100'000;
    const std::string ft = report::table(fk, {.peaks = peaks, .visible_share = 0.5});
    EXPECT_EQ(ft.find("unfused matmuls"), std::string::npos) << ft;
    EXPECT_NE(ft.find("A fused kernel (flash_attention_fwd) counts by the convention."), std::string::npos) << ft;
  }
  EXPECT_NE(report::table(ka, {.peaks = peaks, .visible_share = 0.25}).find("the unfused matmuls count 4.00x"),
            std::string::npos);
  EXPECT_NE(report::table(ka, {.peaks = peaks, .visible_share = 1.0}).find("Without a mask every score is attention's"),
            std::string::npos);
  // --brief: no definitions, but a busy machine's low peaks are still said.
  const std::string brief = report::table(ka, {.peaks = peaks, .visible_share = 0.5, .definitions = false});
  for (const char* d : {"FLOPs: what each op", "Bound: each op's", "CPU Mem: bytes"})
    EXPECT_EQ(brief.find(d), std::string::npos) << d;
  EXPECT_NE(brief.find("Bound: against fp32 100.0 GFLOP/s and 10.0 GB/s (ridge 10.00 FLOP/B). Peaks measured on a busy "
                       "machine (other work used 1.0 of 2 CPUs)"),
            std::string::npos)
      << brief;
  EXPECT_NE(brief.find("Self CPU time total"), std::string::npos);
}

TEST(Csv, FieldsAreQuotedOnlyWhereTheyWouldSplitAndNumbersReadBack) {
  EXPECT_EQ(report::csv_field("matmul"), "matmul");
  EXPECT_EQ(report::csv_field(""), "");
  EXPECT_EQ(report::csv_field("[[1, 4], [4, 1]]"), "\"[[1, 4], [4, 1]]\"");
  EXPECT_EQ(report::csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(report::csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(report::csv_field("cr\r"), "\"cr\r\"");
  EXPECT_EQ(report::csv_line({"a", "b,c", ""}), "a,\"b,c\",\n");
  // Whatever a field holds, a reader gets it back whole.
  const std::vector<std::string> nasty = {"a,b", "\"", "\"\"", "x\ny", ",", "", "plain", "\r\n"};
  const auto back = parse_csv(report::csv_line(nasty));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0], nasty);
  for (double v : {0.1, 1.0 / 3.0, 123456789.123456789, 1e-300, 6.02e23, 0.0, -2.5, 4.0})
    EXPECT_EQ(std::stod(report::csv_number(v)), v) << report::csv_number(v);
  EXPECT_EQ(report::csv_number(4.0), "4");
  EXPECT_EQ(report::csv_number(std::nan("")), "");
  EXPECT_EQ(report::csv_number(std::numeric_limits<double>::infinity()), "");
  EXPECT_EQ(report::csv_value(nlohmann::json()), "");
  EXPECT_EQ(report::csv_value(nlohmann::json("a,b")), "a,b");  // quoted by csv_line, not here
  EXPECT_EQ(report::csv_value(nlohmann::json(3)), "3");
  EXPECT_EQ(report::csv_value(nlohmann::json(2.5)), "2.5");
  EXPECT_EQ(report::csv_value(nlohmann::json(true)), "true");
}

// compare.csv: compare.json's rows, each that ran with its speed-up over the row the text's speed-up line divides
// by; skipped and failed rows with their notes and no speed-up; the peer's rows after attnprof's.
TEST(Csv, CompareRowsWithTheTextsSpeedUps) {
  using nlohmann::json;
  json c = {{"kind", "compare"},
            {"variants",
             {{{"name", "naive"}, {"status", "ok"}, {"ms", 100.0}, {"gflops", 1.5}, {"pct_peak", 2.0}, {"note", ""}},
              {{"name", "inplace"}, {"status", "ok"}, {"ms", 50.0}, {"gflops", 3.0}, {"note", ""}},
              {{"name", "sdpa-math"}, {"status", "skipped"}, {"ms", nullptr}, {"note", "over the budget, by 2 GB"}},
              {{"name", "flash"}, {"status", "failed"}, {"ms", nullptr}, {"note", "max error \"3.5\""}}}},
            {"peers",
             {{"rows",
               {{{"name", "torch naive"}, {"status", "ok"}, {"ms", 200.0}, {"note", ""}},
                {{"name", "torch sdpa"}, {"status", "failed"}, {"ms", 10.0}, {"note", "wrong"}}}}}}};
  const auto rows = parse_csv(report::compare_csv(c));
  ASSERT_EQ(rows.size(), 7u);
  const auto at = [&](const char* name) { return csv_column(rows[0], name); };
  EXPECT_EQ(rows[0].front(), "source");
  EXPECT_EQ(rows[0].back(), "note");
  EXPECT_EQ(rows[1][at("name")], "naive");
  EXPECT_EQ(rows[1][at("speedup")], "1");
  EXPECT_EQ(rows[2][at("speedup")], "2");
  EXPECT_EQ(rows[2][at("speedup_base")], "naive");
  EXPECT_EQ(rows[2][at("pct_peak")], "");  // not in that row: empty, as null is
  EXPECT_EQ(rows[3][at("status")], "skipped");
  EXPECT_EQ(rows[3][at("ms")], "");
  EXPECT_EQ(rows[3][at("speedup")], "");
  EXPECT_EQ(rows[3][at("note")], "over the budget, by 2 GB");
  EXPECT_EQ(rows[4][at("note")], "max error \"3.5\"");
  EXPECT_EQ(rows[5][at("source")], "torch");
  EXPECT_EQ(rows[5][at("speedup")], "0.5");
  EXPECT_EQ(rows[6][at("ms")], "10");      // a failed peer row keeps its time, as compare.json does,
  EXPECT_EQ(rows[6][at("speedup")], "");  // and gets no speed-up
  // Without naive, the first row that ran is the base, as in the text; with one row that ran, none.
  c["variants"].erase(0);
  c["variants"][2].update({{"status", "ok"}, {"ms", 25.0}});  // flash
  const auto no_naive = parse_csv(report::compare_csv(c));
  EXPECT_EQ(no_naive[1][at("speedup_base")], "inplace");
  EXPECT_EQ(no_naive[3][at("speedup")], "2");
  EXPECT_EQ(no_naive[4][at("speedup")], "0.25");
  c.erase("peers");
  c["variants"][2]["status"] = "failed";
  const auto one = parse_csv(report::compare_csv(c));
  EXPECT_EQ(one[1][at("speedup")], "");
  EXPECT_EQ(report::speedup_line({{"inplace", 50.0, 0.0}}), "");
}

TEST(Table, CsvHasEveryRowInTheTablesOrderUnderOneFixedHeader) {
  analysis::KeyAverages ka;
  auto mem = op("softmax", 100, 100, 2, 4096, 4096, 1e6);
  mem.cost.bytes_read = 1e6;  // 1 FLOP/B: below the ridge
  mem.self_cost = mem.cost;
  mem.input_shapes = "[[8, 16, 1024, 1024]]";
  mem.input_types = "[bf16]";
  auto comp = op("matmul", 100, 100, 1, 0, 0, 1e9);
  comp.cost.bytes_read = 1e6;  // 1000 FLOP/B: above it
  comp.self_cost = comp.cost;
  comp.page_faults = comp.self_page_faults = 8;
  auto ann = op("attn_fwd", 1, 201, 1, 4096, 0, 1e9 + 1e6);
  ann.category = "user_annotation";
  ann.cost.bytes_read = 2e6;
  ann.task_clock_ns = 200'000;
  ka.rows = {ann, mem, comp, op("transpose", 1, 1, 1, 0, 0)};
  ka.self_total_ns = 202'000;
  analysis::MachinePeaks peaks;
  peaks.fp32_gflops = 100.0;
  peaks.bandwidth_gbs = 10.0;
  const report::TableOptions opt{.sort_by = "flops", .row_limit = 1, .show_input_shapes = true, .peaks = peaks};
  const auto rows = parse_csv(report::table_csv(ka, opt));
  const std::vector<std::string> header = {
      "name", "category", "input_shapes", "input_types", "calls", "self_cpu_us", "self_cpu_pct", "cpu_total_us",
      "cpu_total_pct", "cpu_avg_us", "self_cuda_us", "self_cuda_pct", "cuda_total_us", "cuda_avg_us",
      "cpu_mem_bytes", "self_cpu_mem_bytes", "cuda_mem_bytes", "self_cuda_mem_bytes", "flops", "bytes",
      "gflops_per_s", "gb_per_s", "flop_per_byte", "bound", "pct_roof", "task_clock_us", "self_page_faults",
      "page_faults"};
  ASSERT_EQ(rows.size(), 5u);  // every row, whatever row_limit
  EXPECT_EQ(rows[0], header);
  for (const auto& r : rows) EXPECT_EQ(r.size(), header.size());
  auto col = [&](size_t row, const char* name) {
    return rows[row][size_t(std::find(header.begin(), header.end(), name) - header.begin())];
  };
  // The table's order (by FLOPs), ties in key_averages' order.
  std::vector<std::string> names, table_names;
  for (size_t i = 1; i < rows.size(); ++i) names.push_back(col(i, "name"));
  EXPECT_EQ(names, (std::vector<std::string>{"attn_fwd", "matmul", "softmax", "transpose"}));
  const auto ls = lines(report::table(ka, {.sort_by = "flops", .peaks = peaks}));
  for (size_t i = 3; i < 7; ++i) table_names.push_back(ls[i].substr(ls[i].find_first_not_of(' '), ls[i].find(' ', ls[i].find_first_not_of(' ')) - ls[i].find_first_not_of(' ')));
  EXPECT_EQ(names, table_names);
  // softmax: 100 us self and total over 2 calls, 49.5 % of 202 us; 1e6 FLOPs in 100 us = 10 GFLOP/s, 10 GB/s.
  EXPECT_EQ(col(3, "input_shapes"), "[[8, 16, 1024, 1024]]");
  EXPECT_EQ(col(3, "input_types"), "[bf16]");
  EXPECT_EQ(col(3, "calls"), "2");
  EXPECT_DOUBLE_EQ(std::stod(col(3, "self_cpu_us")), 100.0);
  EXPECT_DOUBLE_EQ(std::stod(col(3, "cpu_avg_us")), 50.0);
  EXPECT_DOUBLE_EQ(std::stod(col(3, "self_cpu_pct")), 100.0 * 100'000 / 202'000);
  EXPECT_EQ(col(3, "cpu_mem_bytes"), "4096");
  EXPECT_DOUBLE_EQ(std::stod(col(3, "gflops_per_s")), 10.0);
  EXPECT_DOUBLE_EQ(std::stod(col(3, "gb_per_s")), 10.0);
  EXPECT_DOUBLE_EQ(std::stod(col(3, "flop_per_byte")), 1.0);
  // The verdicts the table gives: compute for matmul, memory for softmax, none for the annotation.
  for (size_t i : {2u, 3u}) {
    const analysis::OpStats& s = ka.rows[i == 2 ? 2 : 1];
    const analysis::RooflinePoint pt = analysis::place(s.cost, s.rate_ns(), peaks);
    EXPECT_EQ(col(i, "bound"), pt.memory_bound ? "memory" : "compute");
    EXPECT_DOUBLE_EQ(std::stod(col(i, "pct_roof")), 100.0 * pt.fraction_of_attainable);
  }
  EXPECT_EQ(col(2, "bound"), "compute");
  EXPECT_EQ(col(3, "bound"), "memory");
  EXPECT_EQ(col(1, "bound"), "");
  EXPECT_EQ(col(1, "pct_roof"), "");
  // What was not recorded or does not apply is an empty cell: no cost model, no device, counters per row.
  EXPECT_EQ(col(4, "flops"), "");
  EXPECT_EQ(col(4, "gflops_per_s"), "");
  for (size_t i = 1; i < rows.size(); ++i)
    for (const char* c : {"self_cuda_us", "self_cuda_pct", "cuda_total_us", "cuda_avg_us", "cuda_mem_bytes",
                          "self_cuda_mem_bytes"})
      EXPECT_EQ(col(i, c), "") << c;
  EXPECT_DOUBLE_EQ(std::stod(col(1, "task_clock_us")), 200.0);
  EXPECT_EQ(col(2, "page_faults"), "8");
  EXPECT_EQ(col(3, "page_faults"), "");
  // Without memory, shapes on demand, without peaks: the same header, those cells empty.
  ka.has_memory = false;
  const auto bare = parse_csv(report::table_csv(ka, {.sort_by = "flops"}));
  EXPECT_EQ(bare[0], header);
  for (size_t i = 1; i < bare.size(); ++i)
    for (size_t c : {2u, 3u, 14u, 15u, 23u, 24u}) EXPECT_EQ(bare[i][c], "") << header[c];
  EXPECT_THROW(report::table_csv(ka, {.sort_by = "bogus"}), Error);
}

TEST(Table, CounterColumnsWhenRecorded) {
  analysis::KeyAverages ka;
  auto ann = op("attn_fwd", 10, 500, 1, 0, 0);
  ann.category = "user_annotation";
  ann.task_clock_ns = 480'000;
  ann.page_faults = 12;
  ann.self_page_faults = 4;
  auto mm = op("matmul", 490, 490, 1, 0, 0, 1e6);
  mm.page_faults = mm.self_page_faults = 8;  // ops have page faults, not task-clock
  ka.rows = {ann, mm, op("view", 0, 0, 1, 0, 0)};
  ka.self_total_ns = 500'000;
  const auto ls = lines(report::table(ka));
  EXPECT_TRUE(std::regex_search(ls[1], std::regex(R"(FLOP/B +Task clock +Self faults +Page faults  $)"))) << ls[1];
  EXPECT_TRUE(std::regex_search(ls[3], std::regex(R"(^ +attn_fwd .* 480\.000us +4 +12  $)"))) << ls[3];
  EXPECT_TRUE(std::regex_search(ls[4], std::regex(R"(^ +matmul .* -- +8 +8  $)"))) << ls[4];
  EXPECT_TRUE(std::regex_search(ls[5], std::regex(R"(^ +view .* -- +-- +--  $)"))) << ls[5];
  ka.rows[0].task_clock_ns = ka.rows[0].page_faults = ka.rows[0].self_page_faults = -1;
  ka.rows[1].page_faults = ka.rows[1].self_page_faults = -1;
  EXPECT_EQ(lines(report::table(ka))[1].find("Task clock"), std::string::npos);
}

TEST(Table, RealProfileHasEveryOpWithFlops) {
  const auto r = naive_profile();
  const auto ka = analysis::key_averages(r);
  const std::string t = report::table(ka);
  for (const char* name : {"attn_fwd", "matmul", "mul", "masked_fill", "copy_", "masked_fill_", "softmax"}) {
    const std::regex row_re(std::string("\n +") + name + R"(  .*\n)");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(t, m, row_re)) << name << "\n" << t;
    // Every op that computes shows a number in Total FLOPs and its rates, never `--`; copy_ computes nothing
    // (bytes only): `--` under Total FLOPs, as torch prints for an op with no FLOPs, and numbers after it.
    if (std::string(name) == "copy_")
      EXPECT_TRUE(std::regex_search(m.str(), std::regex(R"( 1 +-- +0\.000 +[0-9.]+ +0\.000)"))) << m.str();
    else
      EXPECT_EQ(m.str().find("--"), std::string::npos) << m.str();
  }
  EXPECT_NE(t.find("Self CPU time total: "), std::string::npos);
}

TEST(Trace, RealProfilePassesTheChecker) {
  const auto r = naive_profile();
  const nlohmann::json j = report::chrome_trace_json(r);
  const TraceCheck c = check_trace(j);
  EXPECT_TRUE(c.ok()) << c.report();
  EXPECT_GE(c.x_events, 8u);
  EXPECT_GE(c.c_events, 1u);
  EXPECT_GE(c.i_events, 1u);
  bool saw_matmul = false, saw_annotation = false, saw_process = false;
  std::map<int64_t, int64_t> live;  // [memory] Addr -> bytes of the live allocations
  int paired = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") saw_process = e["args"]["name"] == "attnprof";
    if (e["ph"] == "X" && e["name"] == "matmul") {
      saw_matmul = true;
      EXPECT_EQ(e["cat"], "cpu_op");
      EXPECT_EQ(e["args"]["Input Dims"].size(), 2u);
      EXPECT_EQ(e["args"]["Input type"], nlohmann::json::array({"fp32", "fp32"})) << "torch's key, our dtype names";
      EXPECT_GT(e["args"]["FLOPs"].get<double>(), 0.0);
      EXPECT_GT(e["args"]["bytes"].get<double>(), 0.0);
      EXPECT_EQ(e["args"]["variant"], "naive");
      // Its GEMM runs on the library's threads, which the trace does not hold: said on the op.
      EXPECT_NE(e["args"].value("threads", "").find("not traced: the worker tracks look idle"), std::string::npos);
    }
    // Only ops a library runs say so (softmax runs attnprof's own OpenMP regions, which the trace shows).
    if (e["ph"] == "X" && e["name"] != "matmul" && e["cat"] == "cpu_op")
      EXPECT_FALSE(e["args"].contains("threads")) << e.dump();
    if (e["ph"] == "X" && e["name"] == "masked_fill_" && e["cat"] == "cpu_op")
      EXPECT_EQ(e["args"]["Input type"], nlohmann::json::array({"fp32", "bool"})) << "the mask's own type";
    if (e["ph"] == "X" && e["name"] == "attn_fwd") {
      saw_annotation = true;
      EXPECT_EQ(e["cat"], "user_annotation");
    }
    if (e["ph"] == "C") {
      EXPECT_EQ(e["name"], "Memory");
      EXPECT_TRUE(e["args"].contains("Allocated bytes"));
    }
    if (e["ph"] == "i") {
      EXPECT_EQ(e["name"], "[memory]");
      EXPECT_TRUE(e["args"].contains("Bytes") && e["args"].contains("Total Allocated"));
      EXPECT_EQ(e["args"]["Total Reserved"], 0) << "torch's CPU allocator reports none";
      // Addr pairs each free with a live allocation of its size, as tools that track tensors match them.
      const int64_t addr = e["args"]["Addr"], bytes = e["args"]["Bytes"];
      EXPECT_NE(addr, 0);
      if (bytes > 0) {
        EXPECT_FALSE(live.count(addr)) << "an address allocated twice without a free";
        live[addr] = bytes;
      } else if (live.count(addr)) {  // a block allocated before the recorded steps is freed without its allocation
        EXPECT_EQ(live[addr], -bytes) << "a free of another size than its allocation";
        live.erase(addr);
        ++paired;
      }
    }
    EXPECT_FALSE(e.contains("displayTimeUnit"));
  }
  EXPECT_TRUE(saw_matmul && saw_annotation && saw_process);
  EXPECT_GE(paired, 3) << "each forward frees the blocks it allocated";
  EXPECT_EQ(j["otherData"]["metadata"]["variant"], "naive");
}

// A path from a filesystem that is not UTF-8 reaches the trace through the run's metadata (the .npy inputs): its
// stray bytes become U+FFFD, as in the summary, so strict JSON readers take the file; valid UTF-8 stays as it is.
TEST(Trace, BytesThatAreNotUtf8BecomeTheReplacementCharacter) {
  auto r = naive_profile();
  r.metadata["inputs"] = "files npy/bad\xff" "dir/q.npy, Q\xc2\xb7K\xe1\xb5\x80, cut \xe2\x82";
  const std::string text = report::chrome_trace_text(r);
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(text));  // nlohmann's parser refuses invalid UTF-8
  EXPECT_EQ(j["otherData"]["metadata"]["inputs"],
            "files npy/bad\xef\xbf\xbd" "dir/q.npy, Q\xc2\xb7K\xe1\xb5\x80, cut \xef\xbf\xbd");
  EXPECT_TRUE(check_trace(j).ok());
}

TEST(Text, Utf8SequencesAsTheStandardDefinesThem) {
  uint32_t cp = 0;
  EXPECT_EQ(report::utf8_sequence("a", 0, &cp), 1u);
  EXPECT_EQ(cp, uint32_t('a'));
  EXPECT_EQ(report::utf8_sequence("\xc2\xb7", 0, &cp), 2u);  // ·
  EXPECT_EQ(cp, 0xb7u);
  EXPECT_EQ(report::utf8_sequence("\xe1\xb5\x80", 0, &cp), 3u);  // ᵀ
  EXPECT_EQ(cp, 0x1d40u);
  EXPECT_EQ(report::utf8_sequence("\xf0\x9f\x98\x80", 0, &cp), 4u);  // U+1F600
  EXPECT_EQ(cp, 0x1f600u);
  EXPECT_EQ(report::utf8_sequence("x\xc2\xb7", 1), 2u);
  for (const char* bad : {"\xff", "\x80", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                          "\xf5\x80\x80\x80", "\xe2\x82", "\xc2" "a"})
    EXPECT_EQ(report::utf8_sequence(bad, 0), 0u) << std::string(bad).size();
  EXPECT_EQ(report::utf8_sequence("", 0), 0u);
  // Ill-formed text is replaced as nlohmann's replace handler replaces it in the summaries (Unicode's maximal
  // subparts): a cut sequence is one U+FFFD, a byte that could not continue its lead starts anew.
  const auto as_summary = [](const std::string& s) {
    return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  std::vector<std::string> cases = {"q\xe2\x82.npy", "a\xe0\x80\x80z", "\xff", "x\xf0\x9f\x98", "\xed\xa0\x80",
                                    "\xc2" "a", "\x80\x80", "\xf4\x90\x80", "\xf0\x90\x80", "ok \xc2\xb7"};
  uint64_t state = 42;  // and random bytes, biased to the UTF-8 range
  for (int n = 0; n < 3000; ++n) {
    std::string s;
    for (int k = 0; k < 1 + n % 9; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const unsigned v = unsigned(state >> 33);
      s += char(v % 4 == 0 ? 'a' + v % 26 : 0x80 + v % 0x78);
    }
    cases.push_back(s);
  }
  for (const std::string& s : cases) EXPECT_EQ(nlohmann::json(report::utf8_replaced(s)).dump(), as_summary(s));
}

TEST(Trace, WorkerThreadsAndCountersPassTheChecker) {
  prof::Profiler p({.software_counters = true});
  p.start();
  {
    ATTNPROF_ANNOTATE("region");
#pragma omp parallel num_threads(2)
    {
      ATTNPROF_OP_ZONE(z, "worker_op");
      Tensor t = Tensor::zeros({1, 1, 64, 64}, DType::F32);
    }
  }
  p.stop();
  const prof::ProfileResult r = p.result();
  const nlohmann::json j = report::chrome_trace_json(r);
  const TraceCheck c = check_trace(j);
  EXPECT_TRUE(c.ok()) << c.report();
  std::set<int64_t> tids;
  int thread_names = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "worker_op") tids.insert(e["tid"].get<int64_t>());
    if (e["ph"] == "M" && e["name"] == "thread_name") ++thread_names;
    // No thread on tid 0 (the process's metadata's; some viewers drew a thread 0 on thread 1's track).
    if (e["ph"] == "X" || (e["ph"] == "M" && e["name"] == "thread_name")) EXPECT_GE(e["tid"].get<int64_t>(), 1) << e;
    if (e["ph"] == "X" && (e["name"] == "region" || e["name"] == "worker_op") && r.counters_recorded)
      EXPECT_GE(e["args"]["page_faults"].get<int64_t>(), 0);  // every zone, on every thread
    if (e["ph"] == "X" && e["name"] == "region" && r.task_clock_recorded)
      EXPECT_GE(e["args"]["task_clock_ns"].get<int64_t>(), 0);
  }
  EXPECT_EQ(tids.size(), 2u);
  EXPECT_GE(thread_names, 2);
  EXPECT_EQ(j["otherData"]["counters"], r.counters_note);
}

TEST(Trace, RoundingNeverBreaksNesting) {
  // Tick lengths that do not divide a nanosecond, children ending on the parent's last tick, zero-length
  // zones and a child whose recorded end spills past its parent's (clamped): the trace must still nest.
  prof::ProfileResult r;
  r.ns_per_tick = 0.3337;
  r.origin_ticks = 1000;
  prof::ThreadTrace t;
  t.name = "main";
  uint64_t base = 1000;
  for (int rep = 0; rep < 200; ++rep) {
    const uint64_t p0 = base + 7, p1 = p0 + 10 + uint64_t(rep % 7);
    prof::ZoneEvent parent;
    parent.name = "parent";
    parent.category = "cpu_op";
    parent.t0 = p0;
    parent.t1 = p1;
    const int32_t pi = int32_t(t.zones.size());
    t.zones.push_back(parent);
    prof::ZoneEvent child = parent;
    child.name = "child";
    child.parent = pi;
    child.depth = 1;
    child.t0 = p0 + uint64_t(rep % 3);
    child.t1 = p1 + uint64_t(rep % 2);  // spills by one tick on odd reps
    t.zones.push_back(child);
    prof::ZoneEvent leaf = child;
    leaf.name = "leaf";
    leaf.parent = pi + 1;
    leaf.depth = 2;
    leaf.t0 = leaf.t1 = p1;
    t.zones.push_back(leaf);
    base = p1 + uint64_t(rep % 2);
  }
  r.threads.push_back(t);
  const TraceCheck c = check_trace(report::chrome_trace_json(r));
  EXPECT_TRUE(c.ok()) << c.report();
  EXPECT_EQ(c.x_events, 600u);
}

TEST(Trace, CheckerCatchesBrokenTraces) {
  using nlohmann::json;
  const json meta = {{"ph", "M"}, {"name", "thread_name"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "main"}}}};
  const json proc = {{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"tid", 0}, {"args", {{"name", "p"}}}};
  auto x = [](double ts, double dur) {
    return json{{"ph", "X"}, {"name", "z"}, {"pid", 1}, {"tid", 1}, {"ts", ts}, {"dur", dur}};
  };
  EXPECT_TRUE(check_trace(json{{"traceEvents", {proc, meta, x(0, 10), x(2, 3), x(5, 5)}}}).ok());
  EXPECT_FALSE(check_trace(json{{"traceEvents", {proc, meta, x(0, 10), x(5, 10)}}}).ok());  // overlap
  EXPECT_FALSE(check_trace(json{{"traceEvents", {proc, meta, x(5, 1), x(0, 10)}}}).ok());   // unsorted
  EXPECT_FALSE(check_trace(json{{"traceEvents", {proc, meta, x(0, 1), x(0, 10)}}}).ok());   // dur ascending
  EXPECT_FALSE(check_trace(json{{"traceEvents", {proc, x(0, 1)}}}).ok());                   // unnamed thread
  EXPECT_FALSE(check_trace(json::array()).ok());                                            // array form
  json counter = {{"ph", "C"}, {"name", "Memory"}, {"pid", 1}, {"tid", 1}, {"ts", 1.0}, {"args", {{"a", "x"}}}};
  EXPECT_FALSE(check_trace(json{{"traceEvents", {proc, meta, counter}}}).ok());  // non-numeric series
  json no_dur = x(0, 1);
  no_dur.erase("dur");
  EXPECT_FALSE(check_trace(json{{"traceEvents", {proc, meta, no_dur}}}).ok());
}

TEST(Write, GzipRoundTripAndPlainFile) {
  TempDir dir;
  const auto r = naive_profile();
  const std::string text = report::chrome_trace_text(r);
  const std::string gz = (dir.path / "t.json.gz").string();
  report::write_chrome_trace(r, gz);
  const std::string raw = io::read_file(gz);
  ASSERT_GE(raw.size(), 2u);
  EXPECT_EQ(uint8_t(raw[0]), 0x1f);  // gzip magic
  EXPECT_EQ(uint8_t(raw[1]), 0x8b);
  const std::string back = gunzip_file(gz);
  EXPECT_EQ(nlohmann::json::parse(back), nlohmann::json::parse(text));
  const std::string plain = (dir.path / "t.json").string();
  report::write_text_atomic(plain, text);
  EXPECT_EQ(io::read_file(plain), text);
  EXPECT_EQ(dir.entries().size(), 2u);  // no temporary files left behind
}

TEST(Write, FailureNamesThePathAndLeavesNoFile) {
  TempDir dir;
  // A directory that does not exist.
  const std::string missing = (dir.path / "no-such-dir" / "x.json").string();
  try {
    report::write_text_atomic(missing, "{}");
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  // The target is a directory: the temporary file is written, the rename fails, and it is removed again.
  fs::create_directory(dir.path / "taken");
  const std::string taken = (dir.path / "taken").string();
  EXPECT_THROW(report::write_text_atomic(taken, "{}"), Error);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"taken"});
  // A read-only directory (permissions do not stop root, so only checked when not root).
  if (::geteuid() != 0) {
    fs::create_directory(dir.path / "ro");
    fs::permissions(dir.path / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    const std::string ro = (dir.path / "ro" / "x.json").string();
    try {
      report::write_text_atomic(ro, "{}");
      ADD_FAILURE() << "expected an Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(ro), std::string::npos) << e.what();
    }
    fs::permissions(dir.path / "ro", fs::perms::owner_all);
    EXPECT_TRUE(fs::is_empty(dir.path / "ro"));
  }
}

// In a sticky directory (mode +t, as /tmp) only a file's owner may rename over it: another user's file there
// failed the commit (EPERM) after the whole run. check_output_file, which runs before anything, refuses it.
// Setting up another user's file needs root; the check runs in a child that has given up root.
TEST(Write, AnotherUsersFileInAStickyDirectoryIsRefusedBeforeTheRun) {
  if (::geteuid() != 0) GTEST_SKIP() << "another user's file (chown) needs root";
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path.c_str(), 0711), 0);
  const fs::path sticky = dir.path / "sticky";
  fs::create_directory(sticky);
  ASSERT_EQ(::chmod(sticky.c_str(), 01777), 0);
  const std::string theirs = (sticky / "flash.summary.json").string(), mine = (sticky / "flash.table.txt").string();
  report::write_text_atomic(theirs, "old");
  report::write_text_atomic(mine, "old");
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chown(mine.c_str(), 65533, 65533), 0);
  EXPECT_NO_THROW(report::check_output_file(theirs));  // root may replace any file
  // The child is a fresh run of this test up to the statement, with a directory of its own set up as above: it
  // checks as uid 65533 (its effective ids: what a rename is judged by), then, root again, removes that directory.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto as_another_user = [&](const std::function<std::string()>& body) {
    attnprof::testing::say_and_exit([&] {
      if (::setegid(65533) != 0 || ::seteuid(65533) != 0) return std::string("seteuid failed");
      std::string said;
      try {
        said = body();
      } catch (const std::exception& e) {
        said = std::string("exception: ") + e.what();
      }
      if (::seteuid(0) == 0 && ::setegid(0) == 0) fs::remove_all(dir.path);
      return said;
    });
  };
  EXPECT_EXIT(as_another_user([&] {
                report::check_output_file(theirs);
                return std::string("accepted");
              }),
              ::testing::ExitedWithCode(0),
              "exception: cannot write '.*/sticky/flash.summary.json': the file belongs to another user \\(uid 65534\\) "
              "and its directory is sticky");
  // What the check foresees: the write itself fails at its rename, after the work.
  EXPECT_EXIT(as_another_user([&] {
                report::write_text_atomic(theirs, "new");
                return std::string("written");
              }),
              ::testing::ExitedWithCode(0), "exception: .*flash.summary.json.*Operation not permitted");
  // Its own file there it may replace.
  EXPECT_EXIT(as_another_user([&] {
                report::check_output_file(mine);
                report::write_text_atomic(mine, "new");
                return "written: " + io::read_file(mine) + ", theirs: " + io::read_file(theirs);
              }),
              ::testing::ExitedWithCode(0), "^written: new, theirs: old");
}

TEST(Write, BatchReplacesFilesTogetherOrNotAtAll) {
  TempDir dir;
  const std::string a = (dir.path / "a.txt").string(), b = (dir.path / "b.txt").string();
  report::write_text_atomic(a, "old a");
  report::write_text_atomic(b, "old b");
  {
    report::FileBatch batch;
    report::write_text_atomic(a, "new a");
    EXPECT_EQ(io::read_file(a), "old a");  // staged, complete, not yet in place
    report::write_text_atomic(b, "new b");
    batch.commit();
  }
  EXPECT_EQ(io::read_file(a), "new a");
  EXPECT_EQ(io::read_file(b), "new b");
  {
    report::FileBatch batch;  // a command that fails after its first file: nothing changes
    report::write_text_atomic(a, "half a run");
    // A cache written inside the batch with now = true lands at once and outlives the failure.
    io::write_file_atomic((dir.path / "cache.json").string(), "{}", /*now=*/true);
  }
  EXPECT_EQ(io::read_file(a), "new a");
  EXPECT_EQ(io::read_file(dir.path / "cache.json"), "{}");
  std::vector<std::string> entries = dir.entries();
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"a.txt", "b.txt", "cache.json"}));  // no temporary files
  // After a batch, files are written at once again.
  report::write_text_atomic(b, "after");
  EXPECT_EQ(io::read_file(b), "after");
}

TEST(Write, ABatchWhoseRenameFailsMidwayPutsTheOldFilesBack) {
  // The third rename fails (a directory now stands where its file goes): the first two files are already
  // new by then, and must be old again, a file the batch created must be gone, and no backup left behind.
  TempDir dir;
  const std::string a = (dir.path / "a.txt").string(), made = (dir.path / "made.txt").string(),
                    blocked = (dir.path / "blocked.txt").string();
  report::write_text_atomic(a, "old a");
  try {
    report::FileBatch batch;
    report::write_text_atomic(a, "new a");
    report::write_text_atomic(made, "new file");
    report::write_text_atomic(blocked, "new blocked");
    fs::create_directories(dir.path / "blocked.txt" / "inside");
    batch.commit();
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(blocked), std::string::npos) << e.what();
  }
  EXPECT_EQ(io::read_file(a), "old a");
  EXPECT_FALSE(fs::exists(made));
  std::vector<std::string> entries = dir.entries();
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"a.txt", "blocked.txt"}));
}

namespace {
// A filesystem without hard links, for commit_staged: every link(2) fails with g_link_errno, counted.
int g_link_errno = EPERM;
int g_link_calls = 0;
int failing_link(const char*, const char*) {
  ++g_link_calls;
  errno = g_link_errno;
  return -1;
}
struct NoHardLinks {
  explicit NoHardLinks(int err) {
    g_link_errno = err;
    g_link_calls = 0;
    io::detail::link_function() = failing_link;
  }
  ~NoHardLinks() { io::detail::link_function() = ::link; }
};
}  // namespace

TEST(Write, WithoutHardLinksABatchKeepsCopiesOfTheOldFilesAndStillRollsBack) {
  for (const int err : {EPERM, EOPNOTSUPP, EMLINK, EXDEV}) {
    SCOPED_TRACE(std::strerror(err));
    TempDir dir;
    const std::string a = (dir.path / "a.txt").string(), b = (dir.path / "b.txt").string(),
                      made = (dir.path / "made.txt").string(), blocked = (dir.path / "blocked.txt").string();
    report::write_text_atomic(a, "old a");
    report::write_text_atomic(b, "old b");
    ::chmod(a.c_str(), 0600);
    const NoHardLinks no_links(err);
    // Every file replaced: the batch commits, and the copies it kept are gone.
    {
      report::FileBatch batch;
      report::write_text_atomic(a, "new a");
      report::write_text_atomic(b, "new b");
      batch.commit();
    }
    EXPECT_EQ(g_link_calls, 2) << "the old files were not kept through link_function";
    EXPECT_EQ(io::read_file(a), "new a");
    EXPECT_EQ(io::read_file(b), "new b");
    std::vector<std::string> entries = dir.entries();
    std::sort(entries.begin(), entries.end());
    EXPECT_EQ(entries, (std::vector<std::string>{"a.txt", "b.txt"}));
    // A rename that fails midway (a directory where the third file goes): the copies put the old files back,
    // bytes and permissions, a file the batch created is gone, and no copy or temporary file is left.
    ::chmod(a.c_str(), 0600);
    try {
      report::FileBatch batch;
      report::write_text_atomic(a, "newer a");
      report::write_text_atomic(made, "new file");
      report::write_text_atomic(b, "newer b");
      report::write_text_atomic(blocked, "new blocked");
      fs::create_directories(dir.path / "blocked.txt" / "inside");
      batch.commit();
      ADD_FAILURE() << "expected an Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(blocked), std::string::npos) << e.what();
    }
    EXPECT_EQ(io::read_file(a), "new a");
    EXPECT_EQ(io::read_file(b), "new b");
    EXPECT_FALSE(fs::exists(made));
    struct stat st {};
    ASSERT_EQ(::stat(a.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    entries = dir.entries();
    std::sort(entries.begin(), entries.end());
    EXPECT_EQ(entries, (std::vector<std::string>{"a.txt", "b.txt", "blocked.txt"}));
  }
  // Any other link(2) failure is no filesystem without hard links: the commit stops before replacing anything.
  TempDir dir;
  const std::string a = (dir.path / "a.txt").string();
  report::write_text_atomic(a, "old a");
  const NoHardLinks io_error(EIO);
  try {
    report::FileBatch batch;
    report::write_text_atomic(a, "new a");
    batch.commit();
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot write '" + a + "': cannot keep its old file while replacing it (" +
                                         std::strerror(EIO) + ")");
  }
  EXPECT_EQ(io::read_file(a), "old a");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.txt"});
}

// A run killed outright (SIGKILL) leaves its temporary files: the next write of the same file removes those of
// a process that is gone, here (same boot, same pid namespace: the name's PLACE), and keeps those of a live
// process, of another place (another host or container sharing the directory), ".old" backups (maybe the only
// copy of a replaced file) and other files'.
TEST(Write, TheTemporaryFilesOfAKilledRunGoWithTheNextWrite) {
  TempDir dir;
  std::string place;  // this process's, from a temporary file it stages: f.txt.tmp.PID.PLACE.XXXXXX
  {
    report::FileBatch batch;
    report::write_text_atomic((dir.path / "probe.txt").string(), "staged");
    const std::vector<std::string> staged = dir.entries();
    ASSERT_EQ(staged.size(), 1u);
    const std::string& name = staged[0];
    const size_t pid_end = name.find('.', std::strlen("probe.txt.tmp."));
    ASSERT_NE(pid_end, std::string::npos) << name;
    place = name.substr(pid_end + 1, 8);
  }
  ASSERT_EQ(place.size(), 8u);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // its id now names no process
  const std::string dead = std::to_string(child), alive = std::to_string(::getppid());
  const std::string other_place = place == "0badf00d" ? "0badf00e" : "0badf00d";
  const std::vector<std::string> kept = {
      "f.txt.tmp." + alive + "." + place + ".XyZ789",         // its process still runs
      "f.txt.tmp." + dead + "." + other_place + ".AbC123",    // written where that id is another process's
      "f.txt.tmp." + dead + "." + place + ".AbC123.old",      // a backup: maybe the only copy left
      "f.txt.tmp.notapid." + place + ".AbC123",               // not a name attnprof writes
      "g.txt.tmp." + dead + "." + place + ".AbC123"};         // another file's
  for (const std::string& name : kept) std::ofstream(dir.path / name) << "left";
  std::ofstream(dir.path / ("f.txt.tmp." + dead + "." + place + ".AbC123")) << "left";  // stale: removed
  report::write_text_atomic((dir.path / "f.txt").string(), "new");
  std::vector<std::string> left = dir.entries(), want = kept;
  want.push_back("f.txt");
  std::sort(left.begin(), left.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(left, want);
  EXPECT_EQ(io::read_file(dir.path / "f.txt"), "new");
}

TEST(Write, TheSignalPathRemovesEveryLiveTemporaryFile) {
  // What a SIGINT handler calls: every staged file's temporary goes, the files already in place stay.
  TempDir dir;
  const std::string kept = (dir.path / "kept.txt").string();
  report::write_text_atomic(kept, "in place");
  // A write probe into a directory that does not exist fails 200 times; each failure must give its slot
  // in the handler's fixed table back, or the staged files below would no longer be found.
  for (int i = 0; i < 200; ++i) EXPECT_FALSE(report::write_probe_error((dir.path / "absent").string()).empty());
  EXPECT_EQ(report::write_probe_error(dir.path.string()), "");
  {
    report::FileBatch batch;
    for (int i = 0; i < 40; ++i) report::write_text_atomic((dir.path / ("f" + std::to_string(i) + ".txt")).string(), "staged");
    EXPECT_EQ(dir.entries().size(), 41u);  // 40 temporary files beside kept.txt
    report::remove_temporary_files();
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"kept.txt"});
  }  // the batch's own clean-up then finds nothing left to remove
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"kept.txt"});
  EXPECT_EQ(io::read_file(kept), "in place");
}

TEST(Summary, EveryRowTotalsMemoryAndSchema) {
  const auto r = naive_profile();
  const auto ka = analysis::key_averages(r);
  const nlohmann::json j = nlohmann::json::parse(report::summary_json(r, ka).dump());
  EXPECT_EQ(j["schema"], "attnprof.summary/1");
  EXPECT_EQ(j["metadata"]["variant"], "naive");
  ASSERT_EQ(j["rows"].size(), ka.rows.size());
  for (size_t i = 0; i < ka.rows.size(); ++i) {
    const auto& row = j["rows"][i];
    EXPECT_EQ(row["name"], ka.rows[i].name);
    EXPECT_EQ(row["calls"], ka.rows[i].calls);
    EXPECT_DOUBLE_EQ(row["self_ns"].get<double>(), ka.rows[i].self_ns);
    EXPECT_DOUBLE_EQ(row["total_ns"].get<double>(), ka.rows[i].total_ns);
    EXPECT_EQ(row["mem_bytes"], ka.rows[i].mem_bytes);
    EXPECT_EQ(row["self_mem_bytes"], ka.rows[i].self_mem_bytes);
    EXPECT_EQ(row["freed_bytes"], ka.rows[i].freed_bytes);
    EXPECT_DOUBLE_EQ(row["cost"]["flops"].get<double>(), ka.rows[i].cost.flops);
    for (const std::string key : {"cost", "self_cost"}) {
      const OpCost& c = key == "cost" ? ka.rows[i].cost : ka.rows[i].self_cost;
      EXPECT_EQ(row[key]["bf16_flops"].get<double>(), c.bf16_flops) << key;
      EXPECT_EQ(row[key]["library_flops"].get<double>(), c.library_flops) << key;
      EXPECT_EQ(row[key]["library_bf16_flops"].get<double>(), c.library_bf16_flops) << key;
    }
    // The matmuls ran in OpenBLAS / oneDNN: their FLOPs are the library's, and nothing else's are.
    const double library = ka.rows[i].name == "matmul" ? ka.rows[i].self_cost.flops : 0.0;
    EXPECT_EQ(row["self_cost"]["library_flops"].get<double>(), library) << ka.rows[i].name;
    for (const char* k : {"avg_ns", "self_pct", "total_pct", "gflops_per_s", "gb_per_s", "flop_per_byte"})
      EXPECT_TRUE(row[k].is_number()) << k;
  }
  EXPECT_DOUBLE_EQ(j["totals"]["self_cpu_time_total_ns"].get<double>(), ka.self_total_ns);
  EXPECT_EQ(j["totals"]["zones"], ka.zones);
  EXPECT_DOUBLE_EQ(j["overhead"]["zone_overhead_ns"].get<double>(), r.zone_overhead_ns);
  EXPECT_EQ(j["memory"]["peak_bytes"], ka.peak_bytes);
  const auto& tl = j["memory"]["timeline"];
  ASSERT_GE(tl.size(), 5u);
  int64_t max_bytes = ka.start_bytes;
  for (size_t i = 0; i < tl.size(); ++i) {
    if (i) EXPECT_GE(tl[i]["t_us"].get<double>(), tl[i - 1]["t_us"].get<double>());
    max_bytes = std::max<int64_t>(max_bytes, tl[i]["bytes"].get<int64_t>());
  }
  EXPECT_EQ(max_bytes, ka.peak_bytes);
  EXPECT_TRUE(j["counters"]["note"].is_string());
}

// Each op's self time per recorded step: summed step by step (ProfilerStep#N in step order, 0 where the op did
// not run), written to the summary, and named by uneven_op_notes when a slow step lifts the op's mean above its
// median. An op with a zone outside every step (on a thread of its own) has no per-step figures.
TEST(Summary, SelfTimePerStepAndUnevenOps) {
  prof::ProfileResult r;
  r.ns_per_tick = 1000.0;  // a tick is 1 µs
  prof::ThreadTrace main_thread;
  uint64_t now = 0;
  // Steps #2, #3, #4: matmul 100 µs each; softmax 10, 10 and 50 µs; a copy_ only in the last step.
  for (int step = 2; step <= 4; ++step) {
    const int32_t s = int32_t(main_thread.zones.size());
    prof::ZoneEvent z;
    z.name = step == 2 ? "ProfilerStep#2" : step == 3 ? "ProfilerStep#3" : "ProfilerStep#4";
    z.category = "user_annotation";
    z.t0 = now;
    main_thread.zones.push_back(z);
    auto child = [&](const char* name, uint64_t us) {
      prof::ZoneEvent c;
      c.name = name;
      c.category = "cpu_op";
      c.parent = s;
      c.depth = 1;
      c.t0 = now;
      c.t1 = now += us;
      main_thread.zones.push_back(c);
    };
    child("matmul", 100);
    child("softmax", step == 4 ? 50 : 10);
    if (step == 4) child("copy_", 4);
    main_thread.zones[size_t(s)].t1 = now += 1;  // 1 µs of the step's own
  }
  prof::ThreadTrace other;
  other.tid = 1;
  prof::ZoneEvent lone;
  lone.name = "softmax";
  lone.category = "cpu_op";
  lone.t0 = 0;
  lone.t1 = 5;
  other.zones.push_back(lone);
  r.threads.push_back(main_thread);

  analysis::KeyAverages ka = analysis::key_averages(r);
  std::map<std::string, std::vector<double>> per_step;
  for (const analysis::OpStats& s : ka.rows) per_step[s.name] = s.step_self_ns;
  EXPECT_EQ(per_step["matmul"], (std::vector<double>{100e3, 100e3, 100e3}));
  EXPECT_EQ(per_step["softmax"], (std::vector<double>{10e3, 10e3, 50e3}));
  EXPECT_EQ(per_step["copy_"], (std::vector<double>{0, 0, 4e3}));
  EXPECT_EQ(per_step[std::string(analysis::kStepRow)], (std::vector<double>{1e3, 1e3, 1e3}));
  // softmax: median 10 µs, mean 23.333 µs (over 1.15x), 70 of 377 µs of self time (over 5 %); copy_'s 4 µs is
  // under 5 % of the total, and matmul is even.
  const std::vector<std::string> notes = report::uneven_op_notes(ka);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "Uneven: softmax's self CPU per forward: median 10.000us, mean 23.333us, slowest 50.000us (1 of 3 "
                      "forwards over 1.15x the median); the table's totals and averages include it.");
  // The same op for a line of another output (roofline names the variant, and says what the forward lifts);
  // compare lists the ops' names.
  const std::vector<report::UnevenOp> ops = report::uneven_ops(ka);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].name, "softmax");
  EXPECT_EQ(ops[0].over, 1u);
  EXPECT_EQ(ops[0].forwards, 3u);
  EXPECT_DOUBLE_EQ(ops[0].slowest_ns, 50e3);
  EXPECT_EQ(report::uneven_line(ops[0], "naive", "its Achieved is over every forward's time"),
            "Uneven: softmax's self CPU per forward in naive: median 10.000us, mean 23.333us, slowest 50.000us (1 of 3 "
            "forwards over 1.15x the median); its Achieved is over every forward's time.");
  EXPECT_EQ(report::spoken_list({"to", "matmul", "mul"}), "to, matmul and mul");
  EXPECT_EQ(report::spoken_list({"to", "mul"}), "to and mul");
  EXPECT_EQ(report::spoken_list({"to"}), "to");
  const nlohmann::json j = report::summary_json(r, ka);
  for (const auto& row : j["rows"])
    if (row["name"] == "softmax") EXPECT_EQ(row["self_ns_per_step"], nlohmann::json({10e3, 10e3, 50e3}));
  // A row of one op's shapes (group_by_input_shape) is named with them; a device profile, whose table is in
  // device time, gets no line about its host times.
  analysis::KeyAverages shaped = ka;
  for (analysis::OpStats& s : shaped.rows)
    if (s.name == "softmax") s.input_shapes = "[[1, 2, 64, 64]]";
  ASSERT_EQ(report::uneven_op_notes(shaped).size(), 1u);
  EXPECT_EQ(report::uneven_op_notes(shaped)[0].rfind("Uneven: softmax (inputs [[1, 2, 64, 64]])'s self CPU per forward", 0), 0u);
  shaped.has_device = true;
  EXPECT_TRUE(report::uneven_op_notes(shaped).empty());

  // With the lone softmax on a second thread, outside every step: softmax's per-step figures are unknown.
  r.threads.push_back(other);
  ka = analysis::key_averages(r);
  for (const analysis::OpStats& s : ka.rows) {
    if (s.name == "softmax") EXPECT_TRUE(s.step_self_ns.empty());
    if (s.name == "matmul") EXPECT_EQ(s.step_self_ns.size(), 3u);
  }
  EXPECT_TRUE(report::uneven_op_notes(ka).empty());
  const nlohmann::json with_lone = report::summary_json(r, ka);  // held: a range over a temporary's member dangles
  for (const auto& row : with_lone["rows"])
    if (row["name"] == "softmax") EXPECT_TRUE(row["self_ns_per_step"].is_null());
  // Rows that multiply with the steps (a new name, or shape, in every step) would need rows × steps cells:
  // past 2^21 no row keeps per-step times (1,500 steps of a name each: 1,501 rows).
  prof::ProfileResult many;
  prof::ThreadTrace t;
  std::deque<std::string> names;
  for (int k = 0; k < 1500; ++k) {
    names.push_back("ProfilerStep#" + std::to_string(k));
    prof::ZoneEvent step;
    step.name = names.back().c_str();
    step.category = "user_annotation";
    step.t0 = uint64_t(10 * k);
    step.t1 = step.t0 + 9;
    const int32_t parent = int32_t(t.zones.size());
    t.zones.push_back(step);
    names.push_back("op" + std::to_string(k));
    prof::ZoneEvent e;
    e.name = names.back().c_str();
    e.category = "cpu_op";
    e.parent = parent;
    e.depth = 1;
    e.t0 = step.t0 + 1;
    e.t1 = step.t0 + 8;
    t.zones.push_back(e);
  }
  many.threads.push_back(t);
  const analysis::KeyAverages wide = analysis::key_averages(many);
  ASSERT_EQ(wide.rows.size(), 1501u);
  for (const analysis::OpStats& s : wide.rows) ASSERT_TRUE(s.step_self_ns.empty()) << s.name;
  // A profile without steps has none for any op.
  prof::ProfileResult flat;
  flat.threads.push_back(other);
  for (const analysis::OpStats& s : analysis::key_averages(flat).rows) EXPECT_TRUE(s.step_self_ns.empty()) << s.name;
}
