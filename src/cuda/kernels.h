// Internal: the CUDA backend's kernel launchers (kernels.cu, flash.cu), callable from host C++.
// Pointers are device pointers; `t` is the storage type (F32, BF16 as __nv_bfloat16, F16 as __half). Every
// launcher enqueues exactly one kernel on `stream`, so op zones and CUPTI records pair one to one.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "attnprof/dtype.h"
#include "cuda/flash_params.h"

namespace attnprof::cuda::kernels {

// y[i] = x[i] * s  (y may equal x: mul_)
void scale(const void* x, void* y, int64_t n, float s, DType t, cudaStream_t stream);
// x[b,h,i,j] = value where mask[b',h',i',j'] != 0; x is [B,H,Nq,Nk] and the mask (bytes, contiguous)
// [Bm,Hm,Mq,Mk] broadcasts to it: each mask dim is 1 or x's (b' = Bm == 1 ? 0 : b, and so on).
void masked_fill(void* x, const uint8_t* mask, int64_t B, int64_t H, int64_t Nq, int64_t Nk, int64_t Bm,
                 int64_t Hm, int64_t Mq, int64_t Mk, float value, DType t, cudaStream_t stream);
// x[b,h,i,j] += m[b',h',i',j'], an fp32 additive mask [Bm,Hm,Mq,Mk] broadcast to x's [B,H,Nq,Nk] as above.
void add_mask(void* x, const float* m, int64_t B, int64_t H, int64_t Nq, int64_t Nk, int64_t Bm, int64_t Hm,
              int64_t Mq, int64_t Mk, DType t, cudaStream_t stream);
// out[e] = cond[e] ? if_true : if_false over n contiguous elements: torch.where with scalar branches.
void where(const uint8_t* cond, void* out, int64_t n, float if_true, float if_false, DType t, cudaStream_t stream);
// Row softmax over the last dim (rows of length n); all -inf rows give zeros. y may equal x.
void softmax_rows(const void* x, void* y, int64_t rows, int64_t n, DType t, cudaStream_t stream);
// Dtype conversion between fp32 and bf16 or fp16 (or a same-type copy).
void convert(const void* x, void* y, int64_t n, DType from, DType to, cudaStream_t stream);
// mask[i,j] = (j - i >= diagonal): torch.triu(ones(Nq, Nk, bool), diagonal).
void triu_mask(uint8_t* mask, int64_t nq, int64_t nk, int64_t diagonal, cudaStream_t stream);

// FlashAttention-2 forward, bf16 or fp16 (p.fp16) tensor-core MMA (sm_80+). D must be 64 or 128, scale > 0.
// Launches the tile configuration flash_config_for(D) (fragment.h: kFlashConfigs). Returns false, having
// launched nothing, for a head dim no configuration supports: the output is then unwritten, and the caller fails.
[[nodiscard]] bool flash_forward(const FlashParams& p, cudaStream_t stream);
// Makes flash_forward use kFlashConfigs[config] for the head dims it supports (-1: the defaults).
// Process-wide; for attnprof-gpu-timing, which validates and times every configuration.
void set_flash_config(int config);
int flash_config_for(int D);  // the configuration flash_forward launches for head dim D

}  // namespace attnprof::cuda::kernels
