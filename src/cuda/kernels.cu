// The small kernels of the unfused variants: scale, masked_fill, row softmax, dtype conversion, triu mask.
// Each computes in fp32 and rounds once on store, like the CPU ops (src/ops). Two storage types only
// (float, bf16) keep nvcc's instantiations, and CI's build time, small.
#include <cuda_bf16.h>

#include <cmath>

#include "cuda/kernels.h"

namespace attnprof::cuda::kernels {
namespace {

__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 65535 * 32 ? b : 65535 * 32);
}

template <class T>
__global__ void scale_kernel(const T* x, T* y, int64_t n, float s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    store(y, i, load(x, i) * s);
}

template <class T>
__global__ void masked_fill_kernel(T* x, const uint8_t* mask, int64_t B, int64_t H, int64_t Nq, int64_t Nk,
                                   int64_t Bm, int64_t Hm, float value) {
  const int64_t n = B * H * Nq * Nk, plane = Nq * Nk;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t bh = i / plane, ij = i % plane;
    const int64_t b = bh / H, h = bh % H;
    const int64_t m = ((Bm == 1 ? 0 : b) * Hm + (Hm == 1 ? 0 : h)) * plane + ij;
    if (mask[m]) store(x, i, value);
  }
}

// One warp per row: max, sum of exp, write. Rows of the blog's shape are 1024 long (32 per lane).
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
    mask[i] = (i % nk) - (i / nk) >= diagonal ? 1 : 0;
}

}  // namespace

void scale(const void* x, void* y, int64_t n, float s, bool bf16, cudaStream_t st) {
  if (bf16)
    scale_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<const __nv_bfloat16*>(x),
                                                      static_cast<__nv_bfloat16*>(y), n, s);
  else
    scale_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<const float*>(x), static_cast<float*>(y), n, s);
}

void masked_fill(void* x, const uint8_t* mask, int64_t B, int64_t H, int64_t Nq, int64_t Nk, int64_t Bm, int64_t Hm,
                 float value, bool bf16, cudaStream_t st) {
  const int64_t n = B * H * Nq * Nk;
  if (bf16)
    masked_fill_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<__nv_bfloat16*>(x), mask, B, H, Nq, Nk, Bm,
                                                            Hm, value);
  else
    masked_fill_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<float*>(x), mask, B, H, Nq, Nk, Bm, Hm,
                                                            value);
}

void softmax_rows(const void* x, void* y, int64_t rows, int64_t n, bool bf16, cudaStream_t st) {
  constexpr int kWarps = 8;
  const unsigned grid = unsigned((rows + kWarps - 1) / kWarps);
  if (bf16)
    softmax_kernel<<<grid, kWarps * 32, 0, st>>>(static_cast<const __nv_bfloat16*>(x),
                                                  static_cast<__nv_bfloat16*>(y), rows, n);
  else
    softmax_kernel<<<grid, kWarps * 32, 0, st>>>(static_cast<const float*>(x), static_cast<float*>(y), rows, n);
}

void convert(const void* x, void* y, int64_t n, bool x_bf16, bool y_bf16, cudaStream_t st) {
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
  triu_kernel<<<blocks_for(nq * nk), kThreads, 0, st>>>(mask, nq, nk, diagonal);
}

}  // namespace attnprof::cuda::kernels
