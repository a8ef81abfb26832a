// Internal: the elementwise ops' row kernels, one table per SIMD target (kernels_{scalar,avx2,avx512}.cpp,
// one body in kernels_body.h), chosen at run time by best_isa() like the flash kernel.
// Rows are contiguous (unit stride); the ops fall back to plain strided loops otherwise.
#pragma once

#include <cstdint>

#include "attnprof/dtype.h"

namespace attnprof::ops::detail {

// The kernels of one 16-bit storage type (bf16 or fp16): loaded to fp32, computed in fp32, rounded once on
// store to nearest even.
struct HalfRowKernels {
  void (*scale)(const uint16_t* a, uint16_t* out, int64_t n, float s);        // out may alias a
  void (*fill)(uint16_t* a, const uint8_t* mask, int64_t n, float value);     // a[j] = value where mask[j]
  void (*add_f32)(float* a, const uint16_t* m, int64_t n);                    // fp32 a += half m
  void (*add_to_half)(uint16_t* a, const float* m, int64_t n);                // half a += fp32 m
  void (*add_half)(uint16_t* a, const uint16_t* m, int64_t n);                // half a += half m (same type)
  void (*from_f32)(const float* a, uint16_t* out, int64_t n);
  void (*to_f32)(const uint16_t* a, float* out, int64_t n);
  // softmax of one row; out may alias in; tmp holds n floats. All -inf -> zeros.
  void (*softmax)(const uint16_t* in, uint16_t* out, int64_t n, float* tmp);
};

struct RowKernels {
  void (*scale_f32)(const float* a, float* out, int64_t n, float s);          // out may alias a
  void (*fill_f32)(float* a, const uint8_t* mask, int64_t n, float value);     // a[j] = value where mask[j]
  void (*add_f32_f32)(float* a, const float* m, int64_t n);                    // a[j] += m[j]
  void (*softmax_f32)(const float* in, float* out, int64_t n);                 // out may alias in; all -inf -> 0
  HalfRowKernels bf16, f16;
  const HalfRowKernels& half(DType t) const { return t == DType::F16 ? f16 : bf16; }
};

const RowKernels& row_kernels_scalar();
const RowKernels& row_kernels_avx2();
const RowKernels& row_kernels_avx512();
const RowKernels& row_kernels();  // for best_isa() now (honours IsaOverride)

}  // namespace attnprof::ops::detail
