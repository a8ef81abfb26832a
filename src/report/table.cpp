// The torch.profiler key_averages().table() layout, plus attnprof's columns; the device and thread-balance tables;
// the time and byte formats every reporter prints (format_time_ns, format_bytes, format_bytes_decimal). The notes
// printed beside the tables are in notes.cpp.
//
// Layout rules taken from torch/autograd/profiler_util.py (_build_table) and checked against a real table
// (shared/reference/torch-1.13-naive-attention-table.txt): every column right-aligned and followed by two
// spaces; numeric columns 12 wide; the name column min(longest name + 4, 55) wide, names of 52+ characters
// cut to 52 + "..."; dashed rules above and below the header and at the end; times with 3 decimals and
// us/ms/s; percentages of the Self CPU time total with 2 decimals; FLOPs scaled by the smallest non-zero
// value (Total KFLOPs/MFLOPs/GFLOPs...). Where torch prints `--` for FLOPs, we print the cost model's value:
// `--` appears only for zones with no cost model anywhere in their subtree (e.g. transpose, a view).
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "attnprof/error.h"
#include "attnprof/report.h"
#include "report/item_text.h"
#include "report/text_width.h"

namespace attnprof::report {

std::string format_time_ns(double ns) {
  const double us = ns * 1e-3;
  if (us >= 1e6) return fmt::format("{:.3f}s", us * 1e-6);
  if (us >= 1e3) return fmt::format("{:.3f}ms", us * 1e-3);
  return fmt::format("{:.3f}us", us);
}

std::string format_thread_gflops(double flops, double thread_ns) {
  return flops > 0 && thread_ns > 0 ? fmt::format("{:.1f}", flops / thread_ns) : std::string("--");
}

std::string format_exponent(double x, int decimals) {
  return x != 0 && std::abs(x) < 0.5 * std::pow(10.0, -decimals) ? fmt::format("{:.1e}", x)
                                                                  : fmt::format("{:.{}f}", x, decimals);
}

std::string format_bytes(int64_t bytes) {
  constexpr double KB = 1024.0, MB = 1024.0 * KB, GB = 1024.0 * MB;
  const double b = double(bytes), a = std::fabs(b);
  if (a >= GB) return fmt::format("{:.2f} Gb", b / GB);
  if (a >= MB) return fmt::format("{:.2f} Mb", b / MB);
  if (a >= KB) return fmt::format("{:.2f} Kb", b / KB);
  return fmt::format("{} b", bytes);
}

std::string format_bytes_decimal(double b) {
  const double a = std::fabs(b);
  if (a >= 1e9) return fmt::format("{:.2f} GB", b * 1e-9);
  if (a >= 1e6) return fmt::format("{:.1f} MB", b * 1e-6);
  if (a >= 1e3) return fmt::format("{:.1f} KB", b * 1e-3);
  return fmt::format("{:.0f} B", b);
}

namespace {

using detail::display_width;
using detail::pad_left;
using detail::pad_right;

constexpr int kNumWidth = 12;
constexpr int kSpacing = 2;
constexpr size_t kMaxNameWidth = 55;
constexpr size_t kMaxShapesWidth = 80;

using SortKey = std::function<double(const analysis::OpStats&)>;

SortKey sort_key(const std::string& key, bool has_device) {
  using analysis::OpStats;
  auto avg = [](double ns, int64_t calls) { return calls ? ns / double(calls) : 0.0; };
  if (key == "cpu_time") return [=](const OpStats& s) { return avg(s.total_ns, s.calls); };
  if (key == "cpu_time_total") return [](const OpStats& s) { return s.total_ns; };
  if (key == "self_cpu_time_total") return [](const OpStats& s) { return s.self_ns; };
  if (key == "cpu_memory_usage") return [](const OpStats& s) { return double(s.mem_bytes); };
  if (key == "self_cpu_memory_usage") return [](const OpStats& s) { return double(s.self_mem_bytes); };
  if (key == "count") return [](const OpStats& s) { return double(s.calls); };
  // FLOPs, and attnprof's own columns: the rates and the intensity as the table prints them (-1 for a row without
  // a cost, which sorts it last, after a costed row whose figure is 0: copy_'s FLOPs and GFLOP/s), and the
  // software counters' faults (-1 when not recorded: last as well).
  auto costed = [](const OpStats& s, double v) { return s.cost.does_work() ? v : -1.0; };
  if (key == "flops") return [=](const OpStats& s) { return costed(s, s.cost.flops); };
  if (key == "gflops") return [=](const OpStats& s) { return costed(s, s.rate_ns() > 0 ? s.cost.flops / s.rate_ns() : 0.0); };
  if (key == "gbs") return [=](const OpStats& s) { return costed(s, s.rate_ns() > 0 ? s.cost.bytes() / s.rate_ns() : 0.0); };
  if (key == "flop_per_byte") return [=](const OpStats& s) { return costed(s, s.cost.bytes() > 0 ? s.cost.intensity() : 0.0); };
  if (key == "bytes") return [=](const OpStats& s) { return costed(s, s.cost.bytes()); };
  if (key == "page_faults") return [](const OpStats& s) { return double(s.page_faults); };
  if (key == "self_page_faults") return [](const OpStats& s) { return double(s.self_page_faults); };
  if (has_device) {
    if (key == "cuda_time") return [=](const OpStats& s) { return avg(s.device_total_ns, s.calls); };
    if (key == "cuda_time_total") return [](const OpStats& s) { return s.device_total_ns; };
    if (key == "self_cuda_time_total") return [](const OpStats& s) { return s.self_device_ns; };
    if (key == "cuda_memory_usage") return [](const OpStats& s) { return double(s.device_mem_bytes); };
    if (key == "self_cuda_memory_usage") return [](const OpStats& s) { return double(s.self_device_mem_bytes); };
  }
  ATTNPROF_FAIL(
      "unknown sort key '{}': expected one of cpu_time, cpu_time_total, self_cpu_time_total, cpu_memory_usage, "
      "self_cpu_memory_usage, count, flops (torch's), gflops, gbs, flop_per_byte, bytes, page_faults, "
      "self_page_faults (attnprof's columns){}",
      key,
      has_device ? ", cuda_time, cuda_time_total, self_cuda_time_total, cuda_memory_usage, self_cuda_memory_usage"
      : key.rfind("cuda", 0) == 0 || key.rfind("self_cuda", 0) == 0 ? " (this profile has no CUDA times)"
                                                                    : "");
}

std::string pct(double part, double whole) { return fmt::format("{:.2f}%", whole > 0 ? 100.0 * part / whole : 0.0); }

// torch's auto_scale_flops: the unit of the smallest non-zero value.
std::pair<double, std::string> flops_scale(double min_flops) {
  static const char* kHeaders[] = {"FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs"};
  const double lg = std::max(0.0, std::min(std::log10(min_flops) / 3.0, 5.0));
  const int i = int(std::floor(lg));
  return {std::pow(10.0, -3.0 * i), kHeaders[i]};
}

std::string rate(double amount, double ns) {
  // amount per ns = giga-amount per second.
  return ns > 0 ? fmt::format("{:.3f}", amount / ns) : std::string("--");
}

class Layout {
 public:
  void add(size_t width) { widths_.push_back(width); }
  std::string rule() const {
    std::string s;
    for (size_t w : widths_) s += std::string(w, '-') + std::string(kSpacing, ' ');
    return s + "\n";
  }
  std::string row(const std::vector<std::string>& cells) const {
    std::string s;
    for (size_t i = 0; i < widths_.size(); ++i) s += fmt::format("{:>{}}", cells[i], widths_[i]) + std::string(kSpacing, ' ');
    return s + "\n";
  }

