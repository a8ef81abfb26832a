// The launchers of the unfused variants' small kernels (unfused_kernels.cuh): scale, masked_fill, row
// softmax, dtype conversion, triu mask. Two storage types only (float, bf16) keep nvcc's instantiations, and
// CI's build time, small.
#include <cuda_bf16.h>

#include <cmath>
#include <type_traits>

#include "cuda/kernels.h"

namespace attnprof::cuda::kernels {
namespace {

// The primitives unfused_kernels.cuh is written in: element load and store in fp32 for both storage types.
__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

}  // namespace
}  // namespace attnprof::cuda::kernels

#include "cuda/unfused_kernels.cuh"  // after the primitives it is written in

namespace attnprof::cuda::kernels {
namespace {

// Grid-stride kernels: enough blocks to fill any GPU, well under gridDim.x's 2^31-1. Callers skip n = 0
// (an empty grid is a launch error).
unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 65535 * 32 ? b : 65535 * 32);
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
  const unsigned grid = unsigned((rows + kSoftmaxWarps - 1) / kSoftmaxWarps);
  using bf = __nv_bfloat16;
  auto run = [&](auto* xt, auto* yt) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(xt)>>;
    if (softmax_per_lane(n) == 4)
      softmax_regs_kernel<T, 4><<<grid, kSoftmaxWarps * 32, 0, st>>>(xt, yt, rows, int(n));
    else if (softmax_per_lane(n) == 32)
      softmax_regs_kernel<T, 32><<<grid, kSoftmaxWarps * 32, 0, st>>>(xt, yt, rows, int(n));
    else
      softmax_kernel<<<grid, kSoftmaxWarps * 32, 0, st>>>(xt, yt, rows, n);
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
