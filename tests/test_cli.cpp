// End-to-end tests of the attnprof command line: each subcommand on small shapes (outputs exist, parse and
// say what they should), and every kind of bad input (exit code 2, one line on stderr, no files left).
#include <fcntl.h>
#include <sched.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnprof/analysis.h"
#include "attnprof/attention.h"
#include "attnprof/cuda.h"
#include "attnprof/isa.h"
#include "attnprof/npy.h"
#include "attnprof/ops.h"
#include "attnprof/report.h"
#include "csv_reader.h"
#include "device_profile_fixture.h"
#include "io/file.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace attnprof;

namespace {

const std::string kBinary = std::string(ATTNPROF_BINARY_DIR) + "/tools/attnprof";
// Small shapes and one thread keep each run well under a second (machine peaks are measured once and cached).
const std::string kSmall = " --shape 1,2,64,32 --threads 1 ";

#if defined(NDEBUG) && !defined(ATTNPROF_SANITIZED)
constexpr bool kTimingMeaningful = true;
#else
constexpr bool kTimingMeaningful = false;
#endif

struct Result {
  int code = -1;
  std::string out, err;
};

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(ATTNPROF_BINARY_DIR) / "test_cli_work" / info->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // One peaks cache for the whole suite: measured by the first test that needs it.
    ::setenv("XDG_CACHE_HOME", (fs::path(ATTNPROF_BINARY_DIR) / "test_cli_cache").c_str(), 1);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  Result run(const std::string& args) {
    const std::string cmd = kBinary + " " + args + " >" + (dir_ / "stdout.txt").string() + " 2>" +
                            (dir_ / "stderr.txt").string();
    const int rc = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
    r.out = io::read_file(dir_ / "stdout.txt");
    r.err = io::read_file(dir_ / "stderr.txt");
    return r;
  }
  // `attnprof report` on --out: its page, or nothing where the chart library is not installed (npm ci not run).
  std::optional<std::string> report_page() {
    const Result page = run("report" + out_flag());
    if (page.code == 2 && page.err.find("npm ci") != std::string::npos) return std::nullopt;
    EXPECT_EQ(page.code, 0) << page.err;
    return io::read_file(out() / "report.html");
  }
  fs::path out() const { return dir_ / "out"; }
  std::string out_flag() const { return " --out " + out().string() + " "; }
  json read_json(const std::string& name) {
    const fs::path p = out() / name;
    EXPECT_TRUE(fs::exists(p)) << p;
    return json::parse(io::read_file(p));
  }
  // Bad input: exit 2, exactly one line "attnprof: error: ..." containing `expect`, nothing written.
  void expect_bad(const std::string& args, const std::string& expect) {
    SCOPED_TRACE(args);
    const Result r = run(args + out_flag());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("attnprof: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(expect), std::string::npos) << "expected '" << expect << "' in: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_FALSE(fs::exists(out())) << "bad input must leave no output directory";
  }
  fs::path dir_;
};

std::string write_npy(const fs::path& p, const Tensor& t) {
  npy::save(p.string(), t);
  return p.string();
}

Tensor randn(const Shape4& s, DType t, uint64_t seed) {
  Tensor x = Tensor::empty(s, t);
  fill_randn(x, seed);
  return x;
}

}  // namespace

TEST_F(Cli, VersionAndHelpPerSubcommand) {
  Result r = run("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find(std::string("attnprof ") + ATTNPROF_VERSION), std::string::npos) << r.out;
  for (const char* sub : {"profile", "compare", "sweep", "roofline"}) {
    r = run(std::string(sub) + " --help");
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_NE(r.out.find("--shape"), std::string::npos) << sub << ": " << r.out;
    EXPECT_NE(r.out.find("--threads"), std::string::npos) << sub;
  }
  EXPECT_NE(run("profile --help").out.find("--backend"), std::string::npos);
  EXPECT_NE(run("sweep --help").out.find("--seq"), std::string::npos);
  // The commands that take variants list each registry's, with the one-line summaries the registries carry.
  for (const char* sub : {"profile", "compare", "sweep", "roofline"}) {
    const std::string help = run(std::string(sub) + " --help").out;
    for (const auto* reg : {&registry(), &cuda::cuda_registry()})
      for (const Variant& v : *reg) {
        ASSERT_FALSE(v.summary.empty()) << v.name;
        EXPECT_NE(help.find(v.name + std::string(12 - std::min<size_t>(v.name.size(), 11), ' ') + v.summary),
                  std::string::npos) << sub << " lacks " << v.backend << " " << v.name << ":\n" << help;
      }
    EXPECT_EQ(help.find("Variants with --device cuda:") != std::string::npos, !cuda::cuda_registry().empty()) << sub;
  }
  // Each command answers --version too, before it would name a missing argument (profile's variant).
  for (const char* sub : {"profile", "compare", "sweep", "roofline", "report", "diff"}) {
    r = run(std::string(sub) + " --version");
    EXPECT_EQ(r.code, 0) << sub << ": " << r.err;
    EXPECT_EQ(r.out, std::string("attnprof ") + ATTNPROF_VERSION + "\n") << sub;
  }
}

// The peaks cache's notes are the command's to print (the library returns them): a corrupt cache is named on
// stderr as a note, measured again and rewritten, and the run goes on.
TEST_F(Cli, APeaksCacheNoteReachesTheUser) {
  const fs::path cache = dir_ / "cache", file = cache / "attnprof" / analysis::kPeaksCacheFile;
  fs::create_directories(cache / "attnprof");
  { std::ofstream(file) << "{\"version\": 4, \"entries\": ["; }
  ::setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  const Result r = run("roofline --peaks-only --threads 1");
  ::setenv("XDG_CACHE_HOME", (fs::path(ATTNPROF_BINARY_DIR) / "test_cli_cache").c_str(), 1);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("attnprof: note: ignoring corrupt machine-peaks cache " + file.string()), std::string::npos)
      << r.err;
  EXPECT_TRUE(nlohmann::json::accept(attnprof::io::read_file(file.string())));
}

// Peaks measured low (a busy machine) put a rate above 100 %, which no code reaches: compare and sweep say so
// beside their tables. Here the cached entry is lowered by hand to 0.1 GFLOP/s, the least a cache may hold, at a
// shape where flash runs far faster even under the sanitizers (1.1 ms for 0.5 MFLOP at N=64 under ASan: 16 MFLOP
// here).
TEST_F(Cli, ARateAboveTheMeasuredPeakIsExplained) {
  const fs::path cache = dir_ / "cache";
  ::setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  struct RestoreCache {  // the suite's cache again, however the test ends
    ~RestoreCache() { ::setenv("XDG_CACHE_HOME", (fs::path(ATTNPROF_BINARY_DIR) / "test_cli_cache").c_str(), 1); }
  } restore;
  const Result measured = run("roofline --peaks-only --threads 1");
  ASSERT_EQ(measured.code, 0) << measured.err;
  const fs::path file = cache / "attnprof" / analysis::kPeaksCacheFile;
  const std::string as_measured = io::read_file(file);
  json peaks = json::parse(as_measured);
  ASSERT_EQ(peaks["entries"].size(), 1u) << peaks;
  for (const char* key : {"fp32_gflops", "bf16_gflops", "library_fp32_gflops", "library_bf16_gflops"})
    if (peaks["entries"][0][key].get<double>() > 0) peaks["entries"][0][key] = 0.1;
  peaks["entries"][0]["other_cpus"] = 0.0;
  { std::ofstream(file) << peaks.dump(); }
  const std::string shape = " --dtype fp32 --threads 1 --iters 1 --warmup 0 --variants flash";
  const Result c = run("compare --shape 1,2,256,64" + shape + out_flag());
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("Over 100 %: flash ran above the measured peak, which no code reaches"), std::string::npos)
      << c.out;
  const Result s = run("sweep --seq 128,256 --shape 1,2,64,64" + shape + out_flag());
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_NE(s.out.find("Over 100 %: flash at N=128, flash at N=256 ran above the measured peak"), std::string::npos)
      << s.out;
  EXPECT_NE(s.out.find("attnprof roofline --peaks-only --remeasure"), std::string::npos) << s.out;
  // The report says it beside both tables, from compare.json and sweep.json (where the chart library is there).
  if (const std::optional<std::string> html = report_page()) {
    EXPECT_NE(html->find("Over 100 %: flash ran above the measured peak"), std::string::npos);
    EXPECT_NE(html->find("Over 100 %: flash at N=128, flash at N=256 ran above the measured peak"), std::string::npos);
  }
  // At the peaks as this test measured them, nothing is over.
  { std::ofstream(file) << as_measured; }
  const Result idle = run("compare --shape 1,2,256,64" + shape + out_flag());
  ASSERT_EQ(idle.code, 0) << idle.err;
  EXPECT_EQ(idle.out.find("Over 100 %"), std::string::npos) << idle.out;
}

TEST_F(Cli, ProfileWritesTableTraceAndSummary) {
  const Result r = run("profile naive" + kSmall + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("which did not exist"), std::string::npos) << "--out alone made: nothing to say";
  {  // Directories made above --out's own are named, so that a typo in a parent shows at once.
    const fs::path deep = dir_ / "up" / "down" / "out";
    const Result nested = run("profile flash" + kSmall + " --out " + deep.string());
    ASSERT_EQ(nested.code, 0) << nested.err;
    EXPECT_NE(nested.err.find(fmt::format("--out '{}': also made '{}' and '{}', which did not exist", deep.string(),
                                          (dir_ / "up").string(), (dir_ / "up" / "down").string())),
              std::string::npos)
        << nested.err;
    EXPECT_TRUE(fs::exists(deep / "flash.summary.json"));
    // A relative --out is answered in its own terms; a detour ('x/y/..') names the directory made on the way.
    const std::string base = fs::relative(dir_ / "rel").string();
    const Result rel = run("profile flash" + kSmall + " --out " + base + "/x/y/..");
    ASSERT_EQ(rel.code, 0) << rel.err;
    EXPECT_NE(rel.err.find(fmt::format("also made '{}' and '{}/x/y', which did not exist", base, base)),
              std::string::npos)
        << rel.err;
    // A trailing slash is --out's own directory, not one made above it.
    const Result slash = run("profile flash" + kSmall + " --out " + base + "2/z/");
    ASSERT_EQ(slash.code, 0) << slash.err;
    EXPECT_NE(slash.err.find(fmt::format("also made '{}2', which did not exist", base)), std::string::npos) << slash.err;
  }
  // torch's table columns, in torch's order, plus the footer.
  const std::regex header(R"(Name\s+Self CPU %\s+Self CPU\s+CPU total %\s+CPU total\s+CPU time avg)");
  EXPECT_TRUE(std::regex_search(r.out, header)) << r.out;
  EXPECT_NE(r.out.find("# of Calls"), std::string::npos);
  EXPECT_NE(r.out.find("Self CPU time total:"), std::string::npos);
  for (const char* op : {"attn_fwd", "matmul", "mul", "masked_fill", "softmax"})
    EXPECT_NE(r.out.find(op), std::string::npos) << op;
  EXPECT_NE(r.out.find("time per forward:"), std::string::npos);
  EXPECT_NE(r.out.find("validation: max abs error"), std::string::npos);
  // The blog's counts on one line, as the summary records them: six ops (the copy of out-of-place masked_fill
  // among them) and the memory one forward allocates.
  {
    const json run = read_json("naive.summary.json")["run"];
    EXPECT_EQ(run["ops_per_forward"].get<double>(), 6.0);
    EXPECT_NE(r.out.find(fmt::format("per forward: 6 ops that do work of their own (matmul ×2, mul, copy_, masked_fill_, "
                                     "softmax); {} allocated at its peak above the inputs",
                                     report::format_bytes(run["peak_extra_bytes"].get<int64_t>()))),
              std::string::npos)
        << r.out;
  }
  // The margin to the tolerance, as the summary records it: the line's percentage is tolerance_used.
  {
    const json s = read_json("naive.summary.json");
    const double used = s["run"]["tolerance_used"].get<double>();
    EXPECT_GT(used, 0.0);
    EXPECT_LE(used, 1.0);
    EXPECT_NE(r.out.find(fmt::format("the worst element used {:.0f}% of its tolerance): OK", 100 * used)),
              std::string::npos)
        << r.out;
  }
  // The files: a trace with the blog's ProfilerStep#2..#4 (wait=1, warmup=1, active=3), a summary, the table.
  const json trace = read_json("naive.trace.json");
  ASSERT_TRUE(trace.contains("traceEvents"));
  int steps = 0, annotations = 0;
  for (const json& e : trace["traceEvents"]) {
    const std::string name = e.value("name", "");
    if (name.rfind("ProfilerStep#", 0) == 0) {
      ++steps;
      EXPECT_TRUE(name == "ProfilerStep#2" || name == "ProfilerStep#3" || name == "ProfilerStep#4") << name;
    }
    annotations += name == "attn_fwd";
  }
  EXPECT_EQ(steps, 3);
  EXPECT_EQ(annotations, 3);
  const json summary = read_json("naive.summary.json");
  EXPECT_EQ(summary["run"]["status"], "ok");
  EXPECT_EQ(summary["run"]["forward_ms"].size(), 3u);
  EXPECT_GT(summary["run"]["ms_per_forward"].get<double>(), 0.0);
  // The forwards are flagged as noisy exactly when the slowest is more than 1.15x the fastest.
  const auto f = summary["run"]["forward_ms"].get<std::vector<double>>();
  const double spread = *std::max_element(f.begin(), f.end()) / *std::min_element(f.begin(), f.end());
  EXPECT_EQ(r.out.find("Noisy: naive took") != std::string::npos, spread > 1.15) << r.out;
  EXPECT_LE(summary["run"]["max_abs_err"].get<double>(), summary["run"]["tolerance"]["atol"].get<double>() + 1e-12 +
                                                             summary["run"]["tolerance"]["rtol"].get<double>() * 10);
  EXPECT_EQ(io::read_file(out() / "naive.table.txt").find("Self CPU %") != std::string::npos, true);
  // Nothing but the five files (no temporaries left behind).
  std::set<std::string> files;
  for (const auto& f : fs::directory_iterator(out()))
    if (f.is_regular_file()) files.insert(f.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"naive.summary.json", "naive.trace.json", "naive.table.txt",
                                          "naive.table.csv", "naive.stacks.txt"}));
}

// Forwards timed beside other processes that keep every CPU busy: the run measures the other work
// (/proc/stat) and says that its time is the machine's as much as the code's, in its output and its summary.
TEST_F(Cli, ProfileBesideOtherWorkSaysTheCpusWereShared) {
  if (!std::ifstream("/proc/stat")) GTEST_SKIP() << "no /proc/stat on this machine: the other work cannot be measured";
  const int cpus = analysis::online_cpus();
  std::vector<pid_t> spinners;
  for (int i = 0; i < cpus; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      volatile uint64_t x = 0;
      for (;;) x = x + 1;
    }
    spinners.push_back(pid);
  }
  json summary;
  Result r;
  // Enough forwards for a measurable stretch (other_work_min_seconds()) on any machine: more until there is one.
  for (int iters : {20, 80, 320}) {
    r = run(fmt::format("profile inplace --shape 1,4,512,64 --warmup 0 --iters {} --threads {}", iters, cpus) + out_flag());
    if (r.code != 0) break;
    summary = read_json("inplace.summary.json")["run"];
    if (!summary["cpu_sharing"].is_null()) break;
  }
  for (pid_t pid : spinners) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(summary["cpu_sharing"].is_object()) << summary.dump();
  // The spinners share every CPU with the run's threads: about cpus / 2 of them, well above the busy mark.
  const double other = summary["cpu_sharing"]["other_cpus"].get<double>();
  EXPECT_GT(other, analysis::busy_mark(cpus, cpus)) << summary.dump();
  EXPECT_EQ(summary["cpu_sharing"]["cpus"], cpus);
  EXPECT_EQ(summary["cpu_sharing"]["threads"], cpus);
  EXPECT_NE(r.out.find(fmt::format("Busy: other work used {:.1f} of {} CPUs while inplace ran", other, cpus)),
            std::string::npos)
      << r.out;
}

