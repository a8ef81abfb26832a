// Internal: the small kernels of the unfused CUDA variants (scale, masked_fill, row softmax, dtype
// conversion, triu mask, where, additive mask), launched by kernels.cu. Each computes in fp32 and rounds once
// on store, like the CPU ops (src/ops). Written in the primitives `load`, `store` (float and the bf16 storage type) and
// `__expf`, which the includer defines first: kernels.cu for the GPU, tests/simt_emulator.h on the host
// (tests/test_cuda_unfused_emulated.cpp runs these very kernels against fp64 on the CPU). Unnamed namespace:
// the device build and the host emulation never share a symbol.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/unfused_layout.h"

namespace attnprof::cuda::kernels {
namespace {

// Launch shapes, shared by the launchers and the emulated tests.
constexpr int kThreads = 256;      // grid-stride kernels
constexpr int kSoftmaxWarps = 8;   // softmax: one row per warp, 8 rows per block
// Values per lane of the register-resident softmax for rows of n: 4 or 32, or 0 for the three-pass kernel.
constexpr int softmax_per_lane(int64_t n) { return n <= 4 * 32 ? 4 : n <= 32 * 32 ? 32 : 0; }

template <class T>
__global__ void scale_kernel(const T* x, T* y, int64_t n, float s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    store(y, i, load(x, i) * s);
}

// The mask index math (broadcast strides, element -> mask offset) is layout::mask_offset, tested on the host.
template <class T>
__global__ void masked_fill_kernel(T* x, const uint8_t* mask, int64_t H, int64_t Nq, int64_t Nk, int64_t n,
                                   layout::MaskStrides ms, float value) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x)
    if (mask[layout::mask_offset(e, H, Nq, Nk, ms)]) store(x, e, value);
}

// x += m where m, an fp32 additive mask, broadcasts to x's [B,H,Nq,Nk] (SDPA math's add_ of its mask), in fp32,
// rounded once on store.
template <class T>
__global__ void add_mask_kernel(T* x, const float* m, int64_t H, int64_t Nq, int64_t Nk, int64_t n,
                                layout::MaskStrides ms) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x)
    store(x, e, load(x, e) + m[layout::mask_offset(e, H, Nq, Nk, ms)]);
}

// torch.where(cond, if_true, if_false) with scalar branches over a contiguous bool tensor of n elements.
template <class T>
__global__ void where_kernel(const uint8_t* cond, T* out, int64_t n, float if_true, float if_false) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x)
    store(out, e, cond[e] ? if_true : if_false);
}

// The row maximum's step: fmaxf drops a NaN operand, this keeps it, so that a NaN score makes its whole row
// NaN (as the CPU ops and PyTorch do) even where every other score is -inf.
__device__ __forceinline__ float max_keep_nan(float a, float b) { return a != a || b != b ? a + b : fmaxf(a, b); }

// One warp per row. Rows up to 32·kPerLane long (the blog's are 1024) stay in registers between the max,
// the sum and the write, so the row is read once, as PyTorch's softmax kernel does for rows up to 1024.
// Lane l holds columns l, l+32, ...: every load and store is coalesced.
template <class T, int kPerLane>
__global__ void softmax_regs_kernel(const T* x, T* y, int64_t rows, int n) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // whole warps leave together: the shuffles below see all 32 lanes
  const T* xr = x + row * n;
  T* yr = y + row * n;
  float v[kPerLane];
  float mx = -INFINITY;
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) {
    const int j = c * 32 + lane;
    v[c] = j < n ? load(xr, j) : -INFINITY;
    mx = max_keep_nan(mx, v[c]);
  }
  for (int o = 16; o > 0; o /= 2) mx = max_keep_nan(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if (mx == -INFINITY) {  // nothing visible: zeros, as PyTorch's flash kernels give
#pragma unroll
    for (int c = 0; c < kPerLane; ++c)
      if (c * 32 + lane < n) store(yr, c * 32 + lane, 0.0f);
    return;
  }
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) {
    v[c] = __expf(v[c] - mx);  // -inf (masked or past n) gives 0
    sum += v[c];
  }
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float inv = 1.0f / sum;
#pragma unroll
  for (int c = 0; c < kPerLane; ++c)
    if (c * 32 + lane < n) store(yr, c * 32 + lane, v[c] * inv);
}

// Longer rows: max, sum of exp, write, each a pass over the row.
template <class T>
__global__ void softmax_kernel(const T* x, T* y, int64_t rows, int64_t n) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* xr = x + row * n;
  T* yr = y + row * n;
  float mx = -INFINITY;
  for (int64_t j = lane; j < n; j += 32) mx = max_keep_nan(mx, load(xr, j));
  for (int o = 16; o > 0; o /= 2) mx = max_keep_nan(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if (mx == -INFINITY) {  // nothing visible: zeros, as PyTorch's flash kernels give
    for (int64_t j = lane; j < n; j += 32) store(yr, j, 0.0f);
    return;
  }
  float sum = 0.0f;
  for (int64_t j = lane; j < n; j += 32) sum += __expf(load(xr, j) - mx);
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float inv = 1.0f / sum;
  for (int64_t j = lane; j < n; j += 32) store(yr, j, __expf(load(xr, j) - mx) * inv);
}

template <class X, class Y>
__global__ void convert_kernel(const X* x, Y* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    store(y, i, load(x, i));
}

__global__ void triu_kernel(uint8_t* mask, int64_t nq, int64_t nk, int64_t diagonal) {
  const int64_t n = nq * nk;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    mask[i] = layout::triu_at(i, nk, diagonal) ? 1 : 0;
}

}  // namespace
}  // namespace attnprof::cuda::kernels
