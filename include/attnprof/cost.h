// attnprof/cost.h: the cost model record every op and variant carries.
//
//   OpCost c{.flops = 2.0 * M * N * K, .bytes_read = (M*K + K*N) * 4.0, .bytes_written = M * N * 4.0};
//   double ai = c.intensity();   // FLOP per byte moved
//
// FLOPs count multiply and add separately (a fused multiply-add is 2). Non-arithmetic elementwise work
// (compare/select in masked_fill, exp in softmax) is counted by the conventions in docs/cost-model.md.
//
// `bf16_flops` is the part of `flops` that runs on bf16 dot-product units (vdpbf16ps on the CPU, tensor
// cores on a GPU): the matmuls and the fused kernels of a bf16 problem. The rest (elementwise ops, softmax,
// anything upcast to fp32 first, as SDPA's math backend does) runs at the fp32 FMA rate. The roofline takes
// each op's compute ceiling from this split, so an fp32 matmul inside a bf16 model is not judged against
// the bf16 peak.
#pragma once

namespace attnprof {

struct OpCost {
  double flops = 0.0;
  double bytes_read = 0.0;
  double bytes_written = 0.0;
  double bf16_flops = 0.0;  // of `flops`, those on bf16 dot-product units

  double bytes() const { return bytes_read + bytes_written; }
  double intensity() const { return bytes() > 0 ? flops / bytes() : 0.0; }
  // The op does work of its own: FLOPs or bytes (not a view, nor a wrapper whose work is its children's).
  bool does_work() const { return flops > 0 || bytes() > 0; }
  OpCost& operator+=(const OpCost& o) {
    flops += o.flops;
    bytes_read += o.bytes_read;
    bytes_written += o.bytes_written;
    bf16_flops += o.bf16_flops;
    return *this;
  }
  // The same cost counted under another FLOP convention (e.g. attention's causal-halved FLOPs instead of the
  // sum of its ops'): the bf16 share of the FLOPs is kept.
  OpCost with_flops(double f) const {
    OpCost c = *this;
    c.bf16_flops = flops > 0 ? bf16_flops * (f / flops) : 0.0;
    c.flops = f;
    return c;
  }
};

}  // namespace attnprof
