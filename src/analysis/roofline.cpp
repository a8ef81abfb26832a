// Placing an op on the roofline: attainable = min(compute ceiling, intensity × bandwidth). The ceilings are
// the measured ones from machine.cpp, so "memory-bound" means "below this machine's measured ridge".
#include <algorithm>

#include "attnprof/analysis.h"

namespace attnprof::analysis {

double compute_ceiling_gflops(const OpCost& cost, const MachinePeaks& peaks) {
  const double fp32 = peaks.fp32_gflops, bf16 = peaks.bf16_gflops > 0 ? peaks.bf16_gflops : fp32;
  // OpenBLAS and oneDNN pick their ISA from CPUID whatever ATTNPROF_ISA dispatches our kernels at: their FLOPs
  // at that ISA's peaks, the same figures unless a lower ISA is forced. Peaks recorded before the library's
  // were (an older compare.json) bill them at the dispatched ISA's, as those files always did.
  const bool lib_known = peaks.library_fp32_gflops > 0;
  const double lib_fp32 = lib_known ? peaks.library_fp32_gflops : fp32;
  const double lib_bf16 = !lib_known ? bf16 : peaks.library_bf16_gflops > 0 ? peaks.library_bf16_gflops : lib_fp32;
  if (cost.flops <= 0 || fp32 <= 0) return fp32;
  const double lib = std::clamp(cost.library_flops, 0.0, cost.flops);
  const double lib_on_bf16 = std::clamp(cost.library_bf16_flops, 0.0, lib);
  const double own = cost.flops - lib;
  const double own_on_bf16 = std::clamp(cost.bf16_flops - lib_on_bf16, 0.0, own);
  return cost.flops / (own_on_bf16 / bf16 + (own - own_on_bf16) / fp32 + lib_on_bf16 / lib_bf16 +
                       (lib - lib_on_bf16) / lib_fp32);
}

RooflinePoint place(const OpCost& cost, double ns, const MachinePeaks& peaks) {
  RooflinePoint pt;
  const double compute = compute_ceiling_gflops(cost, peaks);
  pt.intensity = cost.intensity();
  pt.achieved_gflops = ns > 0 ? cost.flops / ns : 0.0;  // FLOP per ns = GFLOP/s
  pt.ridge_intensity = peaks.bandwidth_gbs > 0 ? compute / peaks.bandwidth_gbs : 0.0;
  pt.attainable_gflops = std::min(compute, pt.intensity * peaks.bandwidth_gbs);
  // An op that moves bytes but does no arithmetic (a copy) sits at intensity 0: memory-bound by definition.
  pt.memory_bound = pt.intensity < pt.ridge_intensity;
  pt.fraction_of_attainable = pt.attainable_gflops > 0 ? pt.achieved_gflops / pt.attainable_gflops : 0.0;
  pt.achieved_gbs = ns > 0 ? cost.bytes() / ns : 0.0;
  pt.fraction_of_bandwidth = peaks.bandwidth_gbs > 0 ? pt.achieved_gbs / peaks.bandwidth_gbs : 0.0;
  return pt;
}

std::vector<PlacedOp> roofline_ops(const KeyAverages& ka, const MachinePeaks& peaks) {
  std::vector<PlacedOp> out;
  for (const OpStats& op : ka.rows) {
    if (ka.has_device ? !op.is_device_activity() : is_annotation(op.name, op.category)) continue;
    const OpCost& c = op.self_cost;
    if (!c.does_work()) continue;  // views and wrappers: nothing of their own to place
    const double ns = ka.has_device ? op.self_device_ns : op.self_ns;
    out.push_back({&op, c, ns, place(c, ns, peaks)});
  }
  return out;
}

BoundTime bound_time(const KeyAverages& ka, const MachinePeaks& peaks) {
  BoundTime t;
  t.total_ns = ka.has_device ? ka.device_self_total_ns : ka.self_total_ns;
  for (const PlacedOp& op : roofline_ops(ka, peaks)) {
    (op.pt.memory_bound ? t.memory_ns : t.compute_ns) += op.ns;
    // One entry a name: rows grouped by input shape name an op once per shape.
    std::vector<BoundTime::Op>& ops = op.pt.memory_bound ? t.memory_ops : t.compute_ops;
    const auto same = std::find_if(ops.begin(), ops.end(), [&](const BoundTime::Op& o) { return o.name == op.op->name; });
    if (same != ops.end())
      same->ns += op.ns;
    else
      ops.push_back({op.op->name, op.ns});
  }
  t.total_ns = std::max(t.total_ns, t.memory_ns + t.compute_ns);  // a profile read back without its total
  for (std::vector<BoundTime::Op>* ops : {&t.memory_ops, &t.compute_ops})
    std::stable_sort(ops->begin(), ops->end(), [](const BoundTime::Op& a, const BoundTime::Op& b) { return a.ns > b.ns; });
  return t;
}

RooflineFloor roofline_floor(const KeyAverages& ka, const MachinePeaks& peaks) {
  RooflineFloor f;
  for (const OpStats& op : ka.rows) {
    if (ka.has_device ? !op.is_device_activity() : is_annotation(op.name, op.category)) continue;
    const OpCost& c = op.self_cost;
    const double compute = compute_ceiling_gflops(c, peaks);
    const double memory_ns = peaks.bandwidth_gbs > 0 ? c.bytes() / peaks.bandwidth_gbs : 0.0;  // B / (GB/s) = ns
    const double compute_ns = compute > 0 ? c.flops / compute : 0.0;                           // FLOP / GFLOP/s = ns
    f.ns += std::max(memory_ns, compute_ns);
    if (memory_ns > compute_ns) f.memory_ns += memory_ns;
  }
  return f;
}

const char* floor_bound_kind(double memory_share) {
  return memory_share >= 0.75 ? "memory" : memory_share <= 0.25 ? "compute" : "mixed";
}

}  // namespace attnprof::analysis
