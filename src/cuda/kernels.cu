// The launchers of the unfused variants' small kernels (unfused_kernels.cuh): scale, masked_fill, row
// softmax, dtype conversion, triu mask, where, additive mask.
// Three storage types (float, bf16, fp16); conversions only to and from
// fp32 (what SDPA's math path needs), which keeps nvcc's instantiations, and CI's build time, small.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <type_traits>

#include "cuda/kernels.h"

namespace attnprof::cuda::kernels {
namespace {

// The primitives unfused_kernels.cuh is written in: element load and store in fp32 for each storage type.
__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }

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

// Calls f with a typed (const-stripped) null pointer of t's storage type, to pick the instantiation.
template <class F>
void with_storage(DType t, F&& f) {
  if (t == DType::BF16)
    f(static_cast<__nv_bfloat16*>(nullptr));
  else if (t == DType::F16)
    f(static_cast<__half*>(nullptr));
  else
    f(static_cast<float*>(nullptr));
}

}  // namespace

void scale(const void* x, void* y, int64_t n, float s, DType t, cudaStream_t st) {
  if (n <= 0) return;
  with_storage(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    scale_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<const T*>(x), static_cast<T*>(y), n, s);
  });
}

void masked_fill(void* x, const uint8_t* mask, int64_t B, int64_t H, int64_t Nq, int64_t Nk, int64_t Bm, int64_t Hm,
                 int64_t Mq, int64_t Mk, float value, DType t, cudaStream_t st) {
  const int64_t n = B * H * Nq * Nk;
  if (n <= 0) return;
  const layout::MaskStrides ms = layout::mask_strides(Bm, Hm, Mq, Mk);
  with_storage(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    masked_fill_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<T*>(x), mask, H, Nq, Nk, n, ms, value);
  });
}

void add_mask(void* x, const float* m, int64_t B, int64_t H, int64_t Nq, int64_t Nk, int64_t Bm, int64_t Hm,
              int64_t Mq, int64_t Mk, DType t, cudaStream_t st) {
  const int64_t n = B * H * Nq * Nk;
  if (n <= 0) return;
  const layout::MaskStrides ms = layout::mask_strides(Bm, Hm, Mq, Mk);
  with_storage(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    add_mask_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<T*>(x), m, H, Nq, Nk, n, ms);
  });
}

void where(const uint8_t* cond, void* out, int64_t n, float if_true, float if_false, DType t, cudaStream_t st) {
  if (n <= 0) return;
  with_storage(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    where_kernel<<<blocks_for(n), kThreads, 0, st>>>(cond, static_cast<T*>(out), n, if_true, if_false);
  });
}

void softmax_rows(const void* x, void* y, int64_t rows, int64_t n, DType t, cudaStream_t st) {
  if (rows <= 0 || n <= 0) return;
  const unsigned grid = unsigned((rows + kSoftmaxWarps - 1) / kSoftmaxWarps);
  with_storage(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    if (softmax_per_lane(n) == 4)
      softmax_regs_kernel<T, 4><<<grid, kSoftmaxWarps * 32, 0, st>>>(xt, yt, rows, int(n));
    else if (softmax_per_lane(n) == 32)
      softmax_regs_kernel<T, 32><<<grid, kSoftmaxWarps * 32, 0, st>>>(xt, yt, rows, int(n));
    else
      softmax_kernel<<<grid, kSoftmaxWarps * 32, 0, st>>>(xt, yt, rows, n);
  });
}

void convert(const void* x, void* y, int64_t n, DType from, DType to, cudaStream_t st) {
  if (n <= 0) return;
  if (from == to) {  // a same-type copy, through the kernel like every conversion
    with_storage(from, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      convert_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<const T*>(x), static_cast<T*>(y), n);
    });
  } else if (from == DType::F32) {
    with_storage(to, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      convert_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<const float*>(x), static_cast<T*>(y), n);
    });
  } else {  // to fp32 (the device op refuses a half -> other half conversion)
    with_storage(from, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      convert_kernel<<<blocks_for(n), kThreads, 0, st>>>(static_cast<const T*>(x), static_cast<float*>(y), n);
    });
  }
}

void triu_mask(uint8_t* mask, int64_t nq, int64_t nk, int64_t diagonal, cudaStream_t st) {
  if (nq * nk <= 0) return;
  triu_kernel<<<blocks_for(nq * nk), kThreads, 0, st>>>(mask, nq, nk, diagonal);
}

}  // namespace attnprof::cuda::kernels
