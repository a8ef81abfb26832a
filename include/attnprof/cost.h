// attnprof/cost.h: the cost model record every op and variant carries.
//
//   OpCost c{.flops = 2.0 * M * N * K, .bytes_read = (M*K + K*N) * 4.0, .bytes_written = M * N * 4.0};
//   double ai = c.intensity();   // FLOP per byte moved
//
// FLOPs count multiply and add separately (a fused multiply-add is 2). Non-arithmetic elementwise work
// (compare/select in masked_fill, exp in softmax) is counted by the conventions in docs/cost-model.md.
#pragma once

namespace attnprof {

struct OpCost {
  double flops = 0.0;
  double bytes_read = 0.0;
  double bytes_written = 0.0;

  double bytes() const { return bytes_read + bytes_written; }
  double intensity() const { return bytes() > 0 ? flops / bytes() : 0.0; }
  OpCost& operator+=(const OpCost& o) {
    flops += o.flops;
    bytes_read += o.bytes_read;
    bytes_written += o.bytes_written;
    return *this;
  }
};

}  // namespace attnprof
