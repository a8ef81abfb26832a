// attnprof roofline [VARIANT...]: the machine's measured ceilings (FMA and bf16-dot GFLOP/s, STREAM triad
// bandwidth; cached per CPU, ISA and thread count) and every op of each variant's profile placed under them:
// arithmetic intensity from the cost model, attainable and achieved GFLOP/s, memory- or compute-bound.
// `--device cuda`: the GPU's datasheet ceilings, and every kernel, copy and fill of the CUDA variants placed in
// device time (CUPTI).
#include <algorithm>
#include <cstdio>

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
  std::vector<std::string> run_flags_given;  // --out, --warmup, --iters, --seed as given: none applies to --peaks-only
  std::string device = "cpu";
};

// `memory_reclaim`: analysis::memory_reclaim_note() or "" on a CPU; a GPU's datasheet ceilings have none.
nlohmann::json machine_json(const analysis::MachinePeaks& m, bool gpu, const std::string& memory_reclaim) {
  nlohmann::json j = m;
  j["ridge_fp32"] = m.bandwidth_gbs > 0 ? m.fp32_gflops / m.bandwidth_gbs : 0.0;
  j["ridge_bf16"] = m.bandwidth_gbs > 0 ? m.bf16_gflops / m.bandwidth_gbs : 0.0;
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
  t += fmt::format("  STREAM triad    {:8.1f} GB/s\n", m.bandwidth_gbs);
  t += fmt::format("  OpenBLAS sgemm  {:8.1f} GFLOP/s (2048³, the practical fp32 ceiling)\n", m.sgemm_gflops);
  if (const std::string lib = report::library_peaks_note(m); !lib.empty()) t += "  " + lib + "\n";
  if (!memory_reclaim.empty()) t += "  Memory: " + memory_reclaim + "\n";
  return t;
}

