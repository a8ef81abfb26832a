// The lines printed beside the tables: how the timed forwards spread and what shared the CPUs with them
// (timing_notes, spread_json, cpu_sharing_json), which GEMM ran naive's bf16 matmul, and the notes on peaks
// (over_peak_note, library_peaks_note). compare, profile, sweep, diff and the HTML report print the same words.
#include <algorithm>
#include <cmath>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "attnprof/error.h"
#include "attnprof/report.h"

namespace attnprof::report {

// Up to this many subjects that shared the CPUs get a Busy line each; more share one line.
constexpr int kBusyLinesEach = 3;

double forward_spread(const std::vector<double>& forward_ms) {
  if (forward_ms.empty()) return 0.0;
  const auto [lo, hi] = std::minmax_element(forward_ms.begin(), forward_ms.end());
  return *lo > 0 ? *hi / *lo : 0.0;
}

nlohmann::json spread_json(const std::vector<double>& forward_ms) {
  return forward_ms.size() > 1 ? nlohmann::json(forward_spread(forward_ms)) : nlohmann::json();
}

nlohmann::json cpu_sharing_json(const std::optional<analysis::CpuSharing>& s) {
  if (!s) return nullptr;
  return {{"other_cpus", s->other_cpus}, {"cpus", s->cpus}, {"threads", s->threads}};
}

std::optional<analysis::CpuSharing> cpu_sharing_of(const nlohmann::json& record) {
  if (!record.is_object() || !record.contains("cpu_sharing")) return std::nullopt;
  const nlohmann::json& j = record["cpu_sharing"];
  if (!j.is_object()) return std::nullopt;
  const auto number = [&](const char* k) {
    return j.contains(k) && j[k].is_number() ? j[k].get<double>() : std::nan("");
  };
  const double other = number("other_cpus"), cpus = number("cpus"), threads = number("threads");
  // Other work is between none and every CPU (files written before it was capped there may be a tick over).
  if (!(other >= 0) || !(cpus >= 1 && cpus < 1e6) || !(threads >= 1 && threads < 1e6) || !(other <= cpus + 1))
    return std::nullopt;
  return analysis::CpuSharing{other, int(cpus), int(threads)};
}

std::vector<std::string> timing_notes(const std::vector<Timings>& timings, std::string_view machine_note,
                                      std::string_view more_forwards) {
  std::vector<std::string> lines;
  // Forwards that shared the CPUs: consistently slow, so no spread gives them away.
  std::vector<const Timings*> shared;
  bool threaded = false;
  for (const Timings& t : timings)
    if (t.sharing && t.sharing->shared()) {
      shared.push_back(&t);
      threaded = threaded || t.sharing->threads > 1;
    }
  const int busy = static_cast<int>(shared.size());
  // "of the N timed here": a run diff passes a subject for each side of every variant, timed or not.
  const auto timed = std::count_if(timings.begin(), timings.end(),
                                   [](const Timings& t) { return !t.forward_ms.empty() || t.sharing; });
  const auto threads_text = [](int n) { return fmt::format("{} thread{}", n, n == 1 ? "" : "s"); };
  if (busy <= kBusyLinesEach) {
    for (const Timings* t : shared) {
      const analysis::CpuSharing& s = *t->sharing;
      lines.push_back(fmt::format("Busy: other work used {:.1f} of {} CPUs while {} ran on {}: its forwards waited "
                                  "for a CPU, so its time is the machine's as much as the code's.",
                                  s.other_cpus, s.cpus, t->subject, threads_text(s.threads)));
    }
  } else {
    // A loaded machine marks most subjects of a sweep or a comparison alike: one line names them all, each with
    // its own figure, where a line apiece had repeated the same sentence down the page.
    double lo = INFINITY, hi = 0;
    bool same_cpus = true, same_threads = true;
    for (const Timings* t : shared) {
      lo = std::min(lo, t->sharing->other_cpus);
      hi = std::max(hi, t->sharing->other_cpus);
      same_cpus = same_cpus && t->sharing->cpus == shared[0]->sharing->cpus;
      same_threads = same_threads && t->sharing->threads == shared[0]->sharing->threads;
    }
    std::vector<std::string> each;
    for (const Timings* t : shared) {
      const analysis::CpuSharing& s = *t->sharing;
      each.push_back(fmt::format("{} ({:.1f}{}{})", t->subject, s.other_cpus,
                                 same_cpus ? "" : fmt::format(" of {} CPUs", s.cpus),
                                 same_threads ? "" : ", " + threads_text(s.threads)));
    }
    const std::string range = std::round(lo * 10) == std::round(hi * 10) ? fmt::format("{:.1f}", lo)
                                                                          : fmt::format("{:.1f} to {:.1f}", lo, hi);
    lines.push_back(fmt::format("Busy: other work used {}{} CPUs while {} of the {} timed here ran{}: {}: their forwards waited for "
                                "a CPU, so their times are the machine's as much as the code's.",
                                range, same_cpus ? fmt::format(" of {}", shared[0]->sharing->cpus) : "", busy,
                                timed,
                                same_threads ? " on " + threads_text(shared[0]->sharing->threads) : "",
                                fmt::join(each, ", ")));
  }
  if (busy > 0)
    lines.push_back(fmt::format("Re-run on an idle machine{} before comparing {}.",
                                threaded ? " (or with fewer --threads, which leaves the other work a CPU)" : "",
                                busy == 1 ? "it" : "them"));
  // Stretches too short to tell: a busy machine slows every forward alike, so silence would read as "idle".
  const double min_s = analysis::other_work_min_seconds();
  std::vector<std::string> short_runs;
  for (const Timings& t : timings)
    if (!t.sharing && t.window_s >= 0 && t.window_s < min_s)
      short_runs.push_back(fmt::format("{} ({})", t.subject, format_time_ns(t.window_s * 1e9)));
  if (!short_runs.empty())
    lines.push_back(fmt::format("Not judged: whether other work shared the CPUs with {}: {} warm-up and timed forwards "
                                "took under the {:.2f} s that /proc/stat's ticks need (leave --warmup at its default, "
                                "or {}).",
                                fmt::join(short_runs, ", "), short_runs.size() == 1 ? "its" : "their", min_s,
                                more_forwards));
  // Forwards that disagree: the median may stand on disturbed ones.
  int noisy = 0;
  for (const Timings& t : timings) {
    if (!is_noisy(t.forward_ms)) continue;
    ++noisy;
    // Every forward while they fit on a line; past eight, the range and the median.
    std::string f;
    if (t.forward_ms.size() <= 8) {
      for (double ms : t.forward_ms) f += (f.empty() ? "" : " / ") + format_time_ns(ms * 1e6);
    } else {
      const auto [lo, hi] = std::minmax_element(t.forward_ms.begin(), t.forward_ms.end());
      f = fmt::format("{} to {} (median {} of {})", format_time_ns(*lo * 1e6), format_time_ns(*hi * 1e6),
                      format_time_ns(analysis::median(t.forward_ms) * 1e6), t.forward_ms.size());
    }
    // Two decimals, or three where two would round down onto the threshold (1.151 is noisy, "1.15x" reads not).
    const double spread = forward_spread(t.forward_ms);
    const int digits = std::round(spread * 100) / 100 <= kNoisySpread ? 3 : 2;
    lines.push_back(fmt::format("Noisy: {} took {} per forward (slowest {:.{}f}x the fastest).", t.subject, f, spread,
                                digits));
  }
  if (noisy > 0)
    lines.push_back(fmt::format("{} may stand on disturbed forwards (another process, cold caches at small sizes, or "
                                "fresh pages faulted in by the ops that allocate, which `attnprof profile --counters` "
                                "counts per op): re-run, or {}, before comparing {}.",
                                noisy == 1 ? "Its median" : "Their medians", more_forwards,
                                noisy == 1 ? "it" : "them"));
  if (noisy > 0 && !machine_note.empty()) lines.push_back(fmt::format("Note: {}.", machine_note));
  // Forwards whose thread was off the CPU (task-clock, with --counters): a spread cannot show them when every
  // forward was, nor /proc/stat when the other CPUs sat idle.
  for (const Timings& t : timings)
    if (std::string line = off_cpu_line(t.subject, t.on_cpu, t.forward_ms); !line.empty()) lines.push_back(std::move(line));
  return lines;
}

std::vector<UnevenOp> uneven_ops(const analysis::KeyAverages& ka) {
  std::vector<UnevenOp> found;
  // A device profile's table is in device time; its host self times (the waits on the GPU among them) are not
  // what it shows.
  if (ka.has_device) return {};
  for (const analysis::OpStats& s : ka.rows) {
    const size_t n = s.step_self_ns.size();
    if (n == 0 || analysis::is_annotation(s.name, s.category)) continue;
    const double med = analysis::median(s.step_self_ns), mean = s.self_ns / double(n);
    if (!is_uneven(mean, med, ka.self_total_ns / double(n), double(n))) continue;
    UnevenOp u;
    u.name = s.name;
    u.label = s.input_shapes.empty() ? s.name
              : s.input_types.empty() ? fmt::format("{} (inputs {})", s.name, s.input_shapes)
                                      : fmt::format("{} (inputs {}, types {})", s.name, s.input_shapes, s.input_types);
    u.median_ns = med;
    u.mean_ns = mean;
    u.slowest_ns = *std::max_element(s.step_self_ns.begin(), s.step_self_ns.end());
    u.over = size_t(std::count_if(s.step_self_ns.begin(), s.step_self_ns.end(),
                                  [&](double v) { return v > kNoisySpread * med; }));
    u.forwards = n;
    found.push_back(std::move(u));
  }
  std::stable_sort(found.begin(), found.end(), [](const UnevenOp& a, const UnevenOp& b) {
    return (a.mean_ns - a.median_ns) * double(a.forwards) > (b.mean_ns - b.median_ns) * double(b.forwards);
  });
  if (found.size() > 4) found.resize(4);
  return found;
}

std::string uneven_line(const UnevenOp& u, std::string_view owner, std::string_view consequence) {
  return fmt::format("Uneven: {}'s self CPU per forward{}: median {}, mean {}, slowest {} ({} of {} forwards over "
                     "{:.2f}x the median); {}.",
                     u.label, owner.empty() ? "" : fmt::format(" in {}", owner), format_time_ns(u.median_ns),
                     format_time_ns(u.mean_ns), format_time_ns(u.slowest_ns), u.over, u.forwards, kNoisySpread,
                     consequence);
}

std::string spoken_list(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return s;
}

std::vector<std::string> uneven_op_notes(const analysis::KeyAverages& ka) {
  std::vector<std::string> lines;
  for (const UnevenOp& u : uneven_ops(ka))
    lines.push_back(uneven_line(u, "", fmt::format("the table's totals and averages include {}", u.over == 1 ? "it" : "them")));
  return lines;
}

std::string describe_bf16_matmul(std::string_view key) {
  if (key == "onednn") return "oneDNN's bf16 matmul (bf16 inputs, fp32 accumulation)";
  if (key == "fp32-widened-sgemm")
    return "bf16 widened to fp32 for OpenBLAS sgemm, rounded to bf16 once (the path below AVX-512, where oneDNN 2.6 "
           "has no bf16 matmul; an ATTNPROF_ISA below avx512 takes it too)";
  return "";
}

std::string unfused_matmul_note(std::string_view dtype, std::string_view bf16_key, std::string_view who) {
  if (dtype == "fp16")
    return fmt::format("fp16 matmul ({}): fp16 widened to fp32 for OpenBLAS sgemm, rounded to fp16 once (oneDNN's "
                       "fp16 matmul needs AVX512-FP16); every fp16 op computes in fp32 on the FMA units.",
                       who);
  const std::string gemm = dtype == "bf16" ? describe_bf16_matmul(bf16_key) : "";
  return gemm.empty() ? "" : fmt::format("bf16 matmul ({}): {}.", who, gemm);
}

std::string over_peak_note(bool gpu, const std::vector<std::string>& over) {
  if (over.empty()) return "";
  std::string names;
  for (const std::string& n : over) names += (names.empty() ? "" : ", ") + n;
  if (gpu)
    return fmt::format("Over 100 %: {} ran above the GPU's datasheet peak, which no kernel reaches: the device "
                       "clock ran above the datasheet's boost clock, or the times are short of what ran.\n",
                       names);
  return fmt::format("Over 100 %: {} ran above the measured peak, which no code reaches: the peak was measured low, "
                     "on a busy machine; measure it again on an idle machine with "
                     "`attnprof roofline --peaks-only --remeasure`.\n",
                     names);
}

namespace {
// The rows that ran: a time above 0.
std::vector<const RowTime*> rows_that_ran(const std::vector<RowTime>& rows) {
  std::vector<const RowTime*> ran;
  for (const RowTime& r : rows)
    if (r.ms > 0 && std::isfinite(r.ms)) ran.push_back(&r);
  return ran;
}

const RowTime* base_of(const std::vector<const RowTime*>& ran) {
  if (ran.size() < 2) return nullptr;
  const auto naive = std::find_if(ran.begin(), ran.end(), [](const RowTime* r) { return r->name == "naive"; });
  return *(naive != ran.end() ? naive : ran.begin());
}
}  // namespace

const RowTime* speedup_base(const std::vector<RowTime>& rows) { return base_of(rows_that_ran(rows)); }

std::string speedup_line(const std::vector<RowTime>& rows) {
  const std::vector<const RowTime*> ran = rows_that_ran(rows);
  const RowTime* b = base_of(ran);
  if (!b) return "";
  const RowTime& base = *b;
  std::vector<std::string> each;
  bool marked = false;
  for (const RowTime* r : ran)
    if (r != &base) {
      const double x = base.ms / r->ms;
      const bool mark = base.disturbed || r->disturbed;
      marked = marked || mark;
      each.push_back(fmt::format("{} {}x{}", r->name,
                                 x < 0.1 ? fmt::format("{:.2g}", x) : fmt::format("{:.{}f}", x, x < 10 ? 2 : 1),
                                 mark ? "*" : ""));
    }
  return fmt::format("Speed-up over {} (its ms per forward over each row's): {}.{}", base.name, fmt::join(each, ", "),
                     marked ? disturbed_ratio_note() : "");
}

std::string blog_ratio_line(const std::vector<RowTime>& rows) {
  const RowTime* math = nullptr;
  const RowTime* inplace = nullptr;
  for (const RowTime* r : rows_that_ran(rows)) {
    if (r->name == "sdpa-math") math = r;
    if (r->name == "inplace") inplace = r;
  }
  if (!math || !inplace || !(math->ms > 0) || !(inplace->ms > 0)) return "";
  const double x = math->ms / inplace->ms;
  const bool mark = math->disturbed || inplace->disturbed;
  // A `*` here is one of the speed-up line's too (both rows are in it, and a marked row marks its ratio), which
  // explains it: the note is not printed twice.
  return fmt::format("Blog's ratio: sdpa-math {:.2f}x{} {} than inplace (on its A100: 3.7x slower).",
                     x >= 1 ? x : 1 / x, mark ? "*" : "", x >= 1 ? "slower" : "faster");
}

nlohmann::json on_cpu_json(const std::vector<double>& on_cpu) {
  if (std::none_of(on_cpu.begin(), on_cpu.end(), [](double x) { return x >= 0; })) return nullptr;
  nlohmann::json a = nlohmann::json::array();
  for (double x : on_cpu) a.push_back(x >= 0 ? nlohmann::json(x) : nlohmann::json());
  return a;
}

std::vector<double> on_cpu_of(const nlohmann::json& record) {
  std::vector<double> out;
  if (!record.is_object() || !record.contains("forward_on_cpu") || !record["forward_on_cpu"].is_array()) return out;
  for (const nlohmann::json& x : record["forward_on_cpu"])
    out.push_back(x.is_number() && x.get<double>() >= 0 && x.get<double>() <= 1 ? x.get<double>() : -1.0);
  return out;
}

namespace {
// A forward's share on a CPU that was read (not -1) and falls under the mark.
bool off_cpu(double share) { return share >= 0 && share < kOnCpuMark; }
}  // namespace

bool any_off_cpu(const std::vector<double>& on_cpu) { return std::any_of(on_cpu.begin(), on_cpu.end(), off_cpu); }

std::string off_cpu_line(const std::string& subject, const std::vector<double>& on_cpu,
                         const std::vector<double>& forward_ms) {
  std::vector<size_t> off;
  for (size_t i = 0; i < on_cpu.size() && i < forward_ms.size(); ++i)
    if (off_cpu(on_cpu[i])) off.push_back(i);
  if (off.empty()) return "";
  std::stable_sort(off.begin(), off.end(), [&](size_t a, size_t b) { return on_cpu[a] < on_cpu[b]; });
  std::vector<std::string> each;
  // Whole percents rounded down: a share under the mark never prints as the mark.
  for (size_t k = 0; k < off.size() && k < 3; ++k)
    each.push_back(fmt::format("{:.0f} % of forward {}'s {}", std::floor(100.0 * on_cpu[off[k]]), off[k] + 1,
                               format_time_ns(forward_ms[off[k]] * 1e6)));
  const size_t timed = std::count_if(on_cpu.begin(), on_cpu.end(), [](double x) { return x >= 0; });
  return fmt::format("Off the CPU: {}'s calling thread ran on a CPU for {}{} (its task-clock over the forward's "
                     "wall; {} of {} forward{} under {:.0f} %): the scheduler gave its CPU to other work, or it slept "
                     "waiting for its team, so {} time is the machine's as much as the code's.",
                     subject, fmt::join(each, ", "), off.size() > 3 ? fmt::format(" and {} more", off.size() - 3) : "",
                     off.size(), timed, timed == 1 ? "" : "s", 100.0 * kOnCpuMark,
                     off.size() == 1 ? "that forward's" : "those forwards'");
}

std::string_view disturbed_ratio_note() {
  return " *: either side's forwards shared the CPUs with other work, disagreed or ran off the CPU (the Busy, "
         "Noisy and Off the CPU lines): a ratio to re-measure before trusting.";
}

namespace {
// A roofline floor under a millisecond: a forward's fixed costs (some microseconds each) count beside its work.
constexpr double kFixedCostFloorMs = 1.0;

bool far_from_floor(const RowTime& r) {
  return r.floor_ms > 0 && r.ms > kFarFromFloor * r.floor_ms && std::isfinite(r.ms);
}
// A floor set by FLOPs, as compare's Bound column calls it.
bool compute_floor(const RowTime& r) {
  return r.floor_memory_share >= 0 && std::string_view(analysis::floor_bound_kind(r.floor_memory_share)) == "compute";
}
// Where such a row's time went: a row held by its FLOPs computed below the peak; one held by its bytes (or not
// known) lost its time around the work the cost model counts.
// `steps`: where the kernel's own split of its time is, in the output that says this. `small`: the row's floor is
// under kFixedCostFloorMs, where a forward's fixed costs (a parallel region's start, a few allocations, the zones)
// are no longer small beside its work.
std::string far_from_floor_causes(bool gpu, bool compute, bool small,
                                  std::string_view steps = "the Inside line of a flash row") {
  if (compute)
    return gpu ? "went to kernels below the tensor-core peak (low occupancy, the softmax between the MMAs, a grid "
                 "too small to fill the GPU)"
               : fmt::format("went to arithmetic below the peak (the work between its products, a fused kernel's "
                             "softmax and loads, which {} times; the products' own efficiency; threads waiting on "
                             "other work)",
                             steps);
  return std::string("went where the cost model does not look (") +
         (gpu ? "launches and kernels too small to fill the GPU, or waits between them"
              : "fresh pages faulted in by the ops that allocate, which `attnprof profile --counters` counts per op; "
                + std::string(small ? "fixed costs at a small shape; " : "") +
                "threads waiting on each other or on other work") +
         ")";
}
}  // namespace

std::vector<std::string> far_from_floor_notes(const std::vector<RowTime>& rows, bool gpu) {
  std::vector<std::string> lines;
  for (const RowTime& r : rows) {
    if (!far_from_floor(r)) continue;
    lines.push_back(fmt::format(
        "Far from the floor: {} took {} per forward, {:.1f}x its roofline floor of {}: its time {}.",
        r.name, format_time_ns(r.ms * 1e6), r.ms / r.floor_ms, format_time_ns(r.floor_ms * 1e6),
        far_from_floor_causes(gpu, compute_floor(r), r.floor_ms < kFixedCostFloorMs)));
  }
  return lines;
}

std::string far_from_floor_summary(const std::vector<RowTime>& rows, bool gpu) {
  std::vector<std::string> names, held_by_bytes, held_by_flops;
  bool small_bytes = false, small_flops = false;  // a group with a row whose floor is small
  for (const RowTime& r : rows)
    if (far_from_floor(r)) {
      names.push_back(fmt::format("{} {:.1f}x", r.name, r.ms / r.floor_ms));
      (compute_floor(r) ? held_by_flops : held_by_bytes).push_back(r.name);
      (compute_floor(r) ? small_flops : small_bytes) |= r.floor_ms < kFixedCostFloorMs;
    }
  if (names.empty()) return "";
  std::string s = fmt::format("Far from the floor (past {:.0f}x its roofline floor, the × floor column): {}.",
                              kFarFromFloor, fmt::join(names, ", "));
  // One sentence of causes per kind of floor; a kind's rows are named when both kinds are present.
  const bool both = !held_by_bytes.empty() && !held_by_flops.empty();
  for (const auto& [group, compute, small] :
       {std::tuple{&held_by_bytes, false, small_bytes}, std::tuple{&held_by_flops, true, small_flops}}) {
    if (group->empty()) continue;
    const std::string who = both ? fmt::format("The time of {}", fmt::join(*group, ", "))
                                 : group->size() == 1 ? "Its time" : "Their time";
    s += fmt::format(" {} {}.", who, far_from_floor_causes(gpu, compute, small, "the chart of the kernel's steps"));
  }
  return s;
}

std::string memory_time_line(const std::vector<RowTime>& rows, bool gpu) {
  std::vector<std::string> each, above;
  for (const RowTime& r : rows) {
    if (!(r.memory_time_share >= 0 && r.memory_time_share <= 1)) continue;
    const bool floor_known = r.floor_memory_share >= 0 && r.floor_memory_share <= 1;
    each.push_back(fmt::format("{} {:.0f} %{}", r.name, 100 * r.memory_time_share,
                               floor_known ? fmt::format(" (floor {:.0f} %)", 100 * r.floor_memory_share) : ""));
    // Ten points over the floor's share: its memory-bound ops ran further from their ceiling than the rest.
    if (floor_known && r.memory_time_share >= r.floor_memory_share + 0.1 - 1e-9) above.push_back(r.name);
  }
  if (each.empty()) return "";
  std::string s = fmt::format("Time in memory-bound ops (each row's share of its self time in ops whose FLOP/B is "
                              "below their ridge, beside its floor's memory share, which Bound reads): {}.",
                              fmt::join(each, ", "));
  if (!above.empty())
    s += fmt::format(" {} spent more of {} time there than {} floor: those {} ran further below the bandwidth than "
                     "the others below their peak{}.",
                     spoken_list(above), above.size() == 1 ? "its" : "their",
                     above.size() == 1 ? "its" : "their", gpu ? "kernels" : "ops",
                     gpu ? "" : " (fresh pages each forward: `attnprof profile --counters`)");
  return s;
}

std::string bound_time_line(const analysis::BoundTime& t, bool device) {
  const double total = t.total_ns;
  if (!(total > 0) || !(t.memory_ns + t.compute_ns > 0)) return "";
  const char* what = device ? "activities" : "ops";
  // Each kind's share and its ops', as the table's Self % columns give them (the same denominator).
  const auto kind = [&](const char* bound, double ns, const std::vector<analysis::BoundTime::Op>& list) {
    std::vector<std::string> each;
    for (const analysis::BoundTime::Op& op : list) each.push_back(fmt::format("{} {:.1f} %", op.name, 100 * op.ns / total));
    return list.empty() ? fmt::format("no {}-bound {}", bound, what)
                        : fmt::format("{}-bound {} {:.1f} % ({})", bound, what, 100 * ns / total, fmt::join(each, ", "));
  };
  std::string s = fmt::format("Time by bound, of the Self {} time total: {}; {}", device ? "CUDA" : "CPU",
                              kind("memory", t.memory_ns, t.memory_ops), kind("compute", t.compute_ns, t.compute_ops));
  // The rest: on the CPU the zones that hold no work of their own; on a GPU the activities no cost model covers
  // (one of several a zone launched, or one no zone launched), which would otherwise go unaccounted.
  if (const double other = t.other_ns(); other > 0)
    s += fmt::format("; {} {:.1f} %", device ? "activities without a cost model" : "annotations', steps' and wrappers' own time",
                     100 * other / total);
  return s + fmt::format(". Each {} is judged by its FLOP/B against its ridge (the Bound column): a memory-bound "
                         "one's % roof says how near the bandwidth it ran{}.",
                         device ? "activity" : "op", device ? "" : ", and --counters counts the fresh pages it faulted in");
}

std::string library_peaks_note(const analysis::MachinePeaks& m) {
  if (!m.library_isa_differs()) return "";
  const std::string bf16 = m.library_bf16_gflops > 0 ? fmt::format(" / bf16 {:.1f}", m.library_bf16_gflops) : "";
  return fmt::format("matmul (OpenBLAS/oneDNN) billed at the {} peaks (fp32 {:.1f}{} GFLOP/s): the libraries choose "
                     "their own ISA",
                     m.library_isa, m.library_fp32_gflops, bf16);
}

}  // namespace attnprof::report