 private:
  std::vector<size_t> widths_;
};

// The rows in the table's order: by `sort_by`, descending, ties in key_averages' order. Throws Error on an
// unknown key.
std::vector<const analysis::OpStats*> sorted_rows(const analysis::KeyAverages& ka, const std::string& sort_by) {
  const SortKey key = sort_key(sort_by, ka.has_device);
  std::vector<const analysis::OpStats*> rows;
  rows.reserve(ka.rows.size());
  for (const analysis::OpStats& s : ka.rows) rows.push_back(&s);
  std::stable_sort(rows.begin(), rows.end(), [&](auto* a, auto* b) { return key(*a) > key(*b); });
  return rows;
}

// The Bound column's verdict on one row: which roof holds it and how near it came (NaN when the op has no
// ceiling to be held to). None for a row that gets no verdict: no cost or no time, an annotation, or a region
// (ProfilerStep#N) or wrapper whose cost is all its children's (masked_fill, scaled_dot_product_attention),
// which may hold ops on both sides of the ridge, so its summed FLOP/B would judge none of them. An op with a
// cost of its own is judged on its whole cost.
struct Verdict {
  bool memory_bound = false;
  double roof_fraction = std::nan("");
};
std::optional<Verdict> verdict(const analysis::OpStats& s, const analysis::MachinePeaks& peaks) {
  const double ns = s.rate_ns();
  if (!s.cost.does_work() || !(ns > 0) || analysis::is_annotation(s.name, s.category) || !s.self_cost.does_work())
    return std::nullopt;
  const analysis::RooflinePoint pt = analysis::place(s.cost, ns, peaks);
  // An op that only moves bytes (copy_) is held to the bandwidth alone: its GB/s over it.
  const double frac = s.cost.flops > 0 ? (pt.attainable_gflops > 0 ? pt.fraction_of_attainable : std::nan(""))
                      : peaks.bandwidth_gbs > 0 ? pt.fraction_of_bandwidth
                                                : std::nan("");
  return Verdict{pt.memory_bound, frac};
}

}  // namespace

std::string table(const analysis::KeyAverages& ka, const TableOptions& opt) {
  const bool dev = ka.has_device;
  const std::vector<const analysis::OpStats*> rows = sorted_rows(ka, opt.sort_by);

  // Column widths come from every row, before the row limit, as torch computes them.
  size_t name_width = 4;
  size_t shapes_width = 12;
  double min_flops = 0.0;
  bool any_cost = false;
  for (auto* s : rows) {
    name_width = std::max(name_width, s->name.size() + 4);
    shapes_width = std::max(shapes_width, s->input_shapes.size() + 4);
    if (s->cost.flops > 0) min_flops = min_flops > 0 ? std::min(min_flops, s->cost.flops) : s->cost.flops;
    any_cost = any_cost || s->cost.does_work();
  }
  name_width = std::min(name_width, kMaxNameWidth);
  // Software counters (task-clock, page-faults) get two columns when any row has them.
  const bool counters = std::any_of(rows.begin(), rows.end(), [](auto* s) {
    return s->task_clock_ns >= 0 || s->page_faults >= 0 || s->self_page_faults >= 0;
  });
  shapes_width = std::min(shapes_width, kMaxShapesWidth);
  const auto [fscale, fheader] = min_flops > 0 ? flops_scale(min_flops) : std::pair<double, std::string>{1.0, "FLOPs"};
  const bool bound = opt.extra_columns && opt.peaks.has_value();

  // torch's column order: CPU times, CUDA times, CPU memory, CUDA memory, calls, shapes, FLOPs.
  Layout layout;
  std::vector<std::string> header = {"Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"};
  if (dev) header.insert(header.end(), {"Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"});
  // As torch's table, the memory columns only where memory was profiled (profile_memory).
  const bool mem = ka.has_memory;
  if (mem) header.insert(header.end(), {"CPU Mem", "Self CPU Mem"});
  if (mem && dev) header.insert(header.end(), {"CUDA Mem", "Self CUDA Mem"});
  header.push_back("# of Calls");
  layout.add(name_width);
  for (size_t i = 1; i < header.size(); ++i) layout.add(kNumWidth);
  size_t types_width = 12;  // the inputs' element types beside their shapes (attnprof's; torch has none)
  for (auto* s : rows) types_width = std::max(types_width, s->input_types.size() + 4);
  types_width = std::min(types_width, kMaxShapesWidth);
  if (opt.show_input_shapes) {
    header.push_back("Input Shapes");
    layout.add(shapes_width);
    header.push_back("Input Types");
    layout.add(types_width);
  }
  if (any_cost) {
    header.push_back("Total " + fheader);
    layout.add(kNumWidth);
  }
  if (opt.extra_columns) {
    for (const char* h : {"GFLOP/s", "GB/s", "FLOP/B"}) {
      header.push_back(h);
      layout.add(kNumWidth);
    }
    if (bound) {
      // The verdict from the cost model (which roof), and how near the op came to it (a measurement).
      for (const char* h : {"Bound", "% roof"}) {
        header.push_back(h);
        layout.add(kNumWidth);
      }
    }
  }
  if (counters) {
    for (const char* h : {"Task clock", "Self faults", "Page faults"}) {
      header.push_back(h);
      layout.add(kNumWidth);
    }
  }

  std::string out = layout.rule();
  out += layout.row(header);
  out += layout.rule();
  const double total = ka.self_total_ns;
  int shown = 0;
  for (auto* s : rows) {
    if (opt.row_limit >= 0 && shown >= opt.row_limit) break;
    ++shown;
    std::string name = s->name;
    if (name.size() >= kMaxNameWidth - 3) name = name.substr(0, kMaxNameWidth - 3) + "...";
    const double calls = s->calls ? double(s->calls) : 1.0;
    std::vector<std::string> cells = {name,
                                      pct(s->self_ns, total),
                                      format_time_ns(s->self_ns),
                                      pct(s->total_ns, total),
                                      format_time_ns(s->total_ns),
                                      format_time_ns(s->total_ns / calls)};
    if (dev)
      cells.insert(cells.end(), {format_time_ns(s->self_device_ns), pct(s->self_device_ns, ka.device_self_total_ns),
                                 format_time_ns(s->device_total_ns), format_time_ns(s->device_total_ns / calls)});
    if (mem) cells.insert(cells.end(), {format_bytes(s->mem_bytes), format_bytes(s->self_mem_bytes)});
    if (mem && dev) cells.insert(cells.end(), {format_bytes(s->device_mem_bytes), format_bytes(s->self_device_mem_bytes)});
    cells.push_back(fmt::format("{}", s->calls));
    if (opt.show_input_shapes) {
      cells.push_back(s->input_shapes.substr(0, shapes_width));
      cells.push_back(s->input_types.substr(0, types_width));
    }
    const bool costed = s->cost.does_work();
    // torch's FLOPs column: "--" for an op that counts none (copy_ moves bytes only), as for one with no model.
    if (any_cost) cells.push_back(s->cost.flops > 0 ? fmt::format("{:.3f}", s->cost.flops * fscale) : "--");
    if (opt.extra_columns) {
      // Rates over device time where the row's work ran on the device, else over CPU time.
      const double ns = s->rate_ns();
      cells.push_back(costed ? rate(s->cost.flops, ns) : "--");
      cells.push_back(costed ? rate(s->cost.bytes(), ns) : "--");
      cells.push_back(costed && s->cost.bytes() > 0 ? fmt::format("{:.3f}", s->cost.intensity()) : "--");
      if (bound) {
        if (const std::optional<Verdict> v = verdict(*s, *opt.peaks)) {
          cells.push_back(v->memory_bound ? "memory" : "compute");
          cells.push_back(std::isfinite(v->roof_fraction) ? fmt::format("{:.1f}%", 100.0 * v->roof_fraction)
                                                          : std::string("--"));
        } else {
          cells.insert(cells.end(), {"--", "--"});
        }
      }
    }
    if (counters) {
      cells.push_back(s->task_clock_ns >= 0 ? format_time_ns(double(s->task_clock_ns)) : "--");
      cells.push_back(s->self_page_faults >= 0 ? fmt::format("{}", s->self_page_faults) : "--");
      cells.push_back(s->page_faults >= 0 ? fmt::format("{}", s->page_faults) : "--");
    }
    out += layout.row(cells);
  }
  out += layout.rule();
  out += fmt::format("Self CPU time total: {}\n", format_time_ns(total));
  if (dev) out += fmt::format("Self CUDA time total: {}\n", format_time_ns(ka.device_self_total_ns));
  out += fmt::format(
      "Profiler overhead: {:.1f} ns per zone (calibrated), {} zones, {} subtracted from self and total times (each "
      "zone's cost from the zones around it)\n",
      ka.zone_overhead_ns, ka.zones, format_time_ns(ka.overhead_subtracted_ns));
  if (ka.outside_zones_bytes > 0)
    out += fmt::format("Memory outside zones: {} allocated while no zone was open on the allocating thread (in no row)\n",
                       format_bytes(ka.outside_zones_bytes));
  if (!ka.counters_note.empty()) out += fmt::format("Counters: {}\n", ka.counters_note);
  if (mem && opt.definitions)
    out += "CPU Mem: bytes allocated in the op and its children, summed over its calls; frees are not subtracted "
           "(torch nets them out, so its Self CPU Mem can go negative): a forward's peak is compare's Peak mem, and "
           "the summary keeps the frees as freed_bytes.\n";
  if (!mem || !ka.has_shapes)
    out += fmt::format("Not recorded: {}.\n",
                       !mem && !ka.has_shapes ? "memory (profile_memory off) and input shapes (record_shapes off)"
                       : !mem                 ? "memory (profile_memory off)"
                                              : "input shapes (record_shapes off)");
  if (opt.extra_columns && any_cost && opt.definitions) {
    // What this profile holds: a matmul computes every score; a fused kernel only the pairs it visits.
    bool matmul = false, fused = false;
    for (const analysis::OpStats& r : ka.rows) {
      matmul = matmul || r.name == "matmul" || r.name.find("gemm") != std::string::npos;
      fused = fused || r.name.find("flash") != std::string::npos;
    }
    const double visible = opt.visible_share;
    std::string flops = "FLOPs: what each op computed";
    if (visible > 0 && visible < 1) {
      flops += fmt::format(". Attention's convention, which compare's GFLOP/s use, counts {:.1f} % of the Nq·Nk "
                           "(query, key) pairs (FlashAttention's causal count, which takes the diagonal's pairs "
                           "as halves: min(Nq, Nk)/2 pairs a head under what the mask lets through)",
                           100 * visible);
      if (matmul)
        flops += fmt::format(". A matmul computes every score, masked or not: the unfused matmuls count {:.2f}x the "
                             "convention's FLOPs, and the elementwise ops add theirs",
                             1 / visible);
      if (fused) flops += ". A fused kernel (flash_attention_fwd) counts by the convention";
    } else if (visible == 1) {
      flops += matmul ? ". Without a mask every score is attention's work: the matmuls count attention's convention, "
                        "which compare's GFLOP/s use, and the elementwise ops add theirs"
                      : ". Without a mask every score is attention's work, as compare's GFLOP/s count it";
    } else {
      flops += ". A matmul computes every score, masked or not; attention's convention, which compare's GFLOP/s use, "
               "counts only the (query, key) pairs a mask lets through, and so does a fused kernel (flash_attention_fwd)";
    }
    out += flops + ".\n";
  }
  if (bound) {
    const analysis::MachinePeaks& m = *opt.peaks;
    const double bw = m.bandwidth_gbs;
    const bool bf16 = m.bf16_gflops > 0;
    // The ridges (fp32's; bf16's where the CPU has the units), and matmul's own ceilings under a forced lower ISA.
    const std::string fp32_ridge = bw > 0 ? fmt::format("{:.2f}", m.fp32_gflops / bw) : std::string("--");
    const std::string bf16_ridge = bf16 && bw > 0 ? fmt::format("{:.2f}", m.bf16_gflops / bw) : std::string();
    const std::string lib = library_peaks_note(m), lib_text = lib.empty() ? std::string() : " " + lib + ".";
    if (opt.definitions) {
      out += fmt::format(
          "Bound: each op's FLOP/B against the ridge of its own compute ceiling (fp32 {:.1f} GFLOP/s{}; {:.1f} GB/s; "
          "ridge {}{}); annotations, steps and wrappers whose cost is all their children's "
          "(masked_fill, scaled_dot_product_attention) may hold ops of both kinds and get none.{} "
          "% roof: the op's GFLOP/s over what that roof allows at its FLOP/B, min(its compute ceiling, "
          "FLOP/B × bandwidth), or its GB/s over the bandwidth for an op that computes nothing "
          "(copy_): the verdict is the cost model's, this is the measurement's; over 100 %, a memory-bound "
          "op's bytes came from cache, faster than the DRAM bandwidth measured{}, or the memory was busier while "
          "it was measured, and a compute-bound op ran faster than the peak measured: a peak measured low.{}\n",
          m.fp32_gflops, bf16 ? fmt::format(", bf16 {:.1f} GFLOP/s", m.bf16_gflops) : std::string(), bw,
          bw > 0 ? fp32_ridge + " FLOP/B" : fp32_ridge, bf16_ridge.empty() ? "" : " (bf16 " + bf16_ridge + ")", lib_text,
          // Peaks from before the in-place loop: an in-place op beats triad's figure without any cache.
          m.bandwidth_loops.measured() || m.gpu()
              ? ""
              : " (STREAM triad, which an in-place op beats: it skips the read a write-allocate costs triad)",
          m.measured_busy.empty()
              ? std::string()
              : fmt::format(" The peaks were measured on a busy machine ({}), so they may be low and an "
                            "op's % roof high: `attnprof roofline --peaks-only --remeasure` on an idle "
                            "machine measures them again.",
                            m.measured_busy));
    } else {
      // Without the definitions (--brief): the ceilings the verdicts stand on, and a busy machine's low peaks.
      out += fmt::format("Bound: against fp32 {:.1f}{} GFLOP/s and {:.1f} GB/s (ridge {}{} FLOP/B).{}{}\n",
                         m.fp32_gflops, bf16 ? fmt::format(" / bf16 {:.1f}", m.bf16_gflops) : std::string(), bw,
                         fp32_ridge, bf16_ridge.empty() ? "" : " / " + bf16_ridge, lib_text,
                         m.measured_busy.empty()
                             ? std::string()
                             : fmt::format(" Peaks measured on a busy machine ({}), so they may be low and an op's "
                                           "% roof high.",
                                           m.measured_busy));
    }
  }
  return out;
}

std::string table_csv(const analysis::KeyAverages& ka, const TableOptions& opt) {
  const std::vector<const analysis::OpStats*> rows = sorted_rows(ka, opt.sort_by);
  std::string out = csv_line({"name", "category", "input_shapes", "input_types", "calls", "self_cpu_us",
                              "self_cpu_pct", "cpu_total_us", "cpu_total_pct", "cpu_avg_us", "self_cuda_us",
                              "self_cuda_pct", "cuda_total_us", "cuda_avg_us", "cpu_mem_bytes", "self_cpu_mem_bytes",
                              "cuda_mem_bytes", "self_cuda_mem_bytes", "flops", "bytes", "gflops_per_s", "gb_per_s",
                              "flop_per_byte", "bound", "pct_roof", "task_clock_us", "self_page_faults",
                              "page_faults"});
  const auto us = [](double ns) { return csv_number(ns * 1e-3); };
  const auto share = [](double part, double whole) { return csv_number(whole > 0 ? 100.0 * part / whole : 0.0); };
  const auto count = [](int64_t v) { return v >= 0 ? fmt::format("{}", v) : std::string(); };
  for (const analysis::OpStats* s : rows) {
    const double calls = s->calls ? double(s->calls) : 1.0;
    std::vector<std::string> cells = {s->name,
                                      s->category,
                                      opt.show_input_shapes ? s->input_shapes : std::string(),
                                      opt.show_input_shapes ? s->input_types : std::string(),
                                      fmt::format("{}", s->calls),
                                      us(s->self_ns),
                                      share(s->self_ns, ka.self_total_ns),
                                      us(s->total_ns),
                                      share(s->total_ns, ka.self_total_ns),
                                      us(s->total_ns / calls)};
    if (ka.has_device)
      cells.insert(cells.end(), {us(s->self_device_ns), share(s->self_device_ns, ka.device_self_total_ns),
                                 us(s->device_total_ns), us(s->device_total_ns / calls)});
    else
      cells.insert(cells.end(), 4, std::string());
    const auto mem = [&](int64_t bytes, bool device) {
      return ka.has_memory && (!device || ka.has_device) ? fmt::format("{}", bytes) : std::string();
    };
    cells.insert(cells.end(), {mem(s->mem_bytes, false), mem(s->self_mem_bytes, false),
                               mem(s->device_mem_bytes, true), mem(s->self_device_mem_bytes, true)});
    const bool costed = s->cost.does_work();
    const double ns = s->rate_ns();
    if (costed) {
      cells.insert(cells.end(), {csv_number(s->cost.flops), csv_number(s->cost.bytes()),
                                 ns > 0 ? csv_number(s->cost.flops / ns) : std::string(),
                                 ns > 0 ? csv_number(s->cost.bytes() / ns) : std::string(),
                                 s->cost.bytes() > 0 ? csv_number(s->cost.intensity()) : std::string()});
    } else {
      cells.insert(cells.end(), 5, std::string());
    }
    const std::optional<Verdict> v = opt.peaks ? verdict(*s, *opt.peaks) : std::nullopt;
    cells.push_back(v ? (v->memory_bound ? "memory" : "compute") : "");
    cells.push_back(v ? csv_number(100.0 * v->roof_fraction) : std::string());
    cells.push_back(s->task_clock_ns >= 0 ? us(double(s->task_clock_ns)) : std::string());
    cells.push_back(count(s->self_page_faults));
    cells.push_back(count(s->page_faults));
    out += csv_line(cells);
  }
  return out;
}

std::string device_table(const prof::ProfileResult& r, int row_limit) {
  std::vector<analysis::DeviceOpStats> rows = analysis::device_key_averages(r);
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.total_ns > b.total_ns; });
  const double total = analysis::device_time_total_ns(r);
  size_t name_width = 4;
  for (const auto& row : rows) name_width = std::max(name_width, row.name.size() + 4);
  name_width = std::min(name_width, kMaxNameWidth);
  if (row_limit >= 0 && rows.size() > size_t(row_limit)) rows.resize(size_t(row_limit));
  Layout layout;
  const std::vector<std::string> header = {"Name",       "Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg",
                                           "# of Calls", "Grid",      "Block",       "Regs",       "SMem",
                                           "Occupancy",  "TFLOP/s"};
  layout.add(name_width);
  for (size_t i = 1; i < header.size(); ++i) layout.add(kNumWidth);
  auto dims = [](const std::array<int32_t, 3>& d) {
    return d[1] == 1 && d[2] == 1 ? fmt::format("{}", d[0]) : fmt::format("{}x{}x{}", d[0], d[1], d[2]);
  };
  std::string out = layout.rule() + layout.row(header) + layout.rule();
  for (const auto& row : rows) {
    const bool k = row.category == "kernel";
    std::string name = row.name;
    if (name.size() >= kMaxNameWidth - 3) name = name.substr(0, kMaxNameWidth - 3) + "...";
    out += layout.row({name, format_time_ns(row.total_ns), pct(row.total_ns, total), format_time_ns(row.total_ns),
                       format_time_ns(row.total_ns / double(std::max<int64_t>(row.calls, 1))),
                       fmt::format("{}", row.calls), k ? dims(row.grid) : "--", k ? dims(row.block) : "--",
                       k ? fmt::format("{}", row.registers) : "--",
                       k ? format_bytes(row.static_smem + row.dynamic_smem) : "--",
                       k && row.occupancy >= 0 ? fmt::format("{:.1f} %", 100.0 * row.occupancy) : "--",
                       row.cost.flops > 0 && row.total_ns > 0 ? fmt::format("{:.1f}", row.cost.flops / row.total_ns * 1e-3)
                                                               : "--"});
  }
  out += layout.rule();
  out += fmt::format("Self CUDA time total: {}\n", format_time_ns(total));
  out += "Occupancy: estimated achieved occupancy, as Kineto's: the warps the kernel's resident blocks hold per SM "
         "(limited by its registers, shared memory and block size) over the SM's warp slots, capped by the warps its "
         "grid gives each SM.\n";
  return out;
}

