// attnprof compare: every registry variant (both SDPA backends included) on one shape, one row each:
// what the blog showed trace by trace, plus what it left to the reader: GFLOP/s against the measured
// peak, peak memory, bytes moved and the bandwidth bound on time, error against fp64.
#include <unistd.h>

#include <cstdio>

#include "attnprof/allocator.h"
#include "attnprof/cuda.h"
#include "attnprof/ops.h"
#include "attnprof/report.h"
#include "common.h"

namespace attnprof::cli {
namespace {

struct CompareArgs {
  CommonOptions common;
  std::string variants;  // comma-separated subset; empty: all
  std::string device = "cpu";
};

struct Row {
  std::string name;
  RunOutcome r;
  double ms = 0, gflops = 0, pct_peak = 0, bytes = 0, bound_ms = 0;
  std::string trace, summary;
};

std::vector<const Variant*> selected(const std::string& list) {
  std::vector<const Variant*> out;
  if (list.empty()) {
    for (const Variant& v : registry()) out.push_back(&v);
    return out;
  }
  for (const std::string& name : split_list(list)) {
    if (name == "sdpa") {
      out.push_back(&find_variant("sdpa-math"));
      out.push_back(&find_variant("sdpa-flash"));
    } else {
      bool known = false;
      for (const Variant& v : registry()) known |= v.name == name;
      if (!known) ATTNPROF_FAIL("unknown variant '{}' in --variants: expected {}", name, variant_names());
      out.push_back(&find_variant(name));
    }
  }
  return out;
}

std::string fmt_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b * 1e-9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b * 1e-6);
  if (b >= 1e3) return fmt::format("{:.1f} KB", b * 1e-3);
  return fmt::format("{:.0f} B", b);
}

std::string render(const std::vector<Row>& rows, const Inputs& in, const analysis::MachinePeaks& m, double peak,
                   const char* peak_kind, int threads) {
  std::string s;
  s += fmt::format("attnprof compare — {}, {} threads, inputs {}\n", in.p.str(), threads, in.source);
  const std::string rule(118, '-');
  s += rule + "\n";
  s += fmt::format("{:<12}{:>11}{:>10}{:>9}{:>12}{:>7}{:>13}{:>11}{:>11}  {:<6}\n", "Variant", "ms/fwd", "GFLOP/s",
                   "% peak", "Peak mem", "Ops", "Bytes moved", "Bound ms", "Max err", "Check");
  s += rule + "\n";
  for (const Row& r : rows) {
    if (r.r.status == RunOutcome::Status::Skipped) {
      s += fmt::format("{:<12}skipped: {}\n", r.name, r.r.note);
      continue;
    }
    if (r.r.status == RunOutcome::Status::Failed) {
      s += fmt::format("{:<12}{:>11}{:>10}{:>9}{:>12}{:>7}{:>13}{:>11}{:>11.2e}  FAIL ({})\n", r.name, "--", "--", "--",
                       fmt_bytes(double(r.r.peak_extra_bytes)), "--", fmt_bytes(r.bytes),
                       fmt::format("{:.3f}", r.bound_ms), r.r.err.max_abs, "not timed");
      continue;
    }
    s += fmt::format("{:<12}{:>11.3f}{:>10.1f}{:>8.1f}%{:>12}{:>7.0f}{:>13}{:>11.3f}{:>11.2e}  {:<6}\n", r.name, r.ms,
                     r.gflops, r.pct_peak, fmt_bytes(double(r.r.peak_extra_bytes)), r.r.ops_per_forward,
                     fmt_bytes(r.bytes), r.bound_ms, r.r.err.max_abs, "OK");
  }
  s += rule + "\n";
  s += fmt::format(
      "GFLOP/s: attention FLOPs 4·B·H·Nq·Nk·D = {:.3g} per forward, causal FLOPs halved (FlashAttention's convention).\n",
      attention_flops(in.p));
  s += fmt::format("% peak: of the measured {} peak, {:.1f} GFLOP/s on {} threads ({}; sgemm {:.1f} GFLOP/s).\n",
                   peak_kind, peak, m.threads, m.isa, m.sgemm_gflops);
  s += fmt::format("Bound ms: bytes moved (cost model) / measured STREAM triad bandwidth {:.1f} GB/s.\n",
                   m.bandwidth_gbs);
  s += "Peak mem: bytes one forward allocates at its peak above its inputs (tracked allocator).\n";
  s += "Ops: profiler zones per forward (ops and their children, without the annotation).\n";
  s += fmt::format("Max err: max |out - fp64 reference|; Check: OK when every element is within its variant's "
                   "tolerance. sdpa (auto) selects {}.\n",
                   sdpa_backend_name(sdpa_select_backend(in.p)));
  return s;
}

