// attnprof roofline [VARIANT...]: the machine's measured ceilings (FMA and bf16-dot GFLOP/s, memory
// bandwidth; cached per CPU, ISA and thread count) and every op of each variant's profile placed under them:
// arithmetic intensity from the cost model, attainable and achieved GFLOP/s, memory- or compute-bound.
// `--device cuda`: the GPU's datasheet ceilings, and every kernel, copy and fill of the CUDA variants placed in
// device time (CUPTI). `--from DIR`: the ops an earlier `attnprof compare --out DIR` (or `profile --out DIR`)
// measured, placed under the peaks that run recorded, without running anything (a CUDA run's too, on a machine
// without a GPU).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string_view>

#include <fmt/ranges.h>

#include "attnprof/cuda.h"
#include "attnprof/ops.h"
#include "attnprof/report.h"
#include "common.h"

namespace attnprof::cli {
namespace {

struct RooflineArgs {
  CommonOptions common;
  std::vector<std::string> variants;
  std::string backend;
  bool remeasure = false;
  bool peaks_only = false;
  bool variants_given = false;  // named on the command line (not the default list)
  std::string device = "cpu";
  std::string from;                       // an earlier compare's directory, or its compare.json
  std::vector<std::string> flags_given;   // every option given, as its long name ("--out")
  bool given(std::string_view flag) const {
    return std::find(flags_given.begin(), flags_given.end(), flag) != flags_given.end();
  }
};

// `memory_reclaim`: analysis::memory_reclaim_note() or "" on a CPU; a GPU's datasheet ceilings have none.
nlohmann::json machine_json(const analysis::MachinePeaks& m, bool gpu, const std::string& memory_reclaim) {
  nlohmann::json j = m;
  j["ridge_fp32"] = m.bandwidth_gbs > 0 ? m.fp32_gflops / m.bandwidth_gbs : 0.0;
  // No bf16 units (bf16_gflops 0, an AVX2 CPU): no bf16 ridge either, rather than a ridge at 0 FLOP/B.
  j["ridge_bf16"] = m.bandwidth_gbs > 0 && m.bf16_gflops > 0 ? nlohmann::json(m.bf16_gflops / m.bandwidth_gbs)
                                                             : nlohmann::json();
  if (!gpu) j["memory_reclaim"] = memory_reclaim;
  return j;
}

// The ceilings, as the first lines of roofline.txt.
std::string peaks_text(const analysis::MachinePeaks& m, bool gpu, const std::string& memory_reclaim) {
  if (gpu) {
    std::string t = fmt::format("GPU: {} ({}, {} SMs; datasheet ceilings at the boost clock)\n", m.cpu, m.isa, m.threads);
    t += fmt::format("  bf16 tensor-core peak {:10.1f} GFLOP/s   ridge {:6.2f} FLOP/B\n", m.bf16_gflops,
                     m.bf16_gflops / m.bandwidth_gbs);
    t += fmt::format("  fp32 CUDA-core peak   {:10.1f} GFLOP/s   ridge {:6.2f} FLOP/B\n", m.fp32_gflops,
                     m.fp32_gflops / m.bandwidth_gbs);
    t += fmt::format("  DRAM bandwidth        {:10.1f} GB/s\n", m.bandwidth_gbs);
    return t;
  }
  std::string t = fmt::format("Machine: {} ({}{}, {})\n", m.cpu,
                              m.cpu_signature.empty() ? "" : m.cpu_signature + "; ", m.isa, threads_text(m.threads));
  t += fmt::format("  fp32 FMA peak   {:8.1f} GFLOP/s   ridge {:6.2f} FLOP/B\n", m.fp32_gflops,
                   m.fp32_gflops / m.bandwidth_gbs);
  if (m.bf16_gflops > 0)
    t += fmt::format("  bf16 dot peak   {:8.1f} GFLOP/s   ridge {:6.2f} FLOP/B\n", m.bf16_gflops,
                     m.bf16_gflops / m.bandwidth_gbs);
  else
    t += fmt::format("  bf16 dot peak        n/a ({}): bf16 ops use the fp32 ceiling\n",
                     m.library_bf16_gflops > 0 ? "none at " + m.isa : std::string("no AVX512-BF16"));
  t += fmt::format("  Memory bandwidth{:8.1f} GB/s ({})\n", m.bandwidth_gbs, analysis::bandwidth_source(m));
  t += fmt::format("  OpenBLAS sgemm  {:8.1f} GFLOP/s (2048³, the practical fp32 ceiling)\n", m.sgemm_gflops);
  t += fmt::format("  Peaks           {}\n", analysis::peaks_provenance(m));
  if (const std::string lib = report::library_peaks_note(m); !lib.empty()) t += "  " + lib + "\n";
  if (!memory_reclaim.empty()) t += "  Memory: " + memory_reclaim + "\n";
  return t;
}

// Flags given that `mode` would ignore: refused, naming them all ("--out and --iters do not apply with
// --peaks-only, which <what>: drop them (or --peaks-only)"), rather than silently ignored.
void refuse_idle_flags(const std::vector<std::string>& given, const char* mode, const char* what) {
  const size_t n = given.size();
  if (n == 0) return;
  const std::string flags = report::spoken_list(given);
  ATTNPROF_FAIL("{} {} not apply with {}, which {}: drop {} (or {})", flags, n == 1 ? "does" : "do", mode, what,
                n == 1 ? "it" : "them", mode);
}

// The column heads of the op rows.
// The files a roofline run writes into --out (commit_and_print's three).
const std::vector<std::string> kRooflineFiles = {"roofline.json", "roofline.txt", "roofline.csv"};

// roofline.csv: every placed op, one row each, with roofline.json's fields.
const std::vector<std::string> kRooflineCsvColumns = {
    "variant", "name", "category", "calls", "self_ns", "flops", "bf16_flops", "library_flops", "library_bf16_flops",
    "compute_ceiling_gflops", "bytes", "intensity", "achieved_gflops", "achieved_gbs", "attainable_gflops",
    "ridge_intensity", "fraction_of_attainable", "fraction_of_bandwidth", "bound"};

std::string ops_heading() {
  return fmt::format("{:<12}{:<38}{:>10}{:>12}{:>12}{:>10}{:>8}  {}\n", "Variant", "Op", "FLOP/B", "Attainable",
                     "Achieved", "GB/s", "% att.", "Bound");
}

// Every op of one variant's profile that does work of its own, placed under `m`: a row of `text` and an entry
// of j["ops"] each.
void place_variant(const std::string& variant, const analysis::KeyAverages& ka, const analysis::MachinePeaks& m,
                   nlohmann::json& j, Text& text) {
  for (const analysis::PlacedOp& placed : analysis::roofline_ops(ka, m)) {
    const analysis::OpStats& op = *placed.op;
    const analysis::RooflinePoint& pt = placed.pt;
    const OpCost& cost = placed.cost;
    const double gbs = pt.achieved_gbs;
    const char* bound = pt.memory_bound ? "memory" : "compute";
    j["ops"].push_back({{"variant", variant},
                        {"name", op.name},
                        {"category", op.category},
                        {"calls", op.calls},
                        {"self_ns", placed.ns},
                        {"flops", cost.flops},
                        {"bf16_flops", cost.bf16_flops},
                        {"library_flops", cost.library_flops},
                        {"library_bf16_flops", cost.library_bf16_flops},
                        {"compute_ceiling_gflops", analysis::compute_ceiling_gflops(cost, m)},
                        {"bytes", cost.bytes()},
                        {"intensity", pt.intensity},
                        {"achieved_gflops", pt.achieved_gflops},
                        {"achieved_gbs", gbs},
                        {"attainable_gflops", pt.attainable_gflops},
                        {"ridge_intensity", pt.ridge_intensity},
                        {"fraction_of_attainable", pt.fraction_of_attainable},
                        // what the table's %bw shows for ops without FLOPs (copies), whose
                        // fraction_of_attainable is 0: achieved GB/s over the bandwidth ceiling
                        {"fraction_of_bandwidth", pt.fraction_of_bandwidth},
                        {"bound", bound}});
    // A copy does no arithmetic: its place on the roofline is its bandwidth, so show % of STREAM instead.
    const std::string pct = cost.flops > 0 ? fmt::format("{:.0f}%", 100 * pt.fraction_of_attainable)
                                              : fmt::format("{:.0f}%bw", 100 * pt.fraction_of_bandwidth);
    // ... and no FLOP/B, attainable or achieved GFLOP/s: "--" there, not a 0 that reads as measured.
    const auto flop_cell = [&](double v, int digits) {
      return cost.flops > 0 ? fmt::format("{:.{}f}", v, digits) : std::string("--");
    };
    text += fmt::format("{:<12}{:<38}{:>10}{:>12}{:>12}{:>10.1f}{:>8}  {}\n", variant,
                        op.name.size() > 36 ? op.name.substr(0, 33) + "..." : op.name, flop_cell(pt.intensity, 3),
                        flop_cell(pt.attainable_gflops, 1), flop_cell(pt.achieved_gflops, 1), gbs, pct, bound);
  }
}

// The lines for `variant`'s ops that a few slow forwards lifted (report::uneven_ops), for under the rows: an op's
// Achieved is its FLOPs over every forward's self time, so those forwards place it lower than a median would.
void add_uneven_notes(const std::string& variant, const analysis::KeyAverages& ka, std::vector<std::string>& notes) {
  for (const report::UnevenOp& u : report::uneven_ops(ka))
    notes.push_back(report::uneven_line(
        u, variant,
        fmt::format("its Achieved is over every forward's time, so {} it lower than its median forward would",
                    u.over == 1 ? "that forward places" : "those forwards place")));
}

// What the columns mean, below the rows.
std::string legend(const analysis::MachinePeaks& m, bool gpu) {
  if (gpu)
    return "Attainable and Achieved are GFLOP/s; GB/s is the kernel's bytes over its device time.\n"
           "Attainable = min(compute peak, FLOP/B × DRAM bandwidth); compute peak: the tensor-core one for bf16\n"
           "  and fp16 GEMMs and attention kernels (one dense rate for both), the fp32 CUDA-core one for\n"
           "  elementwise kernels and fp32 GEMMs.\n"
           "% att. = achieved / attainable GFLOP/s; for copies and fills, %bw = achieved GB/s / DRAM bandwidth.\n"
           "Each kernel is placed once, in its own device time; the host ops that launched it are not placed again.\n";
  return "Attainable and Achieved are GFLOP/s; GB/s is the op's bytes (cost model) over its self time.\n"
         "Attainable = min(compute peak, FLOP/B × bandwidth); compute peak: the bf16 dot-product one for bf16\n"
         "  matmuls on oneDNN and the flash kernel (where the CPU has one), the fp32 FMA one for elementwise ops,\n"
         "  fp32, fp16 and widened bf16 matmuls and SDPA math (it upcasts to fp32); matmul's at the ISA OpenBLAS\n"
         "  and oneDNN chose; an op with both is judged by the time its FLOPs take at each.\n"
         "% att. = achieved / attainable GFLOP/s; for ops without FLOPs (copies), %bw = achieved GB/s / bandwidth.\n" +
         std::string(m.bandwidth_loops.measured()
                         ? "Over 100%: the op moved its bytes faster than the best of the memory loops, the\n"
                           "  roofline's slope: its data stayed in cache, or the machine's memory was busier\n"
                           "  while the bandwidth was measured (on a VM, the host's, which other tenants share).\n"
                         : "Over 100%: the op moved its bytes faster than STREAM triad, these peaks' slope (measured\n"
                           "  before attnprof also measured an in-place update and a copy): an in-place op reads and\n"
                           "  writes the same lines, where triad pays an uncounted write-allocate read, or its data\n"
                           "  stayed in cache, or the bandwidth was measured on a busy machine.\n") +
         "Each op is placed once, by its own FLOPs, bytes and self time; a wrapper whose work is all its\n"
         "  children's (masked_fill: copy_ and masked_fill_; scaled_dot_product_attention) is not placed again.\n";
}

// What --from places: a run's peaks and problem, and each variant's summary (or why it has none), read from an
// earlier compare's compare.json or from profiles' summaries, which record the peaks their Bound was judged by.
struct FromRun {
  std::string source;  // compare.json's path, or the profiles' directory
  analysis::MachinePeaks m;
  bool gpu = false;
  std::string reclaim, problem, dtype, forwards;  // forwards: "3 recorded forwards each"
  nlohmann::json threads;
  struct Entry {
    std::string name, status = "ok", note, summary;  // summary: the file's path; status other than ok: not placed
    std::optional<double> ms;                        // compare's time for the row, which its summary must carry
    std::optional<nlohmann::json> doc;               // the summary, read and checked (profiles': for their peaks)
  };
  std::vector<Entry> entries;
  std::vector<std::string> inputs;  // every file read: none may be replaced by the roofline's own
};

// What a variant's summary is named after: <variant>.summary.json.
constexpr std::string_view kSummarySuffix = ".summary.json";

// A <variant>.summary.json, read and checked whole.
nlohmann::json read_summary(const std::string& path) {
  nlohmann::json s = read_json_file(path);
  report::check_summary(s, path);
  return s;
}

// The variants to place: those named, each of which the run must hold, else all of them in its order.
std::vector<FromRun::Entry> chosen_entries(const RooflineArgs& a, const std::vector<FromRun::Entry>& held,
                                           const std::string& source) {
  if (!a.variants_given) return held;
  std::vector<FromRun::Entry> out;
  std::vector<std::string> names;
  for (const FromRun::Entry& e : held) names.push_back(e.name);
  for (const std::string& name : a.variants) {
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) ATTNPROF_FAIL("variant '{}' is not in {} (it holds {})", name, source, fmt::join(names, ", "));
    if (std::none_of(out.begin(), out.end(), [&](const FromRun::Entry& e) { return e.name == name; }))
      out.push_back(held[size_t(it - names.begin())]);
  }
  return out;
}

// An earlier compare: its compare.json's peaks, problem and rows.
FromRun from_compare(const RooflineArgs& a, const std::string& compare_path, const std::filesystem::path& run_dir) {
  FromRun r;
  r.source = compare_path;
  r.inputs = {compare_path};
  const nlohmann::json c = read_json_file(compare_path);
  report::check_compare_json(c, compare_path);  // refuses an empty "variants", which would place nothing
  r.gpu = report::string_field(c, "device") == "cuda";
  const auto machine = c.find("machine");
  ATTNPROF_CHECK(machine != c.end(), "{}: field 'machine' is missing (compare records the peaks it measured against)",
                 compare_path);
  try {
    r.m = analysis::machine_peaks_from_json(*machine);
  } catch (const Error& e) {
    ATTNPROF_FAIL("{}: field 'machine': {}", compare_path, e.what());
  }
  r.reclaim = r.gpu ? "" : report::string_field(*machine, "memory_reclaim");
  r.problem = report::string_field(c, "problem");
  r.dtype = report::string_field(c, "dtype");
  const double iters = c.contains("iters") && c["iters"].is_number() ? c["iters"].get<double>() : 0;
  r.forwards = iters >= 1 ? fmt::format("{:.0f} recorded forwards each", iters) : "its recorded forwards";
  r.threads = c.contains("threads") && c["threads"].is_number_integer() ? c["threads"] : nlohmann::json(r.m.threads);
  std::vector<FromRun::Entry> held;
  for (const nlohmann::json& row : c["variants"]) {
    FromRun::Entry e;
    e.name = report::string_field(row, "name");
    e.status = report::compare_row_status(row);
    e.note = terminal_line(report::string_field(row, "note"));  // a file's text, not escape sequences
    std::string file = report::string_field(row, "summary");
    if (file.empty()) file = e.name + ".summary.json";
    // A name that is not a plain file name would reach files outside the run's directory.
    if (e.status == "ok" && (file.find_first_of("/\\") != std::string::npos || file.front() == '.'))
      ATTNPROF_FAIL("{}: variant '{}' names its summary '{}', not a plain file name (attnprof writes "
                    "<variant>.summary.json)", compare_path, e.name, file);
    e.summary = (run_dir / file).string();
    if (const auto ms = row.find("ms"); ms != row.end() && ms->is_number()) e.ms = ms->get<double>();
    held.push_back(std::move(e));
  }
  r.entries = chosen_entries(a, held, compare_path);
  return r;
}

// Profiles (`attnprof profile --out DIR`): every <variant>.summary.json in `dir`, or the one named, each under
// the peaks its profile recorded, which must be one machine's.
FromRun from_profiles(const RooflineArgs& a, const std::filesystem::path& dir, const std::vector<std::string>& files,
                      bool named_dir) {
  FromRun r;
  r.source = named_dir ? dir.string() : (dir / files.front()).string();
  // The known variants first, in the registries' order (naive first, as the blog), then any other by name.
  std::vector<std::string> order;
  for (const Variant& v : registry()) order.push_back(v.name);
  for (const Variant& v : cuda::cuda_registry())
    if (std::find(order.begin(), order.end(), v.name) == order.end()) order.push_back(v.name);
  std::vector<FromRun::Entry> held;
  for (const std::string& f : files)
    held.push_back({f.substr(0, f.size() - kSummarySuffix.size()), "ok", "", (dir / f).string(), std::nullopt, std::nullopt});
  const auto rank = [&](const FromRun::Entry& e) {
    return size_t(std::find(order.begin(), order.end(), e.name) - order.begin());
  };
  std::stable_sort(held.begin(), held.end(), [&](const auto& x, const auto& y) { return rank(x) < rank(y); });
  r.entries = chosen_entries(a, held, r.source);
  std::string first;  // the summary the others are held to
  nlohmann::json machine;
  std::vector<std::pair<std::string, size_t>> forwards;  // each profile's recorded forwards (run.forward_ms)
  for (FromRun::Entry& e : r.entries) {
    e.doc = read_summary(e.summary);  // kept: the placement reads it again
    const nlohmann::json& s = *e.doc;
    if (const auto run = s.find("run"); run != s.end() && run->is_object() && run->contains("forward_ms") &&
                                        (*run)["forward_ms"].is_array())
      forwards.emplace_back(e.name, (*run)["forward_ms"].size());
    const auto m = s.find("machine");
    if (m == s.end() || !m->is_object())
      ATTNPROF_FAIL("{} records no machine peaks (a summary compare wrote, or one profile wrote before it recorded "
                    "them): run `attnprof roofline {}`, or give the directory of a compare run",
                    e.summary, e.name);
    const std::string problem = report::recorded(s, "problem");
    const bool gpu = s.contains("device");
    if (first.empty()) {
      first = e.summary;
      machine = *m;
      r.problem = problem;
      r.gpu = gpu;
      r.dtype = report::recorded(s, "dtype");
      try {
        r.m = analysis::machine_peaks_from_json(machine);
      } catch (const Error& err) {
        ATTNPROF_FAIL("{}: field 'machine': {}", e.summary, err.what());
      }
      r.reclaim = r.gpu ? "" : report::string_field(machine, "memory_reclaim");
      const auto& run = s.contains("run") && s["run"].is_object() ? s["run"] : s;
      r.threads = run.contains("threads") && run["threads"].is_number_integer() ? run["threads"]
                                                                               : nlohmann::json(r.m.threads);
      continue;
    }
    // One roofline has one set of ceilings and one problem: profiles of two machines, thread counts or shapes
    // would be placed under peaks one of them was not measured against.
    if (!report::same_peaks(*m, machine))
      ATTNPROF_FAIL("{} and {} were judged against different peaks (another machine, thread count or measurement): "
                    "place them one at a time (--from the summary), or profile them again on one machine with the "
                    "same --threads",
                    first, e.summary);
    if (gpu != r.gpu) ATTNPROF_FAIL("{} and {} are a CPU and a CUDA profile: place them one at a time", first, e.summary);
    if (problem != r.problem)
      ATTNPROF_FAIL("{} is of {}, while {} is of {}: one roofline places one problem's ops; place them one at a time",
                    e.summary, problem, first, r.problem);
  }
  const bool same = !forwards.empty() && forwards.size() == r.entries.size() &&
                    std::all_of(forwards.begin(), forwards.end(), [&](const auto& f) { return f.second == forwards[0].second; });
  if (same) {
    const size_t n = forwards[0].second;
    r.forwards = fmt::format("{} recorded forward{}{}", n, n == 1 ? "" : "s", r.entries.size() > 1 ? " each" : "");
  } else if (forwards.size() == r.entries.size()) {  // "naive 3, flash 5 recorded forwards"
    std::vector<std::string> each;
    for (const auto& [name, n] : forwards) each.push_back(fmt::format("{} {}", name, n));
    r.forwards = fmt::format("{} recorded forwards", fmt::join(each, ", "));
  } else {
    r.forwards = "their recorded forwards";
  }
  return r;
}

// roofline --from: the ops an earlier compare or profile measured, under the peaks it recorded. Nothing runs, so
// the placement is that run's, figure for figure, and a CUDA run's can be read on a machine without a GPU.
void run_roofline_from(RooflineArgs a) {  // a copy: --out may default to the run's directory
  namespace fs = std::filesystem;
  CommonOptions& o = a.common;
  // Flags that choose, size or run a problem: the run is over, they would do nothing.
  std::vector<std::string> idle;
  for (const std::string& f : a.flags_given)
    if (f != "--from" && f != "--out" && f != "--json" && f != "--html" && f != "--device" && f != "--brief")
      idle.push_back(f);
  refuse_idle_flags(idle, "--from", "places the ops an earlier run measured and runs nothing");
  ATTNPROF_CHECK(a.device == "cpu" || a.device == "cuda", "--device '{}' is none of cpu, cuda", a.device);
  std::error_code ec;
  const bool is_dir = fs::is_directory(a.from, ec);
  // A path that exists but cannot be followed (a loop of symbolic links, a directory it may not search) says why.
  if (!is_dir && ec && ec != std::errc::no_such_file_or_directory)
    ATTNPROF_FAIL("--from '{}': {}", a.from, ec.message());
  ATTNPROF_CHECK(is_dir || fs::exists(a.from, ec),
                 "--from '{}': no such directory or file (give the --out directory of `attnprof compare` or "
                 "`attnprof profile`, its compare.json or a <variant>.summary.json)", a.from);
  // A file reached through a symbolic link: its run (the summaries it names) is beside the file the link leads
  // to, not beside the link.
  fs::path file = a.from;
  if (!is_dir && fs::is_symlink(file, ec)) {
    const fs::path target = fs::canonical(file, ec);
    if (ec) ATTNPROF_FAIL("--from '{}': cannot follow the symbolic link ({})", a.from, ec.message());
    file = target;
  }
  const fs::path run_dir = is_dir ? fs::path(a.from) : file.parent_path().empty() ? fs::path(".") : file.parent_path();
  FromRun run;
  if (is_dir) {
    const std::string compare_path = (fs::path(a.from) / "compare.json").string();
    const bool has_compare = fs::exists(compare_path, ec);
    if (!has_compare && ec && ec != std::errc::no_such_file_or_directory)
      ATTNPROF_FAIL("--from '{}': cannot read the directory ({})", a.from, ec.message());
    if (has_compare) {
      run = from_compare(a, compare_path, run_dir);
    } else {
      std::vector<std::string> summaries;
      for (fs::directory_iterator it(run_dir, ec), end; !ec && it != end; it.increment(ec))
        if (const std::string name = it->path().filename().string();
            name.ends_with(kSummarySuffix) && name.size() > kSummarySuffix.size())
          summaries.push_back(name);
      if (ec) ATTNPROF_FAIL("--from '{}': cannot read the directory ({})", a.from, ec.message());
      std::sort(summaries.begin(), summaries.end());
      ATTNPROF_CHECK(!summaries.empty(),
                     "--from '{}' holds no compare.json and no <variant>.summary.json: give the --out directory of "
                     "`attnprof compare` or `attnprof profile`", a.from);
      run = from_profiles(a, run_dir, summaries, /*named_dir=*/true);
    }
  } else if (const std::string name = file.filename().string(); name.ends_with(kSummarySuffix)) {
    run = from_profiles(a, run_dir, {name}, /*named_dir=*/false);
  } else {
    run = from_compare(a, a.from, run_dir);
  }
  if (!a.given("--out")) o.out = run_dir.string();  // the roofline joins the run it places
  const bool gpu = run.gpu;
  if (a.given("--device") && (a.device == "cuda") != gpu)
    ATTNPROF_FAIL("--device {}: {} is a {} run; drop --device (--from places the run on the device it ran on)",
                  a.device, run.source, gpu ? "CUDA" : "CPU");
  const analysis::MachinePeaks& m = run.m;

  Text text = peaks_text(m, gpu, run.reclaim);
  text += fmt::format("\n{} of {} as {} measured them ({}; intensity and FLOPs from the cost model)\n",
                      gpu ? "Kernels, copies and fills" : "Ops", run.problem, run.source, run.forwards);
  text += ops_heading();
  nlohmann::json j = {{"kind", "roofline"},
                      {"attnprof_version", ATTNPROF_VERSION},
                      {"device", gpu ? "cuda" : "cpu"},
                      {"threads", run.threads},
                      {"machine", machine_json(m, gpu, run.reclaim)},
                      {"from", run.source},
                      {"problem", run.problem},
                      {"dtype", run.dtype},
                      {"ops", nlohmann::json::array()},
                      {"skipped", nlohmann::json::array()}};
  std::vector<std::string> uneven;  // add_uneven_notes's lines, under the legend
  std::vector<std::string> inputs = run.inputs;
  for (const FromRun::Entry& e : run.entries) {
    const std::string& name = e.name;
    if (e.status != "ok") {
      text += fmt::format("{:<12}{}: {}\n", name, e.status, e.note.empty() ? "not run" : e.note);
      j["skipped"].push_back({{"variant", name}, {"status", e.status}, {"note", e.note}});
      continue;
    }
    const std::string& path = e.summary;
    nlohmann::json read_now;  // a compare run's summary, read here; a profile's was read for its peaks
    const nlohmann::json& s = e.doc ? *e.doc : (read_now = read_summary(path));
    // The directory may hold files of another run (a later profile --out into it): their ops are not this run's.
    if (const std::string p = report::recorded(s, "problem"); !p.empty() && p != run.problem)
      ATTNPROF_FAIL("{} is of {}, while {} is of {}: they are files of two runs (run compare again, or give the "
                    "directory of the run that wrote both)", path, p, run.source, run.problem);
    // Another variant's summary first: its time differs too, but "a later run replaced it" would be the wrong
    // diagnosis.
    if (const std::string v = report::recorded(s, "variant"); !v.empty() && v != name)
      ATTNPROF_FAIL("{} is variant '{}'s summary, while {} names it for '{}'", path, v, run.source, name);
    // compare writes a row's time into its summary: another figure there is another run's (profile naive
    // --out into the same directory, after the compare).
    const auto srun = s.find("run");
    if (e.ms && srun != s.end() && srun->is_object() && srun->contains("ms_per_forward") &&
        (*srun)["ms_per_forward"].is_number()) {
      const double here = (*srun)["ms_per_forward"].get<double>(), there = *e.ms;
      if (std::abs(here - there) > 1e-9 * std::max(std::abs(here), std::abs(there)))
        ATTNPROF_FAIL("{} is not the summary {} wrote for '{}' (its ms per forward is {:.6g}, the run's {:.6g}): "
                      "a later run replaced it (profile --out into the same directory?); run compare again",
                      path, run.source, name, here, there);
    }
    if (s.contains("device") != gpu)
      ATTNPROF_FAIL("{} is a {} profile, while {} is a {} run", path, gpu ? "CPU" : "CUDA", run.source,
                    gpu ? "CUDA" : "CPU");
    if (std::find(inputs.begin(), inputs.end(), path) == inputs.end()) inputs.push_back(path);
    const analysis::KeyAverages ka = report::key_averages_from_summary(s);
    // Each op is placed at its FLOPs over its time: an op with work that took under a nanosecond a call (the
    // clock's grain) would be placed at an infinite or absurd rate, so its time is not one a run measured.
    for (const analysis::PlacedOp& op : analysis::roofline_ops(ka, m)) {
      if (op.ns < 1.0 * double(std::max<int64_t>(op.op->calls, 1)))
        ATTNPROF_FAIL("{}: op '{}' has FLOPs or bytes and {} {} time over {} calls, under 1 ns a call: no run "
                      "measures that (a corrupt or edited summary)", path, terminal_line(op.op->name), op.ns,
                      gpu ? "ns of device" : "ns of self", op.op->calls);
      // Compute cannot outrun its peak: data in cache can beat the bandwidth line, nothing beats the FLOP/s
      // one. Four times over (a peak measured on a busy machine reads low) is FLOPs or a time edited in.
      const double ceiling = analysis::compute_ceiling_gflops(op.cost, m);
      if (op.pt.achieved_gflops > 4.0 * ceiling)
        ATTNPROF_FAIL("{}: op '{}' would run at {:.4g} GFLOP/s ({:.4g} FLOPs in {:.4g} ns), over 4x its compute "
                      "ceiling of {:.1f} GFLOP/s: no run measures that (a corrupt or edited summary)",
                      path, terminal_line(op.op->name), op.pt.achieved_gflops, op.cost.flops, op.ns, ceiling);
    }
    place_variant(name, ka, m, j, text);
    add_uneven_notes(name, ka, uneven);
  }
  text.define(legend(m, gpu));
  for (const std::string& line : uneven) text += line + "\n";

  // The run's own files are read, never replaced: roofline.json linked to the compare.json, say.
  check_html_if_asked(o);
  for (const std::string& out_file : kRooflineFiles)
    for (const std::string& in : inputs)
      if (same_file(out_path(o.out, out_file), in))
        ATTNPROF_FAIL("cannot write '{}': it is {}, which --from reads", out_path(o.out, out_file), in);
  prepare_out_dir(o.out);
  check_out_files(o, {}, kRooflineFiles);
  report::FileBatch outputs;
  commit_and_print(o, "roofline", j, text, report::json_rows_csv(j["ops"], kRooflineCsvColumns), outputs);
}

void run_roofline(const RooflineArgs& a) {
  if (a.given("--from")) return run_roofline_from(a);  // (an empty --from is refused with every empty value)
  const CommonOptions& o = a.common;
  const bool gpu = use_cuda(a.device);
  ATTNPROF_CHECK(!(gpu && a.remeasure), "--remeasure: a GPU's ceilings are its datasheet's, there is nothing to measure");
  ATTNPROF_CHECK(!(a.peaks_only && a.variants_given), "--peaks-only places no variants: drop {} or --peaks-only",
                 fmt::join(a.variants, " "));
  ATTNPROF_CHECK(!(a.peaks_only && !a.backend.empty()),
                 "--peaks-only places no variants: --backend has nothing to choose for");
  ATTNPROF_CHECK(a.backend.empty() || std::find(a.variants.begin(), a.variants.end(), "sdpa") != a.variants.end(),
                 "--backend applies to the variant 'sdpa', which is not among {} (name sdpa, or sdpa-math / "
                 "sdpa-flash directly)",
                 fmt::join(a.variants, " "));
  // --peaks-only measures and prints the peaks (and caches them): no inputs are drawn and no file is written.
  ATTNPROF_CHECK(!(a.peaks_only && o.html), "--peaks-only writes no files: drop --html (or --peaks-only)");
  ATTNPROF_CHECK(!(a.peaks_only && use_files(o)), "--peaks-only reads no inputs: drop --q, --k and --v (or --peaks-only)");
  // The problem flags are checked even though --peaks-only does not use them: a malformed one is an error
  // in every command, never silently ignored.
  if (a.peaks_only) (void)problem_of(o);
  // The run flags would do nothing: refused rather than silently ignored.
  if (a.peaks_only) {
    std::vector<std::string> run_flags;  // as given, in this order: none applies to --peaks-only
    for (const char* flag : {"--out", "--warmup", "--iters", "--seed", "--flash-block"})
      if (a.given(flag)) run_flags.push_back(flag);
    refuse_idle_flags(run_flags, "--peaks-only", "runs no variant and writes no files");
  }
  apply_runtime_options(o, gpu);
  // Before the random inputs are drawn; from input files, once they are read (their shape is the problem).
  std::vector<const Variant*> variants;
  if (!a.peaks_only && !use_files(o)) {
    variants = resolve_variants_on(gpu, a.variants, a.backend, problem_of(o), !a.variants_given);
    check_flash_block_applies(o, variants);
  }
  const Inputs in = a.peaks_only ? Inputs{} : make_inputs(o);
  if (!a.peaks_only && use_files(o)) {
    variants = resolve_variants_on(gpu, a.variants, a.backend, in.p, !a.variants_given);
    check_flash_block_applies(o, variants);
  }
  if (!a.peaks_only) {
    refuse_inputs_in_out(o, {}, kRooflineFiles);
    check_html_if_asked(o);
    prepare_out_dir(o.out);
    check_out_files(o, {}, kRooflineFiles);
  }
  report::FileBatch outputs;  // this run's files replace the last run's together, or not at all
  const int threads = ops::num_threads();

  if (!gpu) progress(a.remeasure ? "measuring machine peaks" : "measuring (or loading cached) machine peaks");
  const analysis::MachinePeaks m = gpu ? cuda::gpu_peaks(cuda::device_info()) : host_peaks(threads, a.remeasure);
  const std::string reclaim = gpu ? "" : analysis::memory_reclaim_note().value_or("");
  Text text = peaks_text(m, gpu, reclaim);

  nlohmann::json j = {{"kind", "roofline"},
                      {"attnprof_version", ATTNPROF_VERSION},
                      {"device", a.device},
                      {"threads", threads},
                      {"machine", machine_json(m, gpu, reclaim)},
                      {"ops", nlohmann::json::array()},
                      {"skipped", nlohmann::json::array()}};
  std::vector<std::string> uneven;  // add_uneven_notes's lines, under the legend
  if (!a.peaks_only) {
    j["problem"] = in.p.str();
    j["dtype"] = std::string(dtype_name(in.p.dtype));
    // The CPU flash kernel's blocks where a variant runs it, as compare.json records them.
    if (!gpu && runs_cpu_flash(variants)) j["flash_block"] = {flash_block().rows, flash_block().cols};
  }
  std::vector<std::string> failed, device_failed;  // failed validation / on the GPU: placed nowhere, exit code 1
  size_t placed = 0;                                // variants placed (none, every one skipped: exit code 1)
  if (!variants.empty()) {
    if (!gpu) prepare_libraries(variants, in);  // OpenBLAS refused under ulimit -v stops it before any variant
    LazyReference ref(in);
    RunPlan plan;
    plan.warmup = o.warmup;
    plan.warmup_min_s = warmup_floor_s(o);
    plan.schedule = {.wait = 0, .warmup = 0, .active = o.iters};
    text += gpu ? fmt::format("\nKernels, copies and fills of {} ({} recorded forwards each, device time from CUPTI; "
                              "intensity and FLOPs from the launching op's cost model)\n",
                              in.p.str(), o.iters)
                : fmt::format("\nOps of {}{} ({} recorded forwards each; intensity and FLOPs from the cost model)\n",
                              in.p.str(), flash_block_note(), o.iters);
    text += ops_heading();
    for (const Variant* v : variants) {
      RunOutcome r = gpu ? run_cuda_variant(*v, in, ref, plan, v->name) : run_variant(*v, in, ref, plan, v->name);
      if (r.status == RunOutcome::Status::Ok && gpu && !r.result.has_device) {
        r.status = RunOutcome::Status::Skipped;
        r.note = "no device activity to place: " + r.cupti_note;
      }
      if (r.status != RunOutcome::Status::Ok) {
        if (r.status == RunOutcome::Status::Failed) (r.device_error ? device_failed : failed).push_back(v->name);
        text += fmt::format("{:<12}{}: {}\n", v->name, status_name(r.status), r.note);
        j["skipped"].push_back({{"variant", v->name}, {"status", status_name(r.status)}, {"note", r.note}});
        continue;
      }
      place_variant(v->name, r.ka, m, j, text);
      add_uneven_notes(v->name, r.ka, uneven);
      ++placed;
    }
    text.define(legend(m, gpu));
    for (const std::string& line : uneven) text += line + "\n";
  }
  if (!a.peaks_only)
    commit_and_print(o, "roofline", j, text, report::json_rows_csv(j["ops"], kRooflineCsvColumns), outputs);
  else if (o.json) print_out("{}\n", json_text(j));
  else print_out("{}", text.shown(o));
  exit_if_validation_failed(failed, device_failed);
  if (!a.peaks_only && !j["skipped"].empty()) exit_if_nothing_measured(placed, j["skipped"].size(), "variant");
}

}  // namespace

