// Probe kernels for test_cuda_codegen.cpp, compiled to PTX only (never run): each calls one primitive of
// src/cuda/flash_ptx.cuh on kernel parameters and stores every result to `out`, so that the PTX shows which
// parameter reaches which operand of the instruction, and which result reaches which output word.
#include "cuda/flash_ptx.cuh"

using namespace attnprof::cuda::kernels;

extern "C" __global__ void probe_mma(uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1,
                                     float c0, float c1, float c2, float c3, float* out) {
  float c[4] = {c0, c1, c2, c3};
  const uint32_t a[4] = {a0, a1, a2, a3};
  mma_bf16(c, a, b0, b1);
  for (int i = 0; i < 4; ++i) out[i] = c[i];
}

extern "C" __global__ void probe_mma_f16(uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1,
                                         float c0, float c1, float c2, float c3, float* out) {
  float c[4] = {c0, c1, c2, c3};
  const uint32_t a[4] = {a0, a1, a2, a3};
  mma_f16(c, a, b0, b1);
  for (int i = 0; i < 4; ++i) out[i] = c[i];
}

extern "C" __global__ void probe_ldmatrix(const void* smem, uint32_t* out) {
  uint32_t r[4];
  ldmatrix_x4(r, smem);
  for (int i = 0; i < 4; ++i) out[i] = r[i];
}

extern "C" __global__ void probe_ldmatrix_trans(const void* smem, uint32_t* out) {
  uint32_t r[4];
  ldmatrix_x4_trans(r, smem);
  for (int i = 0; i < 4; ++i) out[i] = r[i];
}

extern "C" __global__ void probe_cp_async(void* smem, const void* gmem, int row, int rows) {
  cp_async16(smem, gmem, row < rows);
  cp_async_commit();
  cp_async_wait<1>();
}

extern "C" __global__ void probe_pack(float lo, float hi, uint32_t* out) { out[0] = pack_bf16(lo, hi); }
extern "C" __global__ void probe_pack_f16(float lo, float hi, uint32_t* out) { out[0] = pack_f16(lo, hi); }

extern "C" __global__ void probe_exp2(float x, float* out) { out[0] = exp2_ftz(x); }

extern "C" __global__ void probe_ld_st32(const bf16* in, bf16* out, float v, float* out_f32) {
  st32(out, ld32(in));
  st_f32(out_f32, v);
}
