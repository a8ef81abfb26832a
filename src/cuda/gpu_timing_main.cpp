// attnprof-gpu-timing: the numbers docs/gpu.md records, independent of the CLI. For every CUDA variant at
// one shape (default: the blog's [8,16,1024,64] bf16 causal; --dtype fp16 for fp16): validation against the
// fp64 reference, the device activities of one profiled forward (CUPTI), and the forward's device time (CUDA events, median of
// --iters) as ms, TFLOP/s (FlashAttention's causal-halved FLOPs) and % of the GPU's dense bf16 peak, and
// "burst ms": one forward's share of --iters forwards enqueued back to back (no launch gap between them).
//
// Then every tile configuration of the flash kernel (fragment.h: kFlashConfigs): each is first validated
// against the fp64 reference on ragged shapes (Nq, Nk not multiples of the tiles, Nq != Nk, GQA, causal and
// not, D 64 and 128, logsumexp included) and at the timed shape, then timed there; the fastest valid one
// is named, so one GPU run says which default to keep.
//
// The JSON file is rewritten (temporary file + rename) after every variant and every configuration, with
// "complete": false until the end, so a run stopped at a time limit keeps what it finished.
// --configs-only skips the variants (the configuration search as a step of its own); --device-info prints
// the device and exits (3 with the reason when there is no usable CUDA device: scripts/gpu-check.sh's probe).
//
//   attnprof-gpu-timing [--shape 8,16,1024,64] [--dtype bf16|fp16] [--iters 20] [--no-causal] [--json out.json]
//                       [--no-validate] [--no-configs | --configs-only] [--device-info]
#include <algorithm>
#include <cstdio>
#include <functional>
#include <iterator>
#include <map>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "attnprof/analysis.h"
#include "attnprof/attention.h"
#include "attnprof/cuda.h"
#include "attnprof/error.h"
#include "attnprof/report.h"
#include "device_ops.h"  // flash tile configurations (internal to the CUDA backend)
#include "fragment.h"

using namespace attnprof;

