// The machine's measured ceilings for the roofline: FMA and bf16-dot throughput per ISA, the memory bandwidth
// (the best of STREAM's triad and copy and an in-place update), and OpenBLAS sgemm as the practical fp32
// ceiling; under ATTNPROF_ISA below the CPU's best, also the best ISA's FMA and bf16-dot peaks, which the GEMM
// libraries run at. Measured once per (CPU, ISA, threads) and cached as JSON, because the roofline is only as
// honest as its ceilings and these take a few seconds to measure (the memory loops alone at least one).
// The timed loops themselves are in peak_loops.cpp, which is optimised in every build type.
#include <omp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnprof/allocator.h"
#include "attnprof/analysis.h"
#include "attnprof/error.h"
#include "attnprof/isa.h"
#include "attnprof/ops.h"
#include "analysis/peak_loops.h"
#include "analysis/peaks_cache.h"
#include "io/file.h"
#include "ops/blas_loader.h"

namespace attnprof::analysis {
namespace {

constexpr int64_t kIters = 1 << 22;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

volatile float g_sink = 0.0f;

// This thread's share [begin, end) of n elements, as `schedule(static)` would split them.
std::pair<size_t, size_t> thread_range(size_t n) {
  const size_t t = size_t(omp_get_thread_num()), nt = size_t(omp_get_num_threads());
  return {n * t / nt, n * (t + 1) / nt};
}

}  // namespace

// Each repetition starts at a barrier and ends at the barrier the last thread reaches, so the rate is what the
// team did together. Summing each thread's own best rate instead would count a core twice when two threads
// share it (more threads than cores, or SMT siblings): each finds moments it had the core to itself.
double team_gflops(int threads, float (*loop)(int64_t), int64_t iters, int reps, double flops_per_iter) {
  double best = 0.0;
  float sink_all = 0.0f;
  std::chrono::steady_clock::time_point t0;
#pragma omp parallel num_threads(threads)
  {
    float sink = loop(std::max<int64_t>(1, iters / 4));  // wake the core up, settle the clocks
    for (int rep = 0; rep < reps; ++rep) {
#pragma omp barrier
#pragma omp master
      t0 = std::chrono::steady_clock::now();
#pragma omp barrier
      sink += loop(iters);
#pragma omp barrier
#pragma omp master
      best = std::max(best, double(omp_get_num_threads()) * flops_per_iter * double(iters) / seconds_since(t0) * 1e-9);
    }
#pragma omp critical
    sink_all += sink;
  }
  g_sink = g_sink + sink_all;
  return best;
}

namespace {

// ~6 ms per repetition at full speed; the best of 15 finds a moment the cores were not shared with other
// processes (on a busy machine one long run would measure the sharing).
// `chains`: the loop's accumulators (a round of the 24-chain AVX-512 loops is twice a 12-chain one's).
double throughput_gflops(int threads, float (*loop)(int64_t), int chains, double flops_per_chain) {
  return team_gflops(threads, loop, kIters / 4 * kPeakAccumulators / chains, 15, chains * flops_per_chain);
}

double measure_fp32(int threads, Isa isa) {
  switch (isa) {
    case Isa::AVX512: return throughput_gflops(threads, fma_loop_avx512, kPeakAccumulatorsAvx512, 16 * 2.0);
    case Isa::AVX2: return throughput_gflops(threads, fma_loop_avx2, kPeakAccumulators, 8 * 2.0);
    case Isa::Scalar: return throughput_gflops(threads, fma_loop_scalar, kPeakAccumulators, 4 * 2.0);  // SSE2
  }
  return 0.0;
}

double measure_bf16(int threads, Isa isa) {
  if (isa != Isa::AVX512 || !cpu_has_avx512_bf16()) return 0.0;
  return throughput_gflops(threads, bf16_loop_avx512, kPeakAccumulatorsAvx512, 16 * 2 * 2.0);
}

// A measurement's buffers that could not be had (an address-space limit, or no memory left): an error naming
// the measurement and what it needs, not the generic out-of-memory of a run, which would blame its tensors
// or the fp64 reference. Peaks are measured once and cached, so one run without the limit is the way round.
[[noreturn]] void peak_buffers_refused(const char* what, double bytes) {
  const int64_t limit = address_space_limit_bytes();
  ATTNPROF_FAIL("measuring the machine's peaks needs {} for {}, which {}: measure them once where that memory is "
                "free (`attnprof roofline --peaks-only`); they are cached, and later runs do not measure them again",
                binary_size(bytes), what,
                limit >= 0 ? fmt::format("the address-space limit (ulimit -v) of {} does not leave",
                                         binary_size(double(limit)))
                           : std::string("the system refused"));
}

// The memory loops (peak_loops.h) at the CPU's best ISA over arrays far larger than L3 (3 × 128 MB), in turn, for
// at least 12 rounds and a second; bytes counted as STREAM does (triad 24 per element, copy and the in-place
// update 16: no write-allocate). The arrays start on a cache line and each thread's share on a whole line. Pages
// are first-touched in parallel and the first round discarded: fresh memory in this VM is slow to fault in.
BandwidthLoops measure_bandwidth(int threads) {
  constexpr size_t kLine = 64 / sizeof(double);
  const size_t n = size_t(128) << 20 >> 3;  // 128 MB of doubles per array
  struct Free {
    void operator()(double* p) const { std::free(p); }
  };
  const auto array = [&] {
    return std::unique_ptr<double, Free>(static_cast<double*>(std::aligned_alloc(64, n * sizeof(double))));
  };
  std::unique_ptr<double, Free> a = array(), b = array(), c = array();
  if (!a || !b || !c) peak_buffers_refused("the memory loops' three arrays", 3.0 * double(n) * sizeof(double));
  double* A = a.get();
  double* B = b.get();
  double* C = c.get();
  // This thread's share, on whole cache lines.
  const auto share = [&] {
    const auto [begin, end] = thread_range(n / kLine);
    return std::pair{begin * kLine, end * kLine};
  };
#pragma omp parallel num_threads(threads)
  {
    const auto [begin, end] = share();
    triad_first_touch(A, B, C, begin, end);
  }
  const MemoryLoops loops = memory_loops(available_isas().back());
  BandwidthLoops best;
  // One timed pass of a loop, each thread on its share of the arrays: the loop's best so far and this pass's GB/s.
  const auto timed = [&](double& best_gbs, double bytes_per_element, auto&& pass) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
    {
      const auto [begin, end] = share();
      pass(begin, end);
    }
    return std::pair{&best_gbs, bytes_per_element * double(n) / seconds_since(t0) * 1e-9};
  };
  // At least 12 rounds and a second: a VM's memory bandwidth moves with its host's other tenants from one second
  // to the next (this one's gave 64, 81 and 112 GB/s in three measurements a minute apart), and the roof is the
  // most the memory gives, so the window is long enough to find a moment it was not shared.
  const auto start = std::chrono::steady_clock::now();
  for (int rep = 0; rep < 12 || (seconds_since(start) < 1.0 && rep < 1000); ++rep) {
    const double s = 0.5 + rep % 16;
    for (const auto& [best_gbs, gbs] :
         {timed(best.triad, 24.0, [&](size_t i, size_t j) { loops.triad(A, B, C, s, i, j); }),
          timed(best.copy, 16.0, [&](size_t i, size_t j) { loops.copy(C, B, i, j); }),
          timed(best.update, 16.0, [&](size_t i, size_t j) { loops.update(B, 0.999, i, j); })})
      if (rep > 0) *best_gbs = std::max(*best_gbs, gbs);
  }
  g_sink = g_sink + float(A[n / 2] + B[n / 3] + C[n / 5]);
  return best;
}

double measure_sgemm(int threads) {
  const int n = 2048;
  std::vector<float> a, b, c;
  try {
    a.assign(size_t(n) * n, 0.5f);
    b.assign(size_t(n) * n, 0.25f);
    c.assign(size_t(n) * n, 0.0f);
  } catch (const std::bad_alloc&) {
    peak_buffers_refused("the sgemm's three 2048×2048 matrices", 3.0 * double(n) * double(n) * sizeof(float));
  }
  const auto sgemm = ops::detail::blas_api().cblas_sgemm;  // loads OpenBLAS before anything is timed
  const int prev = ops::num_threads();
  ops::set_num_threads(threads);
  double best = 0.0;
  for (int rep = 0; rep < 6; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double s = seconds_since(t0);
    if (rep > 0) best = std::max(best, 2.0 * n * double(n) * n / s * 1e-9);
  }
  ops::set_num_threads(prev);
  g_sink = g_sink + c[12345];
  return best;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string m = line.substr(colon + 1);
        m.erase(0, m.find_first_not_of(" \t"));
        return m;
      }
    }
  return "unknown CPU";
}

