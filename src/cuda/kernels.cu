// The small kernels of the unfused variants: scale, masked_fill, row softmax, dtype conversion, triu mask.
// Each computes in fp32 and rounds once on store, like the CPU ops (src/ops). Two storage types only
// (float, bf16) keep nvcc's instantiations, and CI's build time, small.
#include <cuda_bf16.h>

#include <cmath>
#include <type_traits>

#include "cuda/kernels.h"
#include "cuda/unfused_layout.h"

namespace attnprof::cuda::kernels {
namespace {

__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

constexpr int kThreads = 256;

// Grid-stride kernels: enough blocks to fill any GPU, well under gridDim.x's 2^31-1. Callers skip n = 0
// (an empty grid is a launch error).
unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 65535 * 32 ? b : 65535 * 32);
}

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
    mx = fmaxf(mx, v[c]);
  }
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
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
  for (int64_t j = lane; j < n; j += 32) mx = fmaxf(mx, load(xr, j));
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
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

void scale(const void* x, void* y, int64_t n, float s, bool bf16, cudaStream_t st) {
  if (n <= 0) return;
  if (bf16)
    scale_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<const __nv_bfloat16*>(x),
                                                      static_cast<__nv_bfloat16*>(y), n, s);
  else
    scale_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<const float*>(x), static_cast<float*>(y), n, s);
}

void masked_fill(void* x, const uint8_t* mask, int64_t B, int64_t H, int64_t Nq, int64_t Nk, int64_t Bm, int64_t Hm,
                 int64_t Mq, int64_t Mk, float value, bool bf16, cudaStream_t st) {
  const int64_t n = B * H * Nq * Nk;
  if (n <= 0) return;
  const layout::MaskStrides ms = layout::mask_strides(Bm, Hm, Mq, Mk);
  if (bf16)
    masked_fill_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<__nv_bfloat16*>(x), mask, H, Nq, Nk, n, ms,
                                                            value);
  else
    masked_fill_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<float*>(x), mask, H, Nq, Nk, n, ms, value);
}

void softmax_rows(const void* x, void* y, int64_t rows, int64_t n, bool bf16, cudaStream_t st) {
  if (rows <= 0 || n <= 0) return;
  constexpr int kWarps = 8;  // rows per block
  const unsigned grid = unsigned((rows + kWarps - 1) / kWarps);
  using bf = __nv_bfloat16;
  auto run = [&](auto* xt, auto* yt) {
    if (n <= 4 * 32)
      softmax_regs_kernel<std::remove_const_t<std::remove_pointer_t<decltype(xt)>>, 4>
          <<<grid, kWarps * 32, 0, st>>>(xt, yt, rows, int(n));
    else if (n <= 32 * 32)
      softmax_regs_kernel<std::remove_const_t<std::remove_pointer_t<decltype(xt)>>, 32>
          <<<grid, kWarps * 32, 0, st>>>(xt, yt, rows, int(n));
    else
      softmax_kernel<<<grid, kWarps * 32, 0, st>>>(xt, yt, rows, n);
  };
  if (bf16)
    run(static_cast<const bf*>(x), static_cast<bf*>(y));
  else
    run(static_cast<const float*>(x), static_cast<float*>(y));
}

void convert(const void* x, void* y, int64_t n, bool x_bf16, bool y_bf16, cudaStream_t st) {
  if (n <= 0) return;
  using bf = __nv_bfloat16;
  if (x_bf16 && !y_bf16)
    convert_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<const bf*>(x), static_cast<float*>(y), n);
  else if (!x_bf16 && y_bf16)
    convert_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<const float*>(x), static_cast<bf*>(y), n);
  else if (x_bf16)
    convert_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<const bf*>(x), static_cast<bf*>(y), n);
  else
    convert_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<const float*>(x), static_cast<float*>(y), n);
}

void triu_mask(uint8_t* mask, int64_t nq, int64_t nk, int64_t diagonal, cudaStream_t st) {
  if (nq * nk <= 0) return;
  triu_kernel<<<blocks_for(nq * nk), kThreads, 0, st>>>(mask, nq, nk, diagonal);
}

}  // namespace attnprof::cuda::kernels