// compare --device cuda: the CUDA registry on the GPU (run_cuda_variant: validated against the fp64 reference,
// one forward profiled through CUPTI for its activity count, tables and trace, then at least 20 forwards
// timed with CUDA events on device tensors uploaded once).
void run_compare_cuda(const CompareArgs& a) {
  const CommonOptions& o = a.common;
  ATTNPROF_CHECK(cuda::available(), "--device cuda: {}", cuda::unavailable_reason());
  apply_runtime_options(o);
  const Inputs in = make_inputs(o);
  prepare_out_dir(o.out);
  const cuda::DeviceInfo dev = cuda::device_info();
  const analysis::MachinePeaks m = cuda::gpu_peaks(dev);
  const double peak = in.p.dtype == DType::BF16 ? m.bf16_gflops : m.fp32_gflops;
  progress(fmt::format("attnprof compare --device cuda: {} at {}", dev.name, in.p.str()));
  const Reference ref = reference_attention(in.q, in.k, in.v, in.opt);
  const double flops = attention_flops(in.p);
  std::string text = fmt::format("attnprof compare — {}, {} ({}), inputs {}\n", in.p.str(), dev.name, m.isa, in.source);
  const std::string rule(112, '-');
  text += rule + "\n";
  text += fmt::format("{:<12}{:>11}{:>10}{:>9}{:>12}{:>12}{:>13}{:>11}{:>11}  {:<6}\n", "Variant", "ms/fwd", "TFLOP/s",
                      "% peak", "Peak mem", "Activities", "Bytes moved", "Bound ms", "Max err", "Check");
  text += rule + "\n";
  nlohmann::json rows = nlohmann::json::array();
  std::string tables;
  std::string cupti_note;  // why CUPTI could not collect, if it could not
  for (const Variant& v : cuda::cuda_registry()) {
    // The same row schema as the CPU compare.json, so `attnprof report` draws either.
    const double bytes = v.cost(in.p).bytes();
    const double bound_ms = m.bandwidth_gbs > 0 ? bytes / m.bandwidth_gbs * 1e-6 : 0.0;
    nlohmann::json row = {{"name", v.name}, {"status", "skipped"}, {"ok", false}, {"skipped", nullptr},
                          {"note", ""}, {"ms", nullptr}, {"forward_ms", nlohmann::json::array()},
                          {"gflops", nullptr}, {"pct_peak", nullptr}, {"peak_bytes", nullptr},
                          {"ops", nullptr}, {"bytes", bytes}, {"bound_ms", bound_ms}, {"max_abs_err", nullptr},
                          {"nmse", nullptr}, {"trace", nullptr}, {"summary", nullptr}};
    RunPlan plan;
    plan.warmup = o.warmup;
    plan.schedule = {.wait = 0, .warmup = 0, .active = 1};
    plan.event_iters = std::max(o.iters, 20);
    RunOutcome r = run_cuda_variant(v, in, ref, plan, v.name);
    if (r.status == RunOutcome::Status::Skipped) {
      text += fmt::format("{:<12}skipped: {}\n", v.name, r.note);
      row.update({{"skipped", r.note}, {"note", r.note}});
      rows.push_back(row);
      progress(v.name + ": skipped: " + r.note);
      continue;
    }
    row.update({{"max_abs_err", r.err.max_abs}, {"nmse", r.err.nmse},
                {"tolerance", {{"atol", r.tol.atol}, {"rtol", r.tol.rtol}}}});
    if (r.status == RunOutcome::Status::Failed) {
      text += fmt::format("{:<12}FAIL: {} (not timed)\n", v.name, r.note);
      row.update({{"status", "failed"}, {"note", r.note}});
      rows.push_back(row);
      continue;
    }
    if (!r.cupti_note.empty()) cupti_note = r.cupti_note;
    report::write_chrome_trace(r.result, out_path(o.out, v.name + ".trace.json"));
    nlohmann::json sj = report::summary_json(r.result, r.ka);
    sj["run"] = {{"variant", v.name}, {"ms_per_forward", r.median_event_ms}, {"max_abs_err", r.err.max_abs}};
    write_json(out_path(o.out, v.name + ".summary.json"), sj);
    tables += r.result.has_device
                  ? fmt::format("\n{} (one forward, CUPTI):\n{}{}", v.name,
                                report::table(r.ka, {.sort_by = "cuda_time_total", .peaks = m, .compute_dtype = in.p.dtype}),
                                report::device_table(r.result))
                  : fmt::format("\n{} (one forward, host side only: {}):\n{}", v.name, r.cupti_note,
                                report::table(r.ka, {.peaks = std::nullopt, .compute_dtype = in.p.dtype}));
    const double ms = r.median_event_ms;
    const double tflops = ms > 0 ? flops / (ms * 1e9) : 0.0;
    const double pct = peak > 0 ? 100.0 * tflops * 1e3 / peak : 0.0;
    const std::string activities = r.result.has_device ? fmt::format("{:.0f}", r.ops_per_forward) : "--";
    text += fmt::format("{:<12}{:>11.3f}{:>10.1f}{:>8.1f}%{:>12}{:>12}{:>13}{:>11.3f}{:>11.2e}  OK\n", v.name, ms,
                        tflops, pct, report::format_bytes(r.peak_extra_bytes), activities,
                        report::format_bytes(int64_t(bytes)), bound_ms, r.err.max_abs);
    row.update({{"status", "ok"}, {"ok", true}, {"ms", ms}, {"forward_ms", r.event_ms}, {"gflops", tflops * 1e3},
                {"pct_peak", pct}, {"peak_bytes", r.peak_extra_bytes},
                {"ops", r.result.has_device ? nlohmann::json(r.ops_per_forward) : nlohmann::json()},
                {"trace", v.name + ".trace.json"}, {"summary", v.name + ".summary.json"}});
    rows.push_back(row);
    progress(fmt::format("{}: {:.3f} ms/forward, {} device activities", v.name, ms, activities));
  }
  text += rule + "\n";
  text += fmt::format("TFLOP/s: attention FLOPs {:.3g} per forward, causal FLOPs halved; % peak of the {} datasheet "
                      "peak {:.0f} TFLOP/s; Bound ms: bytes / {:.0f} GB/s.\n",
                      flops, dtype_name(in.p.dtype), peak * 1e-3, m.bandwidth_gbs);
  text += "Activities: kernels, copies and fills one forward puts on the GPU (CUPTI). Peak mem: device bytes "
          "one forward allocates above its inputs.\n";
  if (!cupti_note.empty())
    text += fmt::format("CUPTI could not collect ({}): activities are '--' and the tables are host-side only.\n",
                        cupti_note);
  text += tables;
  const nlohmann::json j = {{"kind", "compare"}, {"device", "cuda"}, {"gpu", dev.name},
                            {"attnprof_version", ATTNPROF_VERSION}, {"problem", in.p.str()},
                            {"shape", {{"B", in.p.B}, {"Hq", in.p.Hq}, {"Hkv", in.p.Hkv}, {"Nq", in.p.Nq},
                                       {"Nk", in.p.Nk}, {"D", in.p.D}}},
                            {"dtype", std::string(dtype_name(in.p.dtype))}, {"causal", in.p.mask == MaskKind::Causal},
                            {"inputs", in.source}, {"warmup", o.warmup}, {"iters", o.iters},
                            {"attention_flops", flops},
                            {"flops_convention", "4*B*Hq*Nq*Nk*D per forward, causal FLOPs halved"},
                            {"peak_kind", std::string(dtype_name(in.p.dtype)) + " tensor-core datasheet"},
                            {"peak_gflops", peak}, {"bandwidth_gbs", m.bandwidth_gbs},
                            {"machine", nlohmann::json(m)}, {"variants", rows}};
  write_json(out_path(o.out, "compare.json"), j);
  report::write_text_atomic(out_path(o.out, "compare.txt"), text);
  write_html_if_asked(o);
  if (o.json) std::printf("%s\n", j.dump(2).c_str());
  else std::printf("%s", text.c_str());
}