// What tells one CPU generation from another when the hypervisor shows a generic model name ("AMD EPYC" is
// Zen 4 and Zen 5 alike, whose AVX-512 peaks differ by 2x): vendor, family, model and stepping.
std::string cpu_signature() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, vendor, family, model, stepping;
  auto value = [&line] {
    const auto colon = line.find(':');
    std::string v = colon == std::string::npos ? "" : line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  };
  while (std::getline(in, line) && !line.empty()) {  // the first processor's block
    if (line.rfind("vendor_id", 0) == 0) vendor = value();
    else if (line.rfind("cpu family", 0) == 0) family = value();
    else if (line.rfind("model", 0) == 0 && line.rfind("model name", 0) != 0) model = value();
    else if (line.rfind("stepping", 0) == 0) stepping = value();
  }
  return fmt::format("{} family {} model {} stepping {}", vendor.empty() ? "?" : vendor, family.empty() ? "?" : family,
                     model.empty() ? "?" : model, stepping.empty() ? "?" : stepping);
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double l = 0.0;
  in >> l;
  return in ? l : 0.0;
}

// Seconds of CPU time every CPU of the machine has spent not idle (the first line of /proc/stat: user, nice,
// system, irq, softirq and steal, the time a hypervisor gave the vCPU to someone else), or -1 unreadable.
double machine_busy_seconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  const long hz = ::sysconf(_SC_CLK_TCK);
  if (!in || cpu != "cpu" || hz <= 0) return -1.0;
  return (user + nice + system + irq + softirq + steal) / double(hz);
}

