// Internal: OpenBLAS, loaded with dlopen on first use (blas_loader.cpp) rather than linked. Its functions are
// named after the symbols cblas.h declares; cblas.h is included for its types and enums only.
//
//   const ops::detail::BlasApi& blas = ops::detail::blas_api();  // loads it, or throws Error saying why not
//   blas.cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
#pragma once

#include <cblas.h>

#include <cstdint>
#include <string>

namespace attnprof::ops::detail {

struct BlasApi {
  std::string file;  // the library that loaded
  decltype(&::cblas_sgemm) cblas_sgemm = nullptr;
  decltype(&::openblas_set_num_threads) openblas_set_num_threads = nullptr;
};

// Loads OpenBLAS if nothing has yet and returns its functions. Before it loads, the address-space limit
// (ulimit -v) is checked against what OpenBLAS reserves at OpenMP's thread count (openblas_reserve_bytes):
// when an mmap of its buffers fails, at start-up or in a call, it retries forever instead of failing. Throws
// Error naming the limit, or the files tried when none loads. Call it before a parallel region, not inside one.
const BlasApi& blas_api();
bool blas_loaded();  // whether blas_api() has loaded it, without loading it

// Before OpenMP's thread count becomes n: when OpenBLAS is loaded and may need more buffers at n threads than it
// may have mapped (openblas_buffers), checks that the address-space limit leaves room for them, and throws Error
// naming the limit when it does not. Nothing when it is not loaded: blas_api() counts the threads then.
void reserve_blas_threads(int n);
// Then: OpenBLAS's own thread count, when it is loaded.
void set_blas_threads(int n);

// What OpenBLAS (Debian's 0.3.21 OpenMP build) maps, measured with VmSize around a dlopen and around sgemm calls
// (docs/dependencies.md says how): its code (the library, libgfortran, libquadmath), then one 128 MiB buffer
// (its BUFFER_SIZE, 32 << 22) for each thread it has (the OMP_NUM_THREADS or processors it loads with, then as
// many as OpenMP's count) and, on the first calls, one for each thread calling it at once: every thread of a
// parallel region when matmul spreads batches over them. It never unmaps one.
inline constexpr int64_t kOpenblasLibraryBytes = int64_t(40) << 20;  // measured 39.2 MiB
inline constexpr int64_t kOpenblasBufferBytes = int64_t(128) << 20;  // exact
// Left free besides: what the first calls map beside the buffers (14 MiB at 2 threads here, most of it the
// stacks of OpenMP's threads where they start then) and the run's own allocations around them.
inline constexpr int64_t kOpenblasMarginBytes = int64_t(32) << 20;
// The threads OpenBLAS allocates buffers for when it loads: OMP_NUM_THREADS when set, else the processors
// configured, and never more than those (its OpenMP build reads no other variable, and this one ignores CPU
// affinity: it is built NO_AFFINITY).
int openblas_load_threads();
// The buffers OpenBLAS maps at most with `threads` OpenMP threads: max(openblas_load_threads(), 2 · threads).
int openblas_buffers(int threads);
// Its code plus those buffers: what the address-space check allows for (with kOpenblasMarginBytes).
int64_t openblas_reserve_bytes(int threads);

}  // namespace attnprof::ops::detail
