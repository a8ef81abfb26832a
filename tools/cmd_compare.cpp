// attnprof compare: every registry variant (both SDPA backends included) on one shape, one row each:
// what the blog showed trace by trace, plus what it left to the reader: GFLOP/s against the measured
// peak, peak memory, bytes moved and the bandwidth bound on time, error against fp64.
// `--device cuda` runs the CUDA registry the same way; both devices share the rows, their JSON and the table.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "attnprof/allocator.h"
#include "attnprof/cuda.h"
#include "attnprof/ops.h"
#include "attnprof/report.h"
#include "common.h"

namespace attnprof::cli {
namespace {

// The run-level files compare writes beside each variant's.
const std::vector<std::string> kCompareFiles = {"compare.json", "compare.txt", "compare.csv"};

struct CompareArgs {
  CommonOptions common;
  std::string variants;  // comma-separated subset; empty: all
  std::string device = "cpu";
  bool counters = false;  // page faults per op in the summaries (diff then shows what in-place saves)
  PeerOptions peer;       // --peer torch: PyTorch on the same inputs (peer_torch.cpp)
};

struct Row {
  std::string name;
  RunOutcome r;
  double ms = 0, gflops = 0, pct_peak = 0, bytes = 0, bound_ms = 0;
  std::optional<analysis::RooflineFloor> floor;  // per forward, from the profile of a row that ran
  double memory_time_share = -1;  // of its self time, in memory-bound ops (analysis::BoundTime); < 0: none
  std::vector<double> forward_ms;  // every timed forward
  std::optional<double> ops;       // zones (CPU) or device activities (GPU) per forward; none when not collected
  std::string trace;               // its trace file's name in --out
  std::vector<analysis::ThreadBalance> balance;  // each op's threads in its parallel regions (kept: the profile is freed)
  std::vector<analysis::OpPhases> phases;        // the steps inside ops that time them (kept, as balance)
  std::vector<analysis::OpItems> items;          // the tasks inside ops that mark them (the flash kernel's tiles)
  std::vector<double> on_cpu;                    // each forward's share on a CPU (--counters' task-clock), or -1
  FlashBlock block;  // the CPU flash kernel's blocks where the row ran it (rows 0 elsewhere)
};

// One row to run: a variant, under its own name, or with a list of --flash-block sizes a flash variant once per
// size, named "flash@128x64" (its files too), so the sizes sit side by side in one table.
struct Job {
  const Variant* v;
  std::string name;
  FlashBlock block;  // set before it runs; rows 0: as set (one --flash-block, or the defaults)
};

std::vector<Job> jobs_of(const std::vector<const Variant*>& variants, const std::vector<FlashBlock>& blocks) {
  std::vector<Job> jobs;
  for (const Variant* v : variants) {
    if (blocks.size() > 1 && runs_cpu_flash({v}))
      for (const FlashBlock& b : blocks) jobs.push_back({v, fmt::format("{}@{}x{}", v->name, b.rows, b.cols), b});
    else
      jobs.push_back({v, v->name, {}});
  }
  return jobs;
}

std::vector<std::string> job_names(const std::vector<Job>& jobs) {
  std::vector<std::string> names;
  for (const Job& j : jobs) names.push_back(j.name);
  return names;
}

// The registry's variants named in --variants ("sdpa" stands for every sdpa-* backend), or all of them; each
// once, in the order first named ("naive,naive" and "sdpa,sdpa-math" would otherwise write the same files twice).
std::vector<const Variant*> selected(const std::string& list, const std::vector<Variant>& reg) {
  std::vector<const Variant*> out;
  for (const std::string& name : list.empty() ? std::vector<std::string>{} : split_variant_list(list)) {
    bool matched = false;
    for (const Variant& v : reg)
      if (v.name == name || (name == "sdpa" && v.name.starts_with("sdpa-"))) {
        matched = true;
        if (std::find(out.begin(), out.end(), &v) == out.end()) out.push_back(&v);
      }
    if (!matched) {
      std::vector<std::string> known = variant_name_list(reg);
      const std::string names = fmt::format("{}", fmt::join(known, ", "));
      known.push_back("sdpa");  // the near miss may be the alias
      ATTNPROF_FAIL("unknown variant '{}' in --variants{}: expected {}, or sdpa (every SDPA backend)", name,
                    did_you_mean(name, known), names);
    }
  }
  if (list.empty())
    for (const Variant& v : reg) out.push_back(&v);
  return out;
}

// One variant's outcome as a row: the time per forward (host clock on the CPU, CUDA events on the GPU), the
// rate against the target's peak, the cost model's bytes with their bandwidth bound, and the roofline floor of
// the ops it recorded.
Row make_row(const Variant& v, RunOutcome r, const Inputs& in, const Target& t, const CommonOptions& o) {
  Row row;
  row.name = v.name;
  row.trace = trace_file(v.name, o);
  row.r = std::move(r);
  row.bytes = v.cost(in.p).bytes();
  row.bound_ms = t.m.bandwidth_gbs > 0 ? row.bytes / t.m.bandwidth_gbs * 1e-6 : 0.0;
  if (row.r.status != RunOutcome::Status::Ok) return row;
  row.balance = analysis::thread_balance(row.r.result);
  row.phases = analysis::op_phases(row.r.result);
  row.items = analysis::op_items(row.r.result);
  if (t.gpu) {
    row.ms = row.r.median_event_ms;
    row.forward_ms = row.r.event_ms;
    if (row.r.result.has_device) row.ops = row.r.ops_per_forward;
  } else {
    row.ms = row.r.median_ns * 1e-6;
    for (double ns : row.r.forward_ns) row.forward_ms.push_back(ns * 1e-6);
    row.ops = row.r.ops_per_forward;
    row.on_cpu = analysis::zone_on_cpu_shares(row.r.result, v.annotation);
  }
  row.gflops = gflops_at(in.p, row.ms);
  row.pct_peak = pct_of_peak(t, row.gflops);
  // On a GPU the floor is the device activities' (host zones against the GPU's ceilings would mean nothing):
  // none when CUPTI collected none.
  if (!row.r.forward_ns.empty() && (!t.gpu || row.r.ka.has_device)) {
    analysis::RooflineFloor f = analysis::roofline_floor(row.r.ka, t.m);
    const double forwards = double(row.r.forward_ns.size());
    f.ns /= forwards;
    f.memory_ns /= forwards;
    row.floor = f;
    row.memory_time_share = analysis::bound_time(row.r.ka, t.m).memory_share();
  }
  return row;
}

// <variant>.trace.json, <variant>.summary.json, <variant>.table.txt (the torch-style table, as profile writes it),
// <variant>.table.csv (its rows as CSV) and <variant>.stacks.txt (folded stacks) of a row that ran: all from this
// run, so no file of an earlier run stays beside them.
void write_row_files(const Row& row, const std::string& out, const std::string& table, const std::string& csv) {
  report::write_chrome_trace(row.r.result, out_path(out, row.trace));
  nlohmann::json sj = report::summary_json(row.r.result, row.r.ka);
  sj["run"] = {{"variant", row.name},
               {"threads", ops::num_threads()},  // as profile records it: diff notes runs on other thread counts
               {"ms_per_forward", row.ms},
               {"max_abs_err", row.r.err.max_abs},
               {"peak_extra_bytes", row.r.peak_extra_bytes},
               {"ops_per_forward", row.ops ? report::count_json(*row.ops) : nlohmann::json()},
               {"forward_ms", row.forward_ms},  // as profile writes them: diff names a noisy side
               {"forward_on_cpu", report::on_cpu_json(row.on_cpu)},  // and one that ran off the CPU
               {"cpu_sharing", report::cpu_sharing_json(row.r.sharing)},
               {"tolerance_used", std::isfinite(row.r.err.tol_used) ? nlohmann::json(row.r.err.tol_used) : nlohmann::json()}};
  if (row.block.rows > 0)  // the CPU kernel's blocks where the row ran it, as profile records them
    sj["run"]["flash_block"] = {row.block.rows, row.block.cols};
  write_json(out_path(out, row.name + ".summary.json"), sj);
  report::write_text_atomic(out_path(out, row.name + ".table.txt"), table);
  report::write_text_atomic(out_path(out, row.name + ".table.csv"), csv);
  report::write_text_atomic(out_path(out, row.name + ".stacks.txt"), report::folded_stacks(row.r.result));
}

// The rows whose forwards shared the CPUs or disagree (their medians may stand on disturbed forwards), and
// `machine_note` with the latter; then the ops whose threads sat idle in their own parallel regions.
// The peer's timed rows (compare --peer torch) are judged the same way: their forwards can disagree too.
std::string noisy_rows_note(const std::vector<Row>& rows, std::string_view machine_note,
                            const PeerRun* peers = nullptr) {
  std::vector<report::Timings> timings;
  for (const Row& r : rows)
    if (r.r.status == RunOutcome::Status::Ok)
      timings.push_back({r.name, r.forward_ms, r.r.sharing, r.r.sharing_window_s, r.on_cpu});
  if (peers)
    for (const PeerRow& r : peers->rows)
      if (r.status != RunOutcome::Status::Skipped) timings.push_back({r.name, r.forward_ms, r.sharing, r.sharing_window_s});
  std::string s;
  for (const std::string& line : report::timing_notes(timings, machine_note)) s += line + "\n";
  // Ops whose own parallel regions left a thread idle: where the time went that no op's self time shows.
  for (const Row& r : rows)
    if (r.r.status == RunOutcome::Status::Ok)
      for (const std::string& line : report::thread_balance_notes(r.name, r.balance))
        s += line + "\n";
  // Ops that a few slow forwards lifted: the ms column is a median, the tables' totals and the memory-bound
  // shares are sums over every forward, so the two can tell different stories (which op dominates, say).
  std::vector<std::string> uneven, tables;
  size_t ops = 0;
  for (const Row& r : rows) {
    if (r.r.status != RunOutcome::Status::Ok) continue;
    std::vector<std::string> names;
    for (const report::UnevenOp& u : report::uneven_ops(r.r.ka)) names.push_back(u.name);
    ops += names.size();
    if (names.empty()) continue;
    uneven.push_back(fmt::format("{}'s {}", r.name, report::spoken_list(names)));
    tables.push_back(r.name + ".table.txt");
  }
  const char* whose = ops == 1 ? "its" : "their";
  if (!uneven.empty())
    s += fmt::format("Uneven: {}: a few forwards lifted {} mean self time over {:.2f}x {} median. The ms column is "
                     "the median forward, while the tables ({}, whose closing lines give the figures) and the time in "
                     "memory-bound ops sum every forward.\n",
                     fmt::join(uneven, "; "), whose, report::kNoisySpread, whose, report::spoken_list(tables));
  return s;
}

// The rows that ran, as the speed-up line and the far-from-floor notes read them.
std::vector<report::RowTime> row_times(const std::vector<Row>& rows) {
  std::vector<report::RowTime> out;
  for (const Row& r : rows)
    if (r.r.status == RunOutcome::Status::Ok)
      out.push_back({r.name, r.ms, r.floor ? r.floor->ns * 1e-6 : std::nan(""),
                     r.floor ? r.floor->memory_share() : -1.0, report::is_disturbed(r.forward_ms, r.r.sharing, r.on_cpu),
                     r.memory_time_share});
  return out;
}

// Under the table: the speed-ups the blog reads off (its first line), and the rows far from their floor.
std::string ratio_lines(const std::vector<Row>& rows, bool gpu) {
  const std::vector<report::RowTime> times = row_times(rows);
  std::string s;
  if (const std::string line = report::speedup_line(times); !line.empty()) s += line + "\n";
  if (const std::string line = report::blog_ratio_line(times); !line.empty()) s += line + "\n";
  if (const std::string line = report::memory_time_line(times, gpu); !line.empty()) s += line + "\n";
  for (const std::string& line : report::far_from_floor_notes(times, gpu)) s += line + "\n";
  // What a fused kernel's one row does not show: where its time goes inside (the flash kernel's steps).
  for (const Row& r : rows)
    if (r.r.status == RunOutcome::Status::Ok)
      for (const analysis::OpPhases& op : r.phases)
        if (const std::string line = report::phase_line(
                r.name, op, report::is_disturbed(r.forward_ms, r.r.sharing, r.on_cpu));
            !line.empty())
          s += line + "\n";
  // And tile by tile: the flash kernel's cost per tile, fitted, and its slowest tile.
  for (const Row& r : rows)
    if (r.r.status == RunOutcome::Status::Ok)
      for (const analysis::OpItems& op : r.items)
        if (const std::string line = report::item_line(r.name, op); !line.empty()) s += line + "\n";
  return s;
}

// A compare.json entry; the same schema for both devices, so `attnprof report` draws either.
nlohmann::json row_json(const Row& r) {
  using nlohmann::json;
  const bool ran = r.r.status == RunOutcome::Status::Ok;
  // Checked against the reference: a skipped row was not, nor one that failed on the GPU before or during it.
  const bool validated = r.r.status != RunOutcome::Status::Skipped && !r.r.device_error;
  auto when = [](bool b, json v) { return b ? v : json(); };
  return {{"name", r.name},
          {"status", status_name(r.r.status)},
          {"ok", ran},
          {"skipped", when(r.r.status == RunOutcome::Status::Skipped, r.r.note)},
          {"note", r.r.note},
          {"ms", when(ran, r.ms)},
          {"forward_ms", r.forward_ms},
          {"forward_on_cpu", report::on_cpu_json(r.on_cpu)},  // --counters' task-clock over each forward's wall
          {"warmup_forwards", when(ran, r.r.warmup_forwards)},
          {"spread", when(ran, report::spread_json(r.forward_ms))},
          {"cpu_sharing", report::cpu_sharing_json(r.r.sharing)},
          {"gflops", when(ran, r.gflops)},
          {"pct_peak", when(ran, r.pct_peak)},
          {"peak_bytes", when(validated, r.r.peak_extra_bytes)},
          {"peak_total_bytes", when(validated, r.r.peak_bytes)},
          {"ops", r.ops ? report::count_json(*r.ops) : json()},
          {"bytes", r.bytes},
          {"bound_ms", r.bound_ms},
          {"floor_ms", r.floor ? json(r.floor->ns * 1e-6) : json()},
          {"floor_memory_share", r.floor ? json(r.floor->memory_share()) : json()},
          {"floor_bound", r.floor ? json(analysis::floor_bound_kind(r.floor->memory_share())) : json()},
          {"memory_time_share", r.memory_time_share >= 0 ? json(r.memory_time_share) : json()},
          {"max_abs_err", when(validated, r.r.err.max_abs)},
          {"nmse", when(validated, r.r.err.nmse)},
          {"tolerance_used", when(validated && std::isfinite(r.r.err.tol_used), r.r.err.tol_used)},
          {"tolerance", {{"atol", r.r.tol.atol}, {"rtol", r.r.tol.rtol}}},
          {"trace", when(ran, r.trace)},
          {"summary", when(ran, r.name + ".summary.json")},
          {"flash_block", r.block.rows > 0 ? json{r.block.rows, r.block.cols} : json()}};
}

// compare.json's header fields, the same for both devices.
nlohmann::json problem_json(const Inputs& in, const CommonOptions& o, const Target& t) {
  return {{"kind", "compare"},
          {"attnprof_version", ATTNPROF_VERSION},
          {"problem", in.p.str()},
          {"shape", {{"B", in.p.B}, {"Hq", in.p.Hq}, {"Hkv", in.p.Hkv}, {"Nq", in.p.Nq}, {"Nk", in.p.Nk}, {"D", in.p.D}}},
          {"dtype", std::string(dtype_name(in.p.dtype))},
          {"causal", in.p.mask == MaskKind::Causal},
          {"inputs", in.source},
          {"warmup", o.warmup},
          {"warmup_min_s", warmup_floor_s(o)},
          {"iters", o.iters},
          {"attention_flops", attention_flops(in.p)},
          {"flops_convention", "4*B*Hq*D per forward per visible (query, key) pair: Nq*Nk, causal Nq^2/2 "
                               "(Nq <= Nk) or Nq*Nk - Nk^2/2 (Nq > Nk), so Nq*Nk/2 when Nq == Nk"},
          {"peak_kind", t.peak_kind},
          {"peak_gflops", t.peak},
          {"peak_isa", t.peak_isa},
          {"bandwidth_gbs", t.m.bandwidth_gbs},
          {"machine", nlohmann::json(t.m)}};
}

// The rows whose rate came out above the peak: names for over_peak_note (the CPU run adds its peer rows').
std::vector<std::string> over_peak(const std::vector<Row>& rows) {
  std::vector<std::string> over;
  for (const Row& r : rows)
    if (r.r.status != RunOutcome::Status::Skipped && r.ms > 0 && r.pct_peak > 100) over.push_back(r.name);
  return over;
}

// What Floor ms and Bound stand on, in the table's footnotes.
std::string floor_legend(const Target& t) {
  const std::string ceilings =
      t.gpu ? fmt::format("the GPU's datasheet {:.0f} GB/s and {:.0f} TFLOP/s bf16 / {:.0f} fp32", t.m.bandwidth_gbs,
                          t.m.bf16_gflops * 1e-3, t.m.fp32_gflops * 1e-3)
            : fmt::format("the measured memory bandwidth {:.1f} GB/s and {:.1f} GFLOP/s fp32 FMA{} ({})",
                          t.m.bandwidth_gbs, t.m.fp32_gflops,
                          t.m.bf16_gflops > 0 ? fmt::format(" / {:.1f} bf16 dot", t.m.bf16_gflops) : std::string(),
                          analysis::peaks_provenance(t.m));
  return fmt::format(
      "Floor ms: the roofline floor of the {} one forward ran, each at max(bytes / bandwidth, FLOPs / its peak) "
      "against {}, summed: what those {} take at those ceilings (data that stays in cache can beat it). "
      "Bound: memory when {} held by their bytes make >= 3/4 of the floor, compute when <= 1/4, else mixed. "
      "Bytes moved / bandwidth alone is compare.json's bound_ms.\n",
      t.gpu ? "kernels, copies and fills" : "ops", ceilings, t.gpu ? "activities" : "ops", t.gpu ? "activities" : "ops");
}

// The comparison table between its title line and its footnotes.
std::string render_rows(const std::vector<Row>& rows, const std::string& title, const Target& t) {
  const char* rate = t.gpu ? "TFLOP/s" : "GFLOP/s";
  const double scale = t.gpu ? 1e-3 : 1.0;
  const char* ops = t.gpu ? "Activities" : "Ops";
  const int ops_w = t.gpu ? 12 : 7;
  const std::string rule(120 + ops_w, '-');
  std::string s = title + "\n" + rule + "\n";
  s += fmt::format("{:<12}{:>11}{:>10}{:>9}{:>12}{:>{}}{:>13}{:>11}{:>9}{:>11}  {}\n", "Variant", "ms/fwd", rate,
                   "% peak", "Peak mem", ops, ops_w, "Bytes moved", "Floor ms", "Bound", "Max err", "Check");
  s += rule + "\n";
  for (const Row& r : rows) {
    switch (r.r.status) {
      case RunOutcome::Status::Skipped:
        s += fmt::format("{:<12}skipped: {}\n", r.name, r.r.note);
        break;
      case RunOutcome::Status::Failed:
        if (r.r.device_error) {  // nothing was measured: the reason is the row
          s += fmt::format("{:<12}{}\n", r.name, r.r.note);
          break;
        }
        s += fmt::format("{:<12}{:>11}{:>10}{:>9}{:>12}{:>{}}{:>13}{:>11}{:>9}{:>11.2e}  FAIL (not timed)\n", r.name,
                         "--", "--", "--", report::format_bytes_decimal(double(r.r.peak_extra_bytes)), "--", ops_w,
                         report::format_bytes_decimal(r.bytes), "--", "--", r.r.err.max_abs);
        break;
      case RunOutcome::Status::Ok:
        s += fmt::format("{:<12}{:>11.3f}{:>10.1f}{:>8.1f}%{:>12}{:>{}}{:>13}{:>11}{:>9}{:>11.2e}  OK\n", r.name, r.ms,
                         r.gflops * scale, r.pct_peak, report::format_bytes_decimal(double(r.r.peak_extra_bytes)),
                         r.ops ? fmt::format("{:.0f}", *r.ops) : "--", ops_w, report::format_bytes_decimal(r.bytes),
                         r.floor ? fmt::format("{:.3f}", r.floor->ns * 1e-6) : "--",
                         r.floor ? analysis::floor_bound_kind(r.floor->memory_share()) : "--", r.r.err.max_abs);
        break;
    }
  }
  return s + rule + "\n";
}

// The peer's rows under the comparison: the same first columns, what ran instead of attnprof's profile columns,
// and how the fastest attnprof variant stands against the fastest peer row.
std::string render_peers(const PeerRun& peers, const std::vector<Row>& rows, const AttnProblem& p, const Target& t) {
  const std::string rule(120 + 7, '-');
  std::string s = fmt::format(
      "Peer: torch {} ('{}', {}), on the same inputs and against the same fp64 reference; each forward timed by "
      "time.perf_counter in the peer's process, not profiled.\n",
      peers.torch_version, peers.python, threads_text(peers.threads));
  s += fmt::format("{:<12}{:>11}{:>10}{:>9}{:>11}  {:<7}{}\n", "Variant", "ms/fwd", "GFLOP/s", "% peak", "Max err",
                   "Check", "What ran");
  const PeerRow* best_peer = nullptr;
  for (const PeerRow& r : peers.rows) {
    if (r.status == RunOutcome::Status::Skipped) {
      s += fmt::format("{:<12}skipped: {}\n", r.name, r.note);
      continue;
    }
    const double gflops = gflops_at(p, r.ms);
    s += fmt::format("{:<12}{:>11.3f}{:>10.1f}{:>8.1f}%{:>11.2e}  {:<7}{}\n", r.name, r.ms, gflops,
                     pct_of_peak(t, gflops), r.err.max_abs,
                     r.status == RunOutcome::Status::Ok ? "OK" : "FAIL", r.call);
    if (r.status == RunOutcome::Status::Failed) s += fmt::format("{:<12}{}\n", "", r.note);
    if (r.status == RunOutcome::Status::Ok && (!best_peer || r.ms < best_peer->ms)) best_peer = &r;
  }
  const Row* best = nullptr;
  for (const Row& r : rows)
    if (r.r.status == RunOutcome::Status::Ok && (!best || r.ms < best->ms)) best = &r;
  if (best && best_peer && best->ms > 0) {
    // Marked as the speed-up line marks its ratios: a median on disturbed forwards, either side's.
    const bool mark = report::is_disturbed(best->forward_ms, best->r.sharing, best->on_cpu) ||
                      report::is_disturbed(best_peer->forward_ms, best_peer->sharing);
    s += fmt::format("Fastest against fastest: {} {:.3f} ms, {} {:.3f} ms: attnprof's {:.2f}x{} {}.{}\n", best->name,
                     best->ms, best_peer->name, best_peer->ms,
                     best_peer->ms >= best->ms ? best_peer->ms / best->ms : best->ms / best_peer->ms, mark ? "*" : "",
                     best_peer->ms >= best->ms ? "faster" : "slower", mark ? report::disturbed_ratio_note() : "");
  }
  return s + rule + "\n";
}

nlohmann::json peers_json(const PeerRun& peers, const AttnProblem& p, const Target& t) {
  using nlohmann::json;
  json rows = json::array();
  for (const PeerRow& r : peers.rows) {
    const bool timed = r.status != RunOutcome::Status::Skipped;
    auto when = [timed](json v) { return timed ? v : json(); };
    const double gflops = gflops_at(p, r.ms);
    rows.push_back({{"name", r.name},
                    {"call", r.call},
                    {"status", status_name(r.status)},
                    {"note", r.note},
                    {"ms", when(r.ms)},
                    {"forward_ms", r.forward_ms},
                    {"spread", when(report::spread_json(r.forward_ms))},
                    {"cpu_sharing", report::cpu_sharing_json(r.sharing)},
                    {"gflops", when(gflops)},
                    {"pct_peak", when(pct_of_peak(t, gflops))},
                    {"max_abs_err", when(r.err.max_abs)},
                    {"nmse", when(r.err.nmse)},
                    {"tolerance_used", when(std::isfinite(r.err.tol_used) ? json(r.err.tol_used) : json())},
                    {"tolerance", {{"atol", r.tol.atol}, {"rtol", r.tol.rtol}}}});
  }
  return {{"kind", "torch"},
          {"python", peers.python},
          {"torch_version", peers.torch_version},
          {"threads", peers.threads},
          {"timing", "time.perf_counter around each forward, in the peer's process"},
          {"rows", rows}};
}

// The variants whose rows failed validation, or failed on the GPU (for the exit code and its line); or, exit 1
// as well, no row measured at all.
void exit_by_outcome(const std::vector<Row>& rows) {
  std::vector<std::string> invalid, device;
  for (const Row& r : rows)
    if (r.r.status == RunOutcome::Status::Failed) (r.r.device_error ? device : invalid).push_back(r.name);
  exit_if_validation_failed(invalid, device);
  const size_t skipped = size_t(std::count_if(rows.begin(), rows.end(), [](const Row& r) {
    return r.r.status == RunOutcome::Status::Skipped;
  }));
  exit_if_nothing_measured(rows.size() - skipped, skipped, "variant");
}

// Writes compare.json, compare.txt and compare.csv, commits them with the variants' files in `outputs`, writes
// (with --html) the report from them, then prints the table or the JSON.
void finish(const CommonOptions& o, const nlohmann::json& j, const Text& text, report::FileBatch& outputs) {
  write_json(out_path(o.out, "compare.json"), j);
  report::write_text_atomic(out_path(o.out, "compare.txt"), text.full);
  report::write_text_atomic(out_path(o.out, "compare.csv"), report::compare_csv(j));
  outputs.commit();
  for (const nlohmann::json& v : j["variants"])
    if (v.contains("trace") && v["trace"].is_string()) remove_other_format_trace(o.out, v["name"].get<std::string>(), o);
  write_html_if_asked(o);
  if (o.json) print_out("{}\n", json_text(j));
  else print_out("{}", text.shown(o));
}

// compare --device cuda, once use_cuda has found the GPU: the CUDA registry on it (run_cuda_variant:
// validated against the fp64 reference, one forward profiled through CUPTI for its activity count, tables
// and trace, then at least 20 forwards timed with CUDA events on device tensors uploaded once).
void run_compare_cuda(const CompareArgs& a) {
  const CommonOptions& o = a.common;
  apply_runtime_options(o, /*gpu=*/true);
  check_html_if_asked(o);
  const Inputs in = make_inputs(o);
  const std::vector<const Variant*> variants = selected(a.variants, cuda::cuda_registry());
  refuse_inputs_in_out(o, names_of(variants), kCompareFiles);
  prepare_out_dir(o.out);
  check_out_files(o, names_of(variants), kCompareFiles);
  report::FileBatch outputs;  // this run's files replace the last run's together, or not at all
  const cuda::DeviceInfo dev = cuda::device_info();
  const Target t = device_target(dev, in.p.dtype);
  progress(fmt::format("attnprof compare --device cuda: {} variant{} on {} at {}", variants.size(),
                       variants.size() == 1 ? "" : "s", dev.name, in.p.str()));
  LazyReference ref(in);
  RunPlan plan;
  plan.warmup = o.warmup;
  plan.schedule = {.wait = 0, .warmup = 0, .active = 1};
  plan.software_counters = a.counters;
  plan.event_iters = std::max(o.iters, 20);
  std::vector<Row> rows;
  std::string tables;
  std::string cupti_note;  // why CUPTI could not collect, if it could not
  for (const Variant* v : variants) {
    Row row = make_row(*v, run_cuda_variant(*v, in, ref, plan, v->name), in, t, o);
    if (row.r.status == RunOutcome::Status::Ok) {
      if (!row.r.cupti_note.empty()) cupti_note = row.r.cupti_note;
      const report::TableOptions topt = row.r.result.has_device
                                            ? report::TableOptions{.sort_by = "cuda_time_total", .peaks = t.m,
                                                                   .visible_share = visible_share(in.p)}
                                            : report::TableOptions{.peaks = std::nullopt,
                                                                   .visible_share = visible_share(in.p)};
      const std::string table = report::table(row.r.ka, topt) +
                                (row.r.result.has_device ? report::device_table(row.r.result) : std::string());
      write_row_files(row, o.out, table, report::table_csv(row.r.ka, topt));
      tables += row.r.result.has_device
                    ? fmt::format("\n{} (one forward, CUPTI):\n{}", v->name, table)
                    : fmt::format("\n{} (one forward, host side only: {}):\n{}", v->name, row.r.cupti_note, table);
      progress(fmt::format("{}: {:.3f} ms/forward, {} device activities", v->name, row.ms,
                           row.ops ? fmt::format("{:.0f}", *row.ops) : "--"));
    } else {
      progress(fmt::format("{}: {}: {}", v->name, status_name(row.r.status), row.r.note));
    }
    row.r.result = prof::ProfileResult{};  // written; free the events
    rows.push_back(std::move(row));
  }
  Text text = render_rows(
      rows, fmt::format("attnprof compare — {}, {} ({}), inputs {}", in.p.str(), dev.name, t.m.isa, in.source), t);
  text += ratio_lines(rows, /*gpu=*/true);
  text.define(fmt::format("TFLOP/s: {}; % peak of the {} datasheet peak {:.0f} TFLOP/s.\n", flops_legend(in.p),
                          dtype_name(in.p.dtype), t.peak * 1e-3));
  text += over_peak_note(t, over_peak(rows));
  text.define(floor_legend(t));
  text.define("Activities: kernels, copies and fills one forward puts on the GPU (CUPTI). Peak mem: device bytes "
              "one forward allocates above its inputs (decimal units, 1 MB = 10^6 B).\n");
  if (!cupti_note.empty())
    text += fmt::format("CUPTI could not collect ({}): activities are '--' and the tables are host-side only.\n",
                        cupti_note);
  text += noisy_rows_note(rows, "");
  text += tables;
  nlohmann::json j = problem_json(in, o, t);
  // The device path warms up for the count only (CUDA events time the device, not the host heap).
  j.update({{"device", "cuda"}, {"gpu", dev.name}, {"warmup_min_s", 0.0}, {"variants", nlohmann::json::array()}});
  for (const Row& r : rows) j["variants"].push_back(row_json(r));
  finish(o, j, text, outputs);
  exit_by_outcome(rows);
}

void run_compare(const CompareArgs& a) {
  check_peer_options(a.peer, /*gpu=*/a.device == "cuda");
  if (use_cuda(a.device)) return run_compare_cuda(a);
  const CommonOptions& o = a.common;
  apply_runtime_options(o, /*gpu=*/false, /*block_list=*/true);
  check_html_if_asked(o);
  const std::vector<const Variant*> variants = selected(a.variants, registry());
  check_flash_block_applies(o, variants);  // before the inputs are drawn
  const std::vector<FlashBlock> blocks = flash_blocks(o);
  const std::vector<Job> jobs = jobs_of(variants, blocks);
  const Inputs in = make_inputs(o);
  const std::string torch_version = probe_peer(a.peer);  // after the cheap checks, before anything runs
  refuse_inputs_in_out(o, job_names(jobs), kCompareFiles);
  prepare_out_dir(o.out);
  check_out_files(o, job_names(jobs), kCompareFiles);
  report::FileBatch outputs;  // this run's files replace the last run's together, or not at all
  const int threads = ops::num_threads();
  const double t_start = now_s();
  progress(fmt::format("attnprof compare: {} {} at {}, {}{}", jobs.size(),
                       jobs.size() == variants.size() ? (jobs.size() == 1 ? "variant" : "variants") : "rows",
                       in.p.str(), threads_text(threads), flash_block_note(blocks)));
  progress("measuring (or loading cached) machine peaks");
  const Target t = host_target(threads, in.p.dtype);
  prepare_libraries(variants, in);  // OpenBLAS refused under ulimit -v stops the run before the first variant
  LazyReference ref(in);

  RunPlan plan;
  plan.warmup = o.warmup;
  plan.warmup_min_s = warmup_floor_s(o);
  plan.schedule = {.wait = 0, .warmup = 0, .active = o.iters};
  plan.software_counters = a.counters;
  std::vector<Row> rows;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Variant& v = *jobs[i].v;
    if (jobs[i].block.rows > 0) set_flash_block(jobs[i].block);
    const std::string label = fmt::format("[{}/{}] {}", i + 1, jobs.size(), jobs[i].name);
    Row row = make_row(v, run_variant(v, in, ref, plan, label), in, t, o);
    row.name = jobs[i].name;
    row.trace = trace_file(row.name, o);
    if (runs_cpu_flash({&v}) && row.r.status != RunOutcome::Status::Skipped) row.block = flash_block();
    if (row.r.status == RunOutcome::Status::Ok) {
      // The table profile prints by default: sorted by CPU total, 15 rows, each op's roofline verdict.
      const report::TableOptions topt{
          .sort_by = "cpu_time_total", .row_limit = 15, .peaks = t.m, .visible_share = visible_share(in.p)};
      write_row_files(row, o.out, report::table(row.r.ka, topt) + uneven_text(row.r.ka),
                      report::table_csv(row.r.ka, topt));
      progress(fmt::format("{}: {:.3f} ms/forward, max abs error {:.2e}", label, row.ms, row.r.err.max_abs));
    } else {
      progress(fmt::format("{}: {}: {}", label, status_name(row.r.status), row.r.note));
    }
    row.r.result = prof::ProfileResult{};  // written; free the events
    rows.push_back(std::move(row));
  }
  std::optional<PeerRun> peers;
  if (a.peer.on()) {
    progress(fmt::format("peer: torch {} in '{}': the blog's script and SDPA, {} warm-up and {} timed forwards",
                         torch_version, a.peer.python, o.warmup, o.iters));
    // The unfused variants' bound: torch's bf16 ops round between ops as naive's do.
    const Tolerance tol = find_variant("naive").tolerance(in.p.dtype);
    peers = run_torch_peer(in, a.peer.python, torch_version, threads, o.warmup, plan.warmup_min_s, o.iters, tol,
                           [&ref](const Tensor& out, const Tolerance& t) { return compare_to_reference(out, ref.get(), t); },
                           a.peer.timeout);
    for (const PeerRow& r : peers->rows)
      progress(r.status == RunOutcome::Status::Skipped
                   ? fmt::format("peer {}: skipped: {}", r.name, r.note)
                   : r.status == RunOutcome::Status::Failed
                   ? fmt::format("peer {}: {:.3f} ms/forward, {}", r.name, r.ms, r.note)
                   : fmt::format("peer {}: {:.3f} ms/forward, max abs error {:.2e}", r.name, r.ms, r.err.max_abs));
  }