namespace {

struct SmallCase {
  int64_t B, Hq, Hkv, Nq, Nk;
  bool causal;
  double scale;  // 0: 1/sqrt(D)
};
// Ragged edges of every tile shape (64, 128), Nq > Nk and Nq < Nk under top-left causal, GQA, one row.
const SmallCase kSmallCases[] = {
    {1, 2, 2, 1, 1, false, 0},      {1, 2, 2, 17, 17, true, 0},      {2, 4, 2, 33, 70, false, 0},
    {1, 4, 1, 65, 65, true, 0},     {1, 2, 2, 100, 37, true, 0},     {1, 2, 2, 37, 100, true, 0},
    {1, 2, 2, 129, 129, true, 0},   {1, 2, 1, 200, 333, false, 0.3}, {2, 2, 2, 300, 300, true, 0},
    {1, 3, 1, 257, 64, true, 0},    {1, 2, 2, 64, 257, true, 2.0},   {1, 1, 1, 1000, 1000, true, 0},
};

// Checks the flash variant (in whatever configuration is set) on the small cases at head dim D.
// Returns the number of failing cases and writes a line per failure to `why`.
struct SmallInputs {
  Tensor q, k, v;
  AttnOptions opt;
  Reference ref;
};

// The small cases' inputs (of type t) and fp64 references at head dim D, built once and shared by every
// configuration.
const std::vector<SmallInputs>& small_inputs(int64_t D, DType t) {
  static std::map<std::pair<int64_t, DType>, std::vector<SmallInputs>> cache;
  auto [it, fresh] = cache.try_emplace({D, t});
  if (!fresh) return it->second;
  uint64_t seed = 100;
  for (const SmallCase& c : kSmallCases) {
    SmallInputs in;
    in.q = Tensor::empty({c.B, c.Hq, c.Nq, D}, t);
    in.k = Tensor::empty({c.B, c.Hkv, c.Nk, D}, t);
    in.v = Tensor::empty({c.B, c.Hkv, c.Nk, D}, t);
    fill_randn(in.q, seed++);
    fill_randn(in.k, seed++);
    fill_randn(in.v, seed++);
    in.opt.is_causal = c.causal;
    if (c.scale != 0) in.opt.scale = c.scale;
    in.ref = reference_attention(in.q, in.k, in.v, in.opt);
    it->second.push_back(std::move(in));
  }
  return it->second;
}

int check_small_cases(int64_t D, DType t, std::string& why, double& worst) {
  const Variant& var = cuda::find_cuda_variant("flash");
  int failed = 0;
  for (const SmallInputs& in : small_inputs(D, t)) {
    const Tensor &q = in.q, &k = in.k, &v = in.v;
    const AttnOptions& opt = in.opt;
    const Reference& ref = in.ref;
    const AttnProblem p = AttnProblem::from(q, k, v, opt);
    if (auto u = var.unsupported(p)) {
      ++failed;
      why += fmt::format("  {}: unsupported: {}\n", p.str(), *u);
      continue;
    }
    const AttnOutput o = var.prepare(p, opt)->run(q, k, v);
    const ErrorStats e = compare_to_reference(o.out, ref, var.tolerance(p.dtype));
    const ErrorStats el = o.lse.defined() ? compare_lse(o.lse, ref, Tolerance{1e-3, 1e-3}) : ErrorStats{};
    worst = std::max(worst, e.max_abs);
    if (!e.ok() || !el.ok() || !o.lse.defined()) {
      ++failed;
      why += fmt::format("  {}: {} of {} outputs off (max_abs {:.3g}), {} of {} lse off{}\n", p.str(), e.violations,
                         e.count, e.max_abs, el.violations, el.count, o.lse.defined() ? "" : " (no lse)");
    }
  }
  return failed;
}

// Median device duration of the forward's kernels, from CUPTI activity records over `iters` forwards
// (0 when CUPTI is unavailable or delivered none).
double kernel_median_ms(cuda::DeviceRunner& d, const cuda::DeviceTensor& dq, const cuda::DeviceTensor& dk,
                        const cuda::DeviceTensor& dv, int iters) {
  d.run_device(dq, dk, dv);  // warm
  cuda::synchronize();
  cuda::DeviceCapture cap;
  try {
    cuda::ActivityCollector cupti;
    cupti.start();
    for (int i = 0; i < iters; ++i) d.run_device(dq, dk, dv);
    cuda::synchronize();
    cap = cupti.stop();
  } catch (const std::exception& ex) {  // CUPTI unavailable: the event timing stands alone
    fmt::print("(no CUPTI kernel times: {})\n", ex.what());
    return 0.0;
  }
  std::vector<double> ms;
  for (const cuda::RawActivity& a : cap.activities)
    if (a.kind == cuda::DeviceActivity::Kind::Kernel && a.end_ns > a.start_ns) ms.push_back((a.end_ns - a.start_ns) * 1e-6);
  if (ms.empty()) return 0.0;
  return analysis::median(ms);  // the mean of the two middle kernels for an even count, as every median here
}

// Every flash tile configuration for the problem's head dim: small-case validation (both head dims),
// validation at the timed shape, CUDA-event timing; the fastest valid one is printed and recorded.
// `save` is called after each configuration, with out["flash_configs"] holding those done so far.
void time_flash_configs(const AttnProblem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                        const AttnOptions& opt, const Reference& ref, bool validate, const cuda::DeviceTensor& dq,
                        const cuda::DeviceTensor& dk, const cuda::DeviceTensor& dv, int iters, nlohmann::json& out,
                        const std::function<void()>& save) {
  const Variant& var = cuda::find_cuda_variant("flash");
  if (var.unsupported(p)) return;
  const int def = cuda::dops::flash_config_for(p.D);
  fmt::print("\nflash tile configurations (validated on {} ragged shapes per head dim, then timed at {}):\n",
             std::size(kSmallCases), p.str());
  fmt::print("{:<13} {:>5} {:>4} {:>6} {:>6} {:>11} {:>6} {:>9} {:>10} {:>10} {:>8}\n", "config", "rows", "keys", "warps",
             "rows/w", "small 64/128", "full", "max_abs", "ms/fwd", "kernel us", "TFLOP/s");
  std::fflush(stdout);
  out["flash_default"] = cuda::frag::kFlashConfigs[def].name;
  nlohmann::json& rows = out["flash_configs"] = nlohmann::json::array();
  int best = -1;
  double best_ms = 0.0;
  for (int c = 0; c < cuda::frag::kFlashConfigCount; ++c) {
    const cuda::frag::TileConfig& tc = cuda::frag::kFlashConfigs[c];
    nlohmann::json e = {{"name", tc.name}, {"block_m", tc.block_m()}, {"block_n", tc.block_n},
                        {"warps", tc.warps}, {"rows_per_warp", 16 * tc.m_tiles}, {"default", c == def}};
    try {
      cuda::dops::set_flash_config(c);
      std::string why, small[2];
      double worst = 0.0;
      bool small_ok = true;
      for (int di = 0; di < 2; ++di) {
        const int64_t d = di == 0 ? 64 : 128;
        if (!tc.supports(int(d))) {
          small[di] = "-";
          continue;
        }
        const int bad = check_small_cases(d, p.dtype, why, worst);
        small[di] = bad == 0 ? "ok" : fmt::format("{}bad", bad);
        small_ok &= bad == 0;
        e[fmt::format("small_d{}_failed", d)] = bad;
      }
      e["small_max_abs_err"] = worst;
      if (!why.empty()) e["small_failures"] = why;
      if (!tc.supports(int(p.D))) {
        fmt::print("{:<13} {:>5} {:>4} {:>6} {:>6} {:>5}/{:<5} {:>6}\n", tc.name, tc.block_m(), tc.block_n, tc.warps,
                   16 * tc.m_tiles, small[0], small[1], "(not for this D)");
        std::fflush(stdout);
        rows.push_back(e);
        save();
        continue;
      }
      std::string full = "-";
      double max_abs = 0.0;
      bool full_ok = true;
      auto runner = var.prepare(p, opt);
      if (validate) {
        const AttnOutput o = runner->run(q, k, v);
        const ErrorStats es = compare_to_reference(o.out, ref, var.tolerance(p.dtype));
        const ErrorStats el = compare_lse(o.lse, ref, Tolerance{1e-3, 1e-3});
        full_ok = es.ok() && el.ok();
        full = full_ok ? "ok" : "FAIL";
        max_abs = es.max_abs;
        e["valid"] = full_ok;
        e["max_abs_err"] = es.max_abs;
        e["lse_violations"] = el.violations;
      }
      auto* d = dynamic_cast<cuda::DeviceRunner*>(runner.get());
      // Per forward between CUDA events (host launch gaps included, as in the table above) and the
      // kernel's own duration from CUPTI (what is compared: launch overhead is the same for every config).
      const cuda::DeviceTiming t = cuda::time_device_forward(*d, dq, dk, dv, 3, iters);
      const double kernel_ms = kernel_median_ms(*d, dq, dk, dv, iters);
      const double ms = kernel_ms > 0 ? kernel_ms : t.median_ms;
      const double tflops = attention_flops(p) / (ms * 1e-3) * 1e-12;
      fmt::print("{:<13} {:>5} {:>4} {:>6} {:>6} {:>5}/{:<5} {:>6} {:>9.2e} {:>10.4f} {:>10.1f} {:>8.1f}{}\n", tc.name,
                 tc.block_m(), tc.block_n, tc.warps, 16 * tc.m_tiles, small[0], small[1], full, max_abs, t.median_ms,
                 kernel_ms * 1e3, tflops, c == def ? "  (default)" : "");
      e["median_ms"] = t.median_ms;
      e["min_ms"] = t.min_ms;
      e["kernel_median_ms"] = kernel_ms;
      e["tflops"] = tflops;
      if (small_ok && full_ok && (best < 0 || ms < best_ms)) {
        best = c;
        best_ms = ms;
      }
      if (!why.empty()) fmt::print("{}", why);
    } catch (const std::exception& ex) {
      fmt::print("{:<13} error: {}\n", tc.name, ex.what());
      e["error"] = ex.what();
    }
    std::fflush(stdout);
    rows.push_back(e);
    if (best >= 0) out["flash_fastest"] = cuda::frag::kFlashConfigs[best].name;  // so far
    save();
  }
  cuda::dops::set_flash_config(-1);
  if (best >= 0) {
    fmt::print("fastest valid flash configuration: {} ({:.4f} ms kernel); default for D={}: {}\n",
               cuda::frag::kFlashConfigs[best].name, best_ms, p.D, cuda::frag::kFlashConfigs[def].name);
    out["flash_fastest"] = cuda::frag::kFlashConfigs[best].name;
  } else {
    fmt::print("no flash configuration passed validation\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> shape_arg{8, 16, 1024, 64};
  int iters = 20;
  std::string dtype_arg = "bf16";
  bool no_causal = false, no_validate = false, no_configs = false, configs_only = false, device_info_only = false;
  std::string json_path;
  std::vector<std::string> order;  // --variants: the ones to time, in this order (default: the registry's)
  CLI::App app{"the GPU numbers of docs/gpu.md: every CUDA variant validated and timed at one shape, then every flash "
               "tile configuration",
               "attnprof-gpu-timing"};
  app.add_option("--shape", shape_arg, "B,H,N,D (default: the blog's 8,16,1024,64)")
      ->delimiter(',')
      ->expected(4)
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--dtype", dtype_arg, "bf16 or fp16, the flash kernel's types (default bf16)")
      ->check(CLI::IsMember({"bf16", "fp16"}));
  app.add_option("--iters", iters, "timed forwards per variant and configuration (default 20)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--json", json_path, "also write the figures here (rewritten after each variant and configuration)");
  app.add_flag("--no-causal", no_causal, "no mask: every query sees every key");
  app.add_flag("--no-validate", no_validate, "skip the fp64 reference and the validation against it");
  auto* no_configs_opt = app.add_flag("--no-configs", no_configs, "time the variants only, not the flash configurations");
  app.add_flag("--configs-only", configs_only, "time the flash configurations only, not the variants")
      ->excludes(no_configs_opt);
  app.add_flag("--device-info", device_info_only, "print the device and exit (3 when there is no usable CUDA device)");
  app.add_option("--variants", order,
                 "comma-separated CUDA variants to time, in this order (default: every one, in the registry's order); "
                 "the first is timed before CUPTI has run in the process")
      ->delimiter(',');
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // help: 0; a bad flag or value: named on stderr, exit 2 as the CLI's
    return code == 0 ? 0 : 2;
  }
  const Shape4 shape{shape_arg[0], shape_arg[1], shape_arg[2], shape_arg[3]};
  const DType dtype = parse_dtype(dtype_arg);
  const bool causal = !no_causal, validate = !no_validate, configs = !no_configs, variants = !configs_only;
  std::vector<const Variant*> timed;  // --variants' order, else the registry's
  if (order.empty())
    for (const Variant& var : cuda::cuda_registry()) timed.push_back(&var);
  for (const std::string& name : order) {  // a name the registry lacks is a bad flag, said before the device is looked for
    try {
      timed.push_back(&cuda::find_cuda_variant(name));
    } catch (const std::exception& ex) {
      fmt::print(stderr, "attnprof-gpu-timing: --variants: {}\n", ex.what());
      return 2;
    }
  }
  if (!variants) timed.clear();  // --configs-only
  if (!cuda::available()) {
    fmt::print(stderr, "attnprof-gpu-timing: {}\n", cuda::unavailable_reason());
    return 3;
  }
  try {
    const cuda::DeviceInfo dev = cuda::device_info(0);
    fmt::print("device: {}, sm_{}{}, {} SMs, {:.2f} GHz, {:.1f} GiB, {:.0f} GB/s, dense bf16 peak {:.1f} TFLOP/s ({}); "
               "CUDA driver {}.{}, runtime {}.{}\n",
               dev.name, dev.cc_major, dev.cc_minor, dev.sms, dev.sm_clock_ghz, double(dev.memory_bytes) / (1 << 30),
               dev.bandwidth_gbs, dev.bf16_tflops, dev.bf16_peak_source, dev.driver_version / 1000,
               dev.driver_version % 1000 / 10, dev.runtime_version / 1000, dev.runtime_version % 1000 / 10);
    std::fflush(stdout);
    if (device_info_only) return 0;
    Tensor q = Tensor::empty(shape, dtype), k = Tensor::empty(shape, dtype), v = Tensor::empty(shape, dtype);
    fill_randn(q, 0);
    fill_randn(k, 1);
    fill_randn(v, 2);
    AttnOptions opt;
    opt.is_causal = causal;
    const AttnProblem p = AttnProblem::from(q, k, v, opt);
    fmt::print("problem: {}, {:.3f} GFLOP per forward (4·B·H·N²·D{})\n", p.str(), attention_flops(p) * 1e-9,
               causal ? ", halved for causal" : "");
    Reference ref;
    if (validate) {
      fmt::print("computing the fp64 reference...\n");
      std::fflush(stdout);
      ref = reference_attention(q, k, v, opt);
    }
    const cuda::DeviceTensor dq = cuda::DeviceTensor::from_host(q), dk = cuda::DeviceTensor::from_host(k),
                             dv = cuda::DeviceTensor::from_host(v);
    nlohmann::json out = {{"device", dev.name},
                          {"cc", fmt::format("{}.{}", dev.cc_major, dev.cc_minor)},
                          {"sms", dev.sms},
                          {"bf16_peak_tflops", dev.bf16_tflops},
                          {"bandwidth_gbs", dev.bandwidth_gbs},
                          {"cuda_driver", dev.driver_version},
                          {"cuda_runtime", dev.runtime_version},
                          {"problem", p.str()},
                          {"flops", attention_flops(p)},
                          {"iters", iters},
                          {"complete", false},
                          {"variants", nlohmann::json::array()}};
    // Rewritten after every variant and configuration (temporary file + rename: a reader, or a run stopped
    // here, sees the previous whole file), "complete": true only at the end.
    const auto save = [&] {
      if (!json_path.empty()) report::write_text_atomic(json_path, out.dump(2) + "\n");
    };
    save();
    std::string tables;
    if (variants)
      fmt::print("\n{:<11} {:>10} {:>10} {:>9} {:>10} {:>8} {:>10}  {}\n", "variant", "ms", "TFLOP/s", "% peak",
                 "burst ms", "valid", "max_abs", "device activities per forward");
    for (const Variant* vp : timed) {
      const Variant& var = *vp;
      nlohmann::json e = {{"name", var.name}};
      if (auto why = var.unsupported(p)) {
        fmt::print("{:<11} unsupported: {}\n", var.name, *why);
        std::fflush(stdout);
        e["unsupported"] = *why;
        out["variants"].push_back(e);
        save();
        continue;
      }
      try {
        auto runner = var.prepare(p, opt);
        auto* d = dynamic_cast<cuda::DeviceRunner*>(runner.get());
        std::string valid = "-";
        double max_abs = 0.0;
        if (validate) {
          const AttnOutput o = runner->run(q, k, v);
          const ErrorStats es = compare_to_reference(o.out, ref, var.tolerance(p.dtype));
          valid = es.ok() ? "ok" : "FAIL";
          max_abs = es.max_abs;
          e["valid"] = es.ok();
          e["max_abs_err"] = es.max_abs;
          e["nmse"] = es.nmse;
        }
        // Timing needs only CUDA events; the profiled forward needs CUPTI, so a CUPTI failure (another
        // subscriber, a VM without profiling rights) costs the activity list, not the variant's time.
        const cuda::DeviceTiming t = cuda::time_device_forward(*d, dq, dk, dv, 3, iters, /*burst=*/true);
        const double tflops = attention_flops(p) / (t.median_ms * 1e-3) * 1e-12;
        const double pct = dev.bf16_tflops > 0 ? 100.0 * tflops / dev.bf16_tflops : 0.0;
        e["median_ms"] = t.median_ms;
        e["min_ms"] = t.min_ms;
        e["burst_ms"] = t.burst_ms;
        e["tflops"] = tflops;
        e["pct_bf16_peak"] = pct;
        std::string acts;
        size_t n_acts = 0;
        try {  // one profiled forward: which device activities it launches
          const prof::ProfileResult r = cuda::profile_device_forward(*d, dq, dk, dv, var.annotation);
          nlohmann::json kern = nlohmann::json::array();
          for (const auto& row : analysis::device_key_averages(r)) {
            acts += fmt::format("{}{}x {:.1f}us", acts.empty() ? "" : "; ", row.calls, row.total_ns * 1e-3);
            kern.push_back({{"name", row.name}, {"category", row.category}, {"calls", row.calls},
                            {"us", row.total_ns * 1e-3}, {"registers", row.registers},
                            {"smem", row.static_smem + row.dynamic_smem},
                            {"grid", row.grid}, {"block", row.block}});
          }
          tables += fmt::format("\n{} (one profiled forward):\n{}", var.name, report::device_table(r));
          n_acts = r.device.size();
          e["activities_per_forward"] = n_acts;
          e["activities"] = kern;
          e["peak_device_bytes"] = analysis::device_peak_bytes(r);
        } catch (const std::exception& ex) {
          acts = fmt::format("not profiled: {}", ex.what());
          e["profile_error"] = ex.what();
        }
        fmt::print("{:<11} {:>10.3f} {:>10.1f} {:>8.1f}% {:>10.3f} {:>8} {:>10.2e}  {}: {}\n", var.name, t.median_ms,
                   tflops, pct, t.burst_ms, valid, max_abs, n_acts, acts);
        std::fflush(stdout);
      } catch (const std::exception& ex) {
        fmt::print("{:<11} error: {}\n", var.name, ex.what());
        std::fflush(stdout);
        e["error"] = ex.what();
      }
      out["variants"].push_back(e);
      save();
    }
    fmt::print("{}", tables);
    std::fflush(stdout);
    if (configs) time_flash_configs(p, q, k, v, opt, ref, validate, dq, dk, dv, iters, out, save);
    out["complete"] = true;
    save();
  } catch (const std::exception& ex) {
    fmt::print(stderr, "attnprof-gpu-timing: {}\n", ex.what());
    return 1;
  }
  return 0;
}
