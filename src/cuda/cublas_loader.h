// Internal: which libcublas the CUDA backend loaded (cublas_loader.cpp), without cuBLAS's headers.
#pragma once

#include <string>

namespace attnprof::cuda::detail {

// Loads libcublas if no device GEMM has yet, and says which file it is; throws Error naming the files tried
// when none loads.
std::string cublas_library_file();

}  // namespace attnprof::cuda::detail
