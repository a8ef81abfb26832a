// Internal: the primitive ops on device tensors, named like their CPU twins (src/ops) and carrying the same
// cost models, each in its own profiler zone (+ NVTX range) and each enqueuing exactly one device activity:
// a cuBLAS GEMM, one small kernel, or one cudaMemcpyAsync.
#pragma once

#include "attnprof/cuda.h"

namespace attnprof::cuda::dops {

// [B,Hq,Nq,D] · [B,Hkv,Nk,D]ᵀ -> [B,Hq,Nq,Nk]; grouped-query heads share their K without a copy.
DeviceTensor matmul_qk(const DeviceTensor& q, const DeviceTensor& k);
// [B,Hq,Nq,Nk] · [B,Hkv,Nk,D] -> [B,Hq,Nq,D]
DeviceTensor matmul_pv(const DeviceTensor& p, const DeviceTensor& v);

DeviceTensor mul(const DeviceTensor& a, double s);
void mul_(DeviceTensor& a, double s);
// mask: Bool [Bm,Hm,Nq,Nk], true = fill. Out of place = copy_ (a Memcpy DtoD) + masked_fill_, as in ATen.
DeviceTensor masked_fill(const DeviceTensor& a, const DeviceTensor& mask, float value);
void masked_fill_(DeviceTensor& a, const DeviceTensor& mask, float value);
void add_(DeviceTensor& a, const DeviceTensor& m);  // m: an fp32 additive mask broadcast to a
DeviceTensor where(const DeviceTensor& cond, float if_true, float if_false, DType dtype);  // scalar branches
DeviceTensor softmax(const DeviceTensor& a);
void softmax_(DeviceTensor& a);
DeviceTensor clone(const DeviceTensor& a);           // copy_: cudaMemcpyAsync device to device
DeviceTensor to(const DeviceTensor& a, DType dtype);  // conversion kernel
DeviceTensor triu_mask(int64_t nq, int64_t nk, int64_t diagonal);  // [1,1,nq,nk] Bool
DeviceTensor mask_from_host(const Tensor& host_bool);              // uploads a Bool mask as is

// The flash kernel's tile configurations (src/cuda/fragment.h: kFlashConfigs). set_flash_config(i) makes
// the flash variant launch configuration i for the head dims it supports, -1 the defaults; process-wide,
// for attnprof-gpu-timing, which validates and times every configuration.
void set_flash_config(int config);
int flash_config_for(int64_t D);  // the configuration the flash variant launches for head dim D

}  // namespace attnprof::cuda::dops
