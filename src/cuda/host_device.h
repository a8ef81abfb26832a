// Internal: ATTNPROF_HD marks the index-math functions that CUDA kernels and host unit tests share
// (fragment.h, unfused_layout.h): __host__ __device__ under nvcc, plain inline C++ elsewhere.
#pragma once

#if defined(__CUDACC__)
#define ATTNPROF_HD __host__ __device__ __forceinline__ constexpr
#else
#define ATTNPROF_HD inline constexpr
#endif
