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
//
// `library_flops` is the part of `flops` run inside an external library that picks its own ISA from CPUID
// (OpenBLAS sgemm, oneDNN's bf16 matmul; cuBLAS on a GPU): what ATTNPROF_ISA dispatches does not reach them,
// so the roofline bills them at the peaks of the CPU's best ISA, and the rest at the dispatched ISA's.
// `library_bf16_flops` is the part of those on bf16 dot-product units (oneDNN's bf16 matmul), so it is
// counted in both `library_flops` and `bf16_flops`:
//   0 <= library_bf16_flops <= min(library_flops, bf16_flops),   library_flops <= flops,   bf16_flops <= flops.
// Our own kernels' bf16 FLOPs are then bf16_flops - library_bf16_flops, and their fp32 ones what is left of
// flops - library_flops.
#pragma once

namespace attnprof {

struct OpCost {
  double flops = 0.0;
  double bytes_read = 0.0;
  double bytes_written = 0.0;
  double bf16_flops = 0.0;          // of `flops`, those on bf16 dot-product units
  double library_flops = 0.0;       // of `flops`, those inside OpenBLAS / oneDNN (which choose their own ISA)
  double library_bf16_flops = 0.0;  // of `library_flops` (and of `bf16_flops`), those on bf16 units

  double bytes() const { return bytes_read + bytes_written; }
  double intensity() const { return bytes() > 0 ? flops / bytes() : 0.0; }
  // The op does work of its own: FLOPs or bytes (not a view, nor a wrapper whose work is its children's).
  bool does_work() const { return flops > 0 || bytes() > 0; }
  OpCost& operator+=(const OpCost& o) {
    flops += o.flops;
    bytes_read += o.bytes_read;
    bytes_written += o.bytes_written;
    bf16_flops += o.bf16_flops;
    library_flops += o.library_flops;
    library_bf16_flops += o.library_bf16_flops;
    return *this;
  }
  // The same cost counted under another FLOP convention (e.g. attention's causal-halved FLOPs instead of the
  // sum of its ops'): the bf16 and library shares of the FLOPs are kept.
  OpCost with_flops(double f) const {
    OpCost c = *this;
    const double scale = flops > 0 ? f / flops : 0.0;
    c.bf16_flops = bf16_flops * scale;
    c.library_flops = library_flops * scale;
    c.library_bf16_flops = library_bf16_flops * scale;
    c.flops = f;
    return c;
  }
};

}  // namespace attnprof