void add_roofline_command(CLI::App& app) {
  auto args = std::make_shared<RooflineArgs>();
  args->variants = {"naive", "inplace", "sdpa-math", "flash"};
  CLI::App* sub = app.add_subcommand("roofline", "machine peaks and every op of a profile on the roofline");
  CLI::Option* variants =
      sub->add_option("variants", args->variants, "variants to place (default: naive inplace sdpa-math flash)");
  sub->add_option("--backend", args->backend,
                  "SDPA backend for 'sdpa': math | flash | auto (with --device cuda: math | cudnn | auto)");
  sub->add_flag("--peaks-only", args->peaks_only, "only measure and print the machine's peaks");
  sub->add_flag("--remeasure", args->remeasure, "measure the peaks again instead of reading the cache");
  sub->add_option("--device", args->device, "cpu (default) or cuda (GPU datasheet ceilings, kernels in device time)");
  sub->add_option("--from", args->from,
                  "place the ops an earlier `attnprof compare --out DIR` or `attnprof profile --out DIR` measured (DIR, "
                  "its compare.json or a <variant>.summary.json), under the peaks that run recorded, running nothing; "
                  "--out defaults to DIR")
                           ->type_name("DIR");
  add_common_options(sub, args->common, {.warmup = 1, .iters = 2, .file_inputs = true});
  sub->footer(variants_help());
  sub->callback([args, variants, sub] {
    args->variants_given = variants->count() > 0;
    for (const CLI::Option* opt : sub->get_options())
      if (opt->count() > 0 && !opt->get_positional()) args->flags_given.push_back(opt->get_name());
    run_roofline(*args);
  });
}

}  // namespace attnprof::cli