std::string thread_balance_table(const std::vector<analysis::ThreadBalance>& rows, bool definitions) {
  if (rows.empty()) return "";
  size_t w = 2;
  for (const auto& r : rows) w = std::max(w, r.name.size());
  std::string out = "Threads: each op's own OpenMP regions (matmul's oneDNN/OpenBLAS threads belong to those libraries)\n";
  out += fmt::format("{:<{}}  {:>7}  {:>7}  {:>7}  {:>12}  {:>10}  {:>12}\n", "Op", w, "Regions", "Threads", "Working",
                     "Slowest/mean", "Late start", "Items/region");
  for (const auto& r : rows)
    out += fmt::format("{:<{}}  {:>7}  {:>7}  {:>5.1f} %  {:>11.2f}x  {:>10}  {:>12}\n", r.name, w, r.regions, r.threads,
                       100 * r.busy_share(), r.imbalance(), format_time_ns(r.lag_ns / double(r.regions)),
                       r.items > 0 ? fmt::format("{:.1f}", double(r.items) / double(r.regions)) : "--");
  // "Working", not "Busy": compare's and sweep's Busy lines say other processes shared the CPUs.
  if (definitions)
    out += "Working: the threads' shares over each region's wall × team (100 % = every thread worked from the region's "
         "first start to its last end); Slowest/mean: the longest share over the mean (2.00x on 2 threads = one "
         "thread did all); Late start: the last thread's start after the first's, the mean over the regions; "
         "Items/region: the tasks or rows the threads shared, per region (-- where the op does not count them).\n";
  return out;
}

