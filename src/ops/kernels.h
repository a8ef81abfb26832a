// Internal: the elementwise ops' row kernels, one table per SIMD target (kernels_{scalar,avx2,avx512}.cpp,
// one body in kernels_body.h), chosen at run time by best_isa() like the flash kernel.
// Rows are contiguous (unit stride); the ops fall back to plain strided loops otherwise.
#pragma once

#include <cstdint>

namespace attnprof::ops::detail {

struct RowKernels {
  void (*scale_f32)(const float* a, float* out, int64_t n, float s);          // out may alias a
  void (*scale_bf16)(const uint16_t* a, uint16_t* out, int64_t n, float s);
  void (*fill_f32)(float* a, const uint8_t* mask, int64_t n, float value);     // a[j] = value where mask[j]
  void (*fill_bf16)(uint16_t* a, const uint8_t* mask, int64_t n, float value);
  void (*add_f32_f32)(float* a, const float* m, int64_t n);                    // a[j] += m[j]
  void (*add_f32_bf16)(float* a, const uint16_t* m, int64_t n);
  void (*add_bf16_f32)(uint16_t* a, const float* m, int64_t n);
  void (*add_bf16_bf16)(uint16_t* a, const uint16_t* m, int64_t n);
  void (*cvt_f32_bf16)(const float* a, uint16_t* out, int64_t n);
  void (*cvt_bf16_f32)(const uint16_t* a, float* out, int64_t n);
  // softmax of one row; out may alias in; tmp holds n floats (bf16 only). All -inf -> zeros.
  void (*softmax_f32)(const float* in, float* out, int64_t n);
  void (*softmax_bf16)(const uint16_t* in, uint16_t* out, int64_t n, float* tmp);
};

const RowKernels& row_kernels_scalar();
const RowKernels& row_kernels_avx2();
const RowKernels& row_kernels_avx512();
const RowKernels& row_kernels();  // for best_isa() now (honours IsaOverride)

}  // namespace attnprof::ops::detail
