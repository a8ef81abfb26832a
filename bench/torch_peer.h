// Optional peer for bench_attention: Debian's libtorch 1.13 `at::_scaled_dot_product_attention` (its
// math path: matmul + softmax + matmul on ATen's CPU kernels), run on attnprof's own buffers (no copy).
// Built only when CMake finds Torch; bench_attention then registers `torch-sdpa/...` next to the registry.
#pragma once

#include "attnprof/tensor.h"

namespace attnprof::bench {

// Output of torch SDPA for q, k, v ([B, H, N, D], fp32 or bf16), as a contiguous attnprof tensor.
Tensor torch_sdpa(const Tensor& q, const Tensor& k, const Tensor& v, bool causal);
// The same call without copying the result out: what the benchmark times.
void torch_sdpa_run(const Tensor& q, const Tensor& k, const Tensor& v, bool causal);
void torch_set_num_threads(int n);
const char* torch_version();

}  // namespace attnprof::bench
