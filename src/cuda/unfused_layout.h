// Internal: the index math of the unfused CUDA path (device_ops.cpp, kernels.cu), as plain functions so that
// the host unit tests (tests/test_cuda_unfused_layout.cpp) check the very formulas the device code runs:
//   - how a row-major batched matmul of [B, H, N, D] tensors maps onto one cublasGemmStridedBatchedEx call
//     (cuBLAS is column-major: row-major C = op(X)·op(Y) is column-major Cᵀ = op(Y)ᵀ·op(X)ᵀ, so the operands
//     swap and m, n swap);
//   - which mask element a broadcast masked_fill reads for each element of the scores;
//   - the causal mask's value at one element.
// No CUDA headers: it compiles as plain C++ too (see fragment.h for the flash kernel's).
#pragma once

#include <cstdint>

#include "host_device.h"  // same directory: found from any include path

namespace attnprof::cuda::layout {

// One cublasGemmStridedBatchedEx call as cuBLAS reads it: for every batch b,
//   C_b (m × n, column-major, leading dimension ldc) = op(A_b) (m × k) · op(B_b) (k × n),
// A_b = A + b·stride_a (column-major, lda; transposed first when trans_a), likewise B and C.
struct StridedGemm {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t batch = 0;
};

// S[b, h] = Q[b, h] · K[b, h/G]ᵀ with Q [B, Hq, Nq, D], K [B, Hkv, Nk, D], S [B, Hq, Nq, Nk], G = Hq / Hkv.
// Per (b, kv head), the G query heads of a group are contiguous in Q and S, so one GEMM covers them:
// column-major Sᵀ (Nk × G·Nq, ld Nk) = K (Nk × D: the stored D × Nk column-major matrix, transposed) · Qᵀ
// (D × G·Nq: Q as stored, ld D).
inline StridedGemm qk_gemm(int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nk, int64_t D) {
  const int64_t G = Hq / Hkv;
  return {.trans_a = true, .trans_b = false, .m = Nk, .n = G * Nq, .k = D, .lda = D, .ldb = D, .ldc = Nk,
          .stride_a = Nk * D, .stride_b = G * Nq * D, .stride_c = G * Nq * Nk, .batch = B * Hkv};
}

// O[b, h] = P[b, h] · V[b, h/G] with P [B, Hq, Nq, Nk], V [B, Hkv, Nk, D], O [B, Hq, Nq, D]:
// column-major Oᵀ (D × G·Nq, ld D) = Vᵀ (D × Nk: V as stored, ld D) · Pᵀ (Nk × G·Nq: P as stored, ld Nk).
inline StridedGemm pv_gemm(int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nk, int64_t D) {
  const int64_t G = Hq / Hkv;
  return {.trans_a = false, .trans_b = false, .m = D, .n = G * Nq, .k = Nk, .lda = D, .ldb = Nk, .ldc = D,
          .stride_a = Nk * D, .stride_b = G * Nq * Nk, .stride_c = G * Nq * D, .batch = B * Hkv};
}

// cuBLAS takes m, n, k, the leading dimensions and the batch count as int: true when every one fits.
inline bool fits_cublas_int(const StridedGemm& g) {
  constexpr int64_t kMax = 2147483647;
  for (int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch})
    if (v < 0 || v > kMax) return false;
  return true;
}

// A Bool mask [Bm, Hm, Mq, Mk] broadcast over scores [B, H, Nq, Nk]: its element strides, 0 along a size-1 dim.
struct MaskStrides {
  int64_t b, h, i, j;
};
ATTNPROF_HD MaskStrides mask_strides(int64_t Bm, int64_t Hm, int64_t Mq, int64_t Mk) {
  return {Bm == 1 ? 0 : Hm * Mq * Mk, Hm == 1 ? 0 : Mq * Mk, Mq == 1 ? 0 : Mk, Mk == 1 ? 0 : 1};
}
// The mask element that score element `e` (row-major index into [B, H, Nq, Nk]) reads.
ATTNPROF_HD int64_t mask_offset(int64_t e, int64_t H, int64_t Nq, int64_t Nk, MaskStrides ms) {
  const int64_t j = e % Nk, r = e / Nk, i = r % Nq, bh = r / Nq;
  return (bh / H) * ms.b + (bh % H) * ms.h + i * ms.i + j * ms.j;
}

// triu(ones(nq, nk), diagonal) at row-major element `e`: true where column − row ≥ diagonal.
ATTNPROF_HD bool triu_at(int64_t e, int64_t nk, int64_t diagonal) { return (e % nk) - (e / nk) >= diagonal; }

}  // namespace attnprof::cuda::layout