double own_cpu_seconds() {
  timespec t{};
  return ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) == 0 ? double(t.tv_sec) + 1e-9 * double(t.tv_nsec) : -1.0;
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

OtherWork::OtherWork() : busy0_(machine_busy_seconds()), own0_(own_cpu_seconds()), t0_(steady_seconds()) {}

double OtherWork::seconds() const { return steady_seconds() - t0_; }

namespace {
// Other work in CPUs: what the machine was busy with beyond the process's own CPU time, per second of wall time.
double other_cpus(double machine_busy_s, double own_cpu_s, double wall_s) {
  if (!(std::isfinite(machine_busy_s) && std::isfinite(own_cpu_s) && std::isfinite(wall_s)) || machine_busy_s < 0 ||
      own_cpu_s < 0 || wall_s <= 0)
    return std::nan("");
  return std::max(0.0, machine_busy_s - own_cpu_s) / wall_s;
}
}  // namespace

double OtherWork::cpus() const {
  const double busy1 = machine_busy_seconds(), own1 = own_cpu_seconds(), wall = seconds();
  if (busy0_ < 0 || busy1 < 0 || own0_ < 0 || own1 < 0) return std::nan("");
  return other_cpus(busy1 - busy0_, own1 - own0_, wall);
}

int online_cpus() { return int(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN))); }

double busy_mark(int threads, int cpus) { return double(cpus) - double(std::min(threads, cpus)) + 0.5; }

double other_work_min_seconds() {
  const long hz = ::sysconf(_SC_CLK_TCK);
  return std::max(0.1, 2.0 * double(online_cpus()) / double(hz > 0 ? hz : 100));
}

std::optional<CpuSharing> cpu_sharing(const OtherWork& w, int threads) {
  const double other = w.cpus();
  if (!std::isfinite(other) || w.seconds() < other_work_min_seconds()) return std::nullopt;
  // /proc/stat counts whole ticks, so a short stretch can read a little over every CPU: no more than all of them.
  return CpuSharing{std::min(other, double(online_cpus())), online_cpus(), threads};
}

std::optional<CpuSharing> cpu_sharing(double machine_busy_seconds, double own_cpu_seconds, double wall_seconds,
                                      int threads) {
  const double other = other_cpus(machine_busy_seconds, own_cpu_seconds, wall_seconds);
  if (!std::isfinite(other) || wall_seconds < other_work_min_seconds() || threads < 1) return std::nullopt;
  return CpuSharing{other, online_cpus(), threads};
}

namespace {

// The other work running now, over a quarter-second sample: NaN when /proc/stat cannot be read.
double other_work_now() {
  const OtherWork sample;
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  return sample.cpus();
}

std::string cache_dir() {
  // A relative XDG_CACHE_HOME is invalid and ignored, as the XDG Base Directory spec says: it would make a cache
  // in whatever directory the command ran from.
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') return std::string(x) + "/attnprof";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/attnprof";
  // No HOME (a service, `env -i`): the user's home directory from the password database, as a shell finds `~`.
  std::vector<char> buf(16384);
  struct passwd pw{}, *found = nullptr;
  if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_dir &&
      found->pw_dir[0] == '/')
    return std::string(found->pw_dir) + "/.cache/attnprof";
  return {};
}

}  // namespace

void to_json(nlohmann::json& j, const MachinePeaks& m) {
  j = {{"cpu", m.cpu},
       {"isa", m.isa},
       {"threads", m.threads},
       {"fp32_gflops", m.fp32_gflops},
       {"bf16_gflops", m.bf16_gflops},
       {"bandwidth_gbs", m.bandwidth_gbs},
       {"sgemm_gflops", m.sgemm_gflops},
       {"library_isa", m.library_isa},
       {"library_fp32_gflops", m.library_fp32_gflops},
       {"library_bf16_gflops", m.library_bf16_gflops}};
  if (m.bandwidth_loops.measured())
    j["bandwidth_loops"] = {{"update", m.bandwidth_loops.update},
                            {"copy", m.bandwidth_loops.copy},
                            {"triad", m.bandwidth_loops.triad}};
  if (!m.cpu_signature.empty()) j["cpu_signature"] = m.cpu_signature;
  if (!m.measured_at.empty()) j["measured_at"] = m.measured_at;
  if (m.from_cache) j["from_cache"] = true;
  if (!m.measured_busy.empty()) j["measured_busy"] = m.measured_busy;
}