std::string phase_table(const std::vector<analysis::OpPhases>& ops, const analysis::MachinePeaks* peaks,
                        DType dtype, bool definitions) {
  std::string out;
  for (const analysis::OpPhases& op : ops) {
    if (op.steps.empty()) continue;
    const double timed = op.steps_ns();
    size_t w = 4;
    for (const auto& st : op.steps) w = std::max(w, display_width(st.name));
    out += fmt::format("Inside {}: each thread's share split by the kernel's steps ({} call{}, {} thread{}; each "
                       "thread's time summed over the threads)\n",
                       op.name, op.regions, op.regions == 1 ? "" : "s", op.threads, op.threads == 1 ? "" : "s");
    out += fmt::format("{}  {:>11}  {:>7}  {:>18}  {:>17}\n", pad_right("Step", w), "Thread time", "%",
                       "GFLOP/s per thread", "% of peak/thread");
    bool over = false;
    for (const auto& st : op.steps) {
      std::string rate = "--", of_peak = "--";
      if (st.flops > 0 && st.ns > 0) {
        const double gflops = st.flops / st.ns;  // FLOPs per ns of one thread's time
        rate = fmt::format("{:.1f}", gflops);
        if (peaks && peaks->threads > 0) {
          OpCost c;
          c.flops = st.flops;
          if (dtype == DType::BF16) c.bf16_flops = st.flops;
          const double core = analysis::compute_ceiling_gflops(c, *peaks) / double(peaks->threads);
          if (core > 0) of_peak = fmt::format("{:.1f} %", 100.0 * gflops / core);
          over = over || (core > 0 && gflops > core);
        }
      }
      out += fmt::format("{}  {:>11}  {:>5.1f} %  {:>18}  {:>17}\n", pad_right(st.name, w), format_time_ns(st.ns),
                         timed > 0 ? 100.0 * st.ns / timed : 0.0, rate, of_peak);
    }
    out += fmt::format("The steps: {} of the shares' {} ({:.1f} %{}).", format_time_ns(timed),
                       format_time_ns(op.share_ns), op.share_ns > 0 ? 100.0 * timed / op.share_ns : 0.0,
                       definitions ? "; the rest is each share's end after its last step" : "");
    if (definitions)
      out += " Thread time is each thread's clock from step to step, time it waited for a CPU included; load Q, K, V "
             "includes handing out the tasks. GFLOP/s per thread: the FLOPs the kernel counted in the step over its "
             "thread time, masked pairs it computed included (the SIMD bodies' Q·Kᵀ counts whole row panels "
             "of a tile on the diagonal, their P·V narrower micro-tiles of rows, so P·V's count is nearer the "
             "visible pairs); % of peak/thread: that over the measured peak its "
             "FLOPs run at divided by the threads it was measured on.";
    out += "\n";
    // A team's peak is under the sum of its threads' rates alone (a core alone clocks higher and has the shared
    // caches to itself), so a thread that worked while the others idled can pass its share of it.
    if (over)
      out += peaks->threads > 1
                 ? fmt::format("Over 100 % of peak/thread: a thread that worked while the team's others idled (the "
                               "Threads table's Working) runs faster than its share of a peak measured on {} threads; "
                               "otherwise the peaks were measured while other work shared the CPUs, and `attnprof "
                               "roofline --peaks-only --remeasure` measures them again.\n",
                               peaks->threads)
                 : std::string("Over 100 % of peak/thread: the peaks were measured while other work shared the CPU; "
                               "`attnprof roofline --peaks-only --remeasure` measures them again.\n");
  }
  return out;
}

