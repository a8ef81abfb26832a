// Internal: the flash kernel's arguments (flash.cu, flash_kernel.cuh). Plain C++, no CUDA headers, so the
// host emulation of the kernel (tests/test_cuda_flash_emulated.cpp) builds in every configuration.
#pragma once

namespace attnprof::cuda::kernels {

struct FlashParams {
  const void* q;      // [B, Hq, Nq, D] bf16 (fp16 when `fp16`), contiguous
  const void* k;      // [B, Hkv, Nk, D]
  const void* v;
  void* o;            // [B, Hq, Nq, D], q's type
  float* lse;         // [B, Hq, Nq] fp32 natural-log logsumexp, or nullptr
  int B, Hq, Hkv, Nq, Nk, D;
  float scale;        // softmax scale (1/sqrt(D) by default)
  bool causal;        // top-left aligned: query i sees keys j <= i
  bool fp16 = false;  // q, k, v, o are fp16 (IEEE binary16), else bf16
};

}  // namespace attnprof::cuda::kernels
