// Internal: state shared by the CUDA backend's host code: the stream, the cuBLAS handle, error checks and
// the device-memory event log the collector drains.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "attnprof/cuda.h"
#include "attnprof/error.h"

#define ATTNPROF_CUDA_CHECK(expr)                                                                      \
  do {                                                                                                 \
    const cudaError_t attnprof_e_ = (expr);                                                            \
    if (attnprof_e_ != cudaSuccess)                                                                    \
      ATTNPROF_FAIL("{} failed: {} ({})", #expr, cudaGetErrorString(attnprof_e_), int(attnprof_e_));   \
  } while (0)

#define ATTNPROF_CUBLAS_CHECK(expr)                                                                    \
  do {                                                                                                 \
    const cublasStatus_t attnprof_s_ = (expr);                                                         \
    if (attnprof_s_ != CUBLAS_STATUS_SUCCESS)                                                          \
      ATTNPROF_FAIL("{} failed: {} ({})", #expr, ::attnprof::cuda::detail::cublas_status_text(attnprof_s_), \
                    int(attnprof_s_));                                                                 \
  } while (0)

namespace attnprof::cuda::detail {

void ensure_available();      // throws Error with unavailable_reason() when there is no usable device
cudaStream_t stream();        // the backend's one stream (non-blocking), created on first use
cublasHandle_t cublas();      // bound to stream()

// The cuBLAS functions the backend calls, from libcublas loaded on first use (cublas_loader.cpp); throws Error
// naming the files tried when it cannot be loaded.
struct CublasApi {
  std::string file;
  decltype(&::cublasCreate_v2) cublasCreate_v2 = nullptr;
  decltype(&::cublasSetStream_v2) cublasSetStream_v2 = nullptr;
  // cublas_api.h overloads this name for C++ (a cudaDataType_t computeType variant), so the C one is spelled out.
  cublasStatus_t (*cublasGemmStridedBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                               const void*, const void*, cudaDataType, int, long long, const void*,
                                               cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                               long long, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  decltype(&::cublasGetStatusString) cublasGetStatusString = nullptr;
};
const CublasApi& cublas_api();
const char* cublas_status_text(cublasStatus_t s);  // cuBLAS's name for a status, once the library is loaded
void check_launch(const char* what);  // cudaGetLastError after a kernel launch
// Mirrors profiler zones as NVTX ranges from now on (unless another zone listener is set): called when the
// backend's stream is created, the first thing any device work does.
void install_nvtx_mirror() noexcept;

// The dtype and problem the CPU cost model is asked about on the GPU: fp16 runs on the tensor cores at bf16's
// dense rate, so it is costed as bf16 (the same bytes; OpCost::bf16_flops counts the 16-bit dot-product units,
// which on the CPU only bf16 has).
constexpr DType tensor_core_dtype(DType t) { return t == DType::F16 ? DType::BF16 : t; }
inline AttnProblem tensor_core_problem(AttnProblem p) {
  p.dtype = tensor_core_dtype(p.dtype);
  return p;
}
// A fused GPU forward's cost: flash_cost at the tensor-core dtype, K and V read once per thread block of
// `block_rows` queries.
inline OpCost fused_cost(const AttnProblem& p, int64_t block_rows) {
  return flash_cost(tensor_core_problem(p), block_rows);
}
// Query rows per thread block: our flash kernel's configuration for the head dim (fragment.h), and cuDNN's
// fused kernels', which are not documented: 128, as FlashAttention-2 tiles at these head dims.
int64_t flash_block_rows(int64_t D);
inline constexpr int64_t kCudnnBlockRows = 128;

// Device memory events, logged while a collector runs and the profiler records memory.
void set_mem_capture(bool on);
std::vector<DeviceMemRecord> take_mem_records();

}  // namespace attnprof::cuda::detail