void run_compare(const CompareArgs& a) {
  if (a.device == "cuda") return run_compare_cuda(a);
  ATTNPROF_CHECK(a.device == "cpu", "unknown --device '{}': expected cpu or cuda", a.device);
  const CommonOptions& o = a.common;
  apply_runtime_options(o);
  const Inputs in = make_inputs(o);
  const std::vector<const Variant*> variants = selected(a.variants);
  prepare_out_dir(o.out);
  const int threads = ops::num_threads();
  const double t_start = now_s();
  progress(fmt::format("attnprof compare: {} variants at {}, {} threads", variants.size(), in.p.str(), threads));
  progress("measuring (or loading cached) machine peaks");
  const analysis::MachinePeaks m = analysis::machine_peaks(threads);
  const bool bf16 = in.p.dtype == DType::BF16 && m.bf16_gflops > 0;
  const double peak = bf16 ? m.bf16_gflops : m.fp32_gflops;
  const char* peak_kind = bf16 ? "bf16 dot-product" : "fp32 FMA";
  progress("computing the fp64 reference");
  const Reference ref = reference_attention(in.q, in.k, in.v, in.opt);

  RunPlan plan;
  plan.warmup = o.warmup;
  plan.schedule = {.wait = 0, .warmup = 0, .active = o.iters};
  std::vector<Row> rows;
  const double flops = attention_flops(in.p);
  for (size_t i = 0; i < variants.size(); ++i) {
    const Variant& v = *variants[i];
    Row row;
    row.name = v.name;
    row.r = run_variant(v, in, ref, plan, fmt::format("[{}/{}] {}", i + 1, variants.size(), v.name));
    row.bytes = v.cost(in.p).bytes();
    row.bound_ms = m.bandwidth_gbs > 0 ? row.bytes / m.bandwidth_gbs * 1e-6 : 0.0;
    if (row.r.status == RunOutcome::Status::Ok) {
      row.ms = row.r.median_ns * 1e-6;
      row.gflops = row.r.median_ns > 0 ? flops / row.r.median_ns : 0.0;
      row.pct_peak = peak > 0 ? 100.0 * row.gflops / peak : 0.0;
      row.trace = out_path(o.out, v.name + ".trace.json");
      row.summary = out_path(o.out, v.name + ".summary.json");
      report::write_chrome_trace(row.r.result, row.trace);
      nlohmann::json sj = report::summary_json(row.r.result, row.r.ka);
      sj["run"] = {{"variant", v.name}, {"ms_per_forward", row.ms}, {"max_abs_err", row.r.err.max_abs}};
      write_json(row.summary, sj);
      progress(fmt::format("[{}/{}] {}: {:.3f} ms/forward, max abs error {:.2e}", i + 1, variants.size(), v.name,
                           row.ms, row.r.err.max_abs));
    } else {
      progress(fmt::format("[{}/{}] {}: {}: {}", i + 1, variants.size(), v.name, status_name(row.r.status), row.r.note));
    }
    row.r.result = prof::ProfileResult{};  // written; free the events
    rows.push_back(std::move(row));
  }

  nlohmann::json j = {
      {"kind", "compare"},
      {"attnprof_version", ATTNPROF_VERSION},
      {"shape",
       {{"B", in.p.B}, {"Hq", in.p.Hq}, {"Hkv", in.p.Hkv}, {"Nq", in.p.Nq}, {"Nk", in.p.Nk}, {"D", in.p.D}}},
      {"dtype", std::string(dtype_name(in.p.dtype))},
      {"causal", in.p.mask == MaskKind::Causal},
      {"threads", threads},
      {"inputs", in.source},
      {"warmup", o.warmup},
      {"iters", o.iters},
      {"attention_flops", flops},
      {"flops_convention", "4*B*Hq*Nq*Nk*D per forward, causal FLOPs halved"},
      {"peak_kind", peak_kind},
      {"peak_gflops", peak},
      {"sdpa_auto_backend", std::string(sdpa_backend_name(sdpa_select_backend(in.p)))},
      {"machine", nlohmann::json(m)},
      {"variants", nlohmann::json::array()}};
  for (const Row& r : rows) {
    const bool ran = r.r.status == RunOutcome::Status::Ok;
    const bool validated = r.r.status != RunOutcome::Status::Skipped;
    nlohmann::json e = {{"name", r.name},
                        {"status", status_name(r.r.status)},
                        {"ok", ran},
                        {"skipped", r.r.status == RunOutcome::Status::Skipped ? nlohmann::json(r.r.note) : nlohmann::json()},
                        {"note", r.r.note},
                        {"ms", ran ? nlohmann::json(r.ms) : nlohmann::json()},
                        {"forward_ms", nlohmann::json::array()},
                        {"gflops", ran ? nlohmann::json(r.gflops) : nlohmann::json()},
                        {"pct_peak", ran ? nlohmann::json(r.pct_peak) : nlohmann::json()},
                        {"peak_bytes", validated ? nlohmann::json(r.r.peak_extra_bytes) : nlohmann::json()},
                        {"peak_total_bytes", validated ? nlohmann::json(r.r.peak_bytes) : nlohmann::json()},
                        {"ops", ran ? nlohmann::json(r.r.ops_per_forward) : nlohmann::json()},
                        {"bytes", r.bytes},
                        {"bound_ms", r.bound_ms},
                        {"max_abs_err", validated ? nlohmann::json(r.r.err.max_abs) : nlohmann::json()},
                        {"nmse", validated ? nlohmann::json(r.r.err.nmse) : nlohmann::json()},
                        {"tolerance", {{"atol", r.r.tol.atol}, {"rtol", r.r.tol.rtol}}},
                        {"trace", ran ? nlohmann::json(r.name + ".trace.json") : nlohmann::json()},
                        {"summary", ran ? nlohmann::json(r.name + ".summary.json") : nlohmann::json()}};
    for (double ns : r.r.forward_ns) e["forward_ms"].push_back(ns * 1e-6);
    j["variants"].push_back(std::move(e));
  }
  const std::string text = render(rows, in, m, peak, peak_kind, threads);
  write_json(out_path(o.out, "compare.json"), j);
  report::write_text_atomic(out_path(o.out, "compare.txt"), text);
  write_html_if_asked(o);
  progress(fmt::format("compare finished in {:.1f} s; wrote {}", elapsed_s(t_start), out_path(o.out, "compare.{json,txt}")));
  if (o.json) std::printf("%s\n", j.dump(2).c_str());
  else std::printf("%s", text.c_str());
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* sub = app.add_subcommand("compare", "every variant and SDPA backend on one shape, one table");
  sub->add_option("--device", args->device, "cpu (default) or cuda (the CUDA registry, timed on the GPU)");
  sub->add_option("--variants", args->variants, "comma-separated subset (default: all of " + variant_names() + ")");
  add_common_options(sub, args->common, {.warmup = 1, .iters = 3, .file_inputs = true});
  sub->callback([args] { run_compare(*args); });
}

}  // namespace attnprof::cli
