// Internal: constructors the registry (registry.cpp) wires into Variant entries.
#pragma once

#include <memory>

#include "attnprof/attention.h"
#include "attnprof/ops.h"

namespace attnprof::variants {

std::unique_ptr<Runner> make_naive(const AttnProblem& p, const AttnOptions& o, bool inplace);
// Why the unfused ops cannot run `p` when their matmuls are in `matmul_dtype` (the problem's, or fp32 for SDPA's
// math backend), or nothing: on OpenBLAS's sgemm (ops::matmul_uses_sgemm) sizes are 32-bit, and Nq, Nk and D
// are each some matmul's M, N or K.
std::optional<std::string> sgemm_sizes_unsupported(const AttnProblem& p, DType matmul_dtype);
// gemm: the cost of one of its matmuls as it runs: the CPU's ops::matmul_cost (bf16 on bf16 units only on
// oneDNN's path), or the GPU's cuBLAS GEMMs (ops::gemm_cost).
OpCost naive_cost(const AttnProblem& p, bool inplace,
                  OpCost (*gemm)(const Shape4&, const Shape4&, DType) = ops::matmul_cost);

std::unique_ptr<Runner> make_sdpa(const AttnProblem& p, const AttnOptions& o, SdpaBackend backend);
// bool_mask_per_call: a bool attn_mask is inverted (logical_not) inside every forward, as the CPU backend does
// like PyTorch's math path; the CUDA backend inverts it once when the runner is prepared.
OpCost sdpa_math_cost(const AttnProblem& p, bool bool_mask_per_call = true);

// The error bounds of the unfused paths (scores rounded between ops) and the fused ones (output rounded
// once), per dtype: shared by the CPU and CUDA registries.
Tolerance unfused_tolerance(DType t);
Tolerance fused_tolerance(DType t);

// Bytes of the bool mask an unfused path fills with -inf: the causal triu, or the logical_not of a bool mask
// (at the mask's own shape, broadcast dims kept at 1); 0 for an additive mask, which is the caller's tensor.
double fill_mask_bytes(const AttnProblem& p);

// The ops that apply p's mask to [B, Hq, Nq, Nk] scores of `dtype`: masked_fill with a bool mask (the causal
// triu, or the caller's at its own shape) or add with an additive one, each after a copy of the scores when
// `copy` (out of place: naive, SDPA math). Nothing without a mask. Shared by the unfused cost models.
OpCost mask_ops_cost(const AttnProblem& p, DType dtype, bool copy);

// The largest head dim the CPU flash kernel's per-thread tiles hold: the flash backend's refusal and the
// kernel's own check.
inline constexpr int64_t kFlashMaxHeadDim = 256;
std::unique_ptr<Runner> make_flash(const AttnProblem& p, const AttnOptions& o);

}  // namespace attnprof::variants