std::string phase_line(const std::string& subject, const analysis::OpPhases& op, bool disturbed) {
  const double timed = op.steps_ns();
  if (op.steps.empty() || !(timed > 0)) return "";
  std::string s = fmt::format("Inside {}'s {} (its threads' time):", subject, op.name);
  for (size_t i = 0; i < op.steps.size(); ++i) {
    const auto& st = op.steps[i];
    s += fmt::format("{} {} {:.0f} %", i ? "," : "", st.name, 100.0 * st.ns / timed);
    if (st.flops > 0 && st.ns > 0) s += fmt::format(" at {:.0f} GFLOP/s a thread", st.flops / st.ns);
  }
  return s + (disturbed ? ". Its forwards were disturbed (its Busy or Noisy line): each step is wall time on its "
                          "thread, so a thread made to wait charged the wait to the step it was in; re-measure this "
                          "split on a quiet machine."
                        : ".");
}

namespace detail {
std::string item_fit_text(const analysis::OpItems& op) {
  if (op.fixed_ns < 0)
    return fmt::format("its FLOPs at {:.1f} GFLOP/s and no fixed cost that shows (the line meets zero FLOPs at -{})",
                       op.marginal_gflops, format_time_ns(-op.fixed_ns));
  return fmt::format("{} + its FLOPs at {:.1f} GFLOP/s", format_time_ns(op.fixed_ns), op.marginal_gflops);
}
std::string item_nouns(const analysis::OpItems& op, int64_t n) { return n == 1 ? op.noun : op.noun + "s"; }
std::string inner_name(const analysis::OpItems& op) { return op.inner.empty() ? "inner blocks" : op.inner; }
std::string inner_header(const analysis::OpItems& op) { return op.inner.empty() ? "Inner" : op.inner; }
std::string item_slowest_text(const analysis::OpItems& op) {
  const auto& s = op.slowest;
  std::string t = fmt::format("{} at {}", op.item_label(s.keys), format_time_ns(s.ns));
  // Against its like: the median of the items with its inner count, where it has company to be compared with.
  const auto g = std::find_if(op.groups.begin(), op.groups.end(),
                              [&](const analysis::OpItems::Group& x) { return x.inner == s.inner; });
  if (s.group_median_ns > 0 && g != op.groups.end() && g->count > 1)
    t += fmt::format(", {:.1f}x the median of the {} with {} {}", s.ns / s.group_median_ns, item_nouns(op, 2),
                     s.inner, inner_name(op));
  if (!s.step.empty() && s.ns > 0)
    t += fmt::format(", {:.0f} % of it in {}", 100.0 * s.step_ns / s.ns, s.step);
  return t;
}
}  // namespace detail

