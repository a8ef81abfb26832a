// attnprof-gpu-timing: the numbers docs/gpu.md records, independent of the CLI. For every CUDA variant at
// one shape (default: the blog's [8,16,1024,64] bf16 causal): validation against the fp64 reference, the
// device activities of one profiled forward (CUPTI), and the forward's device time (CUDA events, median of
// --iters) as ms, TFLOP/s (FlashAttention's causal-halved FLOPs) and % of the GPU's dense bf16 peak.
//
//   attnprof-gpu-timing [--shape 8,16,1024,64] [--iters 20] [--no-causal] [--json out.json] [--no-validate]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

#include "attnprof/attention.h"
#include "attnprof/cuda.h"
#include "attnprof/error.h"

using namespace attnprof;

int main(int argc, char** argv) {
  Shape4 shape{8, 16, 1024, 64};
  int iters = 20;
  bool causal = true, validate = true;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--shape" && i + 1 < argc) {
      if (std::sscanf(argv[++i], "%ld,%ld,%ld,%ld", &shape[0], &shape[1], &shape[2], &shape[3]) != 4) {
        std::fprintf(stderr, "--shape wants B,H,N,D\n");
        return 2;
      }
    } else if (a == "--iters" && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (a == "--no-causal") {
      causal = false;
    } else if (a == "--no-validate") {
      validate = false;
    } else {
      std::fprintf(stderr, "usage: %s [--shape B,H,N,D] [--iters N] [--no-causal] [--json PATH] [--no-validate]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!cuda::available()) {
    std::fprintf(stderr, "attnprof-gpu-timing: %s\n", cuda::unavailable_reason().c_str());
    return 3;
  }
  try {
    const cuda::DeviceInfo dev = cuda::device_info(0);
    std::printf("device: %s, sm_%d%d, %d SMs, %.2f GHz, %.1f GiB, %.0f GB/s, dense bf16 peak %.1f TFLOP/s\n",
                dev.name.c_str(), dev.cc_major, dev.cc_minor, dev.sms, dev.sm_clock_ghz,
                double(dev.memory_bytes) / (1 << 30), dev.bandwidth_gbs, dev.bf16_tflops);
    Tensor q = Tensor::empty(shape, DType::BF16), k = Tensor::empty(shape, DType::BF16),
           v = Tensor::empty(shape, DType::BF16);
    fill_randn(q, 0);
    fill_randn(k, 1);
    fill_randn(v, 2);
    AttnOptions opt;
    opt.is_causal = causal;
    const AttnProblem p = AttnProblem::from(q, k, v, opt);
    std::printf("problem: %s, %.3f GFLOP per forward (4·B·H·N²·D%s)\n", p.str().c_str(), attention_flops(p) * 1e-9,
                causal ? ", halved for causal" : "");
    Reference ref;
    if (validate) {
      std::printf("computing the fp64 reference...\n");
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
                          {"problem", p.str()},
                          {"flops", attention_flops(p)},
                          {"variants", nlohmann::json::array()}};
    std::string tables;
    std::printf("\n%-11s %10s %10s %9s %8s %10s  %s\n", "variant", "ms", "TFLOP/s", "% peak", "valid", "max_abs",
                "device activities per forward");
    for (const Variant& var : cuda::cuda_registry()) {
      nlohmann::json e = {{"name", var.name}};
      if (auto why = var.unsupported(p)) {
        std::printf("%-11s unsupported: %s\n", var.name.c_str(), why->c_str());
        e["unsupported"] = *why;
        out["variants"].push_back(e);
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
        // One profiled forward: which device activities it launches.
        cuda::ActivityCollector cupti;
        cupti.start();
        prof::Profiler prof;
        prof.start();
        {
          prof::Zone ann(var.annotation, "user_annotation");
          d->run_device(dq, dk, dv);
          cuda::synchronize();
        }
        prof.stop();
        prof::ProfileResult r = prof.result();
        cuda::attach_device_capture(r, cupti.stop());
        std::string acts;
        nlohmann::json kern = nlohmann::json::array();
        for (const auto& row : cuda::device_key_averages(r)) {
          acts += fmt::format("{}{}x {:.1f}us", acts.empty() ? "" : "; ", row.calls, row.total_ns * 1e-3);
          kern.push_back({{"name", row.name}, {"category", row.category}, {"calls", row.calls},
                          {"us", row.total_ns * 1e-3}, {"registers", row.registers},
                          {"smem", row.static_smem + row.dynamic_smem},
                          {"grid", row.grid}, {"block", row.block}});
        }
        tables += fmt::format("\n{} (one profiled forward):\n{}", var.name, cuda::device_table(r));
        const cuda::DeviceTiming t = cuda::time_device_forward(*d, dq, dk, dv, 3, iters);
        const double tflops = attention_flops(p) / (t.median_ms * 1e-3) * 1e-12;
        const double pct = dev.bf16_tflops > 0 ? 100.0 * tflops / dev.bf16_tflops : 0.0;
        std::printf("%-11s %10.3f %10.1f %8.1f%% %8s %10.2e  %zu: %s\n", var.name.c_str(), t.median_ms, tflops, pct,
                    valid.c_str(), max_abs, r.device.size(), acts.c_str());
        e["median_ms"] = t.median_ms;
        e["min_ms"] = t.min_ms;
        e["tflops"] = tflops;
        e["pct_bf16_peak"] = pct;
        e["activities_per_forward"] = r.device.size();
        e["activities"] = kern;
        e["peak_device_bytes"] = cuda::device_peak_bytes(r);
      } catch (const std::exception& ex) {
        std::printf("%-11s error: %s\n", var.name.c_str(), ex.what());
        e["error"] = ex.what();
      }
      out["variants"].push_back(e);
    }
    std::printf("%s", tables.c_str());
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      f << out.dump(2) << "\n";
    }
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "attnprof-gpu-timing: %s\n", ex.what());
    return 1;
  }
  return 0;
}