std::string bandwidth_loops_text(const BandwidthLoops& l) {
  return fmt::format("in-place update {:.1f}, copy {:.1f}, STREAM triad {:.1f} GB/s", l.update, l.copy, l.triad);
}

std::string bandwidth_source(const MachinePeaks& m) {
  if (!m.bandwidth_loops.measured()) return m.gpu() ? "the datasheet's" : "STREAM triad";
  return "the best of three loops over 128 MB arrays: " + bandwidth_loops_text(m.bandwidth_loops);
}

std::string bandwidth_loops_from_json(const nlohmann::json& loops, double bandwidth_gbs, BandwidthLoops& out) {
  if (!loops.is_object()) return "bandwidth_loops is not an object";
  BandwidthLoops read;
  for (const auto& [key, field] : {std::pair{"update", &read.update}, std::pair{"copy", &read.copy},
                                   std::pair{"triad", &read.triad}}) {
    if (!loops.contains(key) || !loops[key].is_number()) return fmt::format("bandwidth_loops has no number '{}'", key);
    const std::string name = fmt::format("bandwidth_loops.{}", key);
    if (std::string why = implausible_peak(name.c_str(), loops[key].get<double>(), true, false); !why.empty())
      return why;
    *field = loops[key].get<double>();
  }
  // The roof is the best loop's figure, as written: another would judge every op against a bandwidth no loop
  // measured (a hand edit of one figure and not the other).
  if (std::abs(bandwidth_gbs - read.best()) > 1e-9 * bandwidth_gbs)
    return fmt::format("bandwidth_gbs {:g} is not the best of bandwidth_loops ({:g})", bandwidth_gbs, read.best());
  out = read;
  return "";
}

std::string busy_peaks_clause(std::string_view measured_busy) {
  return measured_busy.empty() ? "" : fmt::format(", on a busy machine ({}), so they may be low", measured_busy);
}

std::string peaks_provenance(const MachinePeaks& m) {
  const std::string busy = busy_peaks_clause(m.measured_busy);
  if (!m.from_cache) return (m.measured_at.empty() ? "measured now" : "measured now (" + m.measured_at + ")") + busy;
  const std::string again = "; `attnprof roofline --peaks-only --remeasure` measures them again";
  return m.measured_at.empty() ? "from the peaks cache, measured before attnprof recorded the time" + busy + again
                               : "measured " + m.measured_at + busy + ", from the peaks cache" + again;
}