TEST_F(Cli, ProfileGroupsByInputShapeAndRecordsCounters) {
  const Result r = run("profile naive --group-by-input-shape --counters --row-limit -1" + kSmall + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Input Shapes"), std::string::npos) << r.out;
  // The two matmuls of the blog's script (Q·Kᵀ and P·V) have different shapes: two rows.
  size_t matmul_rows = 0;
  for (size_t at = r.out.find("  matmul  "); at != std::string::npos; at = r.out.find("  matmul  ", at + 1)) ++matmul_rows;
  EXPECT_EQ(matmul_rows, 2u) << r.out;
  EXPECT_NE(r.out.find("[[1, 2, 64, 32], [1, 2, 32, 64]]"), std::string::npos) << r.out;  // q, kᵀ
  EXPECT_NE(r.out.find("Input Types"), std::string::npos) << r.out;
  // Counters asked for: either recorded (their columns) or the reason they are not, never silence.
  EXPECT_NE(r.out.find("Counters: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("counters off"), std::string::npos) << r.out;
  const json j = read_json("naive.summary.json");
  int shaped = 0;
  for (const json& row : j["rows"]) shaped += row["name"] == "matmul" && !row["input_shapes"].get<std::string>().empty();
  EXPECT_EQ(shaped, 2);
  // The table's rows as CSV: every summary row, keyed as the summary keys them, with the same figures.
  const auto csv = parse_csv(io::read_file(out() / "naive.table.csv"));
  ASSERT_EQ(csv.size(), j["rows"].size() + 1);
  const auto at = [&](const char* name) { return csv_column(csv[0], name); };
  std::map<std::tuple<std::string, std::string, std::string>, const json*> by_key;
  for (const json& row : j["rows"])
    by_key[{row["name"].get<std::string>(), row["input_shapes"].get<std::string>(),
            row["input_types"].get<std::string>()}] = &row;
  for (size_t i = 1; i < csv.size(); ++i) {
    const auto& c = csv[i];
    ASSERT_EQ(c.size(), csv[0].size());
    const auto it = by_key.find({c[at("name")], c[at("input_shapes")], c[at("input_types")]});
    ASSERT_NE(it, by_key.end()) << c[at("name")] << " " << c[at("input_shapes")];
    const json& row = *it->second;
    EXPECT_EQ(std::stoll(c[at("calls")]), row["calls"].get<int64_t>());
    EXPECT_NEAR(std::stod(c[at("self_cpu_us")]) * 1e3, row["self_ns"].get<double>(), 1e-6 * row["self_ns"].get<double>() + 1e-9);
    EXPECT_NEAR(std::stod(c[at("cpu_total_us")]) * 1e3, row["total_ns"].get<double>(), 1e-6 * row["total_ns"].get<double>() + 1e-9);
    EXPECT_EQ(c[at("cpu_mem_bytes")], std::to_string(row["mem_bytes"].get<int64_t>()));
    EXPECT_EQ(c[at("self_page_faults")], row["self_page_faults"].is_null() ? "" : row["self_page_faults"].dump());
    if (row["cost"]["flops"].get<double>() > 0)
      EXPECT_DOUBLE_EQ(std::stod(c[at("flops")]), row["cost"]["flops"].get<double>());
  }
  // By type too: SDPA math's casts of q, k, v up to fp32 and of its output back down have the same shapes, and
  // are two rows (torch's key, the shapes alone, would merge them).
  const Result math = run("profile sdpa --backend math --group-by-input-shape --row-limit -1" + kSmall + out_flag());
  ASSERT_EQ(math.code, 0) << math.err;
  std::map<std::string, int64_t> to_calls;  // input types -> calls per forward, of the `to` rows
  const json math_summary = read_json("sdpa-math.summary.json");
  for (const json& row : math_summary["rows"])
    if (row["name"] == "to") to_calls[row["input_types"].get<std::string>()] += row["calls"].get<int64_t>() / 3;
  EXPECT_EQ(to_calls, (std::map<std::string, int64_t>{{"[bf16]", 3}, {"[fp32]", 1}})) << math.out;
  // Not asked for: the note says how to ask.
  const Result off = run("profile naive --row-limit 1" + kSmall + out_flag());
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_NE(off.out.find("Counters: counters off (turn them on with `attnprof profile --counters`"), std::string::npos)
      << off.out;
}

// torch.profiler's profile_memory and record_shapes, which the blog's scripts turn off: without them the table
// has no memory columns (as torch's), the trace no memory events or Input Dims, and the summary and diff say the
// memory is unknown rather than 0.
TEST_F(Cli, ProfileWithoutMemoryOrShapesLeavesThemOutAsTorchDoes) {
  const Result on = run("profile naive" + kSmall + out_flag());
  ASSERT_EQ(on.code, 0) << on.err;
  EXPECT_NE(on.out.find("CPU Mem"), std::string::npos) << on.out;
  EXPECT_EQ(on.out.find("Not recorded:"), std::string::npos) << on.out;
  EXPECT_EQ(read_json("naive.summary.json")["profiler"],
            (json{{"profile_memory", true}, {"record_shapes", true}}));
  const fs::path with_memory = dir_ / "with-memory.summary.json";
  fs::copy_file(out() / "naive.summary.json", with_memory);

  const Result off = run("profile naive --no-profile-memory --no-record-shapes" + kSmall + out_flag());
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_EQ(off.out.find("CPU Mem"), std::string::npos) << off.out;
  EXPECT_NE(off.out.find("Self CPU %"), std::string::npos) << off.out;
  EXPECT_NE(off.out.find("Not recorded: memory (profile_memory off) and input shapes (record_shapes off)."),
            std::string::npos) << off.out;
  // The blog's counts do not come from the profiler: still printed.
  EXPECT_NE(off.out.find("allocated at its peak above the inputs"), std::string::npos) << off.out;
  const json s = read_json("naive.summary.json");
  EXPECT_EQ(s["profiler"], (json{{"profile_memory", false}, {"record_shapes", false}}));
  EXPECT_TRUE(s["memory"]["timeline"].empty());
  for (const char* key : {"start_bytes", "peak_bytes", "end_bytes", "outside_zones_bytes"})
    EXPECT_TRUE(s["memory"][key].is_null()) << key;  // every memory figure, as the docs say
  for (const json& row : s["rows"]) {
    EXPECT_TRUE(row["mem_bytes"].is_null()) << row;
    EXPECT_EQ(row["input_shapes"], "") << row;
  }
  const std::string trace = io::read_file(out() / "naive.trace.json");
  for (const char* absent : {"Input Dims", "Input type", "[memory]", "\"name\":\"Memory\""})
    EXPECT_EQ(trace.find(absent), std::string::npos) << absent;
  EXPECT_NE(trace.find("\"name\":\"matmul\""), std::string::npos);

  // diff beside a profile with memory: its memory cells are unknown, not a change to 0.
  const Result d = run("diff " + with_memory.string() + " " + (out() / "naive.summary.json").string() + " --json");
  ASSERT_EQ(d.code, 0) << d.err;
  const json dj = json::parse(d.out);
  ASSERT_FALSE(dj["rows"].empty()) << d.out;
  for (const json& row : dj["rows"]) {
    EXPECT_TRUE(row["base_mem_bytes"].is_null()) << row;
    EXPECT_TRUE(row["new_mem_bytes"].is_null()) << row;
  }
  const Result dt = run("diff " + with_memory.string() + " " + (out() / "naive.summary.json").string());
  ASSERT_EQ(dt.code, 0) << dt.err;
  EXPECT_NE(dt.out.find("Self CPU Mem: -- (a profile that recorded no memory"), std::string::npos) << dt.out;
  {  // The null figures say so by themselves, without the "profiler" object; a non-boolean switch is corrupt.
    json edited = read_json("naive.summary.json");
    edited.erase("profiler");
    const fs::path no_block = dir_ / "no-block.summary.json", bad = dir_ / "bad-switch.summary.json";
    { std::ofstream(no_block) << edited.dump(); }
    const Result nb = run("diff " + with_memory.string() + " " + no_block.string());
    ASSERT_EQ(nb.code, 0) << nb.err;
    EXPECT_NE(nb.out.find("Self CPU Mem: -- (a profile that recorded no memory"), std::string::npos) << nb.out;
    // The report's table, rebuilt from the same summary, reads it the same way: no memory columns, not "0 b".
    EXPECT_FALSE(report::summary_has_memory(edited));
    EXPECT_FALSE(report::key_averages_from_summary(edited).has_memory);
    EXPECT_TRUE(report::summary_has_memory(json::parse(io::read_file(with_memory))));
    edited["profiler"] = {{"profile_memory", 0}, {"record_shapes", false}};
    { std::ofstream(bad) << edited.dump(); }
    const Result bs = run("diff " + with_memory.string() + " " + bad.string());
    EXPECT_EQ(bs.code, 2) << bs.err;
    EXPECT_NE(bs.err.find("field 'profiler.profile_memory' is 0, not true or false"), std::string::npos) << bs.err;
  }

  fs::remove_all(out());
  expect_bad("profile naive --no-profile-memory=false" + kSmall, "--no-profile-memory takes no value");
  expect_bad("profile naive --no-record-shapes --group-by-input-shape" + kSmall,
             "--group-by-input-shape needs the input shapes, which --no-record-shapes leaves unrecorded");
  expect_bad("profile naive --no-profile-memory --sort-by self_cpu_memory_usage" + kSmall,
             "--sort-by self_cpu_memory_usage needs memory, which --no-profile-memory leaves unrecorded");
  expect_bad("profile naive --sort-by page_faults" + kSmall, "--sort-by page_faults needs the software counters: add --counters");
}

// --schedule is torch.profiler's schedule(wait, warmup, active, repeat): every cycle's active steps are recorded
// under their own step numbers; a schedule that records nothing or never ends, or --iters beside it, is refused.
TEST_F(Cli, ProfileScheduleRecordsEveryCyclesActiveSteps) {
  const Result r = run("profile naive --schedule 0,1,2,2 --json" + kSmall + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("profiling 6 steps (4 recorded)"), std::string::npos) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["run"]["forward_ms"].size(), 4u);
  EXPECT_EQ(j["run"]["schedule"], (json{{"wait", 0}, {"warmup", 1}, {"active", 2}, {"repeat", 2}}));
  const json summary = read_json("naive.summary.json");
  int forwards = 0, step_calls = 0;
  for (const json& row : summary["rows"]) {
    const std::string name = row["name"];
    EXPECT_NE(name.rfind("ProfilerStep#", 0), 0u) << name;  // one ProfilerStep* row, as torch's key_averages()
    if (name == "ProfilerStep*") step_calls = row["calls"].get<int>();
    if (name == "attn_fwd") forwards = row["calls"].get<int>();
  }
  EXPECT_EQ(forwards, 4);
  EXPECT_EQ(step_calls, 4);
  // The trace keeps each step's own name.
  std::set<std::string> steps;
  const json trace = json::parse(io::read_file(out() / "naive.trace.json"));  // held: its events are iterated
  for (const json& e : trace["traceEvents"])
    if (e.contains("name") && e["name"].get<std::string>().rfind("ProfilerStep#", 0) == 0 && e["ph"] == "X")
      steps.insert(e["name"].get<std::string>());
  EXPECT_EQ(steps, (std::set<std::string>{"ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#4", "ProfilerStep#5"}));
  EXPECT_NE(io::read_file(out() / "naive.table.txt").find("ProfilerStep*"), std::string::npos);
  // Without it, the blog's: wait 1, warmup 1, active --iters.
  const Result d = run("profile naive --iters 2 --json" + kSmall + out_flag());
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_EQ(json::parse(d.out)["run"]["schedule"], (json{{"wait", 1}, {"warmup", 1}, {"active", 2}, {"repeat", 1}}));
  fs::remove_all(out());
  expect_bad("profile naive --schedule 1,1" + kSmall, "--schedule '1,1' has 2 fields: expected WAIT,WARMUP,ACTIVE");
  expect_bad("profile naive --schedule 1,1,0" + kSmall, "ACTIVE is 0, so nothing would be recorded");
  expect_bad("profile naive --schedule 1,1,3,0" + kSmall, "REPEAT 0 (torch's \"forever\") has no end");
  expect_bad("profile naive --schedule 1,-1,3" + kSmall, "WARMUP '-1' is not a count");
  expect_bad("profile naive --schedule 1,1,0x3" + kSmall, "ACTIVE '0x3' is not a count");
  expect_bad("profile naive --schedule 1,1,5000,3" + kSmall, "records 15000 forwards (ACTIVE × REPEAT), over 10000");
  expect_bad("profile naive --schedule 10000,10000,1,2" + kSmall, "runs 40002 steps, over 30000");
  expect_bad("profile naive --schedule 30001,0,1" + kSmall, "WAIT 30001 is over 30000, the most steps a run takes");
  expect_bad("profile naive --schedule 1,1,99999999999999999999999" + kSmall, "ACTIVE 99999999999999999999999 is over");
  // A long wait within the steps' bound is a schedule (it was refused at 10,000, the recorded forwards' bound).
  EXPECT_NE(run("profile naive --schedule 0,12000,1 --warmup 0 --shape 1,1,16,16 --threads 1" + out_flag()).err.find(
                "profiling 12001 steps (1 recorded)"),
            std::string::npos);
  fs::remove_all(out());
  expect_bad("profile naive --schedule ''" + kSmall, "--schedule: an empty value");
  expect_bad("profile naive --schedule 1,1,3 --iters 3" + kSmall, "--iters conflicts with --schedule");
}

// Each thread's share of the ops' own parallel regions: on its thread's track in the trace, in summary.json's
// thread_balance, and in the Threads table profile prints. flash at [1,4,256,64] is one task per (head, block
// of flash_block_rows() queries) a forward, over 2 threads.
TEST_F(Cli, ProfileShowsEachThreadsShareOfTheParallelOps) {
  const Result r = run("profile flash --shape 1,4,256,64 --threads 2 --warmup 1 --iters 3" + out_flag());
  const int64_t tasks = 4 * ((256 + flash_block_rows() - 1) / flash_block_rows());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Threads: each op's own OpenMP regions"), std::string::npos) << r.out;
  // The kernel's pattern its one zone does not show: how it tiles a head, what causal skips.
  AttnProblem p;
  p.B = 1, p.Hq = p.Hkv = 4, p.Nq = p.Nk = 256, p.D = 64;
  p.mask = MaskKind::Causal;
  EXPECT_NE(r.out.find("flash_attention_fwd: " + describe_flash_tiles(flash_tiles(p), p) + "; K and V stream once"),
            std::string::npos)
      << r.out;
  const json s = read_json("flash.summary.json");
  ASSERT_EQ(s["thread_balance"].size(), 1u) << s["thread_balance"];
  const json& b = s["thread_balance"][0];
  EXPECT_EQ(b["name"], "flash_attention_fwd");
  EXPECT_EQ(b["regions"], 3);  // one per recorded forward
  EXPECT_EQ(b["threads"], 2);
  EXPECT_EQ(b["items"], 3 * tasks);
  EXPECT_GT(b["busy_share"].get<double>(), 0.0);
  EXPECT_LE(b["busy_share"].get<double>(), 1.0 + 1e-9);
  EXPECT_GE(b["imbalance"].get<double>(), 1.0 - 1e-9);
  // The trace: a thread_work slice per thread per forward, on two distinct tracks.
  const json t = read_json("flash.trace.json");
  std::set<int64_t> tids;
  int64_t slices = 0, items = 0;
  for (const json& e : t["traceEvents"])
    if (e.value("cat", "") == "thread_work") {
      ++slices;
      tids.insert(e["tid"].get<int64_t>());
      items += e["args"].value("items", int64_t(0));
    }
  EXPECT_EQ(slices, 6);
  EXPECT_EQ(tids.size(), 2u);
  EXPECT_EQ(items, 3 * tasks);
  // Inside the one zone: the kernel's steps, printed, in the summary, and on each share's trace slice.
  EXPECT_NE(r.out.find("Inside flash_attention_fwd: each thread's share split by the kernel's steps (3 calls, 2 threads"),
            std::string::npos)
      << r.out;
  ASSERT_EQ(s["op_phases"].size(), 1u) << s["op_phases"];
  const json& ph = s["op_phases"][0];
  EXPECT_EQ(ph["name"], "flash_attention_fwd");
  EXPECT_EQ(ph["regions"], 3);
  double steps_ns = 0, qk_flops = 0;
  for (const json& st : ph["steps"]) {
    steps_ns += st["thread_ns"].get<double>();
    if (st["name"] == "Q·Kᵀ") qk_flops = st["flops"].get<double>();
  }
  EXPECT_DOUBLE_EQ(qk_flops, 3 * 2.0 * 64 * flash_tiles(p).scores * 4);
  EXPECT_LE(steps_ns, ph["share_ns"].get<double>() * (1 + 1e-9));
  double traced_us = 0, slices_us = 0;
  int64_t main_items = 0, worker_items = 0;  // tasks each took: one of them can take all four on a busy machine
  for (const json& e : t["traceEvents"])
    if (e.value("cat", "") == "thread_work") {
      ASSERT_TRUE(e["args"].contains("steps_us")) << e;
      (e["tid"].get<int64_t>() == 1 ? main_items : worker_items) += e["args"].value("items", int64_t(0));
      slices_us += e["dur"].get<double>();
      for (const auto& [name, us] : e["args"]["steps_us"].items()) traced_us += us.get<double>();
    }
  EXPECT_NEAR(traced_us, steps_ns * 1e-3, 0.01 + 1e-6 * traced_us);  // µs to 3 decimals, per step
  EXPECT_LE(traced_us, slices_us + 0.02);
  // Tile by tile: each (head, Q block) task a work_item slice inside its thread's share, named after its Q block,
  // with the K/V blocks it visited (causal: its own and those left of it); printed grouped, and in the summary.
  const int64_t q_blocks = tasks / 4;
  int64_t tiles = 0;
  for (const json& e : t["traceEvents"])
    if (e.value("cat", "") == "work_item") {
      ++tiles;
      const int64_t qb = e["args"]["Q block"].get<int64_t>();
      EXPECT_EQ(e["name"], "Q block " + std::to_string(qb));
      EXPECT_EQ(e["args"]["K/V blocks"].get<int64_t>(),
                (std::min<int64_t>(256, (qb + 1) * flash_block_rows()) + flash_block().cols - 1) / flash_block().cols);
      bool inside = false;
      const double ts = e["ts"].get<double>(), end = ts + e["dur"].get<double>();
      for (const json& sh : t["traceEvents"])
        inside = inside || (sh.value("cat", "") == "thread_work" && sh["tid"] == e["tid"] &&
                            sh["ts"].get<double>() <= ts && end <= sh["ts"].get<double>() + sh["dur"].get<double>());
      EXPECT_TRUE(inside) << e;
    }
  EXPECT_EQ(tiles, 3 * tasks);
  EXPECT_NE(r.out.find(fmt::format("Tasks of flash_attention_fwd: {} Q blocks in 3 calls ({} a call), by the K/V "
                                   "blocks each visited",
                                   3 * tasks, tasks)),
            std::string::npos)
      << r.out;
  ASSERT_EQ(s["op_items"].size(), 1u) << s["op_items"];
  EXPECT_EQ(s["op_items"][0]["items"], 3 * tasks);
  EXPECT_EQ(s["op_items"][0]["groups"].size(), size_t(q_blocks));
  // The folded stacks: the main thread's lines add up to the table's self CPU total (each rounded to a ns), the
  // kernel's steps are frames under flash_attention_fwd on each thread that took a task (four tasks a forward,
  // handed out dynamically: on a busy machine one thread can take them all).
  const std::string stacks = io::read_file(out() / "flash.stacks.txt");
  double main_ns = 0;
  int lines = 0;
  bool main_steps = false, worker_steps = false;
  for (size_t at = 0; at < stacks.size();) {
    const size_t nl = stacks.find('\n', at);
    ASSERT_NE(nl, std::string::npos) << stacks;
    const std::string line = stacks.substr(at, nl - at);
    const size_t sp = line.rfind(' ');
    ASSERT_NE(sp, std::string::npos) << line;
    if (line.rfind("main;", 0) == 0) main_ns += std::stod(line.substr(sp + 1));
    main_steps = main_steps || line.rfind("main;ProfilerStep*;flash_kernel_fwd;flash_attention_fwd;Q·Kᵀ ", 0) == 0;
    worker_steps = worker_steps || line.rfind("worker 1;flash_attention_fwd;P·V ", 0) == 0;
    ++lines;
    at = nl + 1;
  }
  EXPECT_NEAR(main_ns, s["totals"]["self_cpu_time_total_ns"].get<double>(), 0.5 * lines + 1e-9) << stacks;
  EXPECT_EQ(main_steps, main_items > 0) << stacks;
  EXPECT_EQ(worker_steps, worker_items > 0) << stacks;
  // Kineto's top-level keys: schema version 1, and no GPU on the CPU.
  EXPECT_EQ(t["schemaVersion"], 1);
  EXPECT_EQ(t["deviceProperties"], json::array());
}

TEST_F(Cli, ProfileJsonAndSdpaBackends) {
  Result r = run("profile sdpa --backend math --json --dtype fp32" + kSmall + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);  // stdout is JSON only
  EXPECT_EQ(j["kind"], "profile");
  EXPECT_EQ(j["run"]["variant"], "sdpa-math");
  EXPECT_EQ(j["run"]["annotation"], "sdpa_fwd");
  EXPECT_LT(j["run"]["max_abs_err"].get<double>(), 1e-4);
  EXPECT_TRUE(fs::exists(out() / "sdpa-math.trace.json"));
  r = run("profile sdpa --json" + kSmall + out_flag());  // auto picks flash at D=32
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["run"]["variant"], "sdpa-flash");
  r = run("profile inplace --kv-heads 1 --kv-len 96 --json" + kSmall + out_flag());  // GQA, Nk != Nq
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(json::parse(r.out)["run"]["problem"].get<std::string>().find("Hkv=1 Nq=64 Nk=96"), std::string::npos)
      << r.out;
  r = run("profile flash --no-causal --json" + kSmall + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  j = json::parse(r.out);
  EXPECT_EQ(j["run"]["annotation"], "flash_kernel_fwd");
  EXPECT_NE(j["run"]["problem"].get<std::string>().find("no-mask"), std::string::npos) << j["run"]["problem"];
}

TEST_F(Cli, CompareRunsEveryVariantWithinTolerance) {
  for (const char* dtype : {"fp32", "bf16", "fp16"}) {
    SCOPED_TRACE(dtype);
    const Result r = run(std::string("compare --iters 2 --warmup 0 --dtype ") + dtype + kSmall + out_flag());
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* col : {"Variant", "ms/fwd", "GFLOP/s", "% peak", "Peak mem", "Ops", "Bytes moved", "Floor ms",
                            "Bound", "Max err", "Check", "causal FLOPs halved", "Floor ms: the roofline floor"})
      EXPECT_NE(r.out.find(col), std::string::npos) << col;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
      EXPECT_TRUE(line.empty() || line.back() != ' ') << "trailing space: '" << line << "'";
    const json j = read_json("compare.json");
    EXPECT_EQ(j["kind"], "compare");
    EXPECT_EQ(j["shape"]["Nq"], 64);
    EXPECT_EQ(j["dtype"], dtype);
    ASSERT_EQ(j["variants"].size(), registry().size());
    for (const json& v : j["variants"]) {
      SCOPED_TRACE(v["name"].get<std::string>());
      EXPECT_EQ(v["status"], "ok") << v["note"];
      EXPECT_TRUE(v["ok"].get<bool>());
      EXPECT_GT(v["ms"].get<double>(), 0.0);
      EXPECT_GT(v["gflops"].get<double>(), 0.0);
      EXPECT_GT(v["ops"].get<double>(), 0.0);
      EXPECT_GT(v["bytes"].get<double>(), 0.0);
      EXPECT_GT(v["bound_ms"].get<double>(), 0.0);
      // The roofline floor holds each op to the larger of its two ceilings: never below the bytes alone (the
      // recorded bytes are the cost model's), nor below the attention FLOPs at the fastest peak.
      const json& m = j["machine"];
      const double fastest = std::max(m["fp32_gflops"].get<double>(), m["bf16_gflops"].get<double>());
      EXPECT_GE(v["floor_ms"].get<double>(), v["bound_ms"].get<double>() * (1 - 1e-9));
      EXPECT_GE(v["floor_ms"].get<double>(), j["attention_flops"].get<double>() / fastest * 1e-6 * (1 - 1e-9));
      EXPECT_GE(v["floor_memory_share"].get<double>(), 0.0);
      EXPECT_LE(v["floor_memory_share"].get<double>(), 1.0);
      // The table's Bound, from that share (memory >= 3/4, compute <= 1/4, else mixed).
      const double share = v["floor_memory_share"].get<double>();
      EXPECT_EQ(v["floor_bound"], share >= 0.75 ? "memory" : share <= 0.25 ? "compute" : "mixed") << share;
      // Where the time went, by each op's verdict, and the text's line saying it.
      const double time_share = v["memory_time_share"].get<double>();
      EXPECT_GE(time_share, 0.0);
      EXPECT_LE(time_share, 1.0);
      const size_t line_at = r.out.find("Time in memory-bound ops (");
      ASSERT_NE(line_at, std::string::npos) << r.out;
      const std::string line = r.out.substr(line_at, r.out.find('\n', line_at) - line_at);
      EXPECT_NE(line.find(fmt::format(" {} {:.0f} %", v["name"].get<std::string>(), 100 * time_share)),
                std::string::npos) << line;
      EXPECT_GT(v["peak_bytes"].get<int64_t>(), 0);
      // Within the variant's tolerance: max abs error below atol + rtol·max|ref| (|ref| < 4 for N(0,1) inputs).
      EXPECT_LE(v["max_abs_err"].get<double>(),
                v["tolerance"]["atol"].get<double>() + 4 * v["tolerance"]["rtol"].get<double>());
      EXPECT_TRUE(fs::exists(out() / v["trace"].get<std::string>()));
      // Each summary says, as profile's does, the team its ops ran on: diff notes runs on other thread counts.
      EXPECT_EQ(json::parse(io::read_file(out() / v["summary"].get<std::string>()))["run"]["threads"], 1);
      // The torch-style table of the same run, as profile writes it (report draws it beside the summary).
      const std::string table = io::read_file(out() / (v["name"].get<std::string>() + ".table.txt"));
      EXPECT_NE(table.find("Self CPU %"), std::string::npos);
      EXPECT_NE(table.find("Self CPU time total"), std::string::npos);
      // spread = slowest / fastest timed forward; the table flags a row above 1.15 as noisy, and only then.
      const auto f = v["forward_ms"].get<std::vector<double>>();
      ASSERT_EQ(f.size(), 2u);
      const double spread = std::max(f[0], f[1]) / std::min(f[0], f[1]);
      EXPECT_DOUBLE_EQ(v["spread"].get<double>(), spread);
      const bool flagged = r.out.find("Noisy: " + v["name"].get<std::string>() + " took") != std::string::npos;
      EXPECT_EQ(flagged, spread > 1.15) << r.out;
    }
    // The machine's memory note is recorded always, and printed only to explain a noisy row.
    const std::string reclaim = attnprof::analysis::memory_reclaim_note().value_or("");
    EXPECT_EQ(j["machine"]["memory_reclaim"], reclaim);
    // The CPU's signature tells generations apart where the model name is generic ("AMD EPYC").
    EXPECT_NE(j["machine"].value("cpu_signature", "").find(" family "), std::string::npos) << j["machine"].dump();
    const bool any_noisy = r.out.find("Noisy: ") != std::string::npos;
    EXPECT_EQ(r.out.find("Note: this VM") != std::string::npos, any_noisy && !reclaim.empty()) << r.out;
    // What the blog saw: six kernels for naive (two matmuls, mul, masked_fill's copy and fill, softmax), one
    // fewer for in-place (no copy); flash one. Views and wrappers are not passes over memory.
    EXPECT_EQ(j["variants"][0]["ops"].get<double>(), 6.0) << j["variants"][0].dump();
    EXPECT_EQ(j["variants"][1]["ops"].get<double>(), 5.0) << j["variants"][1].dump();
    EXPECT_TRUE(fs::exists(out() / "compare.txt"));
    // compare.csv: a row per variant with compare.json's figures, and the speed-up the text prints.
    const auto csv = parse_csv(io::read_file(out() / "compare.csv"));
    ASSERT_EQ(csv.size(), j["variants"].size() + 1);
    const auto at = [&](const char* name) { return csv_column(csv[0], name); };
    for (size_t i = 1; i < csv.size(); ++i) {
      const json& v = j["variants"][i - 1];
      EXPECT_EQ(csv[i][at("source")], "attnprof");
      EXPECT_EQ(csv[i][at("name")], v["name"]);
      EXPECT_EQ(csv[i][at("status")], "ok");
      for (const char* key : {"ms", "gflops", "pct_peak", "floor_ms", "max_abs_err"})
        EXPECT_EQ(std::stod(csv[i][at(key)]), v[key].get<double>()) << key;
      EXPECT_EQ(csv[i][at("floor_bound")], v["floor_bound"]);
      EXPECT_EQ(std::stod(csv[i][at("memory_time_share")]), v["memory_time_share"].get<double>());
      EXPECT_DOUBLE_EQ(std::stod(csv[i][at("speedup")]),
                       j["variants"][0]["ms"].get<double>() / v["ms"].get<double>());
      EXPECT_EQ(csv[i][at("speedup_base")], "naive");
      EXPECT_TRUE(fs::exists(out() / (v["name"].get<std::string>() + ".table.csv")));
    }
    // The blog's ratios under the table: naive's median over each other row's, from the JSON's own figures, a
    // ratio marked where either row's forwards were disturbed (Busy or Noisy, from the JSON's forwards and
    // sharing), as a tiny shape's often are.
    const auto disturbed = [](const json& v) {
      return report::is_disturbed(v["forward_ms"].get<std::vector<double>>(), report::cpu_sharing_of(v));
    };
    std::string speedups;
    bool marked = false;
    for (const json& v : j["variants"])
      if (v["name"] != "naive" && v["status"] == "ok") {
        const double x = j["variants"][0]["ms"].get<double>() / v["ms"].get<double>();
        const bool mark = disturbed(j["variants"][0]) || disturbed(v);
        marked = marked || mark;
        // Under a tenth with two significant digits (a slow row under a sanitizer: flash at 0.096x).
        speedups += fmt::format("{}{} {}x{}", speedups.empty() ? "" : ", ", v["name"].get<std::string>(),
                                x < 0.1 ? fmt::format("{:.2g}", x) : fmt::format("{:.{}f}", x, x < 10 ? 2 : 1),
                                mark ? "*" : "");
      }
    EXPECT_NE(r.out.find("Speed-up over naive (its ms per forward over each row's): " + speedups + "." +
                         (marked ? " *: either side's forwards" : "\n")),
              std::string::npos)
        << r.out;
    // The GEMM under naive/in-place's bf16 matmul is named, as the library chose it on this CPU.
    EXPECT_EQ(j["machine"]["bf16_matmul"], ops::bf16_matmul_uses_onednn() ? "onednn" : "fp32-widened-sgemm");
    const std::string gemm = report::describe_bf16_matmul(ops::bf16_matmul_key());
    ASSERT_FALSE(gemm.empty());
    const bool said = r.out.find("bf16 matmul (naive, inplace): " + gemm) != std::string::npos;
    EXPECT_EQ(said, std::string(dtype) == "bf16") << r.out;
    EXPECT_EQ(r.out.find("fp16 matmul (naive, inplace): fp16 widened to fp32") != std::string::npos,
              std::string(dtype) == "fp16") << r.out;
  }
}

// Without --warmup, the CPU warms up for the default count and then until 0.1 s has passed (a forward's first
// runs in a process are slower while malloc adapts); --warmup W runs exactly W. compare.json says which.
TEST_F(Cli, CompareWarmsUpForAFloorOfTimeUnlessWarmupIsGiven) {
  Result r = run("compare --variants flash --iters 1" + kSmall + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  json j = read_json("compare.json");
  EXPECT_EQ(j["warmup"], 1);
  EXPECT_DOUBLE_EQ(j["warmup_min_s"].get<double>(), 0.1);
  // A forward at this shape takes well under a millisecond: 0.1 s holds many more than the count.
  EXPECT_GT(j["variants"][0]["warmup_forwards"].get<int>(), 1) << j["variants"][0].dump();
  EXPECT_NE(r.err.find("warm-up forwards (1 at least, and 0.1 s of them)"), std::string::npos) << r.err;
  // A forward of a few µs needs more than the 10,000 forwards --iters allows to fill 0.1 s: the warm-up is not
  // recorded and runs on, so whether other work shared the CPUs is judged (it stopped at 10,000 and said "Not
  // judged" beside a default --warmup).
  r = run("compare --variants flash --iters 1 --shape 1,1,64,64" + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  j = read_json("compare.json");
  EXPECT_FALSE(j["variants"][0]["cpu_sharing"].is_null()) << j["variants"][0].dump();
  EXPECT_EQ(r.out.find("Not judged"), std::string::npos) << r.out;
  r = run("compare --variants flash --iters 1 --warmup 2" + kSmall + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  j = read_json("compare.json");
  EXPECT_EQ(j["warmup"], 2);
  EXPECT_DOUBLE_EQ(j["warmup_min_s"].get<double>(), 0.0);
  EXPECT_EQ(j["variants"][0]["warmup_forwards"], 2);
}

// compare's Threads: lines say which ops left a thread idle in their parallel regions: exactly the ops whose
// summary's thread_balance has a team of 2 or more busy under 80 % of its time (the profile they come from is
// freed once the row's files are written, so the line must be made from what was kept). At 16 rows softmax's
// second thread usually starts late enough to leave the team half idle, so there is a line to check.
TEST_F(Cli, CompareThreadsLinesFollowEachSummarysThreadBalance) {
  const Result r = run("compare --variants naive,inplace --iters 2 --warmup 1 --shape 1,1,16,16 --threads 2" + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  int checked = 0;
  for (const char* variant : {"naive", "inplace"}) {
    const json s = read_json(std::string(variant) + ".summary.json");
    ASSERT_TRUE(s.contains("thread_balance")) << variant;
    for (const json& b : s["thread_balance"]) {
      const std::string line = fmt::format("Threads: {}'s op {} kept its", variant, b["name"].get<std::string>());
      const bool idle = b["threads"].get<int>() > 1 && b["busy_share"].get<double>() < 0.8;
      EXPECT_EQ(r.out.find(line) != std::string::npos, idle) << line << " busy " << b["busy_share"] << "\n" << r.out;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

TEST_F(Cli, CompareReportsAVariantOverTheBudgetAsARow) {
  // At N=256, 1000 KiB is enough for the inputs (3 × 64 KiB at fp32), their fp64 reference and flash's output
  // and scratch, but not for the naive N×N scores beside them.
  const Result r = run("compare --iters 1 --warmup 0 --dtype fp32 --memory-budget 1000K --variants naive,flash --json "
                       "--shape 1,2,256,32 --threads 1" + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["variants"].size(), 2u);
  EXPECT_EQ(j["variants"][0]["status"], "skipped");
  EXPECT_TRUE(j["variants"][0]["ms"].is_null());
  EXPECT_TRUE(j["variants"][0]["spread"].is_null());  // no timed forwards
  EXPECT_NE(j["variants"][0]["note"].get<std::string>().find("budget"), std::string::npos);
  EXPECT_EQ(j["variants"][1]["status"], "ok");
}

TEST_F(Cli, CompareCountersPutPageFaultsInTheSummariesForDiff) {
  const std::string shape = " --shape 1,4,512,64 --iters 1 --warmup 0";
  ASSERT_EQ(run("compare --counters --variants naive,inplace" + shape + out_flag()).code, 0);
  for (const char* v : {"naive", "inplace"}) {
    const json s = read_json(std::string(v) + ".summary.json");
    EXPECT_TRUE(s["counters"]["recorded"].get<bool>()) << s["counters"];
    int ops = 0;
    for (const json& r : s["rows"])
      if (r["category"] == "cpu_op") {
        EXPECT_TRUE(r["self_page_faults"].is_number()) << v << " " << r["name"];
        EXPECT_GE(r["page_faults"].get<int64_t>(), r["self_page_faults"].get<int64_t>()) << v << " " << r["name"];
        ++ops;
      }
    EXPECT_GE(ops, 5) << v;
  }
  const Result d = run("diff " + (out() / "naive.summary.json").string() + " " + (out() / "inplace.summary.json").string());
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_NE(d.out.find("    Faults       new  Change"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("page faults per forward gone with them"), std::string::npos) << d.out;
  // Without --counters: no counts, and diff shows no column for them.
  ASSERT_EQ(run("compare --variants naive" + shape + out_flag()).code, 0);
  const json plain = read_json("naive.summary.json");
  for (const json& r : plain["rows"]) EXPECT_TRUE(r["self_page_faults"].is_null()) << r["name"];
  const Result d2 = run("diff " + (out() / "naive.summary.json").string() + " " + (out() / "inplace.summary.json").string());
  ASSERT_EQ(d2.code, 0) << d2.err;
  EXPECT_EQ(d2.out.find("Faults"), std::string::npos) << d2.out;
}

// compare --peer torch, without torch: every way the interpreter can be wrong is refused before anything runs,
// with one line that says what to do, and nothing written.
TEST_F(Cli, ComparePeerRefusesAnInterpreterThatCannotRunIt) {
  const std::string args = "compare" + kSmall + "--variants flash --peer torch";
  expect_bad(args + " --python " + (dir_ / "no-such-python").string(), "cannot start the python interpreter");
  expect_bad(args + " --python /bin/false", "failed before running anything: exit status 1");
  expect_bad("compare" + kSmall + "--python /usr/bin/python3", "--python applies with --peer torch only");
  expect_bad("compare" + kSmall + "--peer tensorflow", "unknown --peer 'tensorflow': expected torch");
  expect_bad("compare" + kSmall + "--peer torch --device cuda", "--peer torch runs on the CPU backend");
  expect_bad("compare" + kSmall + "--peer-timeout 5", "--peer-timeout applies with --peer torch only");
  {  // An interpreter that hangs, in its probe or its run: stopped at --peer-timeout, the run ends, nothing written.
    const fs::path hangs = dir_ / "python-hangs";
    { std::ofstream(hangs) << "#!/bin/sh\nexec sleep 60\n"; }
    fs::permissions(hangs, fs::perms::owner_all);
    expect_bad(args + " --python " + hangs.string() + " --peer-timeout 1",
               "'" + hangs.string() + "' did not finish within --peer-timeout 1 s and was stopped");
  }
  {  // A wrapper whose own children hang: the timeout ends them too (the interpreter runs in a group of its own).
    const fs::path wraps = dir_ / "python-wraps", pidfile = dir_ / "grandchild.pid";
    { std::ofstream(wraps) << "#!/bin/sh\nsleep 60 &\necho $! > " << pidfile.string() << "\nwait\n"; }
    fs::permissions(wraps, fs::perms::owner_all);
    expect_bad(args + " --python " + wraps.string() + " --peer-timeout 1", "did not finish within --peer-timeout 1 s");
    std::string pid;
    std::ifstream(pidfile) >> pid;
    ASSERT_FALSE(pid.empty());
    // Killed (then reaped by init, at once or soon): gone, or a zombie for a moment.
    bool gone = false;
    for (int i = 0; i < 100 && !gone; ++i) {
      std::string stat;
      std::getline(std::ifstream("/proc/" + pid + "/stat"), stat);
      gone = stat.empty() || stat.find(") Z ") != std::string::npos;
      if (!gone) ::usleep(20000);
    }
    EXPECT_TRUE(gone) << "the wrapper's sleep " << pid << " survived the timeout";
  }
  // Stand-ins for an interpreter gone wrong after the probe (argv: -c SCRIPT probe|run ...): what they print or
  // how they end is named, and the variants that ran are not written either.
  const std::string probe_ok = "#!/bin/sh\nif [ \"$3\" = probe ]; then echo '{\"torch\": \"0.0\"}'; exit 0; fi\n";
  // A valid fp32 output of the problem's shape, and one cut short (its header promises 16 KiB, 16 bytes come).
  const fs::path zeros_npy = dir_ / "zeros-out.npy", short_npy = dir_ / "short-out.npy";
  const std::string full = npy::to_bytes(Tensor::zeros({1, 2, 64, 32}, DType::F32));
  { std::ofstream(zeros_npy, std::ios::binary) << full; }
  { std::ofstream(short_npy, std::ios::binary) << full.substr(0, full.size() - 16384 + 16); }
  // The result line with both rows: torch-naive's forward times as given, torch-sdpa skipped.
  const auto result = [](const std::string& naive_ms, int threads = 1) {
    return fmt::format("echo '{{\"torch\": \"0.0\", \"threads\": {}, \"rows\": [{{\"name\": \"torch-naive\", "
                       "\"forward_ms\": {}}}, {{\"name\": \"torch-sdpa\", \"skipped\": true}}]}}'\n",
                       threads, naive_ms);
  };
  for (const auto& [name, body, expect] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"garbage", "echo hello\n", "printed no result (exit status 0)"},
           {"no-rows", "echo '{\"torch\": \"0.0\", \"threads\": 1}'\n", "printed no rows"},
           {"bad-times", result("[\"a\"]"), "printed no forward times for torch-naive"},
           {"other-row", "echo '{\"torch\": \"0.0\", \"threads\": 1, \"rows\": [{\"name\": \"\\\\u001b[31mred\", "
                         "\"forward_ms\": [1.5]}]}'\n",
            "printed the rows [\"\\u001b[31mred\"], expected torch-naive and torch-sdpa once each, in that order"},
           {"control-name", "echo '{\"torch\": \"0.0\", \"threads\": 1, \"rows\": [{\"name\": \"torch-naive\\\\u001b\", "
                            "\"skipped\": true}, {\"name\": \"torch-sdpa\", \"skipped\": true}]}'\n",
            "printed the rows [\"torch-naive\\u001b\", \"torch-sdpa\"], expected"},
           {"empty-rows", "echo '{\"torch\": \"0.0\", \"threads\": 1, \"rows\": []}'\n",
            "printed the rows [], expected torch-naive and torch-sdpa once each"},
           {"twice", "echo '{\"torch\": \"0.0\", \"threads\": 1, \"rows\": [{\"name\": \"torch-naive\", \"skipped\": "
                     "true}, {\"name\": \"torch-naive\", \"skipped\": true}]}'\n",
            "printed the rows [\"torch-naive\", \"torch-naive\"], expected"},
           {"threads", result("[1.5, 1.5, 1.5]", 99), "reports 99 threads, where it was asked for 1"},
           {"few-times", result("[1.5]"), "printed 1 forward times for torch-naive, where it was asked to time 3"},
           {"zero-time", result("[1.5, 0, 1.5]"), "printed a forward time of 0 ms for torch-naive"},
           {"tiny-time", result("[1.5, 1e-300, 1.5]"), "printed a forward time of 1e-300 ms for torch-naive"},
           {"huge-time", result("[1.5, 1e308, 1.5]"), "printed a forward time of 1e+308 ms for torch-naive"},
           {"no-output", result("[1.5, 1.5, 1.5]"), "returned no output for torch-naive"},
           {"cut-short", result("[1.5, 1.5, 1.5]") + "cat " + short_npy.string() + "\n",
            "the peer's torch-naive output is cut short: its shape needs 16384 data bytes, 16 came"},
           {"trailing", result("[1.5, 1.5, 1.5]") + "cat " + zeros_npy.string() + "\nprintf xyz\n",
            "printed 3 bytes after its outputs"},
           {"traceback", "echo 'Traceback (most recent call last):' >&2; echo 'RuntimeError: boom' >&2; exit 1\n",
            "failed: RuntimeError: boom (exit status 1)"},
           {"killed", "kill -9 $$\n", "failed: killed by signal 9"},
           {"hangs", "exec sleep 60\n", "did not finish within --peer-timeout 1 s and was stopped"}}) {
    SCOPED_TRACE(name);
    const fs::path fake = dir_ / ("python-" + name);
    { std::ofstream(fake) << probe_ok << body; }
    fs::permissions(fake, fs::perms::owner_all);
    // After the variants ran (their progress is on stderr): exit 2, the error last, and their files discarded.
    const Result r = run(args + " --python " + fake.string() + " --peer-timeout 1" + out_flag());
    EXPECT_EQ(r.code, 2) << r.err;
    const size_t last = r.err.rfind('\n', r.err.size() - 2);
    const std::string last_line = r.err.substr(last == std::string::npos ? 0 : last + 1);
    EXPECT_EQ(last_line.rfind("attnprof: error: --peer torch: ", 0), 0u) << r.err;
    EXPECT_NE(last_line.find(expect), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_FALSE(fs::exists(out())) << "a run whose peer failed writes nothing";
  }
  {  // A row the peer skipped though attnprof did not ask: kept as skipped, with a reason, not an empty note.
    const fs::path fake = dir_ / "python-skips";
    { std::ofstream(fake) << probe_ok << "echo '{\"torch\": \"0.0\", \"threads\": 1, \"rows\": [{\"name\": \"torch-naive\", "
                             "\"skipped\": true}, {\"name\": \"torch-sdpa\", \"skipped\": true}]}'\n"; }
    fs::permissions(fake, fs::perms::owner_all);
    const Result r = run(args + " --python " + fake.string() + out_flag());
    ASSERT_EQ(r.code, 0) << r.err;
    const json row = read_json("compare.json")["peers"]["rows"][0];
    EXPECT_EQ(row["status"], "skipped");
    EXPECT_EQ(row["note"], "the peer skipped it unasked");
    fs::remove_all(out());
  }
  {  // A timed row whose forwards shared the CPUs (by the peer's own readings): a Busy line, as a variant's gets,
     // and its cpu_sharing in compare.json; the stand-in's zeros fail the check, which is printed, not the exit.
    const fs::path zeros = dir_ / "zeros.npy";
    { std::ofstream(zeros, std::ios::binary) << npy::to_bytes(Tensor::zeros({1, 2, 64, 32}, DType::F32)); }
    // Every CPU busy with other work for the whole second: above the busy mark (cpus - 1 + 0.5) on any machine.
    const int cpus = int(::sysconf(_SC_NPROCESSORS_ONLN));
    const fs::path fake = dir_ / "python-busy";
    {
      std::ofstream(fake) << probe_ok
                          << fmt::format(R"(echo '{{"torch": "0.0", "threads": 1, "rows": [{{"name": "torch-naive", )"
                                         R"("skipped": true}}, {{"name": "torch-sdpa", )"
                                         R"("call": "sdpa", "forward_ms": [100, 101, 102], "beside": {{"machine_busy_s": )"
                                         R"({}.5, "own_cpu_s": 0.5, "wall_s": 1.0}}}}]}}')"
                                         "\ncat {}\n",
                                         cpus, zeros.string());
    }
    fs::permissions(fake, fs::perms::owner_all);
    const Result r = run(args + " --python " + fake.string() + out_flag());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(fmt::format("Busy: other work used {}.0 of {} CPUs while torch-sdpa ran on 1 thread: ", cpus,
                                     cpus)),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("FAIL"), std::string::npos) << r.out;
    const json row = read_json("compare.json")["peers"]["rows"][1];
    EXPECT_EQ(row["status"], "failed");
    EXPECT_EQ(row["note"].get<std::string>().rfind("validation failed: ", 0), 0u) << row.dump();
    EXPECT_NE(r.out.find(row["note"].get<std::string>()), std::string::npos) << "the failed row's note is printed";
    EXPECT_DOUBLE_EQ(row["cpu_sharing"]["other_cpus"].get<double>(), double(cpus));
    EXPECT_EQ(row["cpu_sharing"]["threads"], 1);
    fs::remove_all(out());
  }
  {  // An output of NaN: its max abs error is inf, and the note says the elements are NaN, not just far off.
    const fs::path nans = dir_ / "nans.npy";
    {
      std::ofstream(nans, std::ios::binary)
          << npy::to_bytes(Tensor::full({1, 2, 64, 32}, DType::F32, std::numeric_limits<float>::quiet_NaN()));
    }
    const fs::path fake = dir_ / "python-nan";
    {
      std::ofstream(fake) << probe_ok
                          << R"(echo '{"torch": "0.0", "threads": 1, "rows": [{"name": "torch-naive", "skipped": )"
                             R"(true}, {"name": "torch-sdpa", "call": "sdpa", "forward_ms": [1, 1, 1]}]}')"
                          << "\ncat " << nans.string() << "\n";
    }
    fs::permissions(fake, fs::perms::owner_all);
    const Result r = run(args + " --python " + fake.string() + out_flag());
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string note = "validation failed: 4096 of 4096 elements are NaN or infinite";
    EXPECT_NE(r.out.find(note), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("peer torch-sdpa: 1.000 ms/forward, " + note), std::string::npos) << r.err;
    const json row = read_json("compare.json")["peers"]["rows"][1];
    EXPECT_EQ(row["status"], "failed");
    EXPECT_EQ(row["note"].get<std::string>().rfind(note, 0), 0u) << row.dump();
    fs::remove_all(out());
  }
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 for the interpreter without torch";
  // A real interpreter that has neither numpy nor torch: Debian's python3 without its site packages.
  const fs::path bare = dir_ / "python-without-site";
  { std::ofstream(bare) << "#!/bin/sh\nexec /usr/bin/python3 -I -S \"$@\"\n"; }
  fs::permissions(bare, fs::perms::owner_all);
  expect_bad(args + " --python " + bare.string(), "cannot import numpy and torch: ModuleNotFoundError: No module named");
}

// compare --peer torch with the torch Debian ships (python3-torch, not installed by setup.sh): the blog's script
// and torch's SDPA on the same inputs, timed, checked against the same fp64 reference, in the table and in
// compare.json; a row torch cannot run (fp16 matmul on the CPU in 1.13) or that would not fit the memory
// budget is a skipped row with the reason.
TEST_F(Cli, ComparePeerTorchRunsTheBlogsScriptAndSdpaOnTheSameInputs) {
  if (std::system("/usr/bin/python3 -c 'import numpy, torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch to run this test)";
  Result r = run("compare --shape 1,4,128,32 --kv-heads 2 --threads 1 --iters 2 --variants naive,flash --peer torch "
                 "--python /usr/bin/python3" + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  json c = read_json("compare.json");
  ASSERT_TRUE(c.contains("peers")) << c.dump(1);
  const json& peers = c["peers"];
  EXPECT_EQ(peers["kind"], "torch");
  EXPECT_EQ(peers["python"], "/usr/bin/python3");
  EXPECT_FALSE(peers["torch_version"].get<std::string>().empty());
  EXPECT_EQ(peers["threads"], 1) << "torch runs the threads attnprof does";
  ASSERT_EQ(peers["rows"].size(), 2u);
  const json& naive = c["variants"][0];
  for (const json& row : peers["rows"]) {
    SCOPED_TRACE(row.dump());
    EXPECT_EQ(row["status"], "ok");
    EXPECT_EQ(row["forward_ms"].size(), 2u);
    EXPECT_GT(row["ms"].get<double>(), 0.0);
    EXPECT_NEAR(row["gflops"].get<double>(), c["attention_flops"].get<double>() / (row["ms"].get<double>() * 1e6),
                1e-9 * row["gflops"].get<double>());
    // Checked as attnprof's unfused variants are, and as close to the reference: torch rounds to bf16 between
    // ops as naive does.
    EXPECT_EQ(row["tolerance"], naive["tolerance"]);
    EXPECT_LE(row["tolerance_used"].get<double>(), 1.0);
    EXPECT_GT(row["max_abs_err"].get<double>(), 0.0);
    EXPECT_LT(row["max_abs_err"].get<double>(), 2 * naive["max_abs_err"].get<double>());
  }
  EXPECT_EQ(peers["rows"][0]["name"], "torch-naive");
  EXPECT_EQ(peers["rows"][1]["name"], "torch-sdpa");
  EXPECT_NE(r.out.find("Peer: torch " + peers["torch_version"].get<std::string>()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Fastest against fastest: "), std::string::npos) << r.out;
  {
    // Its ratio carries the speed-up line's `*` exactly when either fastest row's forwards were disturbed.
    auto fastest = [](const json& rows) {
      const json* best = nullptr;
      for (const json& row : rows)
        if (row["status"] == "ok" && (!best || row["ms"].get<double>() < (*best)["ms"].get<double>())) best = &row;
      return best;
    };
    const json *ours = fastest(c["variants"]), *theirs = fastest(peers["rows"]);
    ASSERT_TRUE(ours && theirs);
    const bool disturbed = report::is_disturbed((*ours)["forward_ms"].get<std::vector<double>>(),
                                                report::cpu_sharing_of(*ours)) ||
                           report::is_disturbed((*theirs)["forward_ms"].get<std::vector<double>>(),
                                                report::cpu_sharing_of(*theirs));
    const size_t at = r.out.find("Fastest against fastest: ");
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_EQ(line.find("x* ") != std::string::npos, disturbed) << line;
    EXPECT_EQ(line.find(std::string(report::disturbed_ratio_note())) != std::string::npos, disturbed) << line;
  }
  // The peer's rows are not variants: no files of theirs, and nothing else reads them as one.
  EXPECT_FALSE(fs::exists(out() / "torch-naive.summary.json"));
  Result again = run("roofline --from " + out().string());
  EXPECT_EQ(again.code, 0) << again.err;

  // A row torch cannot run, and one over the memory budget: skipped with the reason; attnprof's rows unchanged.
  fs::remove_all(out());
  r = run("compare --shape 1,2,64,32 --dtype fp16 --threads 1 --variants flash --peer torch --python /usr/bin/python3" +
          out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  c = read_json("compare.json");
  for (const json& row : c["peers"]["rows"])
    if (row["status"] == "skipped") EXPECT_NE(row["note"].get<std::string>().find(" raised "), std::string::npos) << row;
  fs::remove_all(out());
  r = run("compare --shape 1,2,512,32 --threads 1 --variants flash --memory-budget 2M --peer torch "
          "--python /usr/bin/python3" + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  c = read_json("compare.json");
  EXPECT_EQ(c["variants"][0]["status"], "ok");
  EXPECT_EQ(c["peers"]["rows"][0]["status"], "skipped");
  EXPECT_NE(c["peers"]["rows"][0]["note"].get<std::string>().find("torch-naive (its inputs"), std::string::npos)
      << c["peers"]["rows"][0];
  // Debian's torch (1.13) composes SDPA on the CPU from the math path: its N×N scores count as naive's do.
  EXPECT_EQ(c["peers"]["rows"][1]["status"], "skipped");
  EXPECT_NE(c["peers"]["rows"][1]["note"].get<std::string>().find("composes it on the CPU from the math path"),
            std::string::npos)
      << c["peers"]["rows"][1];
}

TEST_F(Cli, CompareVariantsSdpaMeansEveryBackend) {
  // A variant named twice, directly or through "sdpa", runs once, where it was first named.
  const Result r =
      run("compare --iters 1 --warmup 0 --dtype fp32 --variants sdpa,flash,sdpa-flash,flash --json" + kSmall + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  std::vector<std::string> names;
  for (const json& v : j["variants"]) names.push_back(v["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"sdpa-math", "sdpa-flash", "flash"}));
  EXPECT_EQ(j["problem"], "B=1 Hq=2 Hkv=2 Nq=64 Nk=64 D=32 fp32 causal");
  EXPECT_GT(j["bandwidth_gbs"].get<double>(), 0.0);
  for (const json& v : j["variants"]) {
    SCOPED_TRACE(v["name"].get<std::string>());
    ASSERT_EQ(v["forward_ms"].size(), 1u);
    EXPECT_EQ(v["forward_ms"][0], v["ms"]);  // one timed forward: its time is the median
    EXPECT_NEAR(v["gflops"].get<double>(), j["attention_flops"].get<double>() / (v["ms"].get<double>() * 1e6), 1e-9);
  }
}

// --flash-block runs the CPU flash kernel on other tiles: the header and the tiles line say so, the summary and
// compare.json record them, and diff names the change beside what it did to the bytes K and V stream.
TEST_F(Cli, FlashBlockRunsOtherTilesAndDiffNamesThem) {
  const std::string shape = " --shape 1,2,300,32 --threads 1 --iters 1 --warmup 0 ";
  const Result dflt = run("profile flash" + shape + " --out " + (dir_ / "dflt").string());
  ASSERT_EQ(dflt.code, 0) << dflt.err;
  const Result set = run("profile flash --flash-block 128x64" + shape + out_flag());
  ASSERT_EQ(set.code, 0) << set.err;
  EXPECT_NE(set.err.find("causal, 1 thread, flash blocks 128×64, inputs"), std::string::npos) << set.err;
  EXPECT_NE(set.out.find("tiles of 128 query rows × 64 keys"), std::string::npos) << set.out;
  EXPECT_EQ(read_json("flash.summary.json")["run"]["flash_block"], json::array({128, 64}));
  const json base = json::parse(io::read_file(dir_ / "dflt" / "flash.summary.json"));
  const json& b = base["run"]["flash_block"];
  ASSERT_TRUE(b.is_array()) << base["run"].dump();
  EXPECT_EQ(dflt.err.find("flash blocks"), std::string::npos) << "the defaults are not called out";
  const Result d = run("diff " + (dir_ / "dflt" / "flash.summary.json").string() + " " + (out() / "flash.summary.json").string());
  ASSERT_EQ(d.code, 0) << d.err;
  if (b != json::array({128, 64})) {
    EXPECT_NE(d.out.find(fmt::format("flash blocks (query rows × keys per tile): {}×{} -> 128×64", b[0].get<int>(),
                                     b[1].get<int>())),
              std::string::npos)
        << d.out;
    // The tiles: 3 Q blocks of 128 rows a head against the default's. The last, rows 256-299 visiting all 5 K/V
    // blocks, is the same tile on both sides and pairs; the others are other tiles, a row each.
    EXPECT_NE(d.out.find("Inside flash_attention_fwd, its Q blocks by the K/V blocks each visited"), std::string::npos)
        << d.out;
    const json dj = json::parse(run("diff " + (dir_ / "dflt" / "flash.summary.json").string() + " " +
                                    (out() / "flash.summary.json").string() + " --json").out);
    ASSERT_EQ(dj["items"].size(), 1u) << dj.dump();
    EXPECT_DOUBLE_EQ(dj["items"][0]["new_items_per_forward"].get<double>(), 6);  // 3 Q blocks × 2 heads
    std::vector<int> paired;
    for (const json& g : dj["items"][0]["groups"])
      if (!g["base"].is_null() && !g["new"].is_null()) paired.push_back(g["inner"].get<int>());
    EXPECT_EQ(paired, std::vector<int>{5}) << dj["items"].dump();
  }
  // compare records them at the top, and in its flash rows' summaries.
  const Result c = run("compare --variants naive,flash --flash-block 128x64 --json" + shape + out_flag());
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(json::parse(c.out)["flash_block"], json::array({128, 64}));
  EXPECT_FALSE(read_json("naive.summary.json")["run"].contains("flash_block"));
  // A list: compare runs each flash variant once per size, side by side as flash@ROWSxCOLS rows with files of
  // their own; the other variants once.
  const Result l = run("compare --variants naive,flash --flash-block 64x64,128x64 --json" + shape + out_flag());
  ASSERT_EQ(l.code, 0) << l.err;
  const json lj = json::parse(l.out);
  std::vector<std::string> names;
  for (const json& v : lj["variants"]) names.push_back(v["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"naive", "flash@64x64", "flash@128x64"}));
  EXPECT_EQ(lj["variants"][2]["flash_block"], json::array({128, 64}));
  EXPECT_TRUE(lj["variants"][0]["flash_block"].is_null());
  EXPECT_TRUE(lj["flash_block"].is_null()) << "each row says its own";
  EXPECT_EQ(read_json("flash@64x64.summary.json")["run"]["flash_block"], json::array({64, 64}));
  EXPECT_NE(l.err.find("3 rows at B=1 Hq=2 Hkv=2 Nq=300 Nk=300 D=32 bf16 causal, 1 thread, flash blocks 64×64, 128×64"),
            std::string::npos) << l.err;
  // A run none of whose rows ran the kernel records none (diff would name a change of blocks nothing used).
  const Result n = run("compare --variants naive --json" + shape + out_flag());
  ASSERT_EQ(n.code, 0) << n.err;
  EXPECT_TRUE(json::parse(n.out)["flash_block"].is_null()) << n.out;
  // roofline places flash's ops under them, and says and records which.
  const Result r = run("roofline flash --flash-block 128x64 --iters 1 --warmup 0 --shape 1,2,300,32 --threads 1" +
                       out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("causal, flash blocks 128×64 (1 recorded forwards each"), std::string::npos) << r.out;
  EXPECT_EQ(read_json("roofline.json")["flash_block"], json::array({128, 64}));
  // sweep: every point on them, said in its header and recorded; none recorded for a sweep without flash.
  const Result sw = run("sweep --variants flash --seq 64,128 --flash-block 128x64 --shape 1,2,64,32 --threads 1 "
                        "--iters 1 --warmup 0" + out_flag());
  ASSERT_EQ(sw.code, 0) << sw.err;
  EXPECT_NE(sw.out.find("1 thread, flash blocks 128×64"), std::string::npos) << sw.out;
  EXPECT_EQ(read_json("sweep.json")["flash_block"], json::array({128, 64}));
  ASSERT_EQ(run("sweep --variants naive --seq 64,128 --shape 1,2,64,32 --threads 1 --iters 1 --warmup 0" + out_flag())
                .code, 0);
  EXPECT_TRUE(read_json("sweep.json")["flash_block"].is_null());
  // Refused: a run that would not use them, a malformed or impossible size, and --peaks-only.
  fs::remove_all(out());
  expect_bad("profile naive --flash-block 128x64" + kSmall,
             "--flash-block sets the CPU flash kernel's blocks, which naive does not run (flash and sdpa-flash do)");
  expect_bad("compare --variants naive,inplace --flash-block 128x64" + kSmall,
             "which naive and inplace do not run (flash and sdpa-flash do)");
  expect_bad("profile flash --flash-block 128" + kSmall, "--flash-block '128' is not ROWSxCOLS");
  expect_bad("profile flash --flash-block 64x64,128x64" + kSmall,
             "--flash-block '64x64,128x64' names 2 sizes: this command runs one (compare runs the flash variants once "
             "per size of a list)");
  expect_bad("compare --flash-block 64x64,,128x64" + kSmall, "holds an empty size");
  expect_bad("compare --flash-block 64x64,64x64" + kSmall, "--flash-block names 64x64 twice");
  expect_bad("profile flash --flash-block 99999999999x64" + kSmall,
             "--flash-block 99999999999x64: the flash kernel takes query blocks of 1 to 1024, got 99999999999");
  // sdpa at a head dim its flash backend does not take selects math, which does not run the kernel.
  expect_bad("profile sdpa --flash-block 128x64 --shape 1,1,16,300 --threads 1",
             "and sdpa selects its math backend here, which does not run it");
  expect_bad("profile flash --flash-block 0x64" + kSmall,
             "--flash-block 0x64: the flash kernel takes query blocks of 1 to 1024, got 0");
  expect_bad("roofline --peaks-only --flash-block 128x64" + kSmall, "and --flash-block do not apply with --peaks-only");
}

TEST_F(Cli, GzipWritesCompressedTracesThatTheJsonNames) {
  const Result r = run("compare --iters 1 --warmup 0 --variants naive,flash --gzip" + kSmall + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = read_json("compare.json");
  for (const json& v : j["variants"]) {
    const std::string trace = v["trace"].get<std::string>();
    EXPECT_EQ(trace, v["name"].get<std::string>() + ".trace.json.gz");
    const std::string bytes = io::read_file(out() / trace);
    ASSERT_GT(bytes.size(), 2u);
    EXPECT_EQ(uint8_t(bytes[0]), 0x1f) << "gzip magic";
    EXPECT_EQ(uint8_t(bytes[1]), 0x8b) << "gzip magic";
    EXPECT_FALSE(fs::exists(out() / (v["name"].get<std::string>() + ".trace.json")));
  }
  const Result p = run("profile flash --gzip --json" + kSmall + out_flag());
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(fs::path(json::parse(p.out)["files"]["trace"].get<std::string>()).filename(), "flash.trace.json.gz");
  // Switching format replaces the trace: the other one would sit beside the new summary as if it were current.
  ASSERT_EQ(run("profile flash --iters 1 --warmup 0" + kSmall + out_flag()).code, 0);
  EXPECT_TRUE(fs::exists(out() / "flash.trace.json"));
  EXPECT_FALSE(fs::exists(out() / "flash.trace.json.gz"));
  ASSERT_EQ(run("compare --iters 1 --warmup 0 --variants flash --gzip" + kSmall + out_flag()).code, 0);
  EXPECT_FALSE(fs::exists(out() / "flash.trace.json"));
  EXPECT_TRUE(fs::exists(out() / "flash.trace.json.gz"));
  // A profile after the compare, in the other format: the report reads the trace beside the summary it draws,
  // not the one compare.json names, which that profile replaced.
  ASSERT_EQ(run("profile flash --iters 1 --warmup 0" + kSmall + out_flag()).code, 0);
  if (const std::optional<std::string> html = report_page()) {
    EXPECT_EQ(html->find("flash.trace.json.gz not found"), std::string::npos);
    EXPECT_NE(html->find("data-kind=\"timeline\""), std::string::npos);
  }
}

TEST_F(Cli, AFlagGivenAValueIsRefused) {
  // --causal=false used to leave the mask on: a value a flag would ignore (or read otherwise than the user
  // meant) is refused, naming the flag; the flag's own "=true" still means the flag.
  expect_bad("profile naive --causal=false" + kSmall,
             "--causal takes no value, got '--causal=false': for no mask give --no-causal");
  expect_bad("profile naive --no-causal=0" + kSmall, "--no-causal takes no value, got '--no-causal=0'");
  expect_bad("compare --variants naive --json=false" + kSmall, "--json takes no value, got '--json=false'");
  expect_bad("profile naive --counters=no" + kSmall, "--counters takes no value, got '--counters=no'");
  expect_bad("roofline --remeasure=0", "--remeasure takes no value, got '--remeasure=0'");
  const Result r = run("profile naive --iters 1 --warmup 0 --causal=true" + kSmall + out_flag());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("causal"), std::string::npos) << r.err;
}

TEST_F(Cli, SaveOutputThatIsOneOfTheRunsOwnFilesIsRefused) {
  // The run's summary (or trace, table, report) would replace the .npy: refused before anything runs,
  // whether the file exists yet or not, however the path is spelled.
  for (const std::string name : {"naive.summary.json", "naive.trace.json", "naive.table.txt", "report.html"}) {
    const std::string saved = (out() / name).string();
    expect_bad("profile naive --html --iters 1 --warmup 0" + kSmall + " --save-output " + saved,
               "--save-output '" + saved + "' is the --out file '" + (out() / name).string() + "', which the run writes");
  }
  ASSERT_EQ(run("profile naive --iters 1 --warmup 0" + kSmall + out_flag()).code, 0);
  const std::string summary = io::read_file(out() / "naive.summary.json");
  const std::string other_spelling = (out() / "." / "naive.trace.json.gz").string();
  const Result r = run("profile naive --iters 1 --warmup 0" + kSmall + out_flag() + " --save-output " + other_spelling);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--save-output '" + other_spelling + "' is the --out file"), std::string::npos) << r.err;
  EXPECT_EQ(io::read_file(out() / "naive.summary.json"), summary);
}

TEST_F(Cli, SaveOutputMayNameTheOutDirectoryBeforeTheRunCreatesIt) {
  ASSERT_FALSE(fs::exists(out()));
  const Result r = run("profile flash --iters 1 --warmup 0" + kSmall + out_flag() + " --save-output " +
                       (out() / "o.npy").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(npy::load((out() / "o.npy").string()).shape(), (Shape4{1, 2, 64, 32}));
}

TEST_F(Cli, SweepFitsExponentsInTheExpectedBands) {
  // Timing is meaningless in Debug/sanitizer builds: there the sweep is small and only memory is checked.
  const std::string seq = kTimingMeaningful ? "512..2048 --shape 1,2,1024,64" : "128..512 --shape 1,8,1024,64";
  const Result r = run("sweep --seq " + seq + " --variants naive,flash --dtype fp32 --threads 1 "
                       "--warmup 2 --iters 5" + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("exponent"), std::string::npos);
  const json j = read_json("sweep.json");
  EXPECT_EQ(j["kind"], "sweep");
  EXPECT_EQ(j["device"], "cpu");
  ASSERT_EQ(j["points"].size(), 6u);  // three lengths for each variant
  for (const json& p : j["points"]) {  // validated before timing: fp32 variants are far inside 1e-3
    EXPECT_EQ(p["status"], "ok") << p["note"];
    EXPECT_LT(p["max_abs_err"].get<double>(), 1e-3) << p["variant"] << " N=" << p["seq"];
    // Every timed forward is kept; a point is flagged as noisy exactly when they spread by more than 1.15x.
    const auto f = p["forward_ms"].get<std::vector<double>>();
    ASSERT_EQ(f.size(), 5u);
    const double spread = *std::max_element(f.begin(), f.end()) / *std::min_element(f.begin(), f.end());
    EXPECT_DOUBLE_EQ(p["spread"].get<double>(), spread);
    const std::string line = fmt::format("Noisy: {} at N={} took", p["variant"].get<std::string>(), p["seq"].get<int>());
    EXPECT_EQ(r.out.find(line) != std::string::npos, spread > 1.15) << r.out;
  }
  std::map<std::string, double> e;
  for (const json& f : j["fits"]) {
    e[f["variant"].get<std::string>() + "/" + f["metric"].get<std::string>()] = f["exponent"].get<double>();
    EXPECT_GE(f["r2"].get<double>(), 0.0);
    EXPECT_GE(f["stderr"].get<double>(), 0.0);
    // A time exponent from 0 to 1 is fixed costs' (the work grows as N²), and said so in the text; memory never.
    const double b = f["exponent"].get<double>();
    const bool fixed = f["metric"] == "time" && b >= 0.0 && b < 1.0;
    EXPECT_EQ(f["fixed_costs"].get<bool>(), fixed) << f;
    EXPECT_EQ(r.out.find("  fixed costs\n") != std::string::npos || r.out.find("  fixed costs ") != std::string::npos,
              r.out.find("fixed costs: a time exponent below 1") != std::string::npos);
  }
  ASSERT_EQ(e.size(), 4u);
  // The time exponents are whatever the machine gave (a shared machine moves single points by 2-5x; how close
  // they come to 2 is for the benchmarks to say): here they must be the least-squares slope of log ms on log N
  // over the points written beside them.
  for (const std::string variant : {"naive", "flash"}) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0, n = 0;
    for (const json& p : j["points"])
      if (p["variant"] == variant) {
        const double x = std::log(p["seq"].get<double>()), y = std::log(p["ms"].get<double>());
        sx += x, sy += y, sxx += x * x, sxy += x * y, n += 1;
      }
    ASSERT_EQ(n, 3.0) << variant;
    const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    EXPECT_NEAR(e[variant + "/time"], slope, 1e-9 * std::max(1.0, std::abs(slope))) << variant;
  }
  // Memory is exact (tracked allocator): N×N scores for naive; output + logsumexp for flash, plus per-thread
  // tiles that do not grow with N (which pull the small-N exponent a little below 1).
  EXPECT_NEAR(e["naive/memory"], 2.0, 0.1);
  EXPECT_GT(e["flash/memory"], 0.6);
  EXPECT_LT(e["flash/memory"], 1.2);
  // Each point's rate is the attention FLOPs of its problem (B=1 Hq=2 or 8, D=64, causal: 4·B·H·D·N²/2) over
  // its median time, and % peak that rate over the fp32 FMA peak the file records (fp32 run).
  const double H = kTimingMeaningful ? 2 : 8;
  ASSERT_EQ(j["peak_kind"], "fp32 FMA");
  const double peak = j["peak_gflops"].get<double>();
  ASSERT_GT(peak, 0);
  EXPECT_DOUBLE_EQ(peak, j["peaks"]["fp32_gflops"].get<double>());
  for (const json& p : j["points"]) {
    const double n = p["seq"].get<double>();
    const double flops = 4.0 * H * 64 * n * n / 2;
    EXPECT_NEAR(p["gflops"].get<double>(), flops / (p["ms"].get<double>() * 1e6), 1e-9 * p["gflops"].get<double>());
    EXPECT_NEAR(p["pct_peak"].get<double>(), 100 * p["gflops"].get<double>() / peak, 1e-9);
    const std::string row = fmt::format("{:<12}{:>8}{:>12.3f}{:>10.1f}{:>7.1f}%", p["variant"].get<std::string>(),
                                        p["seq"].get<int>(), p["ms"].get<double>(), p["gflops"].get<double>(),
                                        p["pct_peak"].get<double>());
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  }
  EXPECT_NE(r.out.find(fmt::format("% peak of the fp32 FMA {:.1f} GFLOP/s (1 thread", peak)), std::string::npos) << r.out;
  const std::string csv = io::read_file(out() / "sweep.csv");
  EXPECT_EQ(csv.rfind("source,variant,seq,ms,gflops,peak_bytes,status,note\n", 0), 0u);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);
  const auto records = parse_csv(csv);  // the points in sweep.json's order, their figures at full precision
  ASSERT_EQ(records.size(), j["points"].size() + 1);
  for (size_t i = 1; i < records.size(); ++i) {
    const json& p = j["points"][i - 1];
    ASSERT_EQ(records[i].size(), 8u);
    EXPECT_EQ(records[i][0], "attnprof");
    EXPECT_EQ(records[i][1], p["variant"]);
    EXPECT_EQ(records[i][2], p["seq"].dump());
    EXPECT_EQ(std::stod(records[i][3]), p["ms"].get<double>());
    EXPECT_EQ(std::stod(records[i][4]), p["gflops"].get<double>());
    EXPECT_EQ(records[i][6], p["status"]);
    EXPECT_EQ(records[i][7], p["note"]);
  }
}

TEST_F(Cli, SweepRecordsTheProblemItsPointsShare) {
  // Grouped-query heads and the batch are part of what a sweep measured: in the text and in sweep.json.
  // The dtype as the report compares it with compare.json's: canonical, however it was typed.
  const Result r = run("sweep --seq 64,128 --variants flash --shape 2,4,64,32 --kv-heads 2 --threads 1 --iters 1 "
                       "--dtype BF16" + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("attnprof sweep — B=2 Hq=4 Hkv=2 D=32 with N = 64,128, bf16 causal, 1 thread"),
            std::string::npos) << r.out;
  // Peak mem in compare's decimal units, as its header reads the same: 219.1 KB, not 213.96 Kb.
  EXPECT_NE(r.out.find("in decimal units as compare prints them (1 MB = 10^6 B"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" Kb "), std::string::npos) << r.out;
  // A range names the lengths that ran, and says where doubling stopped short of LAST.
  const Result range = run("sweep --seq 32..100 --variants flash --shape 2,4,64,32 --threads 1 --iters 1" + out_flag());
  ASSERT_EQ(range.code, 0) << range.err;
  EXPECT_NE(range.out.find("with N = 32,64, bf16"), std::string::npos) << range.out;
  EXPECT_NE(range.err.find("--seq 32..100: doubling from 32 stops at 64 (the next, 128, passes 100)"), std::string::npos)
      << range.err;
  ASSERT_EQ(run("sweep --seq 64,128 --variants flash --shape 2,4,64,32 --kv-heads 2 --threads 1 --iters 1 "
                "--dtype BF16" + out_flag()).code, 0);
  const json j = read_json("sweep.json");
  EXPECT_EQ(j["shape"], (json{{"B", 2}, {"Hq", 4}, {"Hkv", 2}, {"D", 32}}));
  EXPECT_EQ(j["dtype"], "bf16");
  ASSERT_TRUE(j["machine"].is_object());
  EXPECT_TRUE(j["machine"]["memory_reclaim"].is_string());
  // The GEMM naive's bf16 matmul runs on (its peak memory holds the widened path's scratch), as compare.json's.
  EXPECT_EQ(j["machine"]["bf16_matmul"], std::string(attnprof::ops::bf16_matmul_key()));
  const Result naive = run("sweep --seq 32,64 --variants naive --shape 1,2,64,32 --threads 1 --iters 1" + out_flag());
  ASSERT_EQ(naive.code, 0) << naive.err;
  EXPECT_NE(naive.out.find(report::unfused_matmul_note("bf16", attnprof::ops::bf16_matmul_key(), "naive")), std::string::npos)
      << naive.out;
}

TEST_F(Cli, SweepSkipsPointsOverTheBudget) {
  // Naive at N=512 needs several N×N fp32 buffers (> 1 MiB); flash fits. Naive named twice runs once.
  const Result r = run("sweep --seq 64,128,512 --variants naive,flash,naive --shape 1,1,64,32 --dtype fp32 --threads 1 "
                    "--iters 1 --memory-budget 1M --json" + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  int skipped = 0;
  for (const json& p : j["points"])
    if (p["status"] == "skipped") {
      ++skipped;
      EXPECT_EQ(p["variant"], "naive");
      EXPECT_EQ(p["seq"], 512);
      EXPECT_NE(p["note"].get<std::string>().find("budget"), std::string::npos);
      // Refused before its inputs were drawn: none of them live beside the scores it would need.
      EXPECT_EQ(p["note"].get<std::string>().find("already live"), std::string::npos) << p["note"];
    }
  EXPECT_EQ(skipped, 1);
  EXPECT_NE(r.err.find("skipped"), std::string::npos);  // the note on stderr
  // sweep.csv holds the skipped point with its note whole (commas and all, quoted) and empty figures.
  const auto csv = parse_csv(io::read_file(out() / "sweep.csv"));
  ASSERT_EQ(csv.size(), j["points"].size() + 1);
  for (size_t i = 1; i < csv.size(); ++i) {
    ASSERT_EQ(csv[i].size(), 8u);
    EXPECT_EQ(csv[i][7], j["points"][i - 1]["note"]);
    if (csv[i][6] == "skipped") EXPECT_EQ(csv[i][3], "");
  }
}

// The peer's memory check of torch's SDPA follows torch's version: before 2.1 its CPU SDPA is the math path and
// holds N×N scores, from 2.1 a flash kernel does not. What the interpreter is asked to run says which (argv: -c
// SCRIPT run DTYPE CAUSAL THREADS WARMUP ITERS SCALE NAIVE WARMUP_MIN_S MAX_FORWARDS SDPA).
TEST_F(Cli, ThePeersSdpaIsCheckedAgainstTheBudgetByTorchsVersion) {
  const fs::path zeros = dir_ / "zeros.npy", asked = dir_ / "asked";
  { std::ofstream(zeros, std::ios::binary) << npy::to_bytes(Tensor::zeros({1, 2, 512, 32}, DType::F32)); }
  for (const auto& [version, sdpa_runs] : std::vector<std::pair<std::string, bool>>{
           {"1.13.0a0", false}, {"2.0.1", false}, {"2.1.0", true}, {"2.5.1+cpu", true}, {"nightly", false}}) {
    SCOPED_TRACE(version);
    const fs::path fake = dir_ / "python-version";
    {
      std::ofstream(fake) << "#!/bin/sh\nif [ \"$3\" = probe ]; then echo '{\"torch\": \"" << version
                          << "\"}'; exit 0; fi\necho \"${10} ${13}\" > " << asked.string()
                          << "\nif [ \"${13}\" = 0 ]; then echo '{\"torch\": \"" << version
                          << "\", \"threads\": 1, \"rows\": [{\"name\": \"torch-naive\", \"skipped\": true}, "
                             "{\"name\": \"torch-sdpa\", \"skipped\": true}]}'; exit 0; fi\n"
                          << "echo '{\"torch\": \"" << version
                          << "\", \"threads\": 1, \"rows\": [{\"name\": \"torch-naive\", \"skipped\": true}, "
                             "{\"name\": \"torch-sdpa\", \"call\": \"sdpa\", \"forward_ms\": [1, 1, 1]}]}'\n"
                          << "cat " << zeros.string() << "\n";
    }
    fs::permissions(fake, fs::perms::owner_all);
    // 2 MB: the inputs fit, three N×N bf16 score tensors of [1,2,512,512] (3 MB) do not.
    const Result r = run("compare --shape 1,2,512,32 --threads 1 --variants flash --memory-budget 2M --peer torch "
                         "--python " + fake.string() + out_flag());
    ASSERT_EQ(r.code, 0) << r.err;
    // Both rows over the budget start no interpreter; else it is asked to run SDPA alone.
    if (sdpa_runs) {
      std::string flags;
      std::getline(std::ifstream(asked), flags);
      EXPECT_EQ(flags, "0 1") << "NAIVE and SDPA as the interpreter was asked";
    } else {
      EXPECT_FALSE(fs::exists(asked)) << "an interpreter started with nothing to run";
    }
    fs::remove(asked);
    const json row = read_json("compare.json")["peers"]["rows"][1];
    if (sdpa_runs) {
      EXPECT_EQ(row["status"], "failed") << row;  // the stand-in's zeros: ran, and checked
    } else {
      EXPECT_EQ(row["status"], "skipped") << row;
      EXPECT_NE(row["note"].get<std::string>().find("torch-sdpa (torch " + version + " composes it"), std::string::npos)
          << row;
    }
    fs::remove_all(out());
  }
}

// sweep --peer torch with a stand-in interpreter: torch's two rows at every N after the variants', their
// outputs' first and last head checked (the stand-in's zeros fail, which is printed, not the exit status), their
// memory not measured (null, empty, "--"), and a time fit only for a row that ran. The refusals are compare's.
TEST_F(Cli, SweepPeerAddsTorchsRowsAtEveryLength) {
  expect_bad("sweep --seq 64,128 --shape 1,1,64,32 --python /usr/bin/python3", "--python applies with --peer torch only");
  expect_bad("sweep --seq 64,128 --shape 1,1,64,32 --peer torch --device cuda", "--peer torch runs on the CPU backend");
  expect_bad("sweep --seq 64,128 --shape 1,1,64,32 --peer torch --python " + (dir_ / "no-such-python").string(),
             "cannot start the python interpreter");
  const fs::path fake = dir_ / "python-sweep";
  {  // Zeros of the point's N (its 5th argument's shape comes from the inputs on stdin: read the N from them).
    std::ofstream(fake)
        << "#!/bin/sh\nif [ \"$3\" = probe ]; then echo '{\"torch\": \"2.4.0\"}'; exit 0; fi\n"
           "exec /usr/bin/python3 -c '\nimport json, sys\nimport numpy as np\nq = np.load(sys.stdin.buffer)\n"
           "print(json.dumps({\"torch\": \"2.4.0\", \"threads\": 1, \"rows\": [\n"
           "  {\"name\": \"torch-naive\", \"call\": \"five ops\", \"forward_ms\": [2.0, 2.0]},\n"
           "  {\"name\": \"torch-sdpa\", \"error\": \"RuntimeError: not here\"}]}))\nsys.stdout.flush()\n"
           "np.save(sys.stdout.buffer, np.zeros(q.shape, np.float32))\n'\n";
  }
  fs::permissions(fake, fs::perms::owner_all);
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no numpy in /usr/bin/python3";
  const Result r = run("sweep --seq 64,128 --variants flash --shape 1,2,64,32 --threads 1 --iters 2 --peer torch "
                       "--python " + fake.string() + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = read_json("sweep.json");
  EXPECT_EQ(j["peer"]["kind"], "torch");
  EXPECT_EQ(j["peer"]["torch_version"], "2.4.0");
  EXPECT_EQ(j["peer"]["python"], fake.string());
  std::vector<std::string> order;
  for (const json& p : j["points"]) order.push_back(p["variant"].get<std::string>() + "@" + p["seq"].dump());
  EXPECT_EQ(order, (std::vector<std::string>{"flash@64", "flash@128", "torch-naive@64", "torch-naive@128",
                                             "torch-sdpa@64", "torch-sdpa@128"}));
  for (const json& p : j["points"]) {
    SCOPED_TRACE(p.dump());
    const bool peer = p["variant"].get<std::string>().rfind("torch-", 0) == 0;
    EXPECT_EQ(p["source"], peer ? "torch" : "attnprof");
    if (!peer) {
      EXPECT_EQ(p["status"], "ok");
      EXPECT_GT(p["peak_bytes"].get<int64_t>(), 0);
      continue;
    }
    EXPECT_TRUE(p["peak_bytes"].is_null());
    if (p["variant"] == "torch-naive") {
      EXPECT_EQ(p["status"], "failed");
      EXPECT_EQ(p["call"], "five ops");
      EXPECT_EQ(p["note"].get<std::string>().rfind("validation failed: ", 0), 0u);
      EXPECT_NE(p["note"].get<std::string>().find("the first and last head"), std::string::npos);
      EXPECT_EQ(p["forward_ms"], json::array()) << "a failed point is not counted";
      EXPECT_TRUE(p["ms"].is_null());
      EXPECT_GT(p["max_abs_err"].get<double>(), 0.0);
    } else {
      EXPECT_EQ(p["status"], "skipped");
      EXPECT_NE(p["note"].get<std::string>().find("raised RuntimeError: not here"), std::string::npos);
    }
  }
  // The variants' fits only: neither peer row passed its check at two lengths.
  // Two lengths fix a line exactly: no error estimate is written, not a perfect r² 1 and stderr 0.
  for (const json& f : j["fits"]) {
    EXPECT_EQ(f["variant"], "flash") << f;
    EXPECT_EQ(f["points"], 2) << f;
    EXPECT_TRUE(f["r2"].is_null() && f["stderr"].is_null() && f["rms_log_error"].is_null()) << f;
  }
  EXPECT_NE(r.out.find("Peer: torch 2.4.0 ('" + fake.string() + "', 1 thread): torch-naive = five ops;"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("torch-sdpa        64  skipped: torch 2.4.0 raised RuntimeError: not here"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("torch-naive      128  failed: validation failed: "), std::string::npos) << r.out;
  const auto csv = parse_csv(io::read_file(out() / "sweep.csv"));
  ASSERT_EQ(csv.size(), 7u);
  EXPECT_EQ(csv[0], (std::vector<std::string>{"source", "variant", "seq", "ms", "gflops", "peak_bytes", "status", "note"}));
  for (size_t i = 1; i < csv.size(); ++i) EXPECT_EQ(csv[i][0], i < 3 ? "attnprof" : "torch") << i;
  for (size_t i = 3; i < csv.size(); ++i) EXPECT_EQ(csv[i][5], "") << "the peer's peak_bytes: not measured";
}

// A peer that fails at one length (here: stopped at --peer-timeout) does not cost the sweep: that length's torch rows
// and every later one's are skipped points saying why, the variants' points are written, and the exit status is
// theirs. Rows over the memory budget at a length skip it without starting the interpreter.
TEST_F(Cli, SweepPeerThatFailsAtOneLengthSkipsItAndTheLongerOnes) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no numpy in /usr/bin/python3";
  const fs::path fake = dir_ / "python-slow", runs = dir_ / "runs";
  {  // Answers at N=64 (zeros, which fail the check); sleeps past the timeout at N=128. Counts its runs.
    std::ofstream(fake)
        << "#!/bin/sh\nif [ \"$3\" = probe ]; then echo '{\"torch\": \"1.13.0\"}'; exit 0; fi\necho run >> "
        << runs.string()
        << "\nexec /usr/bin/python3 -c '\nimport json, sys, time\nimport numpy as np\nq = np.load(sys.stdin.buffer)\n"
           "if q.shape[2] > 64: time.sleep(30)\n"
           "print(json.dumps({\"torch\": \"1.13.0\", \"threads\": 1, \"rows\": [\n"
           "  {\"name\": \"torch-naive\", \"skipped\": True},\n"
           "  {\"name\": \"torch-sdpa\", \"call\": \"sdpa\", \"forward_ms\": [1.0]}]}))\nsys.stdout.flush()\n"
           "np.save(sys.stdout.buffer, np.zeros(q.shape, np.float32))\n'\n";
  }
  fs::permissions(fake, fs::perms::owner_all);
  // 2 MB: at N=512 three bf16 N×N tensors of [1,2,512,512] (3 MB) fit neither row (torch 1.13's SDPA is the math
  // path): no interpreter starts there.
  Result r = run("sweep --seq 64,512 --variants flash --shape 1,2,64,32 --threads 1 --iters 1 --memory-budget 2M "
                 "--peer torch --python " + fake.string() + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(io::read_file(runs), "run\n") << "one interpreter, at N=64";
  const json first = read_json("sweep.json");  // held: a range over a part of a temporary would dangle
  for (const json& p : first["points"])
    if (p["seq"] == 512 && p["source"] == "torch") {
      EXPECT_EQ(p["status"], "skipped") << p;
      EXPECT_NE(p["note"].get<std::string>().find(") at B=1 Hq=2 Hkv=2 Nq=512 Nk=512 D=32 bf16 causal needs 3801088 bytes"), std::string::npos) << p;
      EXPECT_NE(p["note"].get<std::string>().find("over the memory budget"), std::string::npos) << p;
    }
  fs::remove(runs);
  // Stopped at --peer-timeout at N=128: that length's rows and the longer one's are skipped, saying why.
  r = run("sweep --seq 64,128,256 --variants flash --shape 1,2,64,32 --threads 1 --iters 1 --peer torch "
          "--peer-timeout 3 --python " + fake.string() + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = read_json("sweep.json");
  std::map<std::string, std::string> note;
  for (const json& p : j["points"])
    note[p["variant"].get<std::string>() + "@" + p["seq"].dump()] =
        p["status"].get<std::string>() + ": " + p["note"].get<std::string>();
  EXPECT_EQ(note["flash@256"], "ok: ");
  EXPECT_EQ(note["torch-sdpa@64"].rfind("failed: validation failed", 0), 0u) << note["torch-sdpa@64"];
  for (const char* row : {"torch-naive@128", "torch-sdpa@128"})
    EXPECT_NE(note[row].find("skipped: --peer torch: '" + fake.string() + "' did not finish within --peer-timeout 3 s"),
              std::string::npos) << note[row];
  for (const char* row : {"torch-naive@256", "torch-sdpa@256"})
    EXPECT_EQ(note[row], "skipped: not run: the peer failed at N=128 (above)") << note[row];
  EXPECT_EQ(io::read_file(runs), "run\nrun\n") << "one interpreter at 64, one at 128, none after";
}

// sweep --peer torch with the torch Debian ships: both rows pass the check at every N, and each gets a time fit
// and no memory fit.
TEST_F(Cli, SweepPeerTorchFitsTorchsTimes) {
  if (std::system("/usr/bin/python3 -c 'import numpy, torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch to run this test)";
  const Result r = run("sweep --seq 64,128,256 --variants naive --shape 1,2,64,32 --threads 1 --iters 2 --peer torch "
                       "--python /usr/bin/python3 --json" + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  std::map<std::string, int> ok;
  for (const json& p : j["points"]) {
    SCOPED_TRACE(p.dump());
    EXPECT_EQ(p["status"], "ok");
    ok[p["variant"]]++;
    EXPECT_LT(p["max_abs_err"].get<double>(), 0.05);
    const double n = p["seq"].get<double>(), flops = 4.0 * 2 * 32 * n * n / 2;  // causal: N²/2 pairs, as FlashAttention
    EXPECT_NEAR(p["gflops"].get<double>() * p["ms"].get<double>() * 1e6, flops, 1e-9 * flops);
  }
  EXPECT_EQ(ok, (std::map<std::string, int>{{"naive", 3}, {"torch-naive", 3}, {"torch-sdpa", 3}}));
  std::map<std::string, std::vector<std::string>> metrics;
  for (const json& f : j["fits"]) metrics[f["variant"]].push_back(f["metric"]);
  EXPECT_EQ(metrics["naive"], (std::vector<std::string>{"time", "memory"}));
  EXPECT_EQ(metrics["torch-naive"], std::vector<std::string>{"time"});
  EXPECT_EQ(metrics["torch-sdpa"], std::vector<std::string>{"time"});
}

// attnprof killed outright (SIGKILL: no handler runs) while the peer runs under a --python wrapper that did not
// exec it: the interpreter's parent is then the wrapper, which lives on, so only the pipe attnprof alone holds
// tells it to stop. Its numpy import is a stand-in that sleeps 30 s: without that pipe, it outlived the run.
TEST_F(Cli, ThePeerStopsWhenAttnprofIsKilledUnderAWrapper) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  const fs::path mods = dir_ / "mods", pidfile = dir_ / "python.pid", wrapper = dir_ / "python-wrapper";
  fs::create_directories(mods);
  { std::ofstream(mods / "numpy.py") << "import time\ntime.sleep(30)\n"; }
  { std::ofstream(wrapper) << "#!/bin/sh\nPYTHONPATH=" << mods.string() << " /usr/bin/python3 \"$@\" &\necho $! > "
                           << pidfile.string() << "\nwait\n"; }
  fs::permissions(wrapper, fs::perms::owner_all);
  const std::string cmd = kBinary + " compare" + kSmall + "--variants flash --peer torch --python " + wrapper.string() +
                          out_flag() + " >/dev/null 2>&1";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::string python;
  for (int i = 0; i < 6000 && python.empty(); ++i) {  // up to 60 s (sanitizer builds are slow)
    std::ifstream(pidfile) >> python;
    if (python.empty()) ::usleep(10000);
  }
  ASSERT_FALSE(python.empty()) << "the wrapper never started the interpreter";
  ::usleep(300000);  // the interpreter is in its stand-in import
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {  // up to 5 s; it stops at once
    std::string stat;
    std::getline(std::ifstream("/proc/" + python + "/stat"), stat);
    gone = stat.empty() || stat.find(") Z ") != std::string::npos;
    if (!gone) ::usleep(10000);
  }
  if (!gone) ::kill(pid_t(std::stol(python)), SIGKILL);  // not left behind by a failing test
  EXPECT_TRUE(gone) << "the interpreter " << python << " outlived attnprof";
}

// A library that calls exit() in the middle of a run (libgomp when it cannot create its threads, here under an
// OMP_STACKSIZE no mapping can hold) used attnprof's exit code for a validation failure and left the new --out
// behind: now exit 2, a line saying what ended the run, and nothing left.
TEST_F(Cli, ALibraryThatEndsTheRunIsAnErrorNotAValidationFailure) {
#if defined(ATTNPROF_SANITIZED)
  GTEST_SKIP() << "the sanitizers' own thread creation meets the stack size first";
#endif
  ::setenv("OMP_STACKSIZE", "100000G", 1);
  const Result r = run("compare --iters 1 --warmup 0 --variants flash --shape 1,2,64,32 --threads 2" + out_flag());
  ::unsetenv("OMP_STACKSIZE");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("libgomp: Thread creation failed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("attnprof: error: a library attnprof runs on ended the run"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out())) << "the --out the run created";
}

// OMP_MAX_ACTIVE_LEVELS=0 makes every OpenMP team one thread while the runtime still reports the count: oneDNN's
// bf16 matmul split its work that many ways and left shares unwritten (naive failed validation), and the tables
// reported threads that never ran. One active level is restored, so every variant validates on its 2 threads.
TEST_F(Cli, NoActiveOpenMpLevelsStillRunsTheCountedThreads) {
  ::setenv("OMP_MAX_ACTIVE_LEVELS", "0", 1);
  const Result r = run("compare --shape 1,2,64,32 --threads 2 --iters 1 --warmup 0 --json" + out_flag());
  const Result p = run("profile flash --shape 1,4,256,64 --threads 2 --iters 1" + out_flag());
  ::unsetenv("OMP_MAX_ACTIVE_LEVELS");
  ASSERT_EQ(r.code, 0) << r.err;
  const json c = json::parse(r.out);
  for (const json& v : c["variants"]) EXPECT_EQ(v["status"], "ok") << v;
  ASSERT_EQ(p.code, 0) << p.err;
  const json s = read_json("flash.summary.json");
  ASSERT_EQ(s["thread_balance"].size(), 1u) << s["thread_balance"];
  EXPECT_EQ(s["thread_balance"][0]["threads"], 2) << "the flash regions' team: " << s["thread_balance"];
}

// stdout and stderr sent to one file (2>&1, as a CI log or tee): every stderr line starts a line of its own,
// never lands inside a line of stdout's buffered table.
TEST_F(Cli, StderrLinesNeverCutStdoutLinesInOneLog) {
  const fs::path log = dir_ / "both.log";
  const std::string cmd = kBinary + " compare --iters 1 --warmup 0 --variants naive,flash" + kSmall + out_flag() +
                          " >" + log.string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string text = io::read_file(log);
  std::istringstream lines(text);
  int progress_lines = 0;
  for (std::string line; std::getline(lines, line);)
    for (const char* stderr_start : {"compare finished in", "attnprof compare:", "measuring (or loading"}) {
      const size_t at = line.find(stderr_start);
      if (at == std::string::npos) continue;
      ++progress_lines;
      EXPECT_EQ(at, 0u) << "a stderr line inside a stdout line: " << line;
    }
  EXPECT_GE(progress_lines, 2) << text;
  // In the order they were written: the closing progress line after the table it follows (stdout flushed
  // first; else the buffered table reached the file at exit, after it, or cut by it at 4 KiB).
  const size_t table = text.find("attnprof compare — "), legend = text.find("Max err: "),
               finished = text.find("compare finished in");
  ASSERT_NE(legend, std::string::npos) << text;
  EXPECT_LT(table, legend);
  EXPECT_GT(finished, legend) << text;
}

// Every variant, or every point, skipped: nothing was measured, so the results are written and the run exits 1
// (a script must not take a run of skips for a measurement); one measured row beside skips is a result (exit 0,
// SweepSkipsPointsOverTheBudget).
TEST_F(Cli, ARunThatMeasuredNothingExitsOne) {
  const std::string small = " --shape 1,2,1024,32 --threads 1 --iters 1 --warmup 0 --memory-budget 3M";
  const Result compare = run("compare --variants naive,inplace" + small + out_flag());
  EXPECT_EQ(compare.code, 1) << compare.err;
  EXPECT_NE(compare.err.find("attnprof: nothing was measured: all 2 variants were skipped"), std::string::npos)
      << compare.err;
  {
    const json c = read_json("compare.json");  // written whole: the skips and their reasons are the result
    ASSERT_EQ(c["variants"].size(), 2u);
    for (const json& v : c["variants"]) EXPECT_EQ(v["status"], "skipped") << v;
  }
  // The closing line says what was written, and no per-variant file exists to be claimed.
  EXPECT_NE(compare.err.find("(no variant ran and passed: no trace, summary, table or stacks)"), std::string::npos)
      << compare.err;
  EXPECT_FALSE(fs::exists(out() / "naive.summary.json"));
  fs::remove_all(out());
  const Result sweep = run("sweep --variants naive --seq 1024,2048" + small + out_flag());
  EXPECT_EQ(sweep.code, 1) << sweep.err;
  EXPECT_NE(sweep.err.find("attnprof: nothing was measured: all 2 points were skipped"), std::string::npos)
      << sweep.err;
  EXPECT_TRUE(fs::exists(out() / "sweep.json"));
  fs::remove_all(out());
  const Result roof = run("roofline naive" + small + out_flag());
  EXPECT_EQ(roof.code, 1) << roof.err;
  EXPECT_NE(roof.err.find("attnprof: nothing was measured: the only variant was skipped"), std::string::npos)
      << roof.err;
  EXPECT_TRUE(fs::exists(out() / "roofline.json"));
}

// A head dim flash cannot serve: the command's own default list leaves flash out with a note, as compare
// skips it; named by the user, it is refused.
TEST_F(Cli, DefaultVariantsThatCannotRunAreLeftOutNamedOnesRefused) {
  const std::string shape = " --shape 1,1,16,320 --threads 1 --iters 1 --warmup 0 ";
  const Result sweep = run("sweep --seq 16,32 --json" + shape + out_flag());
  ASSERT_EQ(sweep.code, 0) << sweep.err;
  EXPECT_NE(sweep.err.find("attnprof: note: left out of the default variants: flash cannot run B=1 Hq=1 Hkv=1 Nq=16 "
                           "Nk=16 D=320 bf16 causal: the flash backend supports head dims up to 256"),
            std::string::npos) << sweep.err;
  std::set<std::string> ran;
  const json points = json::parse(sweep.out)["points"];
  for (const json& p : points) ran.insert(p["variant"].get<std::string>());
  EXPECT_EQ(ran, (std::set<std::string>{"naive"}));
  fs::remove_all(out());
  const Result roof = run("roofline" + shape + out_flag());
  ASSERT_EQ(roof.code, 0) << roof.err;
  const std::string note = "left out of the default variants";
  const size_t first = roof.err.find(note);
  ASSERT_NE(first, std::string::npos) << roof.err;
  EXPECT_EQ(roof.err.find(note, first + 1), std::string::npos) << "said once: " << roof.err;
  fs::remove_all(out());
  expect_bad("sweep --variants naive,flash --seq 16,32" + shape, "variant 'flash' cannot run");
  expect_bad("roofline flash" + shape, "variant 'flash' cannot run");
}

TEST_F(Cli, RooflinePlacesEveryOp) {
  // --peaks-only prints the peaks and writes nothing ...
  const Result peaks = run("roofline --peaks-only --threads 1");
  ASSERT_EQ(peaks.code, 0) << peaks.err;
  EXPECT_NE(peaks.out.find("fp32 FMA peak"), std::string::npos) << peaks.out;
  // ... so --out, and the flags of a run, are refused with it rather than ignored: no --out directory appears
  // (expect_bad checks) ...
  expect_bad("roofline --peaks-only --threads 1",
             "attnprof: error: --out does not apply with --peaks-only, which runs no variant and writes no files: "
             "drop it (or --peaks-only)");
  expect_bad("roofline --peaks-only --threads 1 --iters 2 --seed 5",
             "--out, --iters and --seed do not apply with --peaks-only");
  expect_bad("roofline --peaks-only --threads 1 --warmup 0", "--out and --warmup do not apply with --peaks-only");
  for (const char* flags : {"--iters 2", "--seed 0", "--warmup 1"}) {
    const Result r = run(std::string("roofline --peaks-only --threads 1 ") + flags);
    EXPECT_EQ(r.code, 2) << flags;
    EXPECT_EQ(r.err, fmt::format("attnprof: error: {} does not apply with --peaks-only, which runs no variant and "
                                 "writes no files: drop it (or --peaks-only)\n",
                                 std::string(flags).substr(0, std::string(flags).find(' '))));
  }
  const Result r = run("roofline naive flash --iters 1 --warmup 0" + kSmall + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  // ... and an earlier roofline there stays as it was.
  const std::string placed = io::read_file(out() / "roofline.json");
  ASSERT_EQ(run("roofline --peaks-only --threads 1" + out_flag()).code, 2);
  EXPECT_EQ(io::read_file(out() / "roofline.json"), placed);
  // The memory roof is the best of the three loops, each named with its figure.
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n  Memory bandwidth +[0-9.]+ GB/s \(the best of three loops )"
                                                  R"(over 128 MB arrays: in-place update [0-9.]+, copy [0-9.]+, )"
                                                  R"(STREAM triad [0-9.]+ GB/s\)\n)")))
      << r.out;
  // naive's copy_ computes nothing: no FLOP/B, attainable or achieved figure, only its GB/s and share of the
  // bandwidth.
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\nnaive +copy_ +-- +-- +-- +[0-9.]+ +[0-9]+%bw  memory\n)")))
      << r.out;
  const json j = read_json("roofline.json");
  EXPECT_EQ(j["kind"], "roofline");
  EXPECT_GT(j["machine"]["fp32_gflops"].get<double>(), 0.0);
  EXPECT_GT(j["machine"]["bandwidth_gbs"].get<double>(), 0.0);
  {
    const json& loops = j["machine"]["bandwidth_loops"];
    double best = 0;
    for (const char* loop : {"update", "copy", "triad"}) best = std::max(best, loops.at(loop).get<double>());
    EXPECT_EQ(j["machine"]["bandwidth_gbs"].get<double>(), best) << loops.dump();
  }
  std::map<std::string, std::string> bound;
  std::map<std::string, double> ridge;
  for (const json& op : j["ops"]) {
    EXPECT_TRUE(op["bound"] == "memory" || op["bound"] == "compute");
    EXPECT_LE(op["attainable_gflops"].get<double>(),
              std::max(j["machine"]["fp32_gflops"].get<double>(), j["machine"]["bf16_gflops"].get<double>()) + 1e-9);
    // The verdict is the op's intensity against the ridge of the ceiling it was placed under.
    if (op["flops"].get<double>() > 0)
      EXPECT_EQ(op["bound"], op["intensity"].get<double>() < op["ridge_intensity"].get<double>() ? "memory" : "compute")
          << op.dump();
    EXPECT_NEAR(op["fraction_of_bandwidth"].get<double>(),
                op["achieved_gbs"].get<double>() / j["machine"]["bandwidth_gbs"].get<double>(), 1e-9)
        << op.dump();
    const std::string key = op["variant"].get<std::string>() + "/" + op["name"].get<std::string>();
    bound[key] = op["bound"];
    ridge[key] = op["ridge_intensity"].get<double>();
  }
  // Elementwise passes over the scores do ~1 FLOP per element moved (softmax 1.25 FLOP/B at fp32): memory-bound on
  // any real machine. The peaks are measured by this very build, so a Debug/sanitizer build, whose FMA loop runs far
  // below the hardware, can put the ridge under 1.25; the check then stays the consistency one above.
  for (const char* op : {"naive/softmax", "naive/mul"}) {
    ASSERT_TRUE(bound.count(op)) << op;
    if (ridge[op] > 2.5) EXPECT_EQ(bound[op], "memory") << op << " ridge " << ridge[op];
  }
  EXPECT_TRUE(bound.count("flash/flash_attention_fwd"));
  // roofline.csv: the same ops, one row each, with roofline.json's figures.
  const auto csv = parse_csv(io::read_file(out() / "roofline.csv"));
  ASSERT_EQ(csv.size(), j["ops"].size() + 1);
  for (size_t i = 1; i < csv.size(); ++i) {
    const json& op = j["ops"][i - 1];
    EXPECT_EQ(csv[i][csv_column(csv[0], "name")], op["name"]);
    EXPECT_EQ(csv[i][csv_column(csv[0], "bound")], op["bound"]);
    for (const char* key : {"intensity", "achieved_gflops", "attainable_gflops", "self_ns"})
      EXPECT_EQ(std::stod(csv[i][csv_column(csv[0], key)]), op[key].get<double>()) << key;
  }
}

// roofline --from places the ops a compare measured, from its summaries and under the peaks it recorded:
// nothing runs, so every figure is the run's own (the same op, the same self time, the same FLOPs).
// Profiles record the peaks their table's Bound was judged against: roofline --from their directory (or one
// summary) places their ops under those peaks, as it places a compare run's, and refuses profiles that do not
// share one machine's peaks or one problem.
TEST_F(Cli, RooflineFromProfilesPlacesTheirOpsUnderThePeaksTheyRecorded) {
  const fs::path runs = dir_ / "profiles";
  for (const char* v : {"flash", "naive"})
    ASSERT_EQ(run(std::string("profile ") + v + " --iters 2 --warmup 0" + kSmall + " --out " + runs.string()).code, 0);
  const json naive = json::parse(io::read_file(runs / "naive.summary.json"));
  ASSERT_TRUE(naive["machine"].is_object()) << "profile records its peaks";
  const Result r = run("roofline --from " + runs.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "nothing is measured, validated or run";
  const json j = json::parse(r.out);
  EXPECT_EQ(j["from"], runs.string());
  EXPECT_EQ(j["problem"], naive["run"]["problem"]);
  for (const char* key : {"fp32_gflops", "bf16_gflops", "bandwidth_gbs"})
    EXPECT_EQ(j["machine"][key], naive["machine"][key]) << key;
  // naive first, as the blog lists it, whatever the files' order; each op from its summary's own figures.
  ASSERT_FALSE(j["ops"].empty());
  EXPECT_EQ(j["ops"][0]["variant"], "naive");
  EXPECT_EQ(j["ops"].back()["variant"], "flash");
  EXPECT_EQ(j["ops"].back()["name"], "flash_attention_fwd");
  for (const json& op : j["ops"]) {
    const json s = json::parse(io::read_file(runs / (op["variant"].get<std::string>() + ".summary.json")));
    const auto row = std::find_if(s["rows"].begin(), s["rows"].end(), [&](const json& x) { return x["name"] == op["name"]; });
    ASSERT_NE(row, s["rows"].end()) << op;
    EXPECT_EQ(op["self_ns"].get<double>(), (*row)["self_ns"].get<double>());
    EXPECT_EQ(op["flops"].get<double>(), (*row)["self_cost"]["flops"].get<double>());
  }
  const Result text = run("roofline --from " + runs.string());
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("as " + runs.string() + " measured them (2 recorded forwards each;"), std::string::npos)
      << text.out;
  // One summary alone, and its roofline elsewhere.
  const Result one = run("roofline --from " + (runs / "flash.summary.json").string() + out_flag() + " --json");
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(json::parse(one.out)["ops"].size(), 1u);
  fs::remove_all(out());
  {
    // An op that one slow forward lifted (its summary's self time per step) is named under the rows: its
    // Achieved is over every forward's time. Three forwards: the rule needs three.
    const fs::path three = dir_ / "three";
    ASSERT_EQ(run("profile flash --iters 3 --warmup 0" + kSmall + " --out " + three.string()).code, 0);
    json s = json::parse(io::read_file(three / "flash.summary.json"));
    for (json& row : s["rows"])
      if (row["name"] == "flash_attention_fwd") {
        const double all = row["self_ns"].get<double>();
        row["self_ns_per_step"] = {0.2 * all, 0.2 * all, 0.6 * all};
      }
    io::write_file_atomic((three / "flash.summary.json").string(), s.dump());
    const Result uneven = run("roofline --from " + three.string() + out_flag());
    ASSERT_EQ(uneven.code, 0) << uneven.err;
    EXPECT_NE(uneven.out.find("Uneven: flash_attention_fwd's self CPU per forward in flash: median "), std::string::npos)
        << uneven.out;
    EXPECT_NE(uneven.out.find("(1 of 3 forwards over 1.15x the median); its Achieved is over every forward's time, so "
                              "that forward places it lower than its median forward would."),
              std::string::npos)
        << uneven.out;
    fs::remove_all(out());
  }
  // Another problem in the directory, another machine's peaks, a summary without peaks: each refused by name.
  const fs::path mixed = dir_ / "mixed";
  fs::copy(runs, mixed);
  json other = naive;
  other["machine"]["fp32_gflops"] = other["machine"]["fp32_gflops"].get<double>() * 2;
  { std::ofstream(mixed / "naive.summary.json") << other.dump(); }
  expect_bad("roofline --from " + mixed.string(), "were judged against different peaks");
  other = naive;
  other.erase("machine");
  { std::ofstream(mixed / "naive.summary.json") << other.dump(); }
  expect_bad("roofline --from " + mixed.string(), "naive.summary.json records no machine peaks");
  ASSERT_EQ(run("profile inplace --iters 1 --warmup 0 --shape 1,2,32,32 --threads 1 --out " + runs.string()).code, 0);
  expect_bad("roofline --from " + runs.string(), "one roofline places one problem's ops");
  expect_bad("roofline --from " + runs.string() + " nosuch", "variant 'nosuch' is not in " + runs.string());
}

TEST_F(Cli, RooflineFromACompareRunPlacesItsOpsWithoutRunningThem) {
  const fs::path runs = dir_ / "run";
  const Result c = run("compare --variants naive,inplace,flash --iters 2 --warmup 0" + kSmall + " --out " + runs.string());
  ASSERT_EQ(c.code, 0) << c.err;
  const Result r = run("roofline --from " + runs.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "nothing is measured, validated or run";
  EXPECT_NE(r.out.find("as " + (runs / "compare.json").string() + " measured them (2 recorded forwards each"),
            std::string::npos) << r.out;
  // Its files join the run's directory (no --out), so the report draws them beside the comparison.
  const json compare = json::parse(io::read_file(runs / "compare.json"));
  const json j = json::parse(io::read_file(runs / "roofline.json"));
  EXPECT_EQ(j["kind"], "roofline");
  EXPECT_EQ(j["from"], (runs / "compare.json").string());
  EXPECT_EQ(j["problem"], compare["problem"]);
  for (const char* key : {"fp32_gflops", "bf16_gflops", "bandwidth_gbs", "library_fp32_gflops", "library_bf16_gflops"})
    EXPECT_EQ(j["machine"][key], compare["machine"][key]) << key;
  // Every op that does work of its own, in the run's order of variants, and nothing else.
  std::vector<std::string> placed, expected;
  for (const json& op : j["ops"]) placed.push_back(op["variant"].get<std::string>() + "/" + op["name"].get<std::string>());
  for (const char* variant : {"naive", "inplace", "flash"}) {
    const json s = json::parse(io::read_file(runs / (std::string(variant) + ".summary.json")));
    for (const json& row : s["rows"]) {
      if (analysis::is_annotation(row["name"].get<std::string>(), row["category"].get<std::string>())) continue;
      const json& own = row["self_cost"];
      if (own["flops"].get<double>() <= 0 && own["bytes"].get<double>() <= 0) continue;
      expected.push_back(std::string(variant) + "/" + row["name"].get<std::string>());
      const auto op = std::find_if(j["ops"].begin(), j["ops"].end(), [&](const json& o) {
        return o["variant"] == variant && o["name"] == row["name"];
      });
      ASSERT_NE(op, j["ops"].end()) << expected.back();
      EXPECT_EQ((*op)["self_ns"].get<double>(), row["self_ns"].get<double>()) << expected.back();
      EXPECT_EQ((*op)["flops"].get<double>(), own["flops"].get<double>()) << expected.back();
      EXPECT_EQ((*op)["bytes"].get<double>(), own["bytes"].get<double>()) << expected.back();
      EXPECT_DOUBLE_EQ((*op)["achieved_gflops"].get<double>(), own["flops"].get<double>() / row["self_ns"].get<double>());
    }
  }
  EXPECT_EQ(placed, expected);
  EXPECT_NE(std::find(placed.begin(), placed.end(), "naive/softmax"), placed.end());
  EXPECT_NE(std::find(placed.begin(), placed.end(), "flash/flash_attention_fwd"), placed.end());

  // Named variants narrow it; --out sends it elsewhere.
  const Result one = run("roofline --from " + (runs / "compare.json").string() + " flash" + out_flag());
  ASSERT_EQ(one.code, 0) << one.err;
  const json flash = read_json("roofline.json");
  ASSERT_EQ(flash["ops"].size(), 1u);
  EXPECT_EQ(flash["ops"][0]["name"], "flash_attention_fwd");
  fs::remove_all(out());

  // A compare.json reached through a symbolic link elsewhere: its summaries are read beside the file it leads to,
  // and the roofline joins that run.
  const fs::path elsewhere = dir_ / "elsewhere";
  fs::create_directories(elsewhere);
  fs::create_symlink(fs::absolute(runs / "compare.json"), elsewhere / "latest.json");
  fs::remove(runs / "roofline.json");
  const Result linked_file = run("roofline --from " + (elsewhere / "latest.json").string() + " flash");
  ASSERT_EQ(linked_file.code, 0) << linked_file.err;
  EXPECT_TRUE(fs::exists(runs / "roofline.json"));
  EXPECT_FALSE(fs::exists(elsewhere / "roofline.json"));

  // Flags of a run, another device, a variant the run lacks: exit 2, nothing written.
  const std::string from = " --from " + runs.string() + " ";
  expect_bad("roofline" + from + "--shape 1,2,64,32 --iters 3",
             "--shape and --iters do not apply with --from, which places the ops an earlier run measured");
  expect_bad("roofline" + from + "--peaks-only", "--peaks-only does not apply with --from");
  expect_bad("roofline" + from + "--device cuda", "is a CPU run; drop --device");
  expect_bad("roofline" + from + "sdpa-math", "variant 'sdpa-math' is not in " + (runs / "compare.json").string() +
                                                  " (it holds naive, inplace, flash)");
  expect_bad("roofline --from " + (dir_ / "nothing").string(), "no such directory or file");
  expect_bad("roofline --from ''", "--from: an empty value");
  // Files that are not what the run wrote: each named, with its field.
  // A copy of the run with one of its files edited.
  auto edited = [&](const std::string& file, const std::function<void(json&)>& edit) {
    const fs::path copy = dir_ / "edited";
    fs::remove_all(copy);
    fs::copy(runs, copy);
    json doc = json::parse(io::read_file(copy / file));
    edit(doc);
    std::ofstream(copy / file) << doc.dump();
    return copy;
  };
  auto damaged = [&](const std::string& file, const std::function<void(json&)>& edit, const std::string& expect) {
    expect_bad("roofline --from " + edited(file, edit).string(), expect);
  };
  damaged("compare.json", [](json& d) { d["machine"]["bandwidth_gbs"] = 1e-300; },
          "compare.json: field 'machine': bandwidth_gbs 1e-300 is outside 0.1..100000 GB/s");
  damaged("compare.json", [](json& d) { d["machine"]["bandwidth_loops"]["triad"] = 1e6; },
          "compare.json: field 'machine': bandwidth_loops.triad 1e+06 is outside 0.1..100000 GB/s");
  damaged("compare.json", [](json& d) { d["machine"]["bandwidth_loops"] = {{"update", 1}, {"copy", 1}, {"triad", 1}}; },
          "is not the best of bandwidth_loops (1)");
  damaged("compare.json", [](json& d) { d["machine"].erase("fp32_gflops"); },
          "compare.json: field 'machine': field 'fp32_gflops' is missing");
  // A skipped row's note is a file's text: printed without the control characters it may hold.
  {
    const fs::path copy = edited("compare.json", [](json& d) {
      d["variants"][1]["status"] = "skipped";
      d["variants"][1]["ms"] = nullptr;  // as compare writes a row it did not run
      d["variants"][1]["note"] = "over \x1b[31mbudget\u2067";
    });
    const Result noted = run("roofline --from " + copy.string());
    ASSERT_EQ(noted.code, 0) << noted.err;
    EXPECT_NE(noted.out.find("inplace     skipped: over  [31mbudget"), std::string::npos) << noted.out;
    EXPECT_EQ(noted.out.find("\u2067"), std::string::npos) << "a bidirectional isolate reached the terminal";
    EXPECT_EQ(json::parse(io::read_file(copy / "roofline.json"))["skipped"][0]["variant"], "inplace");
  }
  damaged("compare.json", [](json& d) { d["variants"][0]["summary"] = "../naive.summary.json"; },
          "names its summary '../naive.summary.json', not a plain file name");
  damaged("naive.summary.json",
          [](json& d) {
            for (json& row : d["rows"])
              if (row["name"] == "softmax") row["self_cost"]["flops"] = "many";
          },
          "self_cost: field 'flops' is not a number");
  // A cost model that is not an object is no op without cost: the op would silently go unplaced.
  for (const json& bad : {json("x"), json::array(), json(nullptr)})
    damaged("naive.summary.json",
            [&](json& d) {
              for (json& row : d["rows"])
                if (row["name"] == "softmax") row["self_cost"] = bad;
            },
            "naive.summary.json row 'softmax': field 'self_cost' is " + bad.dump() + ", not an object");
  damaged("naive.summary.json",
          [](json& d) {
            for (json& row : d["rows"])
              if (row["name"] == "softmax") row.erase("cost");
          },
          "naive.summary.json row 'softmax': field 'cost' is missing");
  // An op with work in under a nanosecond a call: placed, it read 791,557 % of its ceiling.
  damaged("naive.summary.json",
          [](json& d) {
            for (json& row : d["rows"])
              if (row["name"] == "softmax") {
                row["self_ns"] = 0.5;
                row["self_ns_per_step"] = nullptr;  // else refused first: its steps would not sum to it
              }
          },
          "op 'softmax' has FLOPs or bytes and 0.5 ns of self time over");
  // Per-step times that are not the row's: refused as summary_json never writes them.
  damaged("naive.summary.json",
          [](json& d) {
            for (json& row : d["rows"])
              if (row["name"] == "softmax") row["self_ns"] = 0.5;
          },
          "row 'softmax': field 'self_ns_per_step' sums to ");
  // FLOPs no time could hold: placed, matmul read 2,974,188,039 % of its ceiling and the columns ran together.
  damaged("naive.summary.json",
          [](json& d) {
            for (json& row : d["rows"])
              if (row["name"] == "matmul") row["self_cost"]["flops"] = row["cost"]["flops"] = 1e15;
          },
          "op 'matmul' would run at ");
  // A comparison of no variants: attnprof never writes one, and it would give an empty roofline.
  damaged("compare.json", [](json& d) { d["variants"] = json::array(); },
          "compare.json: field 'variants' is empty");
  damaged("naive.summary.json",
          [](json& d) {  // another run's: its time and the forwards it is the median of
            d["run"]["ms_per_forward"] = d["run"]["ms_per_forward"].get<double>() * 2;
            for (json& ms : d["run"]["forward_ms"]) ms = ms.get<double>() * 2;
          },
          "naive.summary.json is not the summary");
  // A time that is not the median of the forwards beside it: no attnprof summary holds one.
  damaged("naive.summary.json", [](json& d) { d["run"]["ms_per_forward"] = d["run"]["ms_per_forward"].get<double>() * 2; },
          "field 'ms_per_forward' is ");
  // Its outputs never replace what it reads.
  fs::remove(runs / "roofline.json");
  fs::create_symlink("compare.json", runs / "roofline.json");
  const Result linked = run("roofline --from " + runs.string());
  EXPECT_EQ(linked.code, 2);
  EXPECT_NE(linked.err.find("which --from reads"), std::string::npos) << linked.err;
  EXPECT_EQ(json::parse(io::read_file(runs / "compare.json")), compare);
}

// A CUDA compare's directory, as a GPU machine writes it (compare.json with the GPU's datasheet peaks, a device
// summary of a CUPTI capture: here the synthetic one of the host-side CUDA tests), read back by roofline --from
// on this machine, which has no GPU: every kernel, copy and fill placed in its device time.
TEST_F(Cli, RooflineFromACudaRunPlacesItsKernelsWithoutAGpu) {
  const fs::path runs = dir_ / "gpu-run";
  fs::create_directories(runs);
  const std::string problem = "B=1 Hq=1 Hkv=1 Nq=8 Nk=8 D=8 bf16 causal";
  prof::ProfileResult r = testing_device::synthetic_profile();
  cuda::attach_device_capture(r, testing_device::synthetic_capture());
  r.metadata = {{"problem", problem}, {"variant", "naive"}, {"annotation", "attn_fwd"}};
  const analysis::KeyAverages ka = analysis::key_averages(r);
  json summary = report::summary_json(r, ka);
  const double ms = 0.0125;
  summary["run"] = {{"variant", "naive"}, {"ms_per_forward", ms}, {"peak_extra_bytes", 8192}, {"ops_per_forward", 3}};
  std::ofstream(runs / "naive.summary.json") << summary.dump(2);
  const cuda::DeviceInfo h200 = testing_device::h200_info();
  const json compare = {{"kind", "compare"},
                        {"device", "cuda"},
                        {"gpu", h200.name},
                        {"problem", problem},
                        {"dtype", "bf16"},
                        {"iters", 1},
                        {"machine", json(cuda::gpu_peaks(h200))},
                        {"variants", {{{"name", "naive"}, {"status", "ok"}, {"ms", ms}, {"summary", "naive.summary.json"}},
                                      {{"name", "flash"}, {"status", "skipped"}, {"note", "no kernel image"}}}}};
  std::ofstream(runs / "compare.json") << compare.dump(2);

  const Result out = run("roofline --from " + runs.string() + " --json");
  ASSERT_EQ(out.code, 0) << out.err;
  const json j = json::parse(out.out);
  EXPECT_EQ(j["device"], "cuda");
  EXPECT_EQ(j["machine"]["isa"], "sm_90");
  EXPECT_DOUBLE_EQ(j["machine"]["bf16_gflops"].get<double>(), 989400.0);
  EXPECT_EQ(j["skipped"], json::parse(R"([{"variant": "flash", "status": "skipped", "note": "no kernel image"}])"));
  std::set<std::string> placed;
  for (const json& op : j["ops"]) {
    placed.insert(op["name"].get<std::string>());
    const auto row = std::find_if(summary["rows"].begin(), summary["rows"].end(),
                                  [&](const json& x) { return x["name"] == op["name"]; });
    ASSERT_NE(row, summary["rows"].end()) << op["name"];
    EXPECT_EQ(op["self_ns"].get<double>(), (*row)["self_cuda_ns"].get<double>()) << op["name"] << ": device time";
  }
  // The kernels, the copy and the fill kernel; not the host ops that launched them.
  EXPECT_EQ(placed, (std::set<std::string>{"ampere_bf16_gemm", "Memcpy DtoD (Device -> Device)",
                                           "masked_fill_ker(float*, unsigned char const*, float)"}));
  const std::string text = io::read_file(runs / "roofline.txt");
  EXPECT_NE(text.find("GPU: NVIDIA H200 (sm_90, 132 SMs"), std::string::npos) << text;
  EXPECT_NE(text.find("Kernels, copies and fills of " + problem), std::string::npos) << text;
  EXPECT_NE(text.find("flash       skipped: no kernel image"), std::string::npos) << text;
  // The device the run was on is the one it is placed on.
  expect_bad("roofline --from " + runs.string() + " --device cpu", "is a CUDA run; drop --device");
}

// ATTNPROF_ISA=scalar dispatches our kernels at scalar, but OpenBLAS and oneDNN still choose the CPU's best ISA:
// roofline and compare place matmul under that ISA's peaks (recorded beside the scalar ones), not under the
// scalar FMA peak, which OpenBLAS beats many times over. The checks are on the ceilings used, not on speed.
TEST_F(Cli, UnderAForcedIsaMatmulIsPlacedUnderTheLibrarysPeaks) {
  const std::string best{isa_name(available_isas().back())};
  const std::string note = "matmul (OpenBLAS/oneDNN) billed at the " + best + " peaks";
  const bool differs = best != "scalar";
  ::setenv("ATTNPROF_ISA", "scalar", 1);
  const Result r = run("roofline naive sdpa-math --iters 1 --warmup 0" + kSmall + out_flag());
  const Result c =
      run("compare --variants naive --iters 1 --warmup 0" + kSmall + " --out " + (dir_ / "compare").string());
  ::unsetenv("ATTNPROF_ISA");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find(note) != std::string::npos, differs) << r.out;
  const json j = read_json("roofline.json");
  const json& m = j["machine"];
  EXPECT_EQ(m["isa"], "scalar");
  EXPECT_EQ(m["library_isa"], best);
  EXPECT_EQ(m["bf16_gflops"].get<double>(), 0.0);
  EXPECT_TRUE(m["ridge_bf16"].is_null()) << "no bf16 units, no bf16 ridge: " << m.dump();
  EXPECT_GT(m["ridge_fp32"].get<double>(), 0.0);
  std::set<std::string> placed;
  for (const json& op : j["ops"]) {
    const std::string what = op.dump();
    const double flops = op["flops"].get<double>(), ceiling = op["compute_ceiling_gflops"].get<double>();
    EXPECT_LE(op["attainable_gflops"].get<double>(), ceiling + 1e-9) << what;
    if (op["name"] == "matmul") {
      placed.insert(op["variant"].get<std::string>());
      EXPECT_EQ(op["library_flops"].get<double>(), flops) << what;
      // bf16 below AVX-512 is widened for sgemm (and SDPA math upcasts first): fp32 FMA at the library's ISA.
      EXPECT_EQ(op["library_bf16_flops"].get<double>(), 0.0) << what;
      EXPECT_DOUBLE_EQ(ceiling, m["library_fp32_gflops"].get<double>()) << what;
    } else if (flops > 0) {
      EXPECT_EQ(op["library_flops"].get<double>(), 0.0) << what;
      EXPECT_DOUBLE_EQ(ceiling, m["fp32_gflops"].get<double>()) << what;
    }
  }
  EXPECT_EQ(placed, (std::set<std::string>{"naive", "sdpa-math"}));
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.out.find("Floor ms: " + note) != std::string::npos, differs) << c.out;
  const json cj = json::parse(io::read_file(dir_ / "compare" / "compare.json"));
  EXPECT_EQ(cj["machine"]["library_isa"], best);
  EXPECT_EQ(cj["machine"]["library_fp32_gflops"], m["library_fp32_gflops"]) << "the same cached peaks";
  // % peak is out of the hardware's peak, the best ISA's, not the scalar loop's that OpenBLAS beats many times.
  EXPECT_EQ(cj["peak_isa"], best);
  const bool bf16 = cj["dtype"] == "bf16" && m["library_bf16_gflops"].get<double>() > 0;
  EXPECT_EQ(cj["peak_gflops"], bf16 ? m["library_bf16_gflops"] : m["library_fp32_gflops"]);
  for (const json& v : cj["variants"]) EXPECT_LE(v["pct_peak"].get<double>(), 100.0) << v.dump();
  EXPECT_EQ(c.out.find("Our kernels ran at scalar (ATTNPROF_ISA)") != std::string::npos, differs) << c.out;
  const json sj = json::parse(io::read_file(dir_ / "compare" / "naive.summary.json"));
  for (const json& row : sj["rows"])
    if (row["name"] == "matmul")
      EXPECT_EQ(row["self_cost"]["library_flops"], row["self_cost"]["flops"]) << row.dump();
}

TEST_F(Cli, NpyInputsAndSaveOutputMatchTheReference) {
  fs::create_directories(dir_);
  const Tensor q = randn({1, 4, 48, 32}, DType::F32, 1), k = randn({1, 2, 80, 32}, DType::F32, 2),
               v = randn({1, 2, 80, 32}, DType::F32, 3);  // GQA (2 KV heads) and Nk != Nq, from the files
  const std::string args = " --q " + write_npy(dir_ / "q.npy", q) + " --k " + write_npy(dir_ / "k.npy", k) + " --v " +
                           write_npy(dir_ / "v.npy", v) + " --save-output " + (dir_ / "o.npy").string();
  const Result r = run("profile flash --no-causal --threads 1 --json" + args + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(json::parse(r.out)["run"]["problem"].get<std::string>().find("Hkv=2"), std::string::npos);
  const Tensor o = npy::load((dir_ / "o.npy").string());
  EXPECT_EQ(o.shape(), (Shape4{1, 4, 48, 32}));
  AttnOptions opt;
  EXPECT_TRUE(compare_to_reference(o, reference_attention(q, k, v, opt), {2e-4, 2e-3}).ok());
}

// A bf16 failure that the inputs' scale explains says so: scores of |s| ~ 40 stored in bf16 between the unfused
// ops move their weights past the tolerance, while the fused kernels (scores in fp32) pass; inputs at N(0,1)
// fail nothing and print no such line.
TEST_F(Cli, ABf16FailureFromLargeScoresNamesTheirSize) {
  fs::create_directories(dir_);
  Tensor q = randn({1, 2, 96, 64}, DType::F32, 1), k = randn({1, 2, 96, 64}, DType::F32, 2),
         v = randn({1, 2, 96, 64}, DType::F32, 3);
  for (Tensor* t : {&q, &k}) {
    float* x = t->data<float>();
    for (int64_t i = 0; i < t->numel(); ++i) x[i] *= 3.0f;
  }
  const std::string args = " --dtype bf16 --threads 1 --iters 1 --warmup 0 --q " + write_npy(dir_ / "q.npy", q) +
                           " --k " + write_npy(dir_ / "k.npy", k) + " --v " + write_npy(dir_ / "v.npy", v);
  Result r = run("profile naive" + args + out_flag());
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("The scores reach |q·k·scale| = "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bf16 keeps 8 significant bits, so this variant's scores, stored in it between ops, move their "
                       "softmax weights by up to "),
            std::string::npos)
      << r.out;
  // The figure is exp(|s|·2^-8) − 1 of the |s| printed (three significant digits of it, so within a part in 500).
  const size_t at = r.out.find("|q·k·scale| = ") + std::string("|q·k·scale| = ").size();
  const double s = std::stod(r.out.substr(at)), moved = std::expm1(s / 256.0) * 100;
  const size_t up = r.out.find("by up to ") + std::string("by up to ").size();
  EXPECT_NEAR(std::stod(r.out.substr(up)), moved, moved * 0.005 + 0.05) << r.out;
  r = run("profile flash" + args + out_flag());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
}

// Files converted by --dtype say so where the run names its inputs (the file names name no dtype).
TEST_F(Cli, InputFilesConvertedByDtypeSaySo) {
  fs::create_directories(dir_);
  const Tensor q = randn({1, 2, 32, 32}, DType::F32, 1), k = randn({1, 2, 32, 32}, DType::F32, 2),
               v = randn({1, 2, 32, 32}, DType::F32, 3);
  const std::string args = " --q " + write_npy(dir_ / "q.npy", q) + " --k " + write_npy(dir_ / "k.npy", k) + " --v " +
                           write_npy(dir_ / "v.npy", v);
  Result r = run("compare --variants flash --threads 1 --iters 1 --warmup 0 --dtype bf16" + args + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("v.npy (fp32 converted to bf16 by --dtype)"), std::string::npos) << r.out;
  EXPECT_NE(read_json("compare.json")["inputs"].get<std::string>().find("(fp32 converted to bf16 by --dtype)"),
            std::string::npos);
  r = run("compare --variants flash --threads 1 --iters 1 --warmup 0" + args + out_flag());  // as they are
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("converted"), std::string::npos) << r.out;
}

// --brief prints what the run found and leaves out the lines that define the columns; the files keep them all.
TEST_F(Cli, BriefLeavesOutTheDefinitionsButNotTheFindings) {
  const std::vector<std::string> definitions = {"GFLOP/s: attention FLOPs", "Floor ms: the roofline floor",
                                                "Peak mem: bytes", "Ops: ops per forward", "Max err: max |out"};
  Result r = run("compare --brief --iters 2 --warmup 0" + kSmall + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string file = io::read_file(out() / "compare.txt");
  for (const std::string& d : definitions) {
    EXPECT_EQ(r.out.find(d), std::string::npos) << d;
    EXPECT_NE(file.find(d), std::string::npos) << d;
  }
  // Every line printed is the file's, in its order: the file less its definitions, and the one line --brief adds
  // when the suite's cached peaks were measured on a busy machine.
  std::string rest = file;
  for (const std::string& d : definitions) {
    const size_t at = rest.find(d);
    ASSERT_NE(at, std::string::npos) << d;
    rest.erase(at, rest.find('\n', at) + 1 - at);
  }
  std::string printed = r.out;
  if (const size_t at = printed.find("Peaks: measured on a busy machine"); at != std::string::npos)
    printed.erase(at, printed.find('\n', at) + 1 - at);
  EXPECT_EQ(printed, rest);
  // Figures of this run stay: the peak % peak is over, which backend sdpa (auto) took.
  for (const char* finding : {"Speed-up over naive", "Time in memory-bound ops", "Inside flash's", "% peak: of the measured",
                              "sdpa (auto) selects", "flash's tasks (flash_attention_fwd's "})
    EXPECT_NE(r.out.find(finding), std::string::npos) << finding;

  r = run("diff --brief " + (out() / "naive.summary.json").string() + " " + (out() / "inplace.summary.json").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("Change: same ="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("turned in place"), std::string::npos) << r.out;
  r = run("roofline --brief --from " + out().string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("Attainable = min("), std::string::npos) << r.out;
  EXPECT_NE(io::read_file(out() / "roofline.txt").find("Attainable = min("), std::string::npos);

  r = run("profile naive --brief --iters 2 --warmup 0" + kSmall + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string table = io::read_file(out() / "naive.table.txt");
  for (const char* d : {"CPU Mem: bytes allocated", "FLOPs: what each op computed", "Bound: each op's FLOP/B"}) {
    EXPECT_EQ(r.out.find(d), std::string::npos) << d;
    EXPECT_NE(table.find(d), std::string::npos) << d;
  }
  for (const char* kept : {"Self CPU time total", "Profiler overhead", "per forward: 6 ops", "Time by bound"})
    EXPECT_NE(r.out.find(kept), std::string::npos) << kept;
  // JSON has no definitions to leave out: the two together are refused, not one silently ignored.
  r = run("compare --brief --json" + kSmall + out_flag());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--json excludes --brief"), std::string::npos) << r.err;
}

TEST_F(Cli, BadInputExitsTwoWithOneLineAndNoFiles) {
  expect_bad("profile bogus" + kSmall, "unknown variant 'bogus'");
  expect_bad("profile naive --shape 8,16,abc,64", "malformed --shape");
  expect_bad("profile naive --shape 8,16,1024", "malformed --shape");
  expect_bad("profile naive --shape 0,16,64,64", "B must be positive");
  expect_bad("profile naive --shape 1,-2,64,64", "H must be positive");
  // Past 2^53 elements in a tensor or in the N×N scores, the sizes and costs would overflow int64: refused with
  // the tensor named, before any memory check multiplies them (each field alone is in range).
  expect_bad("profile flash --shape 4294967296,4294967296,1,1", "the q would hold 1.84e+19 elements, past 2^53");
  expect_bad("compare --shape 1,1,4294967296,64", "the N×N scores would hold 1.84e+19 elements, past 2^53");
  expect_bad("sweep --variants flash --shape 4096,4096,64,64 --seq 64,2147483648",
             "the q would hold 2.31e+18 elements, past 2^53");
  expect_bad("profile naive --shape 1,1,64,9223372036854775807", "the q would hold 5.9e+20 elements");
  // Within memory, past any time: N = 95M at D = 1 would compute 1.8e16 FLOPs in its fp64 reference (the causal
  // half of the pairs; years on a CPU, and the variant's own forward as long): refused before the inputs are
  // drawn, not left to hang. The budget is raised past what they need (3.6 GB) so that no machine's memory
  // refuses them first.
  expect_bad("profile flash --shape 1,1,94906265,1 --threads 1 --memory-budget 100G",
             "at B=1 Hq=1 Hkv=1 Nq=94906265 Nk=94906265 D=1 bf16 causal the fp64 reference every variant is "
             "validated against would take 1.8e+04 TFLOP (1.05e+06x the blog's shape, hours or more on a CPU; "
             "attnprof refuses past 50 TFLOP on 1 thread)");
  expect_bad("compare --shape 1,1,94906265,1 --threads 1 --memory-budget 100G", "would take 1.8e+04 TFLOP");
  expect_bad("sweep --variants flash --shape 1,1,64,64 --seq 64,50000000 --threads 1",
             "the fp64 reference every variant is validated against would take");
  // A head dim the kernel cannot serve is refused before 600 MB of random inputs are drawn (one line: no
  // progress was printed, so nothing ran).
  expect_bad("profile flash --shape 1,1,1,100000000 --threads 1", "supports head dims up to 256");
  expect_bad("roofline flash --shape 1,1,1,100000000 --threads 1", "supports head dims up to 256");
  expect_bad("profile naive --threads 100000 --shape 1,1,16,16", "--threads '100000' is out of range: expected 0..");
  expect_bad("profile naive --threads 0 --shape 1,1,16,16 --kv-heads 3", "--kv-heads 3 must divide");
  expect_bad("profile sdpa --backend flash --shape 1,1,16,320", "SDPA backend 'flash' cannot serve");
  // A value the library cannot parse is refused naming the option it came from.
  expect_bad("profile sdpa --backend fast" + kSmall, "--backend: unknown SDPA backend 'fast'");
  expect_bad("profile sdpa --backend cudnn" + kSmall, "--backend: 'cudnn' is a backend of the CUDA variants: add --device cuda");
  // A CUDA variant's name without --device cuda (a build without the backend has no such variant).
  expect_bad("compare --variants naive,,flash" + kSmall,
             "--variants 'naive,,flash' holds an empty name (two commas in a row, or one at an end)");
  expect_bad("sweep --variants flash, --seq 64,128" + kSmall, "--variants 'flash,' holds an empty name");
  expect_bad("profile sdpa-cudnn" + kSmall,
             cuda::cuda_registry().empty() ? std::string("unknown variant 'sdpa-cudnn'")
                                           : std::string("'sdpa-cudnn' is a variant of the CUDA backend: add --device "
                                                         "cuda"));
  ::setenv("ATTNPROF_ISA", "bogus", 1);
  expect_bad("profile naive" + kSmall, "ATTNPROF_ISA: unknown ISA 'bogus': expected scalar, avx2 or avx512");
  ::unsetenv("ATTNPROF_ISA");
  {  // A library file the environment names and that does not load is the error, not a silent fall back to the
     // library found by name (fp32 naive multiplies with OpenBLAS; the run's header line comes first).
    ::setenv("ATTNPROF_OPENBLAS_LIBRARY", "/nonexistent/libopenblas.so", 1);
    const Result r = run("profile naive --dtype fp32" + kSmall + out_flag());
    ::unsetenv("ATTNPROF_OPENBLAS_LIBRARY");
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("attnprof: error: OpenBLAS unavailable: "
                         "ATTNPROF_OPENBLAS_LIBRARY='/nonexistent/libopenblas.so' could not be loaded ("),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(out())) << "a stopped run leaves no output directory";
  }
  expect_bad("profile naive --backend math" + kSmall, "--backend applies only to the sdpa variant");
  expect_bad("profile naive --dtype fp8" + kSmall, "--dtype: unsupported dtype 'fp8': expected fp32, bf16 or fp16");
  expect_bad("profile naive --memory-budget 12Q" + kSmall, "--memory-budget");
  expect_bad("profile naive --memory-budget 0" + kSmall, "--memory-budget must be a positive size, got '0'");
  expect_bad("profile naive --memory-budget 99999999999G" + kSmall, "--memory-budget '99999999999G' is too large");
  // Inputs of 3.8e20 bytes: refused with the tensor's element count, past what int64 sizes can count, not with
  // an int64 wrapped round to a negative count; inputs of 5.3e13 bytes, which the sizes can count: with that size
  // (and their fp64 reference's), over the budget.
  expect_bad("compare --shape 99999999,99999,99999,64", "the q would hold 6.4e+19 elements, past 2^53");
  expect_bad("compare --shape 2048,1024,64,64", "(51539607552 bytes) beside their fp64 reference (207232172032 bytes)");
  expect_bad("profile naive --no-such-flag" + kSmall, "no-such-flag");
  expect_bad("sweep --seq 256..abc" + kSmall, "malformed --seq");
  expect_bad("sweep --seq 16,32,16" + kSmall, "--seq '16,32,16' lists N=16 twice");
  expect_bad("sweep --seq 64..100" + kSmall, "--seq '64..100' gives the one length 64: doubling from 64 passes 100 at "
                                             "once (name a LAST of at least 128, or list the lengths: 64,100)");
  // A range that stops short of LAST says so only in a run that goes ahead: a refused one prints its one line.
  expect_bad("sweep --seq 32..100 --variants bogus" + kSmall, "unknown variant 'bogus'");
  // Options that would be silently ignored are refused.
  expect_bad("sweep --variants naive --backend math" + kSmall,
             "--backend applies to the variant 'sdpa', which --variants 'naive' does not name");
  expect_bad("roofline --backend math" + kSmall,
             "--backend applies to the variant 'sdpa', which is not among naive inplace sdpa-math flash");
  expect_bad("roofline naive --peaks-only" + kSmall, "--peaks-only places no variants: drop naive or --peaks-only");
  expect_bad("roofline --peaks-only --backend math" + kSmall, "--peaks-only places no variants: --backend");
  expect_bad("sweep --variants naive,bogus" + kSmall, "unknown variant 'bogus'");
  expect_bad("compare --variants bogus" + kSmall, "unknown variant 'bogus' in --variants: expected naive, inplace, sdpa-math, sdpa-flash, flash, or sdpa (every SDPA backend)");
  expect_bad("profile", "variant is required (see attnprof profile --help)");
  // A near miss is named; a name near none, or near two, is not.
  expect_bad("profile naiv" + kSmall, "unknown variant 'naiv' (did you mean 'naive'?): expected naive,");
  expect_bad("profile Flash" + kSmall, "unknown variant 'Flash' (did you mean 'flash'?): expected naive,");
  expect_bad("compare --variants sdpa-mth" + kSmall, "unknown variant 'sdpa-mth' in --variants (did you mean 'sdpa-math'?)");
  expect_bad("profile flashy-attention" + kSmall, "unknown variant 'flashy-attention': expected naive,");
  // `attnprof help [CMD]` is `attnprof [CMD] --help`.
  {
    const Result help = run("help"), flag = run("--help");
    EXPECT_EQ(help.code, 0);
    EXPECT_EQ(help.out, flag.out);
    // The environment the commands read is listed where --help is read, not only in docs/cli.md.
    for (const char* var : {"ATTNPROF_ISA=scalar|avx2|avx512", "OMP_NUM_THREADS", "ATTNPROF_WEB_DIR"})
      EXPECT_NE(help.out.find(var), std::string::npos) << var;
    const Result sub = run("help sweep"), sub_flag = run("sweep --help");
    EXPECT_EQ(sub.code, 0);
    EXPECT_EQ(sub.out, sub_flag.out);
    EXPECT_NE(sub.out.find("--seq"), std::string::npos);
  }
  {
    const Result typo = run("help swep");
    EXPECT_EQ(typo.code, 2);
    EXPECT_EQ(typo.err.rfind("attnprof: error: unknown command 'swep' (did you mean 'sweep'?): expected one of", 0), 0u)
        << typo.err;
  }
  const Result none = run("");
  EXPECT_EQ(none.code, 2);
  EXPECT_EQ(none.err, "attnprof: error: a command is required: profile, compare, sweep, roofline, report, diff (see "
                      "attnprof --help)\n");
  expect_bad("comapre" + kSmall, "unknown command 'comapre' (did you mean 'compare'?): expected one of profile, compare, "
                                 "sweep, roofline, report, diff");
  expect_bad("--threads 1 compare" + kSmall, "unknown option '--threads' before the command: expected one of profile");
  expect_bad("profile naive --save-output /nonexistent-dir/o.npy" + kSmall,
             "cannot write --save-output '/nonexistent-dir/o.npy': the directory '/nonexistent-dir' does not exist");
  // A --save-output the system refuses to take (a full disk; /dev/full fails every write): the error names the
  // option, not just the file.
  if (fs::exists("/dev/full")) {
    const Result r = run("profile naive --iters 1 --warmup 0 --save-output /dev/full" + kSmall + out_flag());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("attnprof: error: --save-output: cannot write '/dev/full': write failed"), std::string::npos)
        << r.err;
  }
  // --save-output naming the --out directory the run would make, however either is spelt: refused before
  // anything runs or is made.
  for (const auto& [save, out_dir] : std::vector<std::pair<std::string, std::string>>{
           {(dir_ / "not-yet").string(), (dir_ / "not-yet").string()},
           {(dir_ / "not-yet").string(), (dir_ / "not-yet").string() + "/"},
           {(dir_ / "." / "not-yet").string(), (dir_ / "not-yet").string()},
           {fs::relative(dir_ / "not-yet").string(), (dir_ / "not-yet").string()}}) {
    const Result r = run("profile naive --save-output " + save + " --out " + out_dir + kSmall);
    EXPECT_EQ(r.code, 2) << save << " " << out_dir;
    EXPECT_NE(r.err.find("cannot write --save-output '" + save + "': it is the --out directory the run makes"),
              std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("validating"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "not-yet"));
  }
  expect_bad("roofline --peaks-only --html" + kSmall, "--peaks-only writes no files: drop --html");
  // The problem flags are checked with --peaks-only too, though it does not use them.
  expect_bad("roofline --peaks-only --shape 8,16,0,64", "N must be positive");
  expect_bad("roofline --peaks-only --dtype fp64", "fp64");
  expect_bad("roofline --peaks-only --shape 1,4,64,32 --kv-heads 3", "--kv-heads 3 must divide the query heads H=4");
  expect_bad("roofline --peaks-only --q /nonexistent.npy --k /nonexistent.npy --v /nonexistent.npy",
             "--peaks-only reads no inputs: drop --q, --k and --v");
  expect_bad("profile naive --iters 0" + kSmall, "--iters '0' is out of range: expected 1..10000");
  expect_bad("profile naive --iters 2147483647" + kSmall,
             "--iters '2147483647' is out of range: expected 1..10000 (every profiled forward is kept in memory");
  expect_bad("sweep --warmup 10001" + kSmall, "--warmup '10001' is out of range: expected 0..10000");
  expect_bad("profile naive --no-causal --causal" + kSmall, "--causal and --no-causal contradict each other");
  expect_bad("profile naive --seed -1" + kSmall, "--seed '-1' is out of range: expected 0..18446744073709551615");
  expect_bad("profile naive --seed 18446744073709551616" + kSmall, "--seed '18446744073709551616' is out of range: expected 0..18446744073709551615");  // not clamped
  expect_bad("profile naive --seed 0x10" + kSmall, "--seed '0x10' is not a decimal integer");
  expect_bad("profile naive --kv-len 0" + kSmall, "--kv-len '0' is out of range: expected 1..9223372036854775807");
  expect_bad("profile naive --kv-heads 0" + kSmall, "--kv-heads '0' is out of range: expected 1..9223372036854775807");
  expect_bad("profile naive --memory-budget ''" + kSmall, "--memory-budget: an empty value");  // not "the default"
  expect_bad("compare --variants ''" + kSmall, "--variants: an empty value");
  // "--opt=" is empty too: CLI11 alone would read it as "--opt" and take the next argument as its value (--out=
  // --json wrote a directory named --json; --out= --shape=... dropped the shape and ran the default one).
  expect_bad("profile flash --out= --json" + kSmall, "--out: an empty value");
  expect_bad("profile flash --shape= --json", "--shape: an empty value");
  expect_bad("diff a.json b.json --save= --json", "--save: an empty value");
  expect_bad("report --title= --json", "--title: an empty value");
  expect_bad("sweep --threads= --seq 64" + kSmall, "--threads: an empty value");
  expect_bad("sweep --seq 4611686018427387904..9223372036854775807" + kSmall, "--seq: 4611686018427387904 is too long");
  expect_bad("sweep --seq 64,128 --kv-len 16" + kSmall, "--kv-len does not apply to sweep");
  expect_bad("compare --device tpu" + kSmall, "unknown --device 'tpu'");
  if (!cuda::available()) expect_bad("compare --device cuda" + kSmall, "--device cuda");
  expect_bad("profile naive --device tpu" + kSmall, "unknown --device 'tpu'");
  if (!cuda::available()) expect_bad("profile naive --device cuda" + kSmall, "--device cuda");
  expect_bad("profile naive --sort-by cuda_time_total" + kSmall, "no CUDA times");
  expect_bad("roofline --device tpu" + kSmall, "unknown --device 'tpu'");
  if (!cuda::available()) expect_bad("roofline --device cuda" + kSmall, "--device cuda");
  expect_bad("sweep --device tpu" + kSmall, "unknown --device 'tpu'");
  if (!cuda::available()) expect_bad("sweep --device cuda" + kSmall, "--device cuda");
  if (!cuda::available()) expect_bad("compare --device cuda --variants bogus" + kSmall, "--device cuda");
}

// Without --threads, attnprof runs the team OpenMP (and PyTorch) would: OMP_NUM_THREADS when set, else every CPU
// its affinity mask allows (taskset, a cpuset). An OMP_NUM_THREADS it cannot run is an error naming it, unless
// --threads is given.
TEST_F(Cli, ThreadsDefaultToOmpNumThreadsElseTheCpusItMayRunOn) {
  const std::string args = "compare --shape 1,2,64,32 --variants flash --iters 1 --warmup 0" + out_flag();
  struct Env {  // OMP_NUM_THREADS for the runs inside one scope, then as it was (scripts/tsan.sh sets it)
    explicit Env(const char* v) {
      if (const char* was = std::getenv("OMP_NUM_THREADS")) before = was;
      v ? ::setenv("OMP_NUM_THREADS", v, 1) : ::unsetenv("OMP_NUM_THREADS");
    }
    ~Env() { before ? ::setenv("OMP_NUM_THREADS", before->c_str(), 1) : ::unsetenv("OMP_NUM_THREADS"); }
    std::optional<std::string> before;
  };
  cpu_set_t all;
  ASSERT_EQ(::sched_getaffinity(0, sizeof all, &all), 0);
  const int cpus = CPU_COUNT(&all);
  auto threads_of = [&](const std::string& extra = "") {
    const Result r = run(args + extra);
    EXPECT_EQ(r.code, 0) << r.err;
    const int n = read_json("compare.json").value("threads", -1);
    fs::remove_all(out());
    return n;
  };
  {
    const Env env(nullptr);
    EXPECT_EQ(threads_of(), cpus);
  }
  for (const char* v : {"1", "1,2", " 1 ", "2"}) {
    const Env env(v);
    EXPECT_EQ(threads_of(), v[0] == '2' ? 2 : 1) << "'" << v << "'";
  }
  {
    const Env env("2");
    EXPECT_EQ(threads_of(" --threads 1"), 1) << "--threads wins";
  }
  // Confined to one CPU, as `taskset -c 0` would: one thread (the child inherits the mask).
  {
    const Env env(nullptr);
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &all)) {
        CPU_SET(c, &one);
        break;
      }
    ASSERT_EQ(::sched_setaffinity(0, sizeof one, &one), 0);
    const int n = threads_of();
    ASSERT_EQ(::sched_setaffinity(0, sizeof all, &all), 0);
    EXPECT_EQ(n, 1);
  }
  // A value attnprof cannot run: over 4 × the CPUs (OpenMP itself would start it), or no count at all.
  {
    const Env env(std::to_string(4 * cpus + 1).c_str());
    expect_bad(args.substr(0, args.find(" --out")), "OMP_NUM_THREADS='" + std::to_string(4 * cpus + 1) +
                                                        "' is not a thread count attnprof runs");
    EXPECT_EQ(threads_of(" --threads 1"), 1) << "with --threads the variable is not read";
  }
#ifdef ATTNPROF_SANITIZED
  // clang's libomp, in the sanitizer builds, aborts on an empty OMP_NUM_THREADS as it loads, before attnprof runs.
  for (const char* v : {"abc", "0", "-1", "2x", "1,", "2,abc", "1,0"}) {  // OpenMP ignores them whole
#else
  for (const char* v : {"abc", "0", "-1", "2x", "1,", "2,abc", "1,0", "", " "}) {  // OpenMP ignores them whole
#endif
    const Env env(v);
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << v;
    // The OpenMP runtime may warn about the value first (libgomp: "Invalid value for environment variable ...";
    // clang's libomp, in the sanitizer build: "OMP: Warning #234: ..."); attnprof's error is the one line after.
    std::vector<std::string> lines;
    std::istringstream in(r.err);
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line.rfind("libgomp: ", 0) != 0 && line.rfind("OMP: ", 0) != 0) lines.push_back(line);
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_EQ(lines[0].rfind("attnprof: error: OMP_NUM_THREADS='" + std::string(v) + "' is not a thread count", 0), 0u)
        << r.err;
    EXPECT_FALSE(fs::exists(out())) << v;
  }
  // Other OpenMP variables, as OpenMP applies them: a thread limit caps the default and refuses a larger
  // --threads; OMP_DYNAMIC cannot shrink a team below the count reported; OMP_PROC_BIND, which binds the main
  // thread to one CPU as OpenMP starts, does not make the default one thread.
  struct Var {  // one more variable for the runs inside one scope
    Var(const char* name, const char* v) : name(name) { ::setenv(name, v, 1); }
    ~Var() { ::unsetenv(name); }
    const char* name;
  };
  {
    const Env env(nullptr);
    for (const char* v : {"abc", "0", "-1", "2x", "1,2", "", " "}) {  // OpenMP ignores these (no limit), with a warning
      const Var limit("OMP_THREAD_LIMIT", v);
      const Result r = run(args);
      EXPECT_EQ(r.code, 2) << v;
      EXPECT_NE(r.err.find("attnprof: error: OMP_THREAD_LIMIT='" + std::string(v) + "' is not a thread count"),
                std::string::npos) << r.err;
      EXPECT_FALSE(fs::exists(out())) << v;
    }
#ifndef ATTNPROF_SANITIZED  // clang's libomp, in the sanitizer builds, takes no spaces there (no limit at all)
    {
      const Var limit("OMP_THREAD_LIMIT", " 1 ");  // spaces around the count, as libgomp takes them
      EXPECT_EQ(threads_of(), 1);
    }
#endif
    {
      const Var limit("OMP_THREAD_LIMIT", "1");
      EXPECT_EQ(threads_of(), 1);
      if (cpus > 1)
        expect_bad(args.substr(0, args.find(" --out")) + " --threads 2",
                   "--threads 2 is more than OMP_THREAD_LIMIT=1 lets an OpenMP team have");
    }
    for (const auto& [name, value] : {std::pair<const char*, const char*>{"OMP_DYNAMIC", "true"}, {"OMP_PROC_BIND", "true"}}) {
#ifdef ATTNPROF_SANITIZED
      // The sanitizer builds compile with clang, whose libomp runs beside the libgomp oneDNN brings: libgomp binds
      // the main thread to one CPU as it loads, and libomp then counts that one. One runtime, as gcc builds have.
      if (std::string_view(name) == "OMP_PROC_BIND") continue;
#endif
      const Var var(name, value);
      EXPECT_EQ(threads_of(), cpus) << name;
      if (cpus > 1) {
        // The team that ran: every thread of it took a share of flash's region.
        const Result r = run("profile flash --shape 2,4,256,64 --iters 1" + out_flag());
        ASSERT_EQ(r.code, 0) << r.err;
        const json balance = read_json("flash.summary.json")["thread_balance"];
        ASSERT_TRUE(balance.is_array() && !balance.empty()) << balance.dump();
        EXPECT_EQ(balance[0]["threads"].get<int>(), cpus) << name << ": " << balance.dump();
        fs::remove_all(out());
      }
    }
  }
}

TEST_F(Cli, IntegerOptionsTakePlainDecimalInTheirRangeOnly) {
  // Every integer option reads the same way: no spaces, '+' or hex, one message naming the flag and value.
  for (const char* flag : {"--threads", "--warmup", "--iters", "--seed", "--kv-len", "--kv-heads", "--row-limit"})
    for (const char* value : {" 4", "4 ", "+4", "0x10", "4k", "-", "1e3"})
      expect_bad(fmt::format("profile naive --shape 1,1,16,16 {} '{}'", flag, value),
                 fmt::format("{} '{}' is not a decimal integer", flag, value));
  expect_bad("compare --warmup 0x10" + kSmall, "--warmup '0x10' is not a decimal integer");
  expect_bad("sweep --iters +2" + kSmall, "--iters '+2' is not a decimal integer");
  expect_bad("roofline --peaks-only --threads ' 1'", "--threads ' 1' is not a decimal integer");
  const Result diff = run("diff a.json b.json --row-limit 0x10");
  EXPECT_EQ(diff.code, 2);
  EXPECT_EQ(diff.err, "attnprof: error: --row-limit '0x10' is not a decimal integer\n");
  // 2^63 and beyond: out of range, with the range, never a conversion failure.
  const std::string big = "9223372036854775808";
  expect_bad("profile naive --shape 1,1,16,16 --threads " + big,
             "--threads '" + big + "' is out of range: expected 0..");
  expect_bad("profile naive --row-limit " + big + kSmall, "--row-limit '" + big + "' is out of range: expected -2147483648..2147483647");
  expect_bad("profile naive --warmup 2147483648" + kSmall, "--warmup '2147483648' is out of range: expected 0..10000");
  expect_bad("profile naive --kv-len " + big + kSmall, "--kv-len '" + big + "' is out of range: expected 1..9223372036854775807");
  expect_bad("profile naive --seed 99999999999999999999999999" + kSmall,
             "--seed '99999999999999999999999999' is out of range: expected 0..18446744073709551615");
  expect_bad("profile naive --threads -1 --shape 1,1,16,16", "--threads '-1' is out of range: expected 0..");
  for (const std::string bad : {"profile naive --shape 1,1,16,16 --threads " + big,
                                "profile naive --seed 0x10" + kSmall}) {
    const Result r = run(bad + out_flag());
    EXPECT_EQ(r.err.find("Could not convert"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("(see attnprof --help)"), std::string::npos) << r.err;
  }
}

TEST_F(Cli, SeqLengthsArePlainDecimalAsTheIntegerOptions) {
  // Each length of --seq, in a range or a list, reads as the integer options do: '+', spaces, hex and exponents
  // are refused naming the length ('+32..64' used to sweep 32 and 64).
  for (const auto& [seq, part] : {std::pair<std::string, std::string>{"+32..64", "+32"},
                                  {"32..+64", "+64"},
                                  {"+32,64", "+32"},
                                  {"32,+64", "+64"},
                                  {" 32..64", " 32"},
                                  {"32 ..64", "32 "},
                                  {"32..64 ", "64 "},
                                  {"0x20..64", "0x20"},
                                  {"1e2,400", "1e2"},
                                  {"32..64..128", "64..128"}})
    expect_bad(fmt::format("sweep --seq '{}'", seq) + kSmall,
               fmt::format("malformed --seq '{}': '{}' is not a decimal integer", seq, part));
  expect_bad("sweep --seq 32.." + kSmall, "malformed --seq '32..': a length is missing");
  expect_bad("sweep --seq 32,,64" + kSmall, "malformed --seq '32,,64': a length is missing");
  expect_bad("sweep --seq -32..64" + kSmall, "--seq: sequence lengths must be positive, got -32");
  expect_bad("sweep --seq 99999999999999999999999" + kSmall, "--seq: 99999999999999999999999 is too long");
  const Result ok = run("sweep --seq 32..64 --variants flash --iters 1 --warmup 0 --json" + kSmall + out_flag());
  ASSERT_EQ(ok.code, 0) << ok.err;
  const json sweep = json::parse(ok.out);
  std::vector<int64_t> seqs;
  for (const json& p : sweep["points"]) seqs.push_back(p["seq"].get<int64_t>());
  EXPECT_EQ(seqs, (std::vector<int64_t>{32, 64}));
}

TEST_F(Cli, MemoryBudgetTakesDigitsAndOneUnitLetterOnly) {
  // Hex, fractions, exponents, signs, spaces and byte suffixes are refused naming the option and the value, not
  // read as some other size (0x100000 used to be 0 bytes, 1.5 one byte, 8Gb 8 GiB).
  for (const char* value : {"0x100000", "1.5", "1.5G", "8Gb", "8GB", "8GiB", "1e9", " 8G", "8G ", "+8G", "-1", "-8G",
                            "8GG", "G", "8 G", "8P"})
    expect_bad(fmt::format("profile naive --shape 1,1,16,16 --memory-budget '{}'", value),
               fmt::format("malformed --memory-budget '{}': expected a whole number of bytes, optionally followed by "
                           "one unit letter K, M, G or T (1K = 1024)",
                           value));
  expect_bad("profile naive --shape 1,1,16,16 --memory-budget 0K", "--memory-budget must be a positive size, got '0K'");
  expect_bad("profile naive --shape 1,1,16,16 --memory-budget 18446744073709551617K",
             "--memory-budget '18446744073709551617K' is too large");
  // What is accepted is read exactly: the budget the refusal names is the value times 1, 2^10, 2^20, 2^30 or 2^40
  // (this naive run needs 9088 bytes; the inputs of the huge shape more than any budget).
  const std::string huge = " --shape 2048,1024,65536,64 ";
  for (const auto& [value, args, bytes] :
       {std::tuple<std::string, std::string, std::string>{"8000", "profile naive --shape 1,1,16,16", "8000"},
        {"7K", "profile naive --shape 1,1,16,16", "7168"},
        {"1k", "profile naive --shape 1,1,16,16", "1024"},
        {"3m", "compare" + huge, "3145728"},
        {"2G", "compare" + huge, "2147483648"},
        {"5T", "compare" + huge, "5497558138880"}})
    expect_bad(args + " --memory-budget " + value, "over the memory budget of " + bytes + " bytes");
  const Result ok = run("profile naive --memory-budget 8g --iters 1 --warmup 0" + kSmall + out_flag());
  EXPECT_EQ(ok.code, 0) << ok.err;
}

TEST_F(Cli, ShapeFieldsArePlainDecimalAndErrorsQuoteTheWholeValue) {
  expect_bad("profile naive --shape '1, 2,64,16' --threads 1", "malformed --shape '1, 2,64,16': H (' 2') is not a decimal integer");
  expect_bad("profile naive --shape '1,2,64,16 ' --threads 1", "malformed --shape '1,2,64,16 ': D ('16 ') is not a decimal integer");
  expect_bad("profile naive --shape a,b,c,d --threads 1", "malformed --shape 'a,b,c,d': B ('a') is not a decimal integer");
  expect_bad("profile naive --shape 1,,64,16 --threads 1", "malformed --shape '1,,64,16': H is empty");
  expect_bad("profile naive --shape 1,2,64, --threads 1", "malformed --shape '1,2,64,': D is empty");
  expect_bad("profile naive --shape +1,2,64,16 --threads 1", "malformed --shape '+1,2,64,16': B ('+1') is not a decimal integer");
  expect_bad("profile naive --shape 1,2,0x40,16 --threads 1", "malformed --shape '1,2,0x40,16': N ('0x40') is not a decimal integer");
  expect_bad("profile naive --shape 1,2,99999999999999999999,16 --threads 1",
             "malformed --shape '1,2,99999999999999999999,16': N ('99999999999999999999') is out of range");
  expect_bad("profile naive --shape 1,2,64,0 --threads 1", "--shape '1,2,64,0': D must be positive, got 0");
}

TEST_F(Cli, RepeatedAndForeignOptionsAreNamed) {
  expect_bad("profile naive --threads 1 --threads 2 --shape 1,1,16,16", "--threads was given more than once");
  expect_bad("compare --shape 1,1,16,16 --threads 1 --shape 1,1,32,16", "--shape was given more than once");
  // A flag given twice too, under either of its spellings; --help and --version twice still answer.
  expect_bad("compare --shape 1,1,16,16 --json --json", "--json was given more than once");
  expect_bad("profile naive --shape 1,1,16,16 --causal --causal", "--causal was given more than once");
  expect_bad("roofline --peaks-only --remeasure --remeasure", "--remeasure was given more than once");
  {
    const Result help = run("profile --help --help");
    EXPECT_EQ(help.code, 0) << help.err;
    EXPECT_NE(help.out.find("Usage: attnprof profile"), std::string::npos) << help.out;
    const Result version = run("diff --version --version");
    EXPECT_EQ(version.code, 0) << version.err;
    EXPECT_EQ(version.out, std::string("attnprof ") + ATTNPROF_VERSION + "\n");
  }
  expect_bad("profile naive --variants naive" + kSmall, "profile does not take --variants (see attnprof profile --help)");
  expect_bad("profile naive --variants=naive" + kSmall, "profile does not take --variants (see attnprof profile --help)");
  expect_bad("sweep --peaks-only" + kSmall, "sweep does not take --peaks-only");
  expect_bad("profile naive flash" + kSmall, "profile does not take the extra argument 'flash'");
  for (const std::string bad : {"profile naive --variants naive" + kSmall, std::string("profile naive --threads 1 --threads 2")}) {
    const Result r = run(bad + out_flag());
    EXPECT_EQ(r.err.find("not expected"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("At Most"), std::string::npos) << r.err;
  }
}

TEST_F(Cli, SeedWithInputFilesIsRefusedAndItsDefaultIsNot) {
  const std::string good = write_npy(dir_ / "good.npy", randn({1, 1, 4, 8}, DType::F32, 0));
  const std::string files = " --q " + good + " --k " + good + " --v " + good;
  expect_bad("profile flash --threads 1 --seed 3" + files, "--seed conflicts with --q/--k/--v");
  expect_bad("compare --threads 1 --seed 0" + files, "--seed conflicts with --q/--k/--v");  // given, even as the default
  const Result r = run("profile flash --threads 1 --iters 1 --warmup 0" + files + out_flag());
  EXPECT_EQ(r.code, 0) << r.err;
}

// A team larger than the CPUs attnprof may run on is said to be one: its own threads took turns, which a Busy line
// (other work) does not explain.
TEST_F(Cli, MoreThreadsThanCpusIsSaid) {
  const int cpus = ops::available_cpus();
  const std::string line = fmt::format("Oversubscribed: {} threads on the {} CPU{} attnprof may run on", cpus + 1, cpus,
                                       cpus == 1 ? "" : "s");
  const std::string shape = " --shape 1,2,64,32 --iters 1 --warmup 0";
  const Result over = run(fmt::format("profile flash --threads {}", cpus + 1) + shape + out_flag());
  ASSERT_EQ(over.code, 0) << over.err;
  EXPECT_NE(over.out.find(line), std::string::npos) << over.out;
  EXPECT_NE(over.out.find(fmt::format("--threads {} gives each thread a CPU.", cpus)), std::string::npos) << over.out;
  const Result fits = run(fmt::format("compare --variants flash --threads {}", cpus) + shape + out_flag());
  ASSERT_EQ(fits.code, 0) << fits.err;
  EXPECT_EQ(fits.out.find("Oversubscribed:"), std::string::npos) << fits.out;
  const Result compare = run(fmt::format("compare --variants flash --threads {}", cpus + 1) + shape + out_flag());
  ASSERT_EQ(compare.code, 0) << compare.err;
  EXPECT_NE(compare.out.find(line), std::string::npos) << compare.out;
}

TEST_F(Cli, CompareSaysVariantInTheSingular) {
  const Result r = run("compare --variants naive --iters 1 --warmup 0" + kSmall + out_flag());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("attnprof compare: 1 variant at "), std::string::npos) << r.err;
  // The GEMM line names the unfused variant that ran, not the one that did not.
  EXPECT_NE(r.out.find("bf16 matmul (naive): "), std::string::npos) << r.out;
  const Result two = run("compare --variants naive,flash --iters 1 --warmup 0" + kSmall + out_flag());
  ASSERT_EQ(two.code, 0) << two.err;
  EXPECT_NE(two.err.find("attnprof compare: 2 variants at "), std::string::npos) << two.err;
  // The backend `sdpa` would select is said only where an SDPA row ran.
  EXPECT_EQ(two.out.find("sdpa (auto) selects"), std::string::npos) << two.out;
  const Result sdpa = run("compare --variants sdpa-math --iters 1 --warmup 0" + kSmall + out_flag());
  ASSERT_EQ(sdpa.code, 0) << sdpa.err;
  EXPECT_NE(sdpa.out.find("Without a backend named (`profile sdpa`, a torch call's default), sdpa (auto) selects "),
            std::string::npos)
      << sdpa.out;
}

// A fall back from flash to math says why, as PyTorch warns of it: in profile's output (and its progress) and in
// compare's footnote. At a head dim flash serves, profile says nothing of it.
TEST_F(Cli, SdpaFallBackToMathSaysWhy) {
  const std::string why = "sdpa (auto) selects math: the flash backend supports head dims up to 256, got D=320";
  const Result p = run("profile sdpa --iters 1 --warmup 0 --shape 1,1,16,320 --threads 1" + out_flag());
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("sdpa-math — "), std::string::npos) << p.out;
  EXPECT_NE(p.out.find(why + "\n"), std::string::npos) << p.out;
  EXPECT_NE(p.err.find(why + "\n"), std::string::npos) << p.err;
  const Result c = run("compare --variants sdpa --iters 1 --warmup 0 --shape 1,1,16,320 --threads 1" + out_flag());
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find(why + "."), std::string::npos) << c.out;
  const Result f = run("profile sdpa --iters 1 --warmup 0" + kSmall + out_flag());
  ASSERT_EQ(f.code, 0) << f.err;
  EXPECT_EQ(f.out.find("sdpa (auto) selects"), std::string::npos) << f.out;
}

TEST_F(Cli, UnusableOutputPathsSayWhy) {
  // A directory where no file can be created (/proc answers ENOENT): said so, with the system's reason.
  if (fs::is_directory("/proc")) {
    const Result r = run("profile naive" + kSmall + "--out /proc");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err.rfind("attnprof: error: output directory '/proc' is not writable: a file cannot be created there (",
                          0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  // A symbolic link to nothing: named with its target, not "File exists"; nothing is created.
  fs::create_symlink(dir_ / "nowhere", dir_ / "dangling");
  const Result d = run("profile naive" + kSmall + "--out " + (dir_ / "dangling").string());
  EXPECT_EQ(d.code, 2);
  EXPECT_EQ(d.err, "attnprof: error: output path '" + (dir_ / "dangling").string() + "' is a symbolic link to '" +
                       (dir_ / "nowhere").string() + "', which does not exist\n");
  EXPECT_FALSE(fs::exists(dir_ / "nowhere"));
  const Result sub = run("profile naive" + kSmall + "--out " + (dir_ / "dangling" / "sub").string());
  EXPECT_EQ(sub.code, 2);
  EXPECT_NE(sub.err.find("output path '" + (dir_ / "dangling").string() + "' is a symbolic link to '" +
                         (dir_ / "nowhere").string() + "', which does not exist"), std::string::npos) << sub.err;
  EXPECT_FALSE(fs::exists(dir_ / "nowhere"));
}

TEST_F(Cli, DiffShowsWhatInPlaceRemovedAndRefusesBadFiles) {
  const Result c = run("compare --iters 2 --warmup 0 --variants naive,inplace" + kSmall + out_flag());
  ASSERT_EQ(c.code, 0) << c.err;
  const std::string naive = (out() / "naive.summary.json").string(), inplace = (out() / "inplace.summary.json").string();
  const Result r = run("diff " + naive + " " + inplace + " --save " + (out() / "diff.json").string());
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"naive (base) vs inplace (new)", "copy_", "mul -> mul_", "softmax -> softmax_"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  // The removed ops are named in the order of their change in time, copy_ among them: masked_fill, a wrapper
  // with next to no time of its own, comes first in a run where the first touch of a page of the profiler's
  // event buffer (about 11 us on the development VM) lands in its self time.
  const size_t removed = r.out.find("\nremoved: ");
  ASSERT_NE(removed, std::string::npos) << r.out;
  EXPECT_NE(r.out.substr(removed, r.out.find(" (", removed) - removed).find(" copy_"), std::string::npos) << r.out;
  const json j = read_json("diff.json");
  EXPECT_EQ(j["kind"], "diff");
  EXPECT_DOUBLE_EQ(j["base"]["forwards"].get<double>(), 2.0);
  // The extension in any case; no gzip, which diff does not write.
  ASSERT_EQ(run("diff " + naive + " " + inplace + " --save " + (out() / "upper.JSON").string()).code, 0);
  EXPECT_EQ(read_json("upper.JSON")["kind"], "diff");
  const Result gz = run("diff " + naive + " " + inplace + " --save " + (out() / "d.json.gz").string());
  EXPECT_EQ(gz.code, 2);
  EXPECT_NE(gz.err.find("diff writes no gzip"), std::string::npos) << gz.err;
  EXPECT_FALSE(fs::exists(out() / "d.json.gz"));
  bool copy_removed = false;
  for (const json& row : j["rows"])
    if (row["base_name"] == "copy_") {
      copy_removed = row["change"] == "removed";
      EXPECT_GT(row["base_mem_bytes"].get<double>(), 0.0);  // the clone's allocation, gone
    }
  EXPECT_TRUE(copy_removed);
  EXPECT_EQ(j["rows_left_out"], 0);
  // --row-limit keeps the largest changes in the table and the JSON alike; the totals count every op.
  const Result lim = run("diff " + naive + " " + inplace + " --row-limit 1 --json");
  ASSERT_EQ(lim.code, 0) << lim.err;
  const json jl = json::parse(lim.out);
  ASSERT_EQ(jl["rows"].size(), 1u);
  EXPECT_EQ(jl["rows"][0], j["rows"][0]);
  EXPECT_EQ(jl["rows_left_out"].get<size_t>(), j["rows"].size() - 1);
  EXPECT_DOUBLE_EQ(jl["base_ns"].get<double>(), j["base_ns"].get<double>());
  const Result lt = run("diff " + naive + " " + inplace + " --row-limit 1");
  EXPECT_NE(lt.out.find(fmt::format("{} more ops with smaller changes (--row-limit 1)", j["rows"].size() - 1)),
            std::string::npos) << lt.out;
  EXPECT_EQ(json::parse(run("diff " + naive + " " + inplace + " --row-limit 0 --json").out)["rows"].size(),
            j["rows"].size());

  auto bad = [&](const std::string& args, const std::string& expect) {
    SCOPED_TRACE(args);
    const Result b = run(args);
    EXPECT_EQ(b.code, 2) << b.err;
    EXPECT_EQ(std::count(b.err.begin(), b.err.end(), '\n'), 1) << b.err;
    EXPECT_NE(b.err.find(expect), std::string::npos) << b.err;
    EXPECT_TRUE(b.out.empty()) << b.out;
  };
  bad("diff " + naive + " /nonexistent/x.summary.json", "cannot read '/nonexistent/x.summary.json'");
  // Not regular files: refused before reading (/dev/zero never ends, a FIFO blocks until a writer comes).
  bad("diff /dev/zero " + naive, "cannot read '/dev/zero': it is not a regular file");
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  bad("diff " + naive + " " + fifo, "cannot read '" + fifo + "': it is not a regular file");
  bad("diff " + naive + " " + (out() / "compare.txt").string(), "not valid JSON ([json.exception.parse_error.101] parse error at line 1, column ");
  const std::string cmp = (out() / "compare.json").string();
  bad("diff " + naive + " " + cmp, "cannot diff " + cmp + " (a compare.json) against " + naive);
  bad("diff " + naive + " " + (out() / "naive.trace.json").string(), "not an attnprof summary");
  bad("diff " + naive, "new is required");
  bad("diff " + out().string() + " " + out().string() + " --row-limit 2",
      "--row-limit applies to the op rows of two summaries; a diff of two compare runs has one row per variant");
  bad("diff " + out().string() + " " + naive, "cannot diff " + cmp + " (a compare.json) against " + naive);
  // A directory without a compare.json (a profile's --out) stands for its one summary; one holding several names
  // them (which to compare is the user's call); an empty one says so.
  const fs::path prof_dir = dir_ / "profile-out", empty_dir = dir_ / "empty-out";
  fs::create_directories(prof_dir);
  fs::create_directories(empty_dir);
  fs::copy_file(naive, prof_dir / "naive.summary.json");
  const Result one = run("diff " + naive + " " + prof_dir.string());
  EXPECT_EQ(one.code, 0) << one.err;
  EXPECT_NE(one.out.find("attnprof diff — naive (base) vs naive (new), per forward"), std::string::npos) << one.out;
  fs::copy_file(naive, prof_dir / "flash.summary.json");
  bad("diff " + naive + " " + prof_dir.string(),
      prof_dir.string() + " holds no compare.json, only summaries (flash.summary.json, naive.summary.json): name the "
                          "summary to compare, e.g. " + (prof_dir / "flash.summary.json").string());
  bad("diff " + naive + " " + empty_dir.string(),
      empty_dir.string() + " is a directory without a compare.json or a <variant>.summary.json");
  // A directory whose compare.json lost its "kind" is named as the file at fault.
  fs::create_directories(out() / "old");
  io::write_file_atomic((out() / "old" / "compare.json").string(), R"({"variants": [{"name": 5}]})");
  bad("diff " + out().string() + " " + (out() / "old").string(),
      "against " + (out() / "old" / "compare.json").string() + ", which has no \"kind\": \"compare\"");

  // Two runs, variant by variant: a directory stands for its compare.json.
  const Result runs = run("diff " + out().string() + " " + (out() / "compare.json").string() + " --json");
  ASSERT_EQ(runs.code, 0) << runs.err;
  const json rj = json::parse(runs.out);
  EXPECT_EQ(rj["kind"], "diff-compare");
  ASSERT_EQ(rj["rows"].size(), 2u);
  for (const json& row : rj["rows"]) EXPECT_DOUBLE_EQ(row["speedup"].get<double>(), 1.0) << row["variant"];
  // The table points at the op-by-op view: the variants with a summary beside both compare.json.
  const Result text = run("diff " + out().string() + " " + (out() / "compare.json").string());
  ASSERT_EQ(text.code, 0) << text.err;
  const std::string per = (out() / "<variant>.summary.json").string();
  EXPECT_NE(text.out.find("Op by op: attnprof diff " + per + " " + per + ", for naive and inplace.\n"), std::string::npos)
      << text.out;
}

TEST_F(Cli, DiffAndReportRefuseAnInputLargerThanAnyRunWritesBeforeReadingIt) {
  const Result c = run("compare --iters 1 --warmup 0 --variants naive,inplace" + kSmall + out_flag());
  ASSERT_EQ(c.code, 0) << c.err;
  // Sparse files of one byte over the limit (and 8 GiB): nothing of them is read, so the refusal is immediate
  // and names the file and its size; at the limit the file would be read (and found not JSON).
  const uint64_t over = report::kMaxInputBytes + 1;
  const fs::path big = dir_ / "big.summary.json", huge = dir_ / "huge" / "compare.json";
  { std::ofstream(big) << "{"; }
  fs::resize_file(big, over);
  fs::create_directories(huge.parent_path());
  { std::ofstream(huge) << "{"; }
  fs::resize_file(huge, uint64_t(8) << 30);
  const std::string naive = (out() / "naive.summary.json").string();
  const Result r = run("diff " + big.string() + " " + naive);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.err, "attnprof: error: cannot read '" + big.string() + "': it is 268435457 bytes (256.00 MiB), over the "
                   "256 MiB attnprof reads: no file it writes is that large\n");
  EXPECT_TRUE(r.out.empty());
  const Result d = run("diff " + out().string() + " " + huge.parent_path().string());
  EXPECT_EQ(d.code, 2) << d.err;
  EXPECT_EQ(d.err, "attnprof: error: cannot read '" + huge.string() + "': it is 8589934592 bytes (8.00 GiB), over the "
                   "256 MiB attnprof reads: no file it writes is that large\n");
  // The report reads leniently: the oversized file is left out with a note naming it and its size, the rest
  // is drawn.
  fs::copy_file(big, out() / "naive.summary.json", fs::copy_options::overwrite_existing);
  fs::resize_file(out() / "naive.summary.json", over);
  const Result rep = run("report --out " + out().string());
  if (rep.code == 2 && rep.err.find("npm ci --prefix web") != std::string::npos)
    GTEST_SKIP() << "chart library not installed: " << rep.err;
  ASSERT_EQ(rep.code, 0) << rep.err;
  const std::string page = io::read_file(out() / "report.html");
  EXPECT_NE(page.find("naive.summary.json not read: it is 268435457 bytes (256.00 MiB), over the 256 MiB attnprof "
                      "reads"),
            std::string::npos);
  EXPECT_NE(page.find("inplace"), std::string::npos);
}

TEST_F(Cli, OutputsGoThroughLinksAndIntoDevicesNeverOverThem) {
  const Result c = run("compare --iters 1 --warmup 0 --variants naive,inplace" + kSmall + out_flag());
  ASSERT_EQ(c.code, 0) << c.err;
  const std::string pair = (out() / "naive.summary.json").string() + " " + (out() / "inplace.summary.json").string();
  // A symbolic link: its target gets the diff, the link stays a link.
  { std::ofstream(dir_ / "target.txt") << "old"; }
  fs::create_symlink("target.txt", dir_ / "link.txt");
  const Result l = run("diff " + pair + " --save " + (dir_ / "link.txt").string());
  ASSERT_EQ(l.code, 0) << l.err;
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.txt"));
  EXPECT_NE(io::read_file(dir_ / "target.txt").find("mul -> mul_"), std::string::npos);
  // A FIFO nobody reads: an error naming it, not a plain file renamed over it, not a hang.
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Result f = run("diff " + pair + " --save " + fifo.string());
  EXPECT_EQ(f.code, 2) << f.err;
  EXPECT_NE(f.err.find("a FIFO with no reader"), std::string::npos) << f.err;
  EXPECT_EQ(fs::status(fifo).type(), fs::file_type::fifo);
  // stdout that cannot be written (a full disk): exit 2 and say so, not 0 with a cut-off document.
  if (fs::exists("/dev/full")) {
    const std::string err = (dir_ / "full.err").string();
    for (const std::string& args : {" diff " + pair + " --json", std::string(" --help"), std::string(" --version"),
                                     std::string(" profile --help")}) {
      const int rc = std::system((kBinary + args + " >/dev/full 2>" + err).c_str());
      EXPECT_EQ(WIFEXITED(rc) ? WEXITSTATUS(rc) : 128, 2) << args;
      EXPECT_NE(io::read_file(err).find("cannot write to standard output"), std::string::npos)
          << args << ": " << io::read_file(err);
    }
  }
}

// A summary or compare.json without the figures diff prints is refused naming the file and the field, never
// printed with zeros in their place ("ops per forward: 8 -> 0").
TEST_F(Cli, DiffRefusesFilesWithoutTheFiguresItPrints) {
  const Result c = run("compare --iters 1 --warmup 0 --variants naive,inplace" + kSmall + out_flag());
  ASSERT_EQ(c.code, 0) << c.err;
  const std::string naive = (out() / "naive.summary.json").string();
  auto bad = [&](const std::string& args, const std::string& expect) {
    SCOPED_TRACE(args);
    const Result b = run(args);
    EXPECT_EQ(b.code, 2) << b.err;
    EXPECT_EQ(b.err, "attnprof: error: " + expect + "\n");
    EXPECT_TRUE(b.out.empty()) << b.out;
  };
  auto edited = [&](const std::string& name, const std::function<void(json&)>& edit) {
    json j = json::parse(io::read_file(out() / name));
    edit(j);
    const fs::path p = dir_ / ("edited-" + std::to_string(std::hash<std::string>{}(j.dump())) + "-" + name);
    io::write_file_atomic(p.string(), j.dump());
    return p.string();
  };
  const std::string no_run = edited("inplace.summary.json", [](json& j) { j.erase("run"); });
  bad("diff " + naive + " " + no_run,
      no_run + ": field 'run' is missing (attnprof writes a \"run\" object with the time, peak memory and ops per "
               "forward into every summary)");
  bad("diff " + no_run + " " + naive,
      no_run + ": field 'run' is missing (attnprof writes a \"run\" object with the time, peak memory and ops per "
               "forward into every summary)");
  const std::string no_ops = edited("inplace.summary.json", [](json& j) { j["run"].erase("ops_per_forward"); });
  bad("diff " + naive + " " + no_ops, no_ops + " run: field 'ops_per_forward' is missing (null when it was not counted)");
  const std::string no_problem = edited("inplace.summary.json", [](json& j) {
    j["metadata"].erase("problem");
    j["run"].erase("problem");
  });
  bad("diff " + naive + " " + no_problem,
      no_problem + ": field 'problem' is missing (attnprof records it in \"run\" or \"metadata\")");

  const std::string spread = edited("compare.json", [](json& j) { j["variants"][0]["spread"] = "x"; });
  bad("diff " + (out() / "compare.json").string() + " " + spread,
      spread + " variant 'naive': field 'spread' is \"x\", not a number");
  const std::string negative = edited("compare.json", [](json& j) { j["variants"][1]["spread"] = -2; });
  bad("diff " + (out() / "compare.json").string() + " " + negative,
      negative + " variant 'inplace': field 'spread' is -2, not a ratio of the slowest to the fastest forward (at "
                 "least 1)");
  const std::string tpu = edited("compare.json", [](json& j) { j["device"] = "tpu"; });
  bad("diff " + tpu + " " + (out() / "compare.json").string(), tpu + ": field 'device' is 'tpu', none of cpu, cuda");
}

// An output over one of the run's inputs would destroy it: refused before anything is read, run or written,
// whatever the spelling of the path (file identity, not the string).
TEST_F(Cli, OutputsThatAreTheRunsInputsAreRefused) {
  const Tensor t = randn({1, 1, 4, 8}, DType::F32, 0);
  const std::string q = write_npy(dir_ / "q.npy", t), k = write_npy(dir_ / "k.npy", t), v = write_npy(dir_ / "v.npy", t);
  const std::string q_bytes = io::read_file(q);
  const std::string inputs = " --threads 1 --q " + q + " --k " + k + " --v " + v;
  expect_bad("profile flash" + inputs + " --save-output " + q, "--save-output '" + q + "' is the --q input file");
  const std::string other_spelling = (dir_ / "." / "sub" / ".." / "v.npy").string();
  fs::create_directories(dir_ / "sub");
  expect_bad("profile flash" + inputs + " --save-output " + other_spelling,
             "--save-output '" + other_spelling + "' is the --v input file");
  fs::create_symlink("k.npy", dir_ / "k-link.npy");
  expect_bad("profile flash" + inputs + " --save-output " + (dir_ / "k-link.npy").string(),
             "--save-output '" + (dir_ / "k-link.npy").string() + "' is the --k input file");
  EXPECT_EQ(io::read_file(q), q_bytes);

  // An input kept inside --out under the name of a file the run writes there.
  fs::create_directories(out());
  const std::string in_out = write_npy(out() / "flash.summary.json", t);
  const std::string in_out_inputs = " --threads 1 --q " + q + " --k " + in_out + " --v " + v + out_flag();
  for (const std::string cmd : {"profile flash", "compare --variants flash"}) {
    SCOPED_TRACE(cmd);
    const Result r = run(cmd + in_out_inputs);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err, "attnprof: error: --out file '" + in_out + "' is the --k input file\n");
    EXPECT_EQ(io::read_file(in_out), q_bytes);
    EXPECT_FALSE(fs::exists(out() / "compare.json"));
  }
  const std::string as_roofline = write_npy(out() / "roofline.json", t);
  const Result rr = run("roofline flash --threads 1 --q " + q + " --k " + k + " --v " + as_roofline + out_flag());
  EXPECT_EQ(rr.code, 2) << rr.err;
  EXPECT_EQ(rr.err, "attnprof: error: --out file '" + as_roofline + "' is the --v input file\n");
  EXPECT_EQ(io::read_file(as_roofline), q_bytes);
  fs::remove_all(out());

  // diff --save over one of the files it compares, as given or through another spelling or a link.
  const Result c = run("compare --iters 1 --warmup 0 --variants naive,inplace" + kSmall + out_flag());
  ASSERT_EQ(c.code, 0) << c.err;
  const std::string a = (out() / "naive.summary.json").string(), b = (out() / "inplace.summary.json").string();
  const std::string a_bytes = io::read_file(a), b_bytes = io::read_file(b);
  auto refused = [&](const std::string& args, const std::string& save) {
    SCOPED_TRACE(args);
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err, "attnprof: error: --save '" + save + "' is one of the files being compared\n");
    EXPECT_TRUE(r.out.empty()) << r.out;
  };
  refused("diff " + a + " " + b + " --save " + a, a);
  refused("diff " + a + " " + b + " --save " + b, b);
  const std::string a_again = (out() / "." / "naive.summary.json").string();
  refused("diff " + a + " " + b + " --save " + a_again, a_again);
  fs::create_symlink(b, dir_ / "b-link.txt");
  refused("diff " + a + " " + b + " --save " + (dir_ / "b-link.txt").string(), (dir_ / "b-link.txt").string());
  // A hard link is the same file under another name (the same inode): refused too.
  fs::create_hard_link(a, dir_ / "a-hard.json");
  refused("diff " + a + " " + b + " --save " + (dir_ / "a-hard.json").string(), (dir_ / "a-hard.json").string());
  // Two compare runs: a directory stands for its compare.json, which --save must not replace either.
  const std::string cmp = (out() / "compare.json").string(), cmp_bytes = io::read_file(cmp);
  refused("diff " + out().string() + " " + out().string() + " --save " + cmp, cmp);
  // Nor another result of a run it compares: a summary beside the compare.json (report and roofline --from read
  // it), or the compare.txt. Another name there, or a result's name elsewhere, is written.
  for (const std::string name : {"naive.summary.json", "compare.txt", "report.html"}) {
    const std::string save = (out() / name).string();
    const Result r = run("diff " + out().string() + " " + out().string() + " --save " + save);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err, "attnprof: error: --save '" + save + "' would replace the run's " + name + " beside " + cmp +
                         ", which is being compared: save the diff elsewhere or under another name\n");
  }
  const Result beside = run("diff " + out().string() + " " + out().string() + " --save " + (out() / "d.txt").string());
  EXPECT_EQ(beside.code, 0) << beside.err;
  EXPECT_EQ(run("diff " + a + " " + b + " --save " + (dir_ / "naive.summary.json").string()).code, 0);
  fs::remove(out() / "d.txt");
  fs::remove(dir_ / "naive.summary.json");
  EXPECT_EQ(io::read_file(a), a_bytes);
  EXPECT_EQ(io::read_file(b), b_bytes);
  EXPECT_EQ(io::read_file(cmp), cmp_bytes);
  EXPECT_TRUE(fs::is_symlink(dir_ / "b-link.txt"));

  // report.html as a link to a file the report reads.
  fs::create_symlink("compare.json", out() / "report.html");
  const Result rep = run("report --out " + out().string());
  EXPECT_EQ(rep.code, 2) << rep.err;
  EXPECT_EQ(rep.err, "attnprof: error: report: '" + (out() / "report.html").string() + "' is the same file as '" + cmp +
                         "', which the report reads\n");
  EXPECT_EQ(io::read_file(cmp), cmp_bytes);
}

TEST_F(Cli, AFailedWriteLeavesTheLastRunsFilesWhole) {
  // A run that cannot write its summary (a file size limit here, a full disk in life) must leave the
  // previous run's trace, summary and table as they were, not a new trace beside an old summary. The shell
  // leaves SIGXFSZ at its default (death, no message): the binary must ignore it itself to fail cleanly.
#ifdef ATTNPROF_TSAN
  GTEST_SKIP() << "a ThreadSanitizer binary dies at start-up (SIGBUS in its runtime) under `ulimit -f`";
#endif
  const Result first = run("profile naive --iters 1 --warmup 0" + kSmall + out_flag());
  ASSERT_EQ(first.code, 0) << first.err;
  std::map<std::string, std::string> before;
  for (const auto& e : fs::directory_iterator(out())) before[e.path().filename().string()] = io::read_file(e.path());
  ASSERT_EQ(before.size(), 5u);
  ASSERT_GT(before["naive.summary.json"].size(), 8192u);  // over the limit below
  ASSERT_LT(before["naive.trace.json"].size(), 8192u);    // under it: written, then discarded with the batch
  const std::string cmd = "bash -c \"ulimit -f 8; " + kBinary +
                          " profile naive --iters 1 --warmup 0 --shape 1,2,48,32 --threads 1 " + out_flag() +
                          "\" >/dev/null 2>" + (dir_ / "err.txt").string();
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(WIFEXITED(rc) ? WEXITSTATUS(rc) : 128, 2);
  EXPECT_NE(io::read_file(dir_ / "err.txt").find("File too large"), std::string::npos) << io::read_file(dir_ / "err.txt");
  std::map<std::string, std::string> after;
  for (const auto& e : fs::directory_iterator(out())) after[e.path().filename().string()] = io::read_file(e.path());
  EXPECT_TRUE(after == before) << "files changed or temporary files left: " << after.size();
}

TEST_F(Cli, UnderASmallAddressSpaceLimitOnlyRunsThatNeedOpenBlasStopAndSaySo) {
  // Linked, OpenBLAS's constructor reserved a 128 MiB buffer a thread before main and, under an address-space
  // limit too small for them, retried its failed mmaps forever: `attnprof --version` hung under ulimit -v of
  // ~340 MiB on two cores (and a small compare at two threads, in its first sgemm, under ~590 MiB). Loaded by
  // the first run that needs it, after a check of the limit, the rest runs under 200 MiB and such a run stops
  // with one line naming the limit. `timeout` ends a hang (exit 124).
#ifdef ATTNPROF_SANITIZED
  GTEST_SKIP() << "a sanitizer's runtime reserves terabytes of address space: it cannot start under ulimit -v";
#endif
  // Unlimited first: the machine peaks measured (and cached), and the summaries diff and report read below.
  const Result full = run("compare --iters 1 --warmup 0" + kSmall + out_flag());
  ASSERT_EQ(full.code, 0) << full.err;
  auto limited = [&](const std::string& args) {
    SCOPED_TRACE(args);
    const std::string cmd = "timeout 60 sh -c 'ulimit -v 204800; exec " + kBinary + " " + args + "' >" +
                            (dir_ / "limited.out").string() + " 2>" + (dir_ / "limited.err").string();
    const int rc = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
    r.out = io::read_file(dir_ / "limited.out");
    r.err = io::read_file(dir_ / "limited.err");
    EXPECT_NE(r.code, 124) << args << ": hung under ulimit -v";
    return r;
  };
  Result r = limited("--version");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, std::string("attnprof ") + ATTNPROF_VERSION + "\n");
  EXPECT_EQ(limited("compare --help").code, 0);
  r = limited("compare --threads 0x10");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--threads '0x10' is not a decimal integer"), std::string::npos) << r.err;
  {  // Peaks not measured yet: the memory loops' 384 MiB of arrays do not fit, and the error names that measurement and
     // the way round, not the fp64 reference or the shape (which needs kilobytes).
    const fs::path empty_cache = dir_ / "no-peaks-yet";
    ::setenv("XDG_CACHE_HOME", empty_cache.c_str(), 1);
    struct RestoreCache {
      ~RestoreCache() { ::setenv("XDG_CACHE_HOME", (fs::path(ATTNPROF_BINARY_DIR) / "test_cli_cache").c_str(), 1); }
    } restore;
    r = limited("roofline --peaks-only --threads 1");
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("attnprof: error: measuring the machine's peaks needs 384.00 MiB for the memory loops' "
                         "three arrays, which the address-space limit (ulimit -v) of 200.00 MiB does not leave: "
                         "measure them once where that memory is free (`attnprof roofline --peaks-only`)"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("fp64 reference"), std::string::npos) << r.err;
  }
  r = limited("diff " + (out() / "naive.summary.json").string() + " " + (out() / "inplace.summary.json").string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("matmul"), std::string::npos) << r.out;
  r = limited("report --out " + out().string());
  if (r.err.find("npm ci") == std::string::npos) EXPECT_EQ(r.code, 0) << r.err;  // else no chart library here
  {  // A summary too large to parse in what the limit leaves: refused by its estimate, before the parse, whose
     // clean-up of a half-built document aborted the process (SIGABRT) when memory ran out in the middle.
    json big = json::parse(io::read_file(out() / "inplace.summary.json"));
    json padding = json::array();
    for (int i = 0; i < 1000000; ++i) padding.push_back({{"a", i}, {"b", {1, 2, 3}}});
    big["padding"] = std::move(padding);
    const fs::path file = dir_ / "huge.summary.json";
    { std::ofstream(file) << big.dump(); }
    r = limited("diff " + (out() / "naive.summary.json").string() + " " + file.string());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("huge.summary.json: reading it takes about "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("more than the address-space limit (ulimit -v) of 200.00 MiB leaves"), std::string::npos)
        << r.err;
  }
  // The flash kernel multiplies without BLAS: it runs.
  r = limited("profile flash --iters 1 --warmup 0" + kSmall + " --out " + (dir_ / "flash").string());
  EXPECT_EQ(r.code, 0) << r.err;

  // compare prepares every variant before the first runs: the first that multiplies with OpenBLAS (sdpa-math,
  // in fp32; naive already where bf16 is widened for sgemm, below AVX-512) stops the run there, before any
  // variant is validated or timed, with no files written.
  const fs::path stopped = dir_ / "stopped";
  r = limited("compare --iters 1 --warmup 0" + kSmall + " --out " + stopped.string());
  EXPECT_EQ(r.code, 2) << r.err;
  const std::string last = r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1);
  EXPECT_EQ(last.rfind("attnprof: error: the address-space limit (ulimit -v) of 200 MiB is too small for OpenBLAS, "
                       "which reserves up to ~",
                       0),
            0u)
      << r.err;
  EXPECT_NE(last.find(" MiB in use: raise it to at least "), std::string::npos) << last;
  EXPECT_EQ(r.err.find("attnprof: error"), r.err.rfind("attnprof: error")) << "one error line: " << r.err;
  EXPECT_EQ(r.err.find("validating"), std::string::npos) << "no variant ran: " << r.err;
  EXPECT_FALSE(fs::exists(stopped)) << "a stopped run leaves no output directory";

  // Inputs the limit cannot hold (3 × 64 MiB of fp32 under 200 MiB): the default memory budget follows the
  // limit, so they are refused before they are drawn, naming the limit and what to raise.
  const fs::path big = dir_ / "big";
  r = limited("profile flash --iters 1 --warmup 0 --shape 16,16,1024,64 --dtype fp32 --out " + big.string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("over the memory budget of "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("what the address-space limit (ulimit -v) of 200.00 MiB leaves beside the "), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("; raise `ulimit -v`, or run a smaller --shape"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("fp64 reference\n"), std::string::npos) << "nothing was computed: " << r.err;
  EXPECT_FALSE(fs::exists(big)) << "a refused run leaves no output directory";
  // Past the limit by an explicit --memory-budget: the allocation that fails names the limit, not the machine's
  // free memory, which is plenty.
  r = limited("profile flash --iters 1 --warmup 0 --shape 16,16,1024,64 --dtype fp32 --memory-budget 100G --out " +
              big.string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("attnprof: error: out of memory: could not allocate 67108864 bytes (64.0 MiB) beside the "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("MiB of tensors live: the address-space limit (ulimit -v) of 200 MiB"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(big)) << "a stopped run leaves no output directory";
  // The inputs fit, their fp64 reference (not tensors, past the budget by --memory-budget) does not: said to
  // be outside the tensors, under the limit. One thread, whose peaks the unlimited run above cached (measuring
  // them would fail first, and say so).
  r = limited("profile flash --iters 1 --warmup 0 --threads 1 --shape 6,16,1024,64 --dtype fp32 --memory-budget "
              "100G --out " + big.string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("attnprof: error: out of memory: an allocation outside the tensors (the fp64 reference's or a "
                       "report's buffers) failed under the address-space limit (ulimit -v) of 200 MiB"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(big)) << "a stopped run leaves no output directory";
}

TEST_F(Cli, OverBudgetProfileStopsBeforeTheReference) {
  // naive's N×N scores are refused by the budget before the random inputs are drawn (gigabytes and seconds
  // at large N), naming both figures.
  const Result early = run("profile naive --shape 1,1,16384,16 --threads 1 --memory-budget 100M" + out_flag());
  EXPECT_EQ(early.code, 2) << early.err;
  EXPECT_EQ(early.err.rfind("attnprof: error: naive at B=1 Hq=1 Hkv=1 Nq=16384 Nk=16384 D=16 bf16 causal (its "
                            "inputs, 1572864 bytes, their fp64 reference, 6422528 bytes, and what one forward "
                            "allocates beyond them, ",
                            0),
            0u)
      << early.err;
  EXPECT_NE(early.err.find("over the memory budget of 104857600 bytes"), std::string::npos) << early.err;
  EXPECT_FALSE(fs::exists(out()));
  // Inputs from files are read first; the variant's own check then stops it before any fp64 reference work
  // (minutes at large N).
  fs::create_directories(dir_);
  const std::string x = write_npy(dir_ / "x.npy", randn({1, 1, 16384, 16}, DType::F32, 5));
  const std::string files = " --q " + x + " --k " + x + " --v " + x;
  const Result r = run("profile naive --threads 1 --memory-budget 100M" + files + out_flag());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("naive cannot run"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("computing the fp64 reference"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out())) << "the output directory it created is removed with the run";
  // A directory that was there before the run stays, empty as it was.
  fs::create_directories(out());
  EXPECT_EQ(run("profile naive --threads 1 --memory-budget 100M" + files + out_flag()).code, 2);
  EXPECT_TRUE(fs::is_directory(out()));
  EXPECT_TRUE(fs::is_empty(out()));
}

TEST_F(Cli, HtmlFlagWritesTheReportBesideTheResults) {
  const Result r = run("compare --iters 1 --warmup 0 --variants inplace,flash --html" + kSmall + out_flag());
  if (r.code == 2 && r.err.find("npm ci") != std::string::npos) GTEST_SKIP() << "chart library not installed: " << r.err;
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string page = io::read_file(out() / "report.html");
  EXPECT_NE(page.find("</html>"), std::string::npos);
  EXPECT_NE(page.find("flash"), std::string::npos);
  EXPECT_NE(r.err.find("report.html"), std::string::npos) << r.err;
  // profile --json names the page among the files it wrote.
  const Result p = run("profile flash --iters 1 --warmup 0 --html --json" + kSmall + out_flag());
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(json::parse(p.out)["files"]["report"], (out() / "report.html").string()) << p.out;
}

TEST_F(Cli, HtmlFlagRefusesAPageOverTheRunsFilesBeforeTheRun) {
  // report.html linking to where the run will write compare.json: refused before anything runs (not after
  // the run's files are committed), and nothing is written.
  fs::create_directories(out());
  fs::create_symlink("compare.json", out() / "report.html");
  const Result r = run("compare --iters 1 --warmup 0 --variants flash --html" + kSmall + out_flag());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("links to '" + fs::weakly_canonical(out() / "compare.json").string() +
                       "', a file of the run's directory that the page would replace"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("validating"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out() / "compare.json"));
  EXPECT_FALSE(fs::exists(out() / "flash.trace.json"));
  // Any file of the run, not only those the page reads: compare.txt, a table, sweep.csv.
  for (const char* file : {"compare.txt", "flash.table.txt"}) {
    fs::remove(out() / "report.html");
    fs::create_symlink(file, out() / "report.html");
    const Result t = run("compare --iters 1 --warmup 0 --variants flash --html" + kSmall + out_flag());
    EXPECT_EQ(t.code, 2) << t.err;
    EXPECT_NE(t.err.find("a file of the run's directory that the page would replace"), std::string::npos) << t.err;
    EXPECT_FALSE(fs::exists(out() / file)) << file;
  }
  // What writing the page would refuse at the end is refused at the start: report.html a directory, or a link
  // to a file that does not exist outside the run's directory.
  fs::remove(out() / "report.html");
  fs::create_directory(out() / "report.html");
  const Result d = run("profile flash --iters 1 --warmup 0 --html" + kSmall + out_flag());
  EXPECT_EQ(d.code, 2) << d.err;
  EXPECT_NE(d.err.find("report.html': it is a directory"), std::string::npos) << d.err;
  EXPECT_FALSE(fs::exists(out() / "flash.summary.json"));
  fs::remove(out() / "report.html");
  fs::create_symlink("/nonexistent-dir/page.html", out() / "report.html");
  const Result l = run("profile flash --iters 1 --warmup 0 --html" + kSmall + out_flag());
  EXPECT_EQ(l.code, 2) << l.err;
  EXPECT_NE(l.err.find("is a symbolic link to a file that does not exist"), std::string::npos) << l.err;
  EXPECT_FALSE(fs::exists(out() / "flash.summary.json"));
}

TEST_F(Cli, UnwritableOutputDirectoryIsAnError) {
  { std::ofstream(dir_ / "a-file") << "x"; }
  const std::string bad = (dir_ / "a-file" / "sub").string();
  const Result r = run("profile naive" + kSmall + "--out " + bad);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("attnprof: error: cannot create output directory", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) entries += e.path().filename().string().rfind("std", 0) != 0;
  EXPECT_EQ(entries, 1);  // only a-file: nothing else was created
}

TEST_F(Cli, CorruptNpyInputsAreRejected) {
  const Tensor t = randn({1, 1, 4, 8}, DType::F32, 0);
  const std::string good = write_npy(dir_ / "good.npy", t);
  const std::string bytes = npy::to_bytes(t);
  auto write = [&](const std::string& name, const std::string& data) {
    std::ofstream(dir_ / name, std::ios::binary) << data;
    return (dir_ / name).string();
  };
  std::string magic = bytes;
  magic[0] = 'X';
  std::string huge = bytes;
  const size_t shape_at = huge.find("(1, 1, 4, 8)");
  huge.replace(shape_at, 12, "(1000, 1000, 1000, 8)");  // 32 GB declared, 128 bytes present
  const std::string kv = " --k " + good + " --v " + good;
  expect_bad("profile flash --threads 1 --q " + write("trunc.npy", bytes.substr(0, 30)) + kv, "truncated .npy header");
  expect_bad("profile flash --threads 1 --q " + write("magic.npy", magic) + kv, "wrong magic");
  expect_bad("profile flash --threads 1 --q " + write("short.npy", bytes.substr(0, bytes.size() - 4)) + kv,
             "size mismatch");
  expect_bad("profile flash --threads 1 --q " + write("huge.npy", huge) + kv, "size mismatch");
  expect_bad("profile flash --threads 1 --q " + (dir_ / "missing.npy").string() + kv, "--q: cannot open");
  expect_bad("profile flash --threads 1 --q " + good, "--q, --k and --v must be given together");
  // A NUL or other control byte in the dtype: escaped in the message, which goes on to its end.
  std::string nul = bytes;
  nul.replace(nul.find("'<f4'"), 5, std::string("'<\0\r'", 5));
  expect_bad("profile flash --threads 1 --q " + write("nul.npy", nul) + kv,
             "unsupported dtype '<\\x00\\x0d': expected '<f4' (float32)");
  // Non-finite values would make the fp64 reference meaningless: refused, naming the file and the first one.
  Tensor nan_q = t.clone();
  nan_q.set(0, 0, 2, 5, std::numeric_limits<float>::quiet_NaN());
  const std::string nan_path = write_npy(dir_ / "nan.npy", nan_q);
  expect_bad("compare --threads 1 --q " + nan_path + kv,
             "--q " + nan_path + " holds non-finite values as fp32 (1 NaN and 0 Inf, the first at [0, 0, 2, 5])");
  Tensor inf_v = t.clone();
  inf_v.set(0, 0, 3, 7, -std::numeric_limits<float>::infinity());
  const std::string inf_path = write_npy(dir_ / "inf.npy", inf_v);
  expect_bad("profile flash --threads 1 --q " + good + " --k " + good + " --v " + inf_path,
             "--v " + inf_path + " holds non-finite values as fp32 (0 NaN and 1 Inf, the first at [0, 0, 3, 7])");
  // Finite in the file, past fp16's range once --dtype converts it: the conversion is named, not the file.
  Tensor big_q = t.clone();
  big_q.set(0, 0, 1, 2, 1e5f);
  const std::string big_path = write_npy(dir_ / "big.npy", big_q);
  expect_bad("profile flash --threads 1 --dtype fp16 --q " + big_path + kv,
             "--q " + big_path + " holds values fp16 cannot hold: converted to it (--dtype fp16), they are not finite "
             "(0 NaN and 1 Inf, the first at [0, 0, 1, 2])");
  // Files that are each valid but do not fit together: the message names the files, not only the tensors.
  const std::string longer = write_npy(dir_ / "longer.npy", randn({1, 1, 6, 8}, DType::F32, 1));
  expect_bad("profile flash --threads 1 --q " + good + " --k " + good + " --v " + longer,
             "the input files do not fit together (--q " + good + ", --k " + good + ", --v " + longer +
                 "): k and v shapes differ: k [1, 1, 4, 8], v [1, 1, 6, 8]");
  const std::string half = write_npy(dir_ / "half.npy", randn({1, 1, 4, 8}, DType::F16, 2));
  expect_bad("profile flash --threads 1 --q " + good + " --k " + half + " --v " + good,
             "the input files have different dtypes (--q " + good + " fp32, --k " + half + " fp16, --v " + good +
                 " fp32): pass --dtype to convert them");
}

TEST_F(Cli, AnInterruptedRunLeavesNoTemporaryFilesAndNoNewDirectory) {
#ifdef ATTNPROF_TSAN
  // Seen once in scripts/tsan.sh (clang 14): the signal landed while ThreadSanitizer's free() held its slot
  // lock, the runtime ran the handler there at once, and the handler's first atomic store waited on that lock
  // forever. The release and ASan suites check this test's cleanup; its threads are not what it is about.
  GTEST_SKIP() << "ThreadSanitizer's runtime can deadlock running a signal handler inside its own free()";
#endif
  // compare stages each variant's files in temporary files until the run ends. Killed half-way (Ctrl-C, a job
  // scheduler's SIGTERM), it must remove them, and the --out directories it created, then die of the signal.
  // Deterministic: the signal is sent once the first staged file exists, with four variants still to run.
  // A compare into `out`, in the background, quiet; SIGINT as a shell gives a foreground job.
  // Every signal whose default action ends the process and that comes from outside it (tools/main.cpp says
  // why these); the child starts with each at its default, as a shell leaves them, and dumps no core.
  const std::vector<int> terminating = {SIGTERM, SIGINT,  SIGHUP,    SIGQUIT, SIGUSR1, SIGUSR2,
                                        SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGPIPE};
  // `ignored`: a signal the parent set to be ignored, as nohup does SIGHUP. `err_fd`: the child's stderr, and
  // `close_fd` a descriptor it must not keep (the pipe's read end).
  auto spawn_compare = [&](const fs::path& out, int ignored = 0, int err_fd = -1, int close_fd = -1) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (close_fd >= 0) ::close(close_fd);
      for (const int sig : terminating) ::signal(sig, SIG_DFL);
      if (ignored != 0) ::signal(ignored, SIG_IGN);
      const struct rlimit no_core {0, 0};
      ::setrlimit(RLIMIT_CORE, &no_core);
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(err_fd >= 0 ? err_fd : null, 2);
      ::execl(kBinary.c_str(), kBinary.c_str(), "compare", "--shape", "1,4,512,64", "--threads", "1", "--iters", "20",
              "--out", out.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  };
  auto staged_in = [](const fs::path& out_dir) {
    std::error_code ec;
    for (auto it = fs::directory_iterator(out_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->path().filename().string().find(".tmp.") != std::string::npos) return true;
    return false;
  };
  // Waits until the run has staged a file; false when it ended first.
  auto wait_staged = [&](pid_t pid, const fs::path& out_dir) {
    int status = 0;
    for (int i = 0; i < 120000 && !staged_in(out_dir); ++i) {  // up to 10 minutes (sanitizer builds are slow)
      if (::waitpid(pid, &status, WNOHANG) == pid) return false;
      ::usleep(5000);
    }
    return staged_in(out_dir);
  };
  for (const int sig : terminating) {
    SCOPED_TRACE(strsignal(sig));
    const fs::path top = dir_ / "new", out_dir = top / "deeper";
    fs::remove_all(top);
    const pid_t pid = spawn_compare(out_dir);
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(wait_staged(pid, out_dir)) << "compare ended before it staged a file";
    int status = 0;
    ASSERT_EQ(::kill(pid, sig), 0);
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status;
    EXPECT_FALSE(fs::exists(top)) << "the directories the run created are removed with its temporary files";
  }
  {
    // SIGPIPE as it happens: the reader of the run's progress (stderr) goes away half-way, and the next
    // progress line raises it while the first variants' files wait in temporary files.
    SCOPED_TRACE("stderr's reader goes away");
    const fs::path top = dir_ / "new", out_dir = top / "deeper";
    fs::remove_all(top);
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = spawn_compare(out_dir, 0, fds[1], fds[0]);
    ::close(fds[1]);
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(wait_staged(pid, out_dir)) << "compare ended before it staged a file";
    ::close(fds[0]);  // unread progress lines go with it; the run's next line meets a pipe with no reader
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE) << "status " << status;
    EXPECT_FALSE(fs::exists(top)) << "the directories the run created are removed with its temporary files";
  }
  for (const int sig : {SIGHUP, SIGUSR1}) {
    // A signal the parent ignored (nohup's SIGHUP) stays ignored: the run goes on, and ends as it would.
    SCOPED_TRACE(std::string("ignored ") + strsignal(sig));
    const fs::path out_dir = dir_ / "ignored";
    fs::remove_all(out_dir);
    const pid_t pid = spawn_compare(out_dir, sig);
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(wait_staged(pid, out_dir)) << "compare ended before it staged a file";
    ASSERT_EQ(::kill(pid, sig), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    EXPECT_TRUE(fs::exists(out_dir / "compare.json"));
  }
  // An --out that existed before keeps what it held, and only that.
  const fs::path kept = dir_ / "kept";
  fs::create_directories(kept);
  io::write_file_atomic((kept / "mine.txt").string(), "mine");
  const pid_t pid = spawn_compare(kept);
  ASSERT_GT(pid, 0);
  for (int i = 0; i < 120000 && std::distance(fs::directory_iterator(kept), fs::directory_iterator()) < 2; ++i)
    ::usleep(5000);
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(kept)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"mine.txt"});
}

// A long sweep stopped by Ctrl-C keeps what it measured: the first SIGINT lets the point in progress finish and
// writes the points that did, marked interrupted, with exit code 130; a second SIGINT ends the run at once,
// writing nothing, as a signal ends compare.
TEST_F(Cli, ASweepStoppedByCtrlCWritesThePointsThatFinished) {
#ifdef ATTNPROF_TSAN
  GTEST_SKIP() << "ThreadSanitizer's runtime can deadlock running a signal handler inside its own free()";
#endif
  // Three points of naive: a short one, a long one (20 forwards at N=2048) during which the signals land, and one
  // the first signal leaves out.
  auto spawn_sweep = [&](const fs::path& out, int err_fd, int close_fd, const char* seq) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(close_fd);
      ::signal(SIGINT, SIG_DFL);
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(err_fd, 2);
      ::execl(kBinary.c_str(), kBinary.c_str(), "sweep", "--shape", "1,4,64,64", "--seq", seq, "--variants",
              "naive", "--threads", "1", "--warmup", "0", "--iters", "20", "--out", out.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  };
  // Reads the run's stderr until `needle` appears (or the pipe closes): what it read.
  auto read_until = [](int fd, const std::string& needle) {
    std::string err;
    char buf[4096];
    while (err.find(needle) == std::string::npos) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      err.append(buf, size_t(n));
    }
    return err;
  };
  // 0: one SIGINT during the last point, which leaves nothing out.
  for (const int signals : {1, 2, 0}) {
    SCOPED_TRACE(signals == 1 ? "one SIGINT" : signals == 2 ? "two SIGINTs" : "one SIGINT in the last point");
    const fs::path out = dir_ / "swept";
    fs::remove_all(out);
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = spawn_sweep(out, fds[1], fds[0], signals == 0 ? "64,2048" : "64,2048,4096");
    ::close(fds[1]);
    ASSERT_GT(pid, 0);
    std::string err = read_until(fds[0], "N=2048");  // the first point finished, the second began
    ASSERT_NE(err.find("N=2048"), std::string::npos) << err;
    ASSERT_EQ(::kill(pid, SIGINT), 0);
    // The second once the first was taken (two sent at once would merge into one pending signal).
    const std::string taken = "stopping after the point in progress";
    if (signals == 2) {
      err += read_until(fds[0], taken);
      ASSERT_NE(err.find(taken), std::string::npos) << err;
      ASSERT_EQ(::kill(pid, SIGINT), 0);
    }
    err += read_until(fds[0], "\x01");  // to the end
    ::close(fds[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    if (signals == 2) {
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << "status " << status << "\n" << err;
      EXPECT_FALSE(fs::exists(out)) << "a second Ctrl-C writes nothing";
      continue;
    }
    if (signals == 0) {  // the sweep is whole: written as any, exit 0, nothing said to be missing
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status << "\n" << err;
      EXPECT_NE(err.find("sweep: done"), std::string::npos) << err;
      const json j = json::parse(io::read_file(out / "sweep.json"));
      EXPECT_FALSE(j.contains("interrupted")) << j.dump();
      EXPECT_EQ(j["points"].size(), 2u);
      continue;
    }
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << "status " << status << "\n" << err;
    EXPECT_NE(err.find("attnprof: interrupted: stopping after the point in progress"), std::string::npos) << err;
    EXPECT_NE(err.find("attnprof: interrupted after 2 of the 3 points; wrote the 2 that finished"), std::string::npos) << err;
    const json j = json::parse(io::read_file(out / "sweep.json"));
    EXPECT_EQ(j["interrupted"], json({{"points", 2}, {"planned", 3}}));
    ASSERT_EQ(j["points"].size(), 2u);
    for (const json& p : j["points"]) EXPECT_EQ(p["status"], "ok") << p;
    EXPECT_NE(io::read_file(out / "sweep.txt").find("Interrupted (Ctrl-C) after 2 of the 3 points"), std::string::npos);
  }
}

TEST_F(Cli, ASignalAtAnySystemCallLeavesTheRunWholeOrNotAtAll) {
  // strace delivers SIGINT right after a chosen system call: after the mkstemp of a temporary file (before the
  // handler's table knew it, once), after each mkdir of a new --out, after each rename of the commit (which
  // left some files new and some old). Whatever the moment: no temporary file, and the run's files all new or
  // all as they were; a new --out is gone unless the run's files were all in place.
  if (std::system("strace -f -o /dev/null true >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "strace is not installed or cannot trace here (scripts/setup.sh installs it)";
  const fs::path kept = dir_ / "kept";
  const std::string args = " compare --shape 1,2,32,16 --iters 1 --warmup 0 --variants naive,flash --threads 1 ";
  // compare.json, .txt and .csv, and each variant's trace, summary, table, table CSV and stacks.
  constexpr size_t kFiles = 3 + 2 * 5;
  // A first run measures the machine's peaks if they are not cached yet (a file write of its own). The next,
  // traced, numbers the openat calls that create a file (mkstemp's O_EXCL): the probe, then each staged file.
  // The same command makes the same calls again.
  ASSERT_EQ(run(args + "--out " + kept.string()).code, 0);
  // LeakSanitizer refuses to run under ptrace: a sanitizer build's runs keep its other checks only.
  const std::string strace = "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 strace -f ";
  const fs::path log = dir_ / "openat.log", err = dir_ / "traced.err";
  ASSERT_EQ(std::system((strace + "-e trace=openat -o " + log.string() + " " + kBinary + args + "--out " +
                         kept.string() + " >/dev/null 2>" + err.string())
                            .c_str()),
            0)
      << io::read_file(err);
  std::vector<int> creates;
  {
    std::istringstream lines(io::read_file(log));
    int n = 0;
    for (std::string line; std::getline(lines, line);)
      if (line.find("openat(") != std::string::npos && line.find("resumed>") == std::string::npos) {
        ++n;
        // Only the run's own files: LLVM's OpenMP runtime (sanitizer builds) registers itself in /dev/shm.
        if (line.find("O_EXCL") != std::string::npos && line.find(kept.string() + "/") != std::string::npos)
          creates.push_back(n);
      }
  }
  ASSERT_EQ(creates.size(), kFiles + 1) << "the write probe and the staged files";
  auto contents = [](const fs::path& d) {
    std::map<std::string, std::string> m;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(d, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->is_regular_file()) m[fs::relative(it->path(), d).string()] = io::read_file(it->path());
    return m;
  };
  const auto first = contents(kept);
  ASSERT_EQ(first.size(), kFiles);
  std::vector<std::string> injections;
  for (size_t k = 1; k <= kFiles; ++k) injections.push_back("rename:signal=SIGINT:when=" + std::to_string(k));
  for (int k = 1; k <= 2; ++k) injections.push_back("mkdir:signal=SIGINT:when=" + std::to_string(k));
  for (int k : creates) injections.push_back("openat:signal=SIGINT:when=" + std::to_string(k));
  int seed = 0;
  for (const std::string& inject : injections) {
    SCOPED_TRACE(inject);
    const std::string syscall = inject.substr(0, inject.find(':'));
    const fs::path fresh = dir_ / "new";
    fs::remove_all(fresh);
    for (const fs::path& out : {kept, fresh / "deeper"}) {
      const auto before = contents(kept);
      const std::string cmd = strace + "-o /dev/null -e trace=" + syscall + " -e inject=" + inject + " " + kBinary +
                              args + "--seed " + std::to_string(++seed) + " --out " + out.string() +
                              " >/dev/null 2>&1";
      (void)std::system(cmd.c_str());
      const auto after = contents(out == kept ? kept : out);
      for (const auto& [name, text] : after)
        EXPECT_TRUE(name.find(".tmp.") == std::string::npos && name.find(".attnprof-write-probe.") == std::string::npos)
            << name << " left behind";
      if (out == kept) {
        ASSERT_EQ(after.size(), kFiles);
        int changed = 0;
        for (const auto& [name, text] : after) changed += before.at(name) != text;
        EXPECT_TRUE(changed == 0 || changed == int(kFiles)) << changed << " of " << kFiles << " files new";
      } else if (fs::exists(fresh)) {
        EXPECT_EQ(after.size(), kFiles) << "a new --out kept without the run's files";
      }
    }
  }
}

TEST_F(Cli, WithoutHardLinksARunStillReplacesItsFilesWholeOrNotAtAll) {
  // On a filesystem without hard links (vfat, some FUSE and network mounts) link(2) fails with EPERM or
  // EOPNOTSUPP; strace makes every link fail so. The commit then keeps each old file as a copy: the run
  // succeeds, and a rename that fails midway still puts every old file back.
  if (std::system("strace -f -o /dev/null true >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "strace is not installed or cannot trace here (scripts/setup.sh installs it)";
  const std::string args = " compare --shape 1,2,32,16 --iters 1 --warmup 0 --variants naive,flash --threads 1 ";
  ASSERT_EQ(run(args + out_flag()).code, 0);
  auto contents = [&] {
    std::map<std::string, std::string> m;
    for (const auto& e : fs::directory_iterator(out())) m[e.path().filename().string()] = io::read_file(e.path());
    return m;
  };
  const auto first = contents();
  ASSERT_EQ(first.size(), 13u);  // compare.json, .txt, .csv; per variant trace, summary, table, CSV, stacks
  // LeakSanitizer refuses to run under ptrace: a sanitizer build's runs keep its other checks only.
  const fs::path log = dir_ / "strace.log", err = dir_ / "traced.err";
  auto traced = [&](const std::string& inject, int seed) {
    const std::string cmd = "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 strace -f -o " + log.string() +
                            " -e trace=link,rename -e inject=link:error=EPERM " + inject + " " + kBinary + args +
                            "--seed " + std::to_string(seed) + out_flag() + " >/dev/null 2>" + err.string();
    const int rc = std::system(cmd.c_str());
    return Result{WIFEXITED(rc) ? WEXITSTATUS(rc) : 128, "", io::read_file(err)};
  };
  const Result ok = traced("", 1);
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(io::read_file(log).find("EPERM (Operation not permitted) (INJECTED)"), std::string::npos)
      << "no link(2) was made to fail: " << io::read_file(log);
  const auto second = contents();
  ASSERT_EQ(second.size(), 13u) << "a copy or temporary file left behind";
  EXPECT_NE(second.at("compare.txt").find("seed 1"), std::string::npos);
  EXPECT_NE(second.at("naive.summary.json"), first.at("naive.summary.json"));
  // The first 13 renames put the copies in place; the 16th is the commit's third: two files are new by then.
  const Result midway = traced("-e inject=rename:error=EACCES:when=16", 2);
  EXPECT_EQ(midway.code, 2) << midway.err;
  EXPECT_NE(midway.err.find("rename from its temporary file failed (Permission denied)"), std::string::npos)
      << midway.err;
  EXPECT_EQ(contents(), second) << "the old files were not all put back";
}

TEST_F(Cli, AValidationFailureIsReportedWrittenAndExitsOne) {
  // q = k = 1e30 everywhere: the scores, 8e60, overflow fp32 to inf in every variant (inf - inf in the
  // softmax is NaN) while the fp64 reference stays finite, so every variant fails validation: a real failure,
  // not an injected one.
  fs::create_directories(dir_);
  const std::string big = write_npy(dir_ / "big.npy", Tensor::full({1, 1, 8, 8}, DType::F32, 1e30f));
  const std::string small = write_npy(dir_ / "small.npy", randn({1, 1, 8, 8}, DType::F32, 4));
  const std::string files = " --dtype fp32 --threads 1 --iters 1 --q " + big + " --k " + big + " --v " + small;
  const Result r = run("compare --variants naive,flash" + files + out_flag());
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.out.find("FAIL (not timed)"), std::string::npos) << r.out;  // the table still printed
  EXPECT_NE(r.err.find("attnprof: naive, flash failed validation against the fp64 reference"), std::string::npos)
      << r.err;
  const json j = read_json("compare.json");  // and written
  ASSERT_EQ(j["variants"].size(), 2u);
  for (const json& v : j["variants"]) EXPECT_EQ(v["status"], "failed") << v.dump();
  const Result roof = run("roofline naive" + files + out_flag());
  EXPECT_EQ(roof.code, 1) << roof.err;
  EXPECT_NE(roof.err.find("attnprof: naive failed validation"), std::string::npos) << roof.err;
  EXPECT_EQ(read_json("roofline.json")["skipped"][0]["status"], "failed");
  // profile writes no file for a failed variant, so the --out directories it made are removed, deepest first,
  // as after an error; a directory that was there before stays, and so does one holding the run's files.
  const fs::path fresh = dir_ / "fresh";
  const Result prof = run("profile naive" + files + " --out " + (fresh / "deeper").string());
  EXPECT_EQ(prof.code, 1) << prof.err;
  EXPECT_NE(prof.err.find("attnprof: naive failed validation"), std::string::npos) << prof.err;
  EXPECT_FALSE(fs::exists(fresh)) << "an empty --out the failed run created was left behind";
  const fs::path existing = dir_ / "existing";
  fs::create_directories(existing);
  EXPECT_EQ(run("profile naive" + files + " --out " + existing.string()).code, 1);
  EXPECT_TRUE(fs::is_directory(existing)) << "a directory the run did not create was removed";
  EXPECT_TRUE(fs::is_empty(existing));
  EXPECT_EQ(run("profile naive" + files + " --json --out " + (existing / "new").string()).code, 1);
  EXPECT_FALSE(fs::exists(existing / "new"));
  EXPECT_TRUE(fs::is_directory(existing));
  // '--out detour/../existing/via' makes 'detour' on its way (as mkdir -p does): it goes with the failed run, and
  // the directory the path comes back to stays.
  EXPECT_EQ(run("profile naive" + files + " --out " + (dir_ / "detour" / ".." / "existing" / "via").string()).code, 1);
  EXPECT_FALSE(fs::exists(dir_ / "detour")) << "a directory made on the way to --out was left behind";
  EXPECT_FALSE(fs::exists(existing / "via"));
  EXPECT_TRUE(fs::is_directory(existing));
  const Result cmp = run("compare --variants naive" + files + " --out " + (fresh / "deeper").string());
  EXPECT_EQ(cmp.code, 1) << cmp.err;
  EXPECT_TRUE(fs::exists(fresh / "deeper" / "compare.json")) << "a --out holding the run's files was removed";
}

TEST_F(Cli, ErrorLinesReachTheTerminalWithoutControlCharacters) {
  // A message quotes what it was given. A path holding an escape sequence, a bell, a tab, the C1 CSI (U+009B,
  // an escape to some terminals) and a byte that is not UTF-8 must not reach the terminal as such; valid
  // UTF-8 (ü, ·) stays as it is.
  const std::string name = (dir_ / "a\x1b[2J\x07\t\xc2\x9b\xff-\xc3\xbc\xc2\xb7.json").string();
  const Result r = run("diff '" + name + "' '" + name + "x'");
  EXPECT_EQ(r.code, 2) << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.back(), '\n');
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  for (size_t i = 0; i + 1 < r.err.size(); ++i) {
    const auto c = static_cast<unsigned char>(r.err[i]);
    EXPECT_FALSE(c < 0x20 || c == 0x7f || c == 0xff) << "byte 0x" << std::hex << int(c) << " at " << std::dec << i;
  }
  EXPECT_EQ(r.err.find("\xc2\x9b"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("attnprof: error: cannot read '" + dir_.string() + "/a [2J   ?-\xc3\xbc\xc2\xb7.json"),
            std::string::npos)
      << r.err;
}

// The same on stdout: the "wrote ..." line names the --out as given, and --json's document cannot hold bytes that
// are not UTF-8 (nlohmann's dump threw after the files were written): there each becomes U+FFFD.
TEST_F(Cli, OutputPathsReachStdoutWithoutControlCharacters) {
  const std::string dir = (dir_ / "o\x1b[2J\x07\xff").string();
  const Result r = run("profile flash" + kSmall + " --out '" + dir + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char c : r.out) EXPECT_FALSE(c == '\x1b' || c == '\x07' || c == '\xff') << r.out;
  EXPECT_NE(r.out.find("wrote " + (dir_ / "o [2J ?").string() + "/flash.trace.json"), std::string::npos) << r.out;
  const Result j = run("profile flash" + kSmall + " --out '" + dir + "' --json");
  ASSERT_EQ(j.code, 0) << j.err;
  const json doc = json::parse(j.out);
  EXPECT_EQ(doc["files"]["trace"], (dir_ / "o\x1b[2J\x07\xef\xbf\xbd").string() + "/flash.trace.json");
}

// report's --out that is missing gets the run that fills it; one that is a file gets no advice to write into it.
TEST_F(Cli, ReportOfAMissingOrNonDirectoryOutSaysWhich) {
  const std::string missing = (dir_ / "no-run-yet").string();
  Result r = run("report --out " + missing);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "attnprof: error: report: --out " + missing + " does not exist (run `attnprof compare --out " +
                       missing + "` first)\n");
  const fs::path file = dir_ / "a-file";
  std::ofstream(file) << "x";
  r = run("report --out " + file.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "attnprof: error: report: --out " + file.string() + " is not a directory (it holds the results of a "
                       "run, which write into a directory: pass that directory)\n");
  EXPECT_EQ(io::read_file(file.string()), "x");
}

TEST_F(Cli, ReportWithNothingUsableWritesNoPageAndExitsTwo) {
  // Nothing the page can draw is bad input, as a corrupt .npy is: exit 2, no report.html, and on stderr one
  // line per file that could not be used, then the error. A report of notes alone would pass for a result.
  fs::create_directories(out());
  auto expect_refused = [&](const std::vector<std::string>& lines) {
    const Result r = run("report --out " + out().string());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    std::vector<std::string> got;
    std::istringstream in(r.err);
    for (std::string line; std::getline(in, line);) got.push_back(line);
    ASSERT_EQ(got.size(), lines.size()) << r.err;
    for (size_t i = 0; i < lines.size(); ++i) {
      EXPECT_EQ(got[i].rfind("attnprof: error: ", 0), 0u) << got[i];
      EXPECT_NE(got[i].find(lines[i]), std::string::npos) << "expected '" << lines[i] << "' in: " << got[i];
    }
    EXPECT_FALSE(fs::exists(out() / "report.html"));
    for (const auto& e : fs::directory_iterator(out()))
      EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  };
  const std::string nothing = "report: " + out().string() + " holds no compare.json, sweep.json, roofline.json or "
                              "<variant>.summary.json, so there is nothing to draw and no report.html was written";
  // An empty directory, and one holding only files the report does not read.
  expect_refused({nothing});
  { std::ofstream(out() / "notes.txt") << "mine"; }
  { std::ofstream(out() / "other.json") << "{}"; }
  { std::ofstream(out() / "naive.trace.json") << "{\"traceEvents\": []}"; }
  expect_refused({nothing});
  // Every input corrupt, unreadable or of another schema: each named, in the order the report reads them.
  const std::string dir = out().string() + "/";
  { std::ofstream(out() / "compare.json") << "{not json"; }
  { std::ofstream(out() / "sweep.json") << R"({"kind": "compare", "variants": []})"; }
  { std::ofstream(out() / "roofline.json") << "[1, 2]"; }
  { std::ofstream(out() / "naive.summary.json") << R"({"rows": []})"; }
  fs::create_directory(out() / "flash.summary.json");
  expect_refused({dir + "compare.json: not valid JSON (",
                  dir + "sweep.json: not an attnprof sweep: its \"kind\" is \"compare\", not \"sweep\"",
                  dir + "roofline.json: not an attnprof roofline: it is not a JSON object",
                  dir + "flash.summary.json: it is a directory",
                  dir + "naive.summary.json: not an attnprof summary",
                  "report: none of the 5 result files in " + out().string() +
                      " could be used (each named above), so no report.html was written"});
  // An earlier run's page stays as it was.
  { std::ofstream(out() / "report.html") << "earlier"; }
  const Result again = run("report --out " + out().string());
  EXPECT_EQ(again.code, 2) << again.err;
  EXPECT_EQ(io::read_file(out() / "report.html"), "earlier");
  fs::remove(out() / "report.html");
  // One usable input is enough: the rest become notes on the page, as before.
  fs::copy_file(fs::path(ATTNPROF_SOURCE_DIR) / "tests/fixtures/report/sweep.json", out() / "sweep.json",
                fs::copy_options::overwrite_existing);
  const Result some = run("report --out " + out().string());
  if (some.code == 2 && some.err.find("npm ci --prefix web") != std::string::npos)
    GTEST_SKIP() << "chart library not installed: " << some.err;
  ASSERT_EQ(some.code, 0) << some.err;
  const std::string page = io::read_file(out() / "report.html");
  EXPECT_NE(page.find("compare.json could not be parsed"), std::string::npos);
  EXPECT_NE(page.find("sweep-time"), std::string::npos);
  // ... and on stderr, one note per file left out, so that a script reading only the exit status and stderr
  // learns that the page lacks them.
  for (const std::string& file :
       {"compare.json: not valid JSON (", "roofline.json: not an attnprof roofline",
        "flash.summary.json: it is a directory", "naive.summary.json: not an attnprof summary"})
    EXPECT_NE(some.err.find("attnprof: note: " + dir + file), std::string::npos) << file << " in: " << some.err;
  EXPECT_NE(some.err.find("(left out of the page)"), std::string::npos) << some.err;
  EXPECT_EQ(some.err.find("sweep.json:"), std::string::npos) << some.err;
}

TEST_F(Cli, OutputTargetsThatCannotBeWrittenAreRefusedBeforeTheRun) {
  // What the writer would refuse at the end of the run (after minutes of it) is refused before anything runs:
  // exit 2 with one line (no progress line: nothing ran), and nothing in --out changes.
  fs::create_directories(out());
  auto listing = [&] {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(out())) names.insert(e.path().filename().string());
    return names;
  };
  auto refused = [&](const std::string& args, const std::string& expect) {
    SCOPED_TRACE(args);
    const auto before = listing();
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("attnprof: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "the run started: " << r.err;
    EXPECT_NE(r.err.find(expect), std::string::npos) << "expected '" << expect << "' in: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(listing(), before);
  };
  const std::string o = out().string() + "/";
  const std::string fast = " --iters 1 --warmup 0" + kSmall + out_flag();
  // A directory where a file of the run goes.
  fs::create_directory(out() / "naive.summary.json");
  refused("profile naive" + fast, "cannot write '" + o + "naive.summary.json': it is a directory");
  refused("compare --variants inplace,naive" + fast, "cannot write '" + o + "naive.summary.json': it is a directory");
  fs::remove(out() / "naive.summary.json");
  fs::create_directory(out() / "roofline.txt");
  refused("roofline naive" + fast, "cannot write '" + o + "roofline.txt': it is a directory");
  fs::remove(out() / "roofline.txt");
  // A link to nothing, and a loop of links.
  fs::create_symlink(dir_ / "gone" / "compare.json", out() / "compare.json");
  refused("compare --variants flash" + fast,
          "cannot write '" + o + "compare.json': it is a symbolic link to a file that does not exist");
  fs::remove(out() / "compare.json");
  fs::create_symlink("loop-b", out() / "sweep.json");
  fs::create_symlink("sweep.json", out() / "loop-b");
  refused("sweep --seq 16,32 --variants flash" + fast,
          "cannot write '" + o + "sweep.json': it is a symbolic link that never reaches a file (a loop of links)");
  fs::remove(out() / "sweep.json");
  fs::remove(out() / "loop-b");
  // A link into a directory where no file can be created (/proc answers ENOENT, even to root).
  if (fs::is_regular_file("/proc/version")) {
    fs::create_symlink("/proc/version", out() / "flash.table.txt");
    refused("profile flash" + fast, "cannot write '" + o + "flash.table.txt' in '/proc': a file cannot be created there (");
    refused("compare --variants flash" + fast, "cannot write '" + o + "flash.table.txt' in '/proc': a file cannot be created there (");
    fs::remove(out() / "flash.table.txt");
    fs::create_symlink("/proc/version", out() / "report.html");
    refused("profile flash --html" + fast, "cannot write '" + o + "report.html' in '/proc': a file cannot be created there (");
    refused("report --out " + out().string(), "cannot write '" + o + "report.html' in '/proc': a file cannot be created there (");
    fs::remove(out() / "report.html");
  }
  // --save-output: a name too long for the temporary file written beside it (".tmp.PID.PLACE.XXXXXX": 22 to 28
  // more bytes, with the run's process id), a link to nothing.
  const std::string long_name = (dir_ / (std::string(250, 'o') + ".npy")).string();
  refused("profile naive" + fast + " --save-output " + long_name,
          "--save-output: cannot write '" + long_name + "': its name is 254 bytes long, and the temporary file "
          "written beside it needs 2");
  fs::create_symlink(dir_ / "gone" / "o.npy", dir_ / "o-link.npy");
  refused("profile naive" + fast + " --save-output " + (dir_ / "o-link.npy").string(),
          "--save-output: cannot write '" + (dir_ / "o-link.npy").string() +
              "': it is a symbolic link to a file that does not exist");
  // A loop of links, as the file and as its directory: named as one (std::filesystem throws on such a path).
  fs::create_symlink("loop-f", dir_ / "loop-e");
  fs::create_symlink("loop-e", dir_ / "loop-f");
  refused("profile flash" + fast + " --save-output " + (dir_ / "loop-e").string(),
          "--save-output: cannot write '" + (dir_ / "loop-e").string() +
              "': it is a symbolic link that never reaches a file (a loop of links)");
  refused("profile flash" + fast + " --save-output " + (dir_ / "loop-e" / "o.npy").string(),
          "cannot write --save-output '" + (dir_ / "loop-e" / "o.npy").string() + "': the directory '" +
              (dir_ / "loop-e").string() + "' is a symbolic link that never reaches a directory (a loop of links)");
  // diff --save: checked before either file is read (here neither exists).
  const std::string nowhere = (dir_ / "no-such-dir" / "d.txt").string();
  refused("diff " + o + "a.summary.json " + o + "b.summary.json --save " + nowhere,
          "--save: cannot write '" + nowhere + "': its directory '" + (dir_ / "no-such-dir").string() +
              "' does not exist");
  refused("diff " + o + "a.summary.json " + o + "b.summary.json --save " + out().string(),
          "--save: cannot write '" + out().string() + "': it is a directory");
  // --out itself a loop of links: named as one, not as a link to a missing directory.
  fs::create_symlink("loop-d", dir_ / "loop-c");
  fs::create_symlink("loop-c", dir_ / "loop-d");
  refused("profile naive --iters 1 --warmup 0" + kSmall + "--out " + (dir_ / "loop-c").string(),
          "output path '" + (dir_ / "loop-c").string() +
              "' is a symbolic link that never reaches a directory (a loop of links)");
  // A file flagged immutable or append-only (chattr +i / +a): no rename replaces it, even as root. Setting the
  // flag needs CAP_LINUX_IMMUTABLE and a filesystem that keeps it (ext4, xfs, btrfs; not tmpfs or overlayfs).
  for (const auto& [flag, words] : {std::pair<int, std::string>{FS_IMMUTABLE_FL, "it is immutable (chattr +i)"},
                                    {FS_APPEND_FL, "it is append-only (chattr +a)"}}) {
    const fs::path kept = out() / "compare.txt";
    std::ofstream(kept) << "an earlier run's\n";
    auto set_flags = [&](int add) {
      const int fd = ::open(kept.c_str(), O_RDONLY);
      int flags = 0;
      const bool ok = fd >= 0 && ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 &&
                      ::ioctl(fd, FS_IOC_SETFLAGS, &(flags = (flags & ~(FS_IMMUTABLE_FL | FS_APPEND_FL)) | add)) == 0;
      if (fd >= 0) ::close(fd);
      return ok;
    };
    if (!set_flags(flag)) {
      std::printf("[ SKIPPED part ] chattr flags cannot be set here (%s): %s not checked\n", std::strerror(errno),
                  words.c_str());
      fs::remove(kept);
      continue;
    }
    refused("compare --variants flash" + fast, "cannot write '" + o + "compare.txt': " + words);
    ASSERT_TRUE(set_flags(0)) << "could not clear the flag again: remove it with chattr -i -a " << kept;
    EXPECT_EQ(io::read_file(kept.string()), "an earlier run's\n");
    fs::remove(kept);
  }
  // A directory flagged so (chattr +a takes new files and refuses to rename or remove them): refused before
  // the run, with nothing created in it, where the commit would have failed after the run and left its
  // temporary files there for good.
  {
    const fs::path dir = dir_ / "append-only";
    fs::create_directories(dir);
    auto set_dir_flags = [&](int add) {
      const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
      int flags = 0;
      const bool ok = fd >= 0 && ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 &&
                      ::ioctl(fd, FS_IOC_SETFLAGS, &(flags = (flags & ~(FS_IMMUTABLE_FL | FS_APPEND_FL)) | add)) == 0;
      if (fd >= 0) ::close(fd);
      return ok;
    };
    if (set_dir_flags(FS_APPEND_FL)) {
      refused("compare --variants flash --iters 1 --warmup 0" + kSmall + "--out " + dir.string(),
              "output directory '" + dir.string() + "' is not writable: it is append-only (chattr +a)");
      ASSERT_TRUE(set_dir_flags(0)) << "could not clear the flag again: remove it with chattr -a " << dir;
      EXPECT_TRUE(fs::is_empty(dir));
    } else {
      std::printf("[ SKIPPED part ] chattr flags cannot be set here (%s): an append-only --out not checked\n",
                  std::strerror(errno));
    }
    fs::remove_all(dir);
  }
  // None of it touched --out: no run wrote there.
  EXPECT_TRUE(fs::is_empty(out()));
}