void run_roofline(const RooflineArgs& a) {
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
  if (a.peaks_only && !a.run_flags_given.empty()) {
    const size_t n = a.run_flags_given.size();
    std::string flags;
    for (size_t i = 0; i < n; ++i) flags += (i == 0 ? "" : i + 1 == n ? " and " : ", ") + a.run_flags_given[i];
    ATTNPROF_FAIL("{} {} not apply with --peaks-only, which runs no variant and writes no files: drop {} (or "
                  "--peaks-only)",
                  flags, n == 1 ? "does" : "do", n == 1 ? "it" : "them");
  }
  apply_runtime_options(o);
  if (!a.peaks_only && !use_files(o)) (void)resolve_variants_on(gpu, a.variants, a.backend, problem_of(o));  // before the inputs
  const Inputs in = a.peaks_only ? Inputs{} : make_inputs(o);
  const std::vector<const Variant*> variants =
      a.peaks_only ? std::vector<const Variant*>{} : resolve_variants_on(gpu, a.variants, a.backend, in.p);
  if (!a.peaks_only) {
    refuse_inputs_in_out(o, {}, {"roofline.json", "roofline.txt"});
    check_html_if_asked(o);
    prepare_out_dir(o.out);
    check_out_files(o, {}, {"roofline.json", "roofline.txt"});
  }
  report::FileBatch outputs;  // this run's files replace the last run's together, or not at all
  const int threads = ops::num_threads();

  if (!gpu) progress(a.remeasure ? "measuring machine peaks" : "measuring (or loading cached) machine peaks");
  const analysis::MachinePeaks m = gpu ? cuda::gpu_peaks(cuda::device_info()) : analysis::machine_peaks(threads, a.remeasure);
  const std::string reclaim = gpu ? "" : analysis::memory_reclaim_note().value_or("");
  std::string text = peaks_text(m, gpu, reclaim);

  nlohmann::json j = {{"kind", "roofline"},
                      {"attnprof_version", ATTNPROF_VERSION},
                      {"device", a.device},
                      {"threads", threads},
                      {"machine", machine_json(m, gpu, reclaim)},
                      {"ops", nlohmann::json::array()},
                      {"skipped", nlohmann::json::array()}};
  if (!a.peaks_only) {
    j["problem"] = in.p.str();
    j["dtype"] = std::string(dtype_name(in.p.dtype));
  }
  std::vector<std::string> failed;  // variants that failed validation: placed nowhere, exit code 1
  if (!variants.empty()) {
    if (!gpu) prepare_libraries(variants, in);  // OpenBLAS refused under ulimit -v stops it before any variant
    LazyReference ref(in);
    RunPlan plan;
    plan.warmup = o.warmup;
    plan.schedule = {.wait = 0, .warmup = 0, .active = o.iters};
    text += gpu ? fmt::format("\nKernels, copies and fills of {} ({} recorded forwards each, device time from CUPTI; "
                              "intensity and FLOPs from the launching op's cost model)\n",
                              in.p.str(), o.iters)
                : fmt::format("\nOps of {} ({} recorded forwards each; intensity and FLOPs from the cost model)\n",
                              in.p.str(), o.iters);
    text += fmt::format("{:<12}{:<38}{:>10}{:>12}{:>12}{:>10}{:>8}  {}\n", "Variant", "Op", "FLOP/B", "Attainable",
                        "Achieved", "GB/s", "% att.", "Bound");
    for (const Variant* v : variants) {
      RunOutcome r = gpu ? run_cuda_variant(*v, in, ref, plan, v->name) : run_variant(*v, in, ref, plan, v->name);
      if (r.status == RunOutcome::Status::Ok && gpu && !r.result.has_device) {
        r.status = RunOutcome::Status::Skipped;
        r.note = "no device activity to place: " + r.cupti_note;
      }
      if (r.status != RunOutcome::Status::Ok) {
        if (r.status == RunOutcome::Status::Failed) failed.push_back(v->name);
        text += fmt::format("{:<12}{}: {}\n", v->name, status_name(r.status), r.note);
        j["skipped"].push_back({{"variant", v->name}, {"status", status_name(r.status)}, {"note", r.note}});
        continue;
      }
      for (const analysis::PlacedOp& placed : analysis::roofline_ops(r.ka, m)) {
        const analysis::OpStats& op = *placed.op;
        const analysis::RooflinePoint& pt = placed.pt;
        const OpCost& cost = placed.cost;
        const double gbs = placed.ns > 0 ? cost.bytes() / placed.ns : 0.0;
        const char* bound = pt.memory_bound ? "memory" : "compute";
        j["ops"].push_back({{"variant", v->name},
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
                            {"fraction_of_bandwidth", m.bandwidth_gbs > 0 ? gbs / m.bandwidth_gbs : 0.0},
                            {"bound", bound}});
        // A copy does no arithmetic: its place on the roofline is its bandwidth, so show % of STREAM instead.
        const std::string pct = cost.flops > 0 ? fmt::format("{:.0f}%", 100 * pt.fraction_of_attainable)
                                                  : fmt::format("{:.0f}%bw", 100 * gbs / m.bandwidth_gbs);
        text += fmt::format("{:<12}{:<38}{:>10.3f}{:>12.1f}{:>12.1f}{:>10.1f}{:>8}  {}\n", v->name,
                            op.name.size() > 36 ? op.name.substr(0, 33) + "..." : op.name, pt.intensity,
                            pt.attainable_gflops, pt.achieved_gflops, gbs, pct, bound);
      }
    }
    if (gpu) {
      text += "Attainable = min(compute peak, FLOP/B × DRAM bandwidth); compute peak: the tensor-core one for bf16\n"
              "  and fp16 GEMMs and attention kernels (one dense rate for both), the fp32 CUDA-core one for\n"
              "  elementwise kernels and fp32 GEMMs.\n";
      text += "% att. = achieved / attainable GFLOP/s; for copies and fills, %bw = achieved GB/s / DRAM bandwidth.\n";
      text += "Each kernel is placed once, in its own device time; the host ops that launched it are not placed again.\n";
    } else {
      text += "Attainable = min(compute peak, FLOP/B × bandwidth); compute peak: the bf16 dot-product one for bf16\n"
              "  matmuls on oneDNN and the flash kernel (where the CPU has one), the fp32 FMA one for elementwise ops,\n"
              "  fp32, fp16 and widened bf16 matmuls and SDPA math (it upcasts to fp32); matmul's at the ISA OpenBLAS\n"
              "  and oneDNN chose; an op with both is judged by the time its FLOPs take at each.\n";
      text += "% att. = achieved / attainable GFLOP/s; for ops without FLOPs (copies), %bw = achieved GB/s / STREAM.\n";
      text += "Over 100%: the op moved its bytes faster than STREAM triad, the roofline's slope: an in-place op\n"
              "  reads and writes the same lines (triad also pays an uncounted write-allocate read), or its data\n"
              "  stayed in cache.\n";
      text += "Each op is placed once, by its own FLOPs, bytes and self time; a wrapper whose work is all its\n"
              "  children's (masked_fill: copy_ and masked_fill_; scaled_dot_product_attention) is not placed again.\n";
    }
  }
  if (!a.peaks_only) {
    write_json(out_path(o.out, "roofline.json"), j);
    report::write_text_atomic(out_path(o.out, "roofline.txt"), text);
    outputs.commit();
    write_html_if_asked(o);
  }
  if (o.json) std::printf("%s\n", j.dump(2).c_str());
  else std::printf("%s", text.c_str());
  exit_if_validation_failed(failed);
}

}  // namespace

void add_roofline_command(CLI::App& app) {
  auto args = std::make_shared<RooflineArgs>();
  args->variants = {"naive", "inplace", "sdpa-math", "flash"};
  CLI::App* sub = app.add_subcommand("roofline", "machine peaks and every op of a profile on the roofline");
  CLI::Option* variants =
      sub->add_option("variants", args->variants, "variants to place (default: naive inplace sdpa-math flash)");
  sub->add_option("--backend", args->backend, "SDPA backend for 'sdpa': math | flash | auto");
  sub->add_flag("--peaks-only", args->peaks_only, "only measure and print the machine's peaks");
  sub->add_flag("--remeasure", args->remeasure, "measure the peaks again instead of reading the cache");
  sub->add_option("--device", args->device, "cpu (default) or cuda (GPU datasheet ceilings, kernels in device time)");
  add_common_options(sub, args->common, {.warmup = 1, .iters = 2, .file_inputs = true});
  sub->callback([args, variants, sub] {
    args->variants_given = variants->count() > 0;
    for (const char* flag : {"--out", "--warmup", "--iters", "--seed"})
      if (sub->get_option(flag)->count() > 0) args->run_flags_given.push_back(flag);
    run_roofline(*args);
  });
}

}  // namespace attnprof::cli