using detail::inner_name;
using detail::item_fit_text;
using detail::item_nouns;
using detail::item_slowest_text;

std::string item_table(const std::vector<analysis::OpItems>& ops, bool definitions) {
  std::string out;
  for (const analysis::OpItems& op : ops) {
    if (op.groups.empty()) continue;
    const std::string nouns = item_nouns(op, 2), inner = detail::inner_header(op);
    out += fmt::format("Tasks of {}: {} {} in {} call{} ({} a call), by the {} each visited\n", op.name, op.items,
                       item_nouns(op, op.items), op.regions, op.regions == 1 ? "" : "s",
                       fmt::format("{:.0f}", op.regions > 0 ? double(op.items) / double(op.regions) : 0.0),
                       inner_name(op));
    const size_t w0 = std::max<size_t>(display_width(inner), 5), w1 = std::max<size_t>(display_width(nouns), 5);
    out += fmt::format("{}  {}  {:>11}  {:>11}  {:>11}  {:>18}\n", pad_left(inner, w0), pad_left(nouns, w1), "Median",
                       "Mean", "Max", "GFLOP/s per thread");
    for (const analysis::OpItems::Group& g : op.groups) {
      out += fmt::format("{}  {}  {:>11}  {:>11}  {:>11}  {:>18}\n", pad_left(std::to_string(g.inner), w0),
                         pad_left(std::to_string(g.count), w1), format_time_ns(g.median_ns), format_time_ns(g.mean_ns),
                         format_time_ns(g.max_ns), format_thread_gflops(g.flops, g.thread_ns()));
    }
    if (op.fitted)
      out += fmt::format("Per {}: {} (the line through the {} medians against their FLOPs, r² {:.3f}){}.\n", op.noun,
                         item_fit_text(op), op.groups.size(), op.r2,
                         definitions && op.fixed_ns >= 0
                             ? fmt::format(": {} whatever its size (taking the task, loading its rows, storing its "
                                           "output), and the rate its steps add work at",
                                           format_time_ns(op.fixed_ns))
                             : "");
    out += fmt::format("Slowest {}: {}.\n", op.noun, item_slowest_text(op));
    if (definitions)
      out += fmt::format("Each {0} is one task a thread took (the trace's work_item slices under its share, named "
                         "after it). Its time runs from its thread's step before it to its last step, so one thread's "
                         "tasks follow one another; time the thread waited for a CPU, and page faults on fresh output "
                         "pages, count in the step they fell in. GFLOP/s per thread: the FLOPs its steps counted over "
                         "that time. Under a causal mask a {0} visits only the {1} left of the diagonal and the "
                         "diagonal's own, so its time grows with its position: its {1} are the triangle the kernel "
                         "computes, and those above the diagonal, which it skips, cost it nothing.\n",
                         op.noun, inner_name(op));
  }
  return out;
}

std::string item_line(const std::string& subject, const analysis::OpItems& op) {
  if (op.items == 0 || op.groups.empty()) return "";
  std::string s = fmt::format("{}'s tasks ({}'s {} {}):", subject, op.name, op.items, item_nouns(op, op.items));
  if (op.fitted) s += fmt::format(" {} (r² {:.3f});", item_fit_text(op), op.r2);
  return s + fmt::format(" the slowest, {}.", item_slowest_text(op));
}

std::vector<std::string> thread_balance_notes(const std::string& subject,
                                              const std::vector<analysis::ThreadBalance>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows)
    if (r.threads > 1 && r.busy_share() < 0.8)
      out.push_back(fmt::format("Threads: {}'s op {} kept its {} threads working {:.0f} % of its parallel time (slowest "
                                "share {:.2f}x the mean; the last thread started {} after the first, per region).",
                                subject, r.name, r.threads, 100 * r.busy_share(), r.imbalance(),
                                format_time_ns(r.lag_ns / double(r.regions))));
  return out;
}

}  // namespace attnprof::report