namespace {

// An entry of the cache, or a compare.json's "machine": std::runtime_error naming what is wrong.
MachinePeaks from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::runtime_error(fmt::format("it is {}, not an object", j.is_null() ? "null" : j.type_name()));
  // The library fields came later: a file without all three (an older compare.json or summary) is read as if
  // the libraries ran at `isa`, at its peaks; one with some of them is damaged.
  const bool libraries =
      j.contains("library_isa") || j.contains("library_fp32_gflops") || j.contains("library_bf16_gflops");
  for (const char* key : {"cpu", "isa", "library_isa"}) {
    if (!libraries && std::string_view(key) == "library_isa") continue;
    if (!j.contains(key)) throw std::runtime_error(fmt::format("field '{}' is missing", key));
    if (!j[key].is_string()) throw std::runtime_error(fmt::format("field '{}' is not a string", key));
  }
  for (const char* key : {"threads", "fp32_gflops", "bf16_gflops", "bandwidth_gbs", "sgemm_gflops",
                          "library_fp32_gflops", "library_bf16_gflops"}) {
    if (!libraries && std::string_view(key).starts_with("library_")) continue;
    if (!j.contains(key)) throw std::runtime_error(fmt::format("field '{}' is missing", key));
    if (!j[key].is_number()) throw std::runtime_error(fmt::format("field '{}' is not a number", key));
  }
  MachinePeaks m;
  m.cpu = j.at("cpu").get<std::string>();
  if (j.contains("measured_at")) {
    if (!j["measured_at"].is_string() || j["measured_at"].get<std::string>().size() > 64)
      throw std::runtime_error("measured_at is not a time");
    m.measured_at = j["measured_at"].get<std::string>();
  }
  if (j.contains("from_cache")) {
    if (!j["from_cache"].is_boolean()) throw std::runtime_error("from_cache is not true or false");
    m.from_cache = j["from_cache"].get<bool>();
  }
  if (j.contains("cpu_signature")) {
    if (!j["cpu_signature"].is_string()) throw std::runtime_error("cpu_signature is not a string");
    m.cpu_signature = j["cpu_signature"].get<std::string>();
  }
  if (j.contains("measured_busy")) {
    if (!j["measured_busy"].is_string() || j["measured_busy"].get<std::string>().size() > 200)
      throw std::runtime_error("measured_busy is not a note");
    m.measured_busy = j["measured_busy"].get<std::string>();
  }
  m.isa = j.at("isa").get<std::string>();
  m.library_isa = libraries ? j.at("library_isa").get<std::string>() : m.isa;
  // Every one of these is printed: attnprof writes none with a control character, and an escape sequence from a
  // hand-edited cache or compare.json would reach the terminal.
  for (const auto& [key, text] : {std::pair<const char*, const std::string*>{"cpu", &m.cpu}, {"cpu_signature", &m.cpu_signature},
                                  {"isa", &m.isa}, {"library_isa", &m.library_isa}, {"measured_at", &m.measured_at},
                                  {"measured_busy", &m.measured_busy}})
    if (std::any_of(text->begin(), text->end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
      throw std::runtime_error(fmt::format("field '{}' holds a control character", key));
  const nlohmann::json& threads = j.at("threads");
  if (!threads.is_number_integer() || threads.get<int64_t>() < 1 || threads.get<int64_t>() > 65536)
    throw std::runtime_error("threads is not a thread count");
  m.threads = threads.get<int>();
  // Figures no machine gives (a hand edit, a damaged file: 1e-300 GB/s would put every op under a ceiling of
  // nothing) make the cache corrupt, so it is measured again. The bounds are far outside any real machine's:
  // 0.1 GFLOP/s to 10 PFLOP/s, 0.1 GB/s to 100 TB/s. bf16 alone may be 0: no AVX512-BF16, no bf16 peak.
  auto plausible = [&](const char* key, bool bandwidth, bool zero_ok) {
    const double v = j.at(key).get<double>();
    if (std::string why = implausible_peak(key, v, bandwidth, zero_ok); !why.empty()) throw std::runtime_error(why);
    return v;
  };
  m.fp32_gflops = plausible("fp32_gflops", false, false);
  m.bf16_gflops = plausible("bf16_gflops", false, true);
  m.bandwidth_gbs = plausible("bandwidth_gbs", true, false);
  // The loops the bandwidth is the best of (absent from files written before they were measured).
  if (j.contains("bandwidth_loops")) {
    // A GPU's bandwidth is its datasheet's: loops beside it would describe a measurement no one made.
    if (m.gpu()) throw std::runtime_error("bandwidth_loops beside a GPU's datasheet bandwidth");
    if (std::string why = bandwidth_loops_from_json(j["bandwidth_loops"], m.bandwidth_gbs, m.bandwidth_loops);
        !why.empty())
      throw std::runtime_error(why);
  }
  m.sgemm_gflops = plausible("sgemm_gflops", false, false);
  m.library_fp32_gflops = libraries ? plausible("library_fp32_gflops", false, false) : m.fp32_gflops;
  m.library_bf16_gflops = libraries ? plausible("library_bf16_gflops", false, true) : m.bf16_gflops;
  return m;
}

// An entry of the cache: from_json's rules, and the memory loops, which every measurement of this version
// records (a compare.json or summary from before them may lack them; a cache entry is measured again).
MachinePeaks cache_entry(const nlohmann::json& e) {
  MachinePeaks m = from_json(e);
  if (!m.gpu() && !m.bandwidth_loops.measured()) throw std::runtime_error("field 'bandwidth_loops' is missing");
  return m;
}

}  // namespace

std::string implausible_peak(const char* key, double value, bool bandwidth, bool zero_ok) {
  const double hi = bandwidth ? kMaxPeakGbs : kMaxPeakGflops;
  if ((zero_ok && value == 0.0) || (value >= kMinPeakRate && value <= hi)) return "";
  return fmt::format("{} {:g} is outside {:g}..{:g} {}", key, value, kMinPeakRate, hi, bandwidth ? "GB/s" : "GFLOP/s");
}

MachinePeaks machine_peaks_from_json(const nlohmann::json& j) {
  try {
    return from_json(j);
  } catch (const std::exception& e) {  // the cache's reader notes it and re-measures; a caller here stops
    ATTNPROF_FAIL("{}", e.what());
  }
}

std::optional<std::string> memory_reclaim_note(const std::string& sysfs) {
  // The balloon driver lists each device's negotiated features as a string of '0'/'1', bit 0 first;
  // bit 5 is VIRTIO_BALLOON_F_REPORTING (free page reporting).
  constexpr size_t kReportingBit = 5;
  std::error_code ec;
  bool reporting = false;
  for (std::filesystem::directory_iterator it(sysfs + "/bus/virtio/drivers/virtio_balloon", ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().filename().string().rfind("virtio", 0) != 0) continue;
    std::ifstream in(it->path() / "features");
    std::string bits;
    if (in >> bits && bits.size() > kReportingBit && bits.find_first_not_of("01") == std::string::npos &&
        bits[kReportingBit] == '1')
      reporting = true;
  }
  if (!reporting) return std::nullopt;
  // The kernel reports free blocks of 2^order pages and waits ~2 s (page_reporting_delay) before it does.
  std::string blocks;
  std::ifstream order_in(sysfs + "/module/page_reporting/parameters/page_reporting_order");
  int order = -1;
  if (order_in >> order && order >= 0 && order <= 20) {
    const long sys_page = ::sysconf(_SC_PAGESIZE);
    const long page = sys_page > 0 ? sys_page : 4096;
    const double mib = double(page) * double(int64_t(1) << order) / double(1 << 20);
    blocks = mib >= 1.0 ? fmt::format(" in blocks of {:g} MiB", mib) : fmt::format(" in blocks of {:g} KiB", mib * 1024);
  }
  return fmt::format(
      "this VM gives freed memory back to its hypervisor (virtio-balloon free page reporting{}): memory freed and "
      "not reused within about 2 s is taken back, and touching it again waits for the host, so ops that allocate "
      "fresh buffers (naive's N×N tensors) vary from forward to forward",
      blocks);
}

namespace detail {

MachinePeaks measure_peak_figures(int threads, Isa isa) {
  MachinePeaks m;
  m.fp32_gflops = measure_fp32(threads, isa);
  m.bf16_gflops = measure_bf16(threads, isa);
  m.bandwidth_loops = measure_bandwidth(threads);
  m.bandwidth_gbs = m.bandwidth_loops.best();
  m.sgemm_gflops = measure_sgemm(threads);
  // OpenBLAS and oneDNN choose their kernels from CPUID: below the best ISA, their peaks are measured too.
  const Isa library_isa = available_isas().back();
  m.library_isa = std::string(isa_name(library_isa));
  m.library_fp32_gflops = library_isa == isa ? m.fp32_gflops : measure_fp32(threads, library_isa);
  m.library_bf16_gflops = library_isa == isa ? m.bf16_gflops : measure_bf16(threads, library_isa);
  return m;
}

MachinePeaks machine_peaks(int threads, bool force_measure, const PeakMeasurement& measure,
                           std::vector<std::string>* notes, const OtherWorkProbe* probe) {
  ATTNPROF_CHECK(threads >= 1, "machine_peaks needs threads >= 1, got {}", threads);
  const auto note = [notes](std::string text) {
    if (notes) notes->push_back(std::move(text));
  };
  const std::string cpu = cpu_model();
  const std::string signature = cpu_signature();
  const Isa isa = best_isa();
  const std::string isa_s(isa_name(isa));
  const std::string dir = cache_dir();
  const std::string path = dir.empty() ? std::string() : dir + "/" + kPeaksCacheFile;
  if (path.empty())
    note("the machine peaks are not cached (no XDG_CACHE_HOME, HOME or home directory for this user): measured "
         "on every run");

  // The cache: {"version": 6, "entries": [MachinePeaks + "cpu_signature" + "load_average" + "other_cpus"...]}, one
  // entry per (CPU signature, ISA, threads). An entry without the signature matches nothing. Anything unreadable is
  // ignored with a note. Older versions' entries are measured again: version 1 summed each thread's best FMA
  // rate, which overstated the peak wherever two threads shared a core (--threads above the core count);
  // version 2 had no library peaks; version 3 timed the scalar ISA's FMA peak through memory (a fraction of it);
  // version 4 ran the AVX-512 loops on 12 chains, 8 % under a Zen 5 core's bf16 peak (peak_loops.h); version 5
  // measured the bandwidth with STREAM triad alone, which in-place ops beat by a third.
  constexpr int kCacheVersion = 6;
  nlohmann::json cache = {{"version", kCacheVersion}, {"entries", nlohmann::json::array()}};
  if (!path.empty() && ::access(path.c_str(), F_OK) == 0) {
    try {
      // A cache holds a few hundred bytes per (CPU, ISA, threads): one over a megabyte is no cache of ours, and
      // is not parsed (a file of nested brackets would take gigabytes to).
      std::error_code ec;
      if (const auto size = std::filesystem::file_size(path, ec); !ec && size > (uintmax_t(1) << 20))
        throw std::runtime_error(fmt::format("{} bytes, more than a cache of peaks holds", size));
      nlohmann::json j = nlohmann::json::parse(io::read_file(path));
      if (j.is_object() && j.contains("version") && j["version"].is_number_integer() &&
          j["version"].get<int64_t>() >= 1 && j["version"].get<int64_t>() < kCacheVersion) {
        note(fmt::format("the machine-peaks cache {} is from an older attnprof; re-measuring", path));
        j = cache;
      }
      if (!j.is_object() || j.value("version", 0) != kCacheVersion || !j.at("entries").is_array())
        throw std::runtime_error("unexpected layout");
      for (const auto& e : j.at("entries")) (void)cache_entry(e);  // validate every entry
      cache = std::move(j);
    } catch (const std::exception& e) {
      note(fmt::format("ignoring corrupt machine-peaks cache {} ({}); re-measuring", path, e.what()));
    }
  }
  // This machine's key, less the signature: an entry matches with the signature equal, and an unsigned one
  // (an older cache) is replaced when this machine's peaks are written.
  auto same_key = [&](const MachinePeaks& m) { return m.cpu == cpu && m.isa == isa_s && m.threads == threads; };
  // Busy: more other work than the CPUs the measurement's threads leave free, plus half a CPU of slack. A
  // measurement records the other work it ran beside ("other_cpus"); older entries have only the load average
  // at their start, which lags a minute behind and so also counts what ran just before.
  const int hw = online_cpus();
  const double busy_above = busy_mark(threads, hw);
  const double load = load_average();
  // What a measurement ran beside: its other work where /proc/stat could be read, else the load average.
  auto beside_figure = [](double other, double at_load) { return std::isfinite(other) ? other : at_load; };
  auto beside_text = [&](double other, double at_load) {
    return std::isfinite(other) ? fmt::format("other work used {:.1f} of {} CPUs", other, hw)
                                : fmt::format("load average {:.1f} on {} CPUs", at_load, hw);
  };
  // vdpbf16ps does two multiply-adds per lane where an FMA does one: on Zen 4 at the FMA's rate (twice its FLOPs),
  // on Intel's AVX512-BF16 cores at half of it (the same FLOPs). A bf16 dot-product peak well under the fp32 FMA
  // peak (under 90 % of it: a tie measured with noise stays above) is a disturbed measurement.
  // The first (bf16, fp32) pair that is, the dispatched ISA's before the libraries'.
  const auto bf16_under_fp32 = [](const MachinePeaks& x) -> std::optional<std::pair<double, double>> {
    constexpr double kLeast = 0.9;
    for (const auto& [bf16, fp32] : {std::pair{x.bf16_gflops, x.fp32_gflops},
                                     std::pair{x.library_bf16_gflops, x.library_fp32_gflops}})
      if (bf16 > 0 && bf16 < kLeast * fp32) return std::pair{bf16, fp32};
    return std::nullopt;
  };
  if (!force_measure)
    for (const auto& e : cache["entries"]) {
      MachinePeaks m = cache_entry(e);
      if (!same_key(m) || m.cpu_signature != signature) continue;
      auto number = [&](const char* key) {
        return e.contains(key) && e[key].is_number() ? e[key].get<double>() : std::nan("");
      };
      const double other = number("other_cpus"), cached_load = number("load_average");
      // Other work is between none and every CPU (the entry is this machine's); a load average is not negative.
      if (other < 0 || other > double(hw) || cached_load < 0) {
        note(fmt::format("ignoring corrupt machine-peaks cache {} (other_cpus {}, load_average {}: no measurement "
                         "records that); re-measuring",
                         path, other, cached_load));
        break;
      }
      if (const auto low = bf16_under_fp32(m)) {
        note(fmt::format("the cached machine peaks have a bf16 dot-product peak under 90 % of the fp32 FMA peak "
                         "({:.1f} against {:.1f} GFLOP/s), a disturbed measurement; measuring them again",
                         low->first, low->second));
        break;
      }
      if (!(beside_figure(other, cached_load) > busy_above)) {  // an entry with neither counts as idle
        m.from_cache = true;
        return m;
      }
      // Peaks cached from a busy machine are low, and every later roofline would rest on them: measured again
      // once the machine is idle, kept with a note while it is not. Idle means other work below half the busy
      // mark over a quarter-second sample (the load average, which lags a minute behind, where /proc/stat
      // cannot be read).
      const std::string what = beside_text(other, cached_load);
      if (beside_figure(probe ? probe->now() : other_work_now(), load) >= busy_above / 2) {
        note(fmt::format("the cached machine peaks were measured on a busy machine ({}) and may be low; they are "
                         "measured again once it is idle, or now with `attnprof roofline --peaks-only --remeasure`",
                         what));
        m.from_cache = true;
        m.measured_busy = what;
        return m;
      }
      note(fmt::format("the cached machine peaks were measured on a busy machine ({}); measuring them again now "
                       "that it is idle",
                       what));
      break;
    }

  std::optional<OtherWork> beside;  // /proc/stat's readings, unless a probe stands in for them
  if (!probe) beside.emplace();
  const auto t0 = std::chrono::steady_clock::now();
  MachinePeaks m = measure(threads, isa);
  // A bf16 peak well under the fp32 one (bf16_under_fp32: another process took a CPU during its loop): the peaks
  // are measured once more and each figure keeps its larger reading: each is a best of
  // several passes, so the larger is the nearer to the machine's.
  if (bf16_under_fp32(m)) {
    const MachinePeaks again = measure(threads, isa);
    for (auto [mine, theirs] : {std::pair{&m.fp32_gflops, again.fp32_gflops}, std::pair{&m.bf16_gflops, again.bf16_gflops},
                                std::pair{&m.bandwidth_loops.update, again.bandwidth_loops.update},
                                std::pair{&m.bandwidth_loops.copy, again.bandwidth_loops.copy},
                                std::pair{&m.bandwidth_loops.triad, again.bandwidth_loops.triad},
                                std::pair{&m.sgemm_gflops, again.sgemm_gflops},
                                std::pair{&m.library_fp32_gflops, again.library_fp32_gflops},
                                std::pair{&m.library_bf16_gflops, again.library_bf16_gflops}})
      *mine = std::max(*mine, theirs);
    m.bandwidth_gbs = m.bandwidth_loops.best();  // the roof is the best loop, as measure_peak_figures sets it
    if (bf16_under_fp32(m))
      note(fmt::format("the bf16 dot-product peak measured under 90 % of the fp32 FMA peak twice (bf16 {:.1f} against "
                       "fp32 {:.1f} GFLOP/s{}), which no CPU with vdpbf16ps runs: the machine disturbed the measurement; "
                       "measure again on an idle machine with `attnprof roofline --peaks-only --remeasure`",
                       m.bf16_gflops, m.fp32_gflops,
                       m.library_bf16_gflops > 0 && m.library_isa != isa_s
                           ? fmt::format("; the libraries' ISA: bf16 {:.1f} against fp32 {:.1f}",
                                         m.library_bf16_gflops, m.library_fp32_gflops)
                           : std::string()));
  }
  const double other =
      probe ? probe->beside(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) : beside->cpus();
  // The libraries' ISA is the CPU's best, which runs the dispatched ISA's code as well: its peak is at least that
  // one's. Measured below it, the machine disturbed the libraries' measurement, which is then taken as no lower.
  for (auto [lib, own, what] : {std::tuple{&m.library_fp32_gflops, m.fp32_gflops, "fp32"},
                                std::tuple{&m.library_bf16_gflops, m.bf16_gflops, "bf16"}})
    if (*lib < own) {
      note(fmt::format("the {} peak of the libraries' ISA ({}) measured {:.1f} GFLOP/s, below the {:.1f} of {}, whose "
                       "code it also runs: a disturbed measurement, taken as {:.1f}",
                       what, m.library_isa, *lib, own, isa_s, own));
      *lib = own;
    }
  m.cpu = cpu;
  m.cpu_signature = signature;
  m.isa = isa_s;
  m.threads = threads;
  {
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &utc);
    m.measured_at = when;
  }
  m.from_cache = false;
  // Peaks measured on a busy machine are low and are cached; say so (the figures stay honest: they are what
  // was measured) and record the other work next to them.
  if (beside_figure(other, load) > busy_above) {
    m.measured_busy = beside_text(other, load);
    note(fmt::format("the machine was busy while the peaks were measured ({}): they may be low; they are measured "
                     "again once it is idle, or with `attnprof roofline --peaks-only --remeasure`",
                     m.measured_busy));
  }

  if (!path.empty()) {
    auto& entries = cache["entries"];
    for (auto it = entries.begin(); it != entries.end();) {
      const MachinePeaks old = cache_entry(*it);
      const bool replaced = same_key(old) && (old.cpu_signature == signature || old.cpu_signature.empty());
      it = replaced ? entries.erase(it) : it + 1;
    }
    nlohmann::json entry = m;  // with its cpu_signature
    entry["load_average"] = load;
    if (std::isfinite(other)) entry["other_cpus"] = other;
    entries.push_back(std::move(entry));
    try {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);  // ~/.cache may not exist yet; a failure shows below
      io::write_file_atomic(path, cache.dump(2) + "\n", /*now=*/true);  // a cache outlives a failed command
    } catch (const Error& e) {
      note(fmt::format("could not cache machine peaks: {}", e.what()));
    }
  }
  return m;
}

}  // namespace detail

MachinePeaks machine_peaks(int threads, bool force_measure, std::vector<std::string>* notes) {
  return detail::machine_peaks(threads, force_measure, detail::measure_peak_figures, notes);
}

}  // namespace attnprof::analysis
