// attnprof profile VARIANT: one of the blog's four scripts, re-created. The blog's set-up by default:
// [8,16,1024,64] bf16 causal, 3 warm-up forwards, then schedule(wait=1, warmup=1, active=3), each forward
// inside the variant's annotation (attn_fwd, sdpa_fwd, flash_kernel_fwd). Validated against fp64 first.
// --device cuda: the CUDA variant on the GPU, each recorded forward also through CUPTI (Self CUDA columns,
// the kernel table, GPU stream tracks in the trace).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "attnprof/cuda.h"
#include "attnprof/npy.h"
#include "attnprof/ops.h"
#include "attnprof/report.h"
#include "common.h"

namespace attnprof::cli {
namespace {

struct ProfileArgs {
  CommonOptions common;
  std::string variant;
  std::string backend;
  std::string sort_by;  // default: cpu_time_total, or cuda_time_total with --device cuda (as the blog sorted)
  int row_limit = 15;
  std::string device = "cpu";
  bool group_by_input_shape = false;
  bool counters = false;
  std::string schedule;  // "WAIT,WARMUP,ACTIVE[,REPEAT]": torch.profiler's schedule(); default 1,1,--iters,1
  CLI::Option* schedule_opt = nullptr;  // given (an empty value is refused, not taken as the default)
  bool profile_memory = true;  // torch.profiler's switches, on by default here (the tables' memory columns and
  bool record_shapes = true;   // the trace's Input Dims); the blog's scripts turn both off
};

// --schedule WAIT,WARMUP,ACTIVE[,REPEAT], as torch.profiler.schedule(wait, warmup, active, repeat): plain
// decimal counts, at least one active step, and a finite repeat (torch's 0, forever, has no end in a run of a
// fixed number of forwards); at most kMaxForwards recorded steps (ACTIVE × REPEAT), as --iters, and three times
// that in all.
prof::Schedule parse_schedule(const std::string& text) {
  const std::vector<std::string> parts = split_list(text);
  const char* expect = "expected WAIT,WARMUP,ACTIVE or WAIT,WARMUP,ACTIVE,REPEAT (the blog's: 1,1,3)";
  if (text.empty()) ATTNPROF_FAIL("--schedule is empty: {}", expect);
  if (parts.size() != 3 && parts.size() != 4)
    ATTNPROF_FAIL("--schedule '{}' has {} field{}: {}", text, parts.size(), parts.size() == 1 ? "" : "s", expect);
  static constexpr const char* kNames[] = {"WAIT", "WARMUP", "ACTIVE", "REPEAT"};
  int64_t v[4] = {0, 0, 0, 1};
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::optional<__int128> n = plain_decimal(parts[i]);
    if (!n || *n < 0)
      ATTNPROF_FAIL("--schedule '{}': {} '{}' is not a count (a decimal integer of at least 0); {}", text, kNames[i],
                    parts[i], expect);
    // WAIT and WARMUP are bounded by the steps in all, below; ACTIVE and REPEAT by the recorded forwards.
    if (*n > 3 * kMaxForwards)
      ATTNPROF_FAIL("--schedule '{}': {} {} is over {}, the most steps a run takes", text, kNames[i], parts[i],
                    3 * kMaxForwards);
    v[i] = int64_t(*n);
  }
  if (v[2] < 1) ATTNPROF_FAIL("--schedule '{}': ACTIVE is 0, so nothing would be recorded; {}", text, expect);
  if (v[3] < 1)
    ATTNPROF_FAIL("--schedule '{}': REPEAT 0 (torch's \"forever\") has no end in a run of a fixed number of forwards; "
                  "give the number of cycles",
                  text);
  // The recorded forwards stay in memory until the run ends: at most --iters' cap, across every cycle; and no more
  // steps in all than one cycle of the largest fields.
  if (v[2] * v[3] > kMaxForwards)
    ATTNPROF_FAIL("--schedule '{}' records {} forwards (ACTIVE × REPEAT), over {}: every recorded forward is kept "
                  "in memory until the run ends, as --iters' are",
                  text, v[2] * v[3], kMaxForwards);
  const int64_t steps = (v[0] + v[1] + v[2]) * v[3];
  if (steps > 3 * kMaxForwards)
    ATTNPROF_FAIL("--schedule '{}' runs {} steps, over {}", text, steps, 3 * kMaxForwards);
  return {.wait = int(v[0]), .warmup = int(v[1]), .active = int(v[2]), .repeat = int(v[3])};
}

// --save-output, checked before anything runs or is written: not one of the run's own files, and a place a .npy
// can be written. True when it names a file inside --out, which may not exist yet: check_output_flag() is then
// run on it once prepare_out_dir() has made --out.
bool check_save_output(const CommonOptions& o, const std::string& variant) {
  if (o.save_output.empty()) return false;
  namespace fs = std::filesystem;
  // The .npy would be replaced by the run's own file of that name (or the trace it removes), silently.
  // Neither file need exist yet, so besides file identity the paths are compared resolved.
  std::error_code ec;
  const fs::path saved = fs::weakly_canonical(o.save_output, ec);
  for (const std::string& path : run_out_files(o, {variant}, {})) {
    std::error_code ec2;
    if (same_file(o.save_output, path) || (!ec && fs::weakly_canonical(path, ec2) == saved && !ec2))
      ATTNPROF_FAIL("--save-output '{}' is the --out file '{}', which the run writes", o.save_output, path);
  }
  const fs::path parent = fs::path(o.save_output).parent_path();
  const fs::path dir = parent.empty() ? fs::path(".") : parent;
  // A file inside --out may name it before the run creates it (prepare_out_dir checks it then).
  const bool in_out = fs::weakly_canonical(dir, ec) == fs::weakly_canonical(o.out, ec) && !ec;
  // Asked with error codes: on a loop of symbolic links std::filesystem throws, which would reach the user as
  // an internal error rather than as what is wrong with the path.
  std::error_code dec;
  const fs::file_status dir_status = fs::status(dir, dec);
  if (!in_out && dec == std::errc::too_many_symbolic_link_levels)
    ATTNPROF_FAIL("cannot write --save-output '{}': the directory '{}' is a symbolic link that never reaches a "
                  "directory (a loop of links)", o.save_output, parent.string());
  if (!in_out && dec && dir_status.type() != fs::file_type::not_found)
    ATTNPROF_FAIL("cannot write --save-output '{}': the directory '{}' cannot be reached ({})", o.save_output,
                  parent.string(), dec.message());
  if (!in_out && !fs::exists(dir_status))
    ATTNPROF_FAIL("cannot write --save-output '{}': the directory '{}' does not exist", o.save_output, parent.string());
  if (!in_out && !fs::is_directory(dir_status))
    ATTNPROF_FAIL("cannot write --save-output '{}': '{}' is not a directory", o.save_output, parent.string());
  if (std::error_code fec; fs::is_directory(o.save_output, fec))  // a loop: check_output_flag names it below
    ATTNPROF_FAIL("cannot write --save-output '{}': it is a directory (name a .npy file)", o.save_output);
  // Not there yet: the run would make it as --out, and then find a directory. Compared as absolute paths
  // without a trailing separator, so 'D', './D', 'D/' and '$PWD/D' are one place (weakly_canonical leaves
  // a relative path that does not exist relative, and keeps its trailing slash).
  auto place = [](const std::string& p, std::error_code& e) {
    fs::path a = fs::weakly_canonical(fs::absolute(p, e), e).lexically_normal();
    return a.has_filename() ? a : a.parent_path();
  };
  std::error_code sec, oec;
  if (place(o.save_output, sec) == place(o.out, oec) && !sec && !oec)
    ATTNPROF_FAIL("cannot write --save-output '{}': it is the --out directory the run makes (name a .npy file)",
                  o.save_output);
  // Everything else npy::save would refuse at the end (a link to nothing, a directory that takes no new file,
  // a name too long for its temporary file); inside --out, once prepare_out_dir has made it.
  if (!in_out) check_output_flag("--save-output", o.save_output);
  return in_out;
}

void run_profile(const ProfileArgs& a) {
  const CommonOptions& o = a.common;
  const bool scheduled = a.schedule_opt && a.schedule_opt->count() > 0;
  if (scheduled && o.iters_opt && o.iters_opt->count() > 0)
    ATTNPROF_FAIL("--iters conflicts with --schedule: the schedule's ACTIVE is the number of recorded forwards");
  const prof::Schedule schedule =
      scheduled ? parse_schedule(a.schedule) : prof::Schedule{.wait = 1, .warmup = 1, .active = o.iters};
  if (a.group_by_input_shape && !a.record_shapes)
    ATTNPROF_FAIL("--group-by-input-shape needs the input shapes, which --no-record-shapes leaves unrecorded");
  if (!a.profile_memory && (a.sort_by == "cpu_memory_usage" || a.sort_by == "self_cpu_memory_usage" ||
                            a.sort_by == "cuda_memory_usage" || a.sort_by == "self_cuda_memory_usage"))
    ATTNPROF_FAIL("--sort-by {} needs memory, which --no-profile-memory leaves unrecorded", a.sort_by);
  if (!a.counters && (a.sort_by == "page_faults" || a.sort_by == "self_page_faults"))
    ATTNPROF_FAIL("--sort-by {} needs the software counters: add --counters", a.sort_by);
  // Writing the output over an input file would destroy the input the run reads: refused before it is read.
  if (!o.save_output.empty()) refuse_input_as_output(o, o.save_output, fmt::format("--save-output '{}'", o.save_output));
  const bool gpu = use_cuda(a.device);
  apply_runtime_options(o, gpu);
  // A problem the variant cannot serve (flash's head dims), or one over the memory budget (naive's N×N scores
  // at a long sequence), fails before the random inputs are drawn: at a large D or N gigabytes and seconds.
  if (!use_files(o)) {
    const AttnProblem planned = problem_of(o);
    const Variant& pv = resolve_variant_on(gpu, a.variant, a.backend, planned);
    check_flash_block_applies(o, {&pv}, a.variant);
    check_forward_fits(pv, planned);
  }
  const Inputs in = make_inputs(o);
  const Variant& v = resolve_variant_on(gpu, a.variant, a.backend, in.p);
  if (use_files(o)) check_flash_block_applies(o, {&v}, a.variant);  // once the files give the shape
  refuse_inputs_in_out(o, {v.name}, {});
  const std::string sort_by = !a.sort_by.empty() ? a.sort_by : gpu ? "cuda_time_total" : "cpu_time_total";
  {  // checks the sort key before running anything
    report::TableOptions check;
    check.sort_by = sort_by;
    analysis::KeyAverages empty;
    empty.has_device = gpu;
    (void)report::table(empty, check);
  }
  const bool save_in_out = check_save_output(o, v.name);
  check_html_if_asked(o);
  prepare_out_dir(o.out);
  check_out_files(o, {v.name}, {});
  if (save_in_out) check_output_flag("--save-output", o.save_output);  // now that --out exists (else above)
  report::FileBatch outputs;  // this run's files replace the last run's together, or not at all

  const int threads = ops::num_threads();
  const cuda::DeviceInfo dev = gpu ? cuda::device_info() : cuda::DeviceInfo{};
  const std::string where = gpu ? dev.name : threads_text(threads);
  progress(fmt::format("attnprof profile {}: {}, {}{}, inputs {}", v.name, in.p.str(), where, flash_block_note(),
                       in.source));
  // `sdpa` alone picks its backend as PyTorch's does; a fall back to math is said, as PyTorch warns of it.
  const std::string selection =
      !gpu && a.variant == "sdpa" && (a.backend.empty() || a.backend == "auto") &&
              sdpa_select_backend(in.p) != SdpaBackend::Flash ? sdpa_selection_note(in.p) : "";
  if (!selection.empty()) progress(selection);
  const analysis::MachinePeaks peaks = gpu ? cuda::gpu_peaks(dev) : host_peaks(threads);
  LazyReference ref(in);  // computed after the variant is prepared: over-budget runs stop before fp64 work

  RunPlan plan;
  plan.warmup = o.warmup;
  plan.warmup_min_s = warmup_floor_s(o);
  plan.schedule = schedule;
  plan.keep_output = !o.save_output.empty();
  plan.software_counters = a.counters;
  plan.group_by_input_shape = a.group_by_input_shape;
  plan.profile_memory = a.profile_memory;
  plan.record_shapes = a.record_shapes;
  RunOutcome r = gpu ? run_cuda_variant(v, in, ref, plan, v.name) : run_variant(v, in, ref, plan, v.name);
  if (r.status == RunOutcome::Status::Skipped) ATTNPROF_FAIL("{} cannot run: {}", v.name, r.note);

  nlohmann::json run = {{"variant", v.name},
                        {"annotation", v.annotation},
                        {"problem", in.p.str()},
                        {"threads", threads},
                        {"device", gpu ? where : std::string("cpu")},
                        {"status", status_name(r.status)},
                        {"max_abs_err", r.err.max_abs},
                        {"max_rel_err", r.err.max_rel},
                        {"tolerance_used", r.err.tol_used},
                        {"nmse", r.err.nmse},
                        {"tolerance", {{"atol", r.tol.atol}, {"rtol", r.tol.rtol}}},
                        {"peak_extra_bytes", r.peak_extra_bytes},
                        {"schedule", {{"wait", schedule.wait}, {"warmup", schedule.warmup},
                                      {"active", schedule.active}, {"repeat", schedule.repeat}}}};
  if (r.device_error)  // failed on the GPU: nothing was checked or measured
    for (const char* key : {"max_abs_err", "max_rel_err", "tolerance_used", "nmse", "peak_extra_bytes"})
      run[key] = nullptr;
  if (r.status == RunOutcome::Status::Failed) {
    // Reported, not timed (the benchmark refuses to time a kernel that fails validation).
    if (o.json) print_out("{}\n", json_text(nlohmann::json{{"kind", "profile"}, {"run", run}, {"note", r.note}}));
    else print_out("{}: {} (not timed)\n", v.name, r.note);
    if (r.device_error) exit_if_validation_failed({}, {v.name});
    else exit_if_validation_failed({v.name});
  }
  const double flops = attention_flops(in.p);
  run["ms_per_forward"] = r.median_ns * 1e-6;
  std::vector<double> forward_ms;
  for (double ns : r.forward_ns) forward_ms.push_back(ns * 1e-6);
  run["forward_ms"] = forward_ms;
  // Each forward's share on a CPU (task-clock, read with --counters): null without it.
  run["forward_on_cpu"] = report::on_cpu_json(gpu ? std::vector<double>{} : analysis::zone_on_cpu_shares(r.result, v.annotation));
  run["cpu_sharing"] = report::cpu_sharing_json(r.sharing);
  run["gflops"] = r.median_ns > 0 ? flops / r.median_ns : 0.0;
  run["attention_flops"] = flops;
  run["ops_per_forward"] = report::count_json(r.ops_per_forward);  // device activities per forward with --device cuda
  // The blocks the CPU flash kernel ran (its defaults, or --flash-block's), so diff can name a change of them.
  if (!gpu && runs_cpu_flash({&v})) run["flash_block"] = {flash_block().rows, flash_block().cols};
  if (!r.cupti_note.empty()) run["cupti_note"] = r.cupti_note;
  // Where the time went by the roofline's verdict (a GPU profile's in device time; none without CUPTI's records).
  const analysis::BoundTime bound_time =
      !gpu || r.ka.has_device ? analysis::bound_time(r.ka, peaks) : analysis::BoundTime{};  // host zones: no verdicts
  run["memory_time_share"] = bound_time.memory_share() >= 0 ? nlohmann::json(bound_time.memory_share()) : nlohmann::json();

  report::TableOptions topt;
  topt.sort_by = r.ka.has_device || !gpu ? sort_by : "cpu_time_total";
  topt.row_limit = a.row_limit;
  topt.show_input_shapes = a.group_by_input_shape;
  topt.peaks = peaks;
  topt.visible_share = visible_share(in.p);
  const std::string table = report::table(r.ka, topt);

  const std::string trace_path = out_path(o.out, trace_file(v.name, o));
  const std::string summary_path = out_path(o.out, v.name + ".summary.json");
  const std::string table_path = out_path(o.out, v.name + ".table.txt");
  const std::string stacks_path = out_path(o.out, v.name + ".stacks.txt");
  const std::string csv_path = out_path(o.out, v.name + ".table.csv");
  nlohmann::json summary = report::summary_json(r.result, r.ka);
  summary["run"] = run;
  // The peaks the table's Bound was judged against, so `roofline --from` places these ops under them.
  summary["machine"] = peaks;
  if (!gpu) summary["machine"]["memory_reclaim"] = analysis::memory_reclaim_note().value_or("");
  if (!o.save_output.empty()) {
    try {  // the file's own message, with the option that named it (a full disk, a device that refuses)
      npy::save(o.save_output, r.output);
    } catch (const Error& e) {
      ATTNPROF_FAIL("--save-output: {}", e.what());
    }
  }
  report::write_chrome_trace(r.result, trace_path);
  write_json(summary_path, summary);
  report::write_text_atomic(table_path, table + uneven_text(r.ka));
  report::write_text_atomic(csv_path, report::table_csv(r.ka, topt));
  report::write_text_atomic(stacks_path, report::folded_stacks(r.result));
  outputs.commit();
  remove_other_format_trace(o.out, v.name, o);
  write_html_if_asked(o);

  if (o.json) {
    nlohmann::json j = {{"kind", "profile"},
                        {"run", run},
                        {"files", {{"trace", trace_path}, {"summary", summary_path}, {"table", table_path}, {"table_csv", csv_path}, {"stacks", stacks_path}}}};
    if (!o.save_output.empty()) j["files"]["output"] = o.save_output;
    if (o.html) j["files"]["report"] = out_path(o.out, "report.html");
    if (!selection.empty()) j["sdpa_selection"] = selection;
    print_out("{}\n", json_text(j));
    return;
  }
  print_out("{} — {}, {}\n", v.name, in.p.str(), where);
  if (!selection.empty()) print_out("{}\n", selection);
  print_out("validation: max abs error {:.3g} vs the fp64 reference (tolerance atol {:g}, rtol {:g}; the worst element "
            "used {:.0f}% of its tolerance): OK\n",
            r.err.max_abs, r.tol.atol, r.tol.rtol, 100.0 * r.err.tol_used);
  if (o.brief) {
    report::TableOptions shown = topt;
    shown.definitions = false;
    print_out("{}", report::table(r.ka, shown));
  } else {
    print_out("{}", table);
  }
  if (r.result.has_device) print_out("{}", report::device_table(r.result));
  if (!r.cupti_note.empty()) print_out("CUPTI could not collect ({}): host-side table only\n", r.cupti_note);
  print_out("{}", report::thread_balance_table(analysis::thread_balance(r.result), !o.brief));
  print_out("time per forward: {} ({}), {:.1f} GFLOP/s ({}{})\n", report::format_time_ns(r.median_ns),
            r.forward_ns.size() == 1 ? "one recorded forward"
                                     : fmt::format("median of {} recorded forwards", r.forward_ns.size()),
            r.median_ns > 0 ? flops / r.median_ns : 0.0, flops_legend(in.p),
            in.p.mask == MaskKind::Causal ? "; the table's GFLOP/s count what each op computed, masked scores included"
                                          : "");
  // The blog's two headline counts: the ops (kernels, on a GPU) one forward runs, and the memory it allocates.
  if (!r.forward_ns.empty()) {
    std::vector<std::string> ops;
    if (!r.result.has_device) {
      // Calls per name, in the table's order (rows of one name merge under --group-by-input-shape).
      std::vector<std::pair<std::string, int64_t>> calls;
      for (const analysis::OpStats& s : r.ka.rows) {
        if (analysis::is_annotation(s.name, s.category) || !s.self_cost.does_work() || s.calls <= 0) continue;
        auto it = std::find_if(calls.begin(), calls.end(), [&](const auto& c) { return c.first == s.name; });
        if (it == calls.end()) calls.emplace_back(s.name, s.calls);
        else it->second += s.calls;
      }
      for (const auto& [name, n] : calls) {
        const double per = double(n) / double(r.forward_ns.size());
        ops.push_back(per == 1.0 ? name : fmt::format("{} ×{:g}", name, per));
      }
    }
    print_out("per forward: {:g} {}{}; {} allocated at its peak above the inputs ({})\n", r.ops_per_forward,
              r.result.has_device ? (r.ops_per_forward == 1 ? "device activity" : "device activities")
                                  : (r.ops_per_forward == 1 ? "op that does work of its own" : "ops that do work of their own"),
              ops.empty() ? "" : fmt::format(" ({})", fmt::join(ops, ", ")), report::format_bytes(r.peak_extra_bytes),
              gpu ? "device allocator" : "tracked allocator");
  }
  if (const std::string line = report::bound_time_line(bound_time, r.ka.has_device); !line.empty())
    print_out("{}\n", line);
  // The flash kernel's pattern, which its one zone does not show: how it tiles a head and what causal skips.
  if (!gpu && std::any_of(r.ka.rows.begin(), r.ka.rows.end(),
                          [](const analysis::OpStats& s) { return s.name == "flash_attention_fwd"; }))
    print_out("flash_attention_fwd: {}; K and V stream once per block of queries, and no N×N buffer exists\n",
              describe_flash_tiles(flash_tiles(in.p), in.p));
  // And where its time goes inside: the kernel's steps, timed on every thread.
  print_out("{}", report::phase_table(analysis::op_phases(r.result), topt.peaks ? &*topt.peaks : nullptr, in.p.dtype,
                                         !o.brief));
  // And tile by tile: what a tile costs per K/V block it visits, and the slowest one.
  print_out("{}", report::item_table(analysis::op_items(r.result), !o.brief));
  const std::string machine_note = gpu ? "" : analysis::memory_reclaim_note().value_or("");
  if (!gpu) print_out("{}", oversubscribed_line(threads));
  for (const std::string& line : report::timing_notes({{v.name, forward_ms, r.sharing, r.sharing_window_s,
                                                        report::on_cpu_of(run)}},
                                                      machine_note,
                                                      scheduled ? "raise the --schedule's ACTIVE or REPEAT"
                                                                : "raise --iters"))
    print_out("{}\n", line);
  for (const std::string& line : report::uneven_op_notes(r.ka)) print_out("{}\n", line);
  // The paths hold what --out said, which may be any bytes: through terminal_line, as stderr's lines are.
  print_out("{}\n", terminal_line(fmt::format("wrote {}, {}, {}, {}, {}{}{}", trace_path, summary_path, table_path,
                                               csv_path, stacks_path, o.save_output.empty() ? "" : ", ",
                                               o.save_output)));
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto args = std::make_shared<ProfileArgs>();
  CLI::App* sub = app.add_subcommand("profile", "re-run one of the blog's experiments under the profiler");
  sub->add_option("variant", args->variant, "naive | inplace | sdpa | flash (or sdpa-math, sdpa-flash)")->required();
  sub->add_option("--backend", args->backend,
                  "SDPA backend: math | flash | auto (default auto; sdpa only; with --device cuda: math | cudnn | auto)");
  sub->add_option("--sort-by", args->sort_by,
                  "table sort key, descending (torch's: cpu_time, cpu_time_total, self_cpu_time_total, "
                  "cpu_memory_usage, self_cpu_memory_usage, count, flops, and with --device cuda cuda_time, "
                  "cuda_time_total, "
                  "self_cuda_time_total, cuda_memory_usage, self_cuda_memory_usage; attnprof's columns: gflops, gbs, "
                  "flop_per_byte, bytes, page_faults and self_page_faults with --counters; default cpu_time_total, "
                  "cuda_time_total with --device cuda)");
  sub->add_option("--device", args->device, "cpu (default) or cuda (the CUDA variant, CUPTI-profiled on the GPU)");
  add_integer_option(sub, "--row-limit", args->row_limit, "table rows (as torch's row_limit: -1 all, 0 none, only the header and totals)")
      ->capture_default_str();
  sub->add_flag("--group-by-input-shape", args->group_by_input_shape,
                "one table row per (op, input shapes, input types), with Input Shapes and Input Types columns (torch's "
                "group_by_input_shape, whose key is the shapes alone)");
  args->schedule_opt = sub->add_option("--schedule", args->schedule,
                  "WAIT,WARMUP,ACTIVE[,REPEAT]: torch.profiler's schedule(wait, warmup, active, repeat) over the "
                  "profiled forwards (default 1,1,--iters: the blog's 1,1,3); the ACTIVE steps of every cycle are "
                  "recorded, as ProfilerStep#N with N counted from the first step");
  // Only the "off" spellings: both are on unless given (a "--profile-memory" beside them would only let the last of
  // two contradicting flags win).
  sub->add_flag_callback("--no-profile-memory", [args] { args->profile_memory = false; },
                         "record no allocations and frees, as the blog's profile_memory=False (recorded by default): "
                         "the table loses its memory columns, the trace its memory counter");
  sub->add_flag_callback("--no-record-shapes", [args] { args->record_shapes = false; },
                         "drop each op's input shapes and dtypes, as the blog's record_shapes=False (kept by default): "
                         "the trace's Input Dims and Input type, and --group-by-input-shape, need them");
  sub->add_flag("--counters", args->counters,
                "software counters: page faults per op, forward and profiler step (every thread's, getrusage; read "
                "outside each op's time, their cost calibrated away), task-clock per forward and step (perf_event_open): the table gains their columns, and "
                "its footer says what was recorded and why anything could not be");
  add_common_options(sub, args->common, {.warmup = 3, .iters = 3, .file_inputs = true, .save_output = true, .traces = true});
  sub->footer(variants_help());
  sub->callback([args] { run_profile(*args); });
}

}  // namespace attnprof::cli