  const std::string sdpa_auto{sdpa_backend_name(sdpa_select_backend(in.p))};
  const std::optional<std::string> reclaim = analysis::memory_reclaim_note();
  nlohmann::json j = problem_json(in, o, t);
  j["machine"]["memory_reclaim"] = reclaim.value_or("");
  j["machine"]["bf16_matmul"] = ops::bf16_matmul_key();
  j.update({{"threads", threads}, {"sdpa_auto_backend", sdpa_auto}, {"variants", nlohmann::json::array()}});
  // The CPU flash kernel's blocks, where a row ran it (flash, sdpa-flash), so diff can name a change of them: one
  // pair when every such row ran the same, null when none did or a list gave each its own (each row says).
  std::optional<FlashBlock> run_block;
  bool one_block = true;
  for (const Row& r : rows)
    if (r.block.rows > 0) {
      one_block = one_block && (!run_block || (run_block->rows == r.block.rows && run_block->cols == r.block.cols));
      run_block = r.block;
    }
  j["flash_block"] = run_block && one_block ? nlohmann::json{run_block->rows, run_block->cols} : nlohmann::json();
  for (const Row& r : rows) j["variants"].push_back(row_json(r));
  if (peers) j["peers"] = peers_json(*peers, in.p, t);

  Text text = render_rows(
      rows,
      fmt::format("attnprof compare — {}, {}{}, inputs {}", in.p.str(), threads_text(threads),
                  flash_block_note(blocks), in.source),
      t);
  text += ratio_lines(rows, /*gpu=*/false);
  if (peers) text += render_peers(*peers, rows, in.p, t);
  text.define(fmt::format("GFLOP/s: {}.\n", flops_legend(in.p)));
  // The peak itself is a figure of this run, which --brief keeps: the % peak column is over it.
  text += fmt::format("% peak: of the measured {} peak, {:.1f} GFLOP/s on {} ({}; sgemm {:.1f} GFLOP/s).{}\n",
                      t.peak_kind, t.peak, threads_text(t.m.threads), t.peak_isa, t.m.sgemm_gflops, dispatch_note(t));
  {
    std::vector<std::string> over = over_peak(rows);
    if (peers)
      for (const PeerRow& r : peers->rows)
        if (r.status != RunOutcome::Status::Skipped && r.ms > 0 && pct_of_peak(t, gflops_at(in.p, r.ms)) > 100)
          over.push_back(r.name);
    text += over_peak_note(t, over);
  }
  text.define(floor_legend(t));
  text.brief_only(busy_peaks_line(t.m));
  if (const std::string lib = report::library_peaks_note(t.m); !lib.empty()) text += "Floor ms: " + lib + ".\n";
  text.define("Peak mem: bytes one forward allocates at its peak above its inputs (tracked allocator). Peak mem and "
              "Bytes moved are in decimal units (1 MB = 10^6 B); the torch-style tables print torch's binary ones "
              "(1 Mb = 2^20 B).\n");
  // The blog's counts are of its causal forward: without a mask there is no fill, and no copy of one.
  text.define(fmt::format("Ops: ops per forward that do work of their own, the passes a GPU launches a kernel for{}; "
                          "views and wrappers whose work is their children's (masked_fill, SDPA's entry points) are "
                          "not counted.\n",
                          in.p.mask == MaskKind::Causal ? " (the blog's counts: naive 6, in-place 5)" : ""));
  // Which backend `sdpa` alone (profile sdpa, the torch call) would take: said where an SDPA row ran.
  const bool sdpa_ran = std::any_of(rows.begin(), rows.end(), [](const Row& r) {
    return r.name.rfind("sdpa", 0) == 0 && r.r.status != RunOutcome::Status::Skipped;
  });
  text.define("Max err: max |out - fp64 reference|; Check: OK when every element is within its variant's "
              "tolerance.\n");
  // The backend a call that names none would take, beside the rows that name theirs: a finding.
  if (sdpa_ran)
    text += fmt::format("Without a backend named (`profile sdpa`, a torch call's default), {}.\n", sdpa_selection_note(in.p));
  // Which GEMM the unfused bf16 variants ran on: below AVX-512 they are not oneDNN's, and a reader comparing
  // with another machine must know it.
  std::vector<std::string> unfused;
  for (const Row& r : rows)
    if ((r.name == "naive" || r.name == "inplace") && r.r.status != RunOutcome::Status::Skipped) unfused.push_back(r.name);
  if (const std::string note = report::unfused_matmul_note(dtype_name(in.p.dtype), ops::bf16_matmul_key(),
                                                           fmt::format("{}", fmt::join(unfused, ", ")));
      !unfused.empty() && !note.empty())
    text += note + "\n";  // which GEMM ran: a fact of this run, kept under --brief
  text += oversubscribed_line(threads);
  // On a machine that hands freed memory back to its hypervisor, that is the likely cause of a noisy row.
  text += noisy_rows_note(rows, reclaim.value_or(""), peers ? &*peers : nullptr);
  finish(o, j, text, outputs);
  // What was written: only a variant that ran and passed its check has a trace, summary, table and stacks.
  const size_t ran = size_t(std::count_if(rows.begin(), rows.end(), [](const Row& r) {
    return r.r.status == RunOutcome::Status::Ok;
  }));
  const std::string per_variant =
      ran == 0            ? " (no variant ran and passed: no trace, summary, table or stacks)"
      : ran == rows.size() ? " and each variant's trace, summary, table, table CSV and stacks"
                           : fmt::format(" and the trace, summary, table, table CSV and stacks of the {} that ran and passed",
                                         ran == 1 ? "one variant" : fmt::format("{} variants", ran));
  progress(fmt::format("compare finished in {:.1f} s; wrote {}{}", elapsed_s(t_start),
                       out_path(o.out, "compare.{json,txt,csv}"), per_variant));
  exit_by_outcome(rows);
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* sub = app.add_subcommand("compare", "every variant and SDPA backend on one shape, one table");
  sub->add_option("--device", args->device, "cpu (default) or cuda (the CUDA registry, timed on the GPU)");
  sub->add_option("--variants", args->variants,
                  "comma-separated subset; sdpa = every SDPA backend (default: all of " + variant_names() + ")");
  sub->add_flag("--counters", args->counters,
                "software counters in each variant's table and summary, as profile --counters records them: page "
                "faults per op (every thread's), task-clock per forward; attnprof diff of two summaries then shows "
                "each op's faults");
  add_peer_options(sub, args->peer, "beside the variants", "the run ends with an error, writing nothing");
  add_common_options(sub, args->common, {.warmup = 1, .iters = 3, .file_inputs = true, .traces = true});
  sub->footer(variants_help());
  sub->callback([args] { run_compare(*args); });
}

}  // namespace attnprof::cli
