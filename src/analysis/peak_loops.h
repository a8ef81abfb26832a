// Internal: the loops machine_peaks() times. They live in their own file because a roofline ceiling is
// only honest if it is measured with optimised code: src/CMakeLists.txt compiles peak_loops.cpp at -O2 in
// every build type, so a Debug or sanitizer build measures (and caches) the same peaks a Release build does.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attnprof/isa.h"

namespace attnprof::analysis {

// Independent accumulator chains per thread: enough to cover latency × pipes (Zen 4's FMA: 4 × 2 = 8), and as
// many as the registers allow, since a core with a longer latency needs more. 12 left a Zen 5 core's
// vdpbf16ps (measured 414 GFLOP/s a core with 12, 449 with 16 or 24) under what the flash kernel's 24-chain
// Q·Kᵀ ran at (428 a thread), which reads as more than the peak. AVX-512 has 32 registers and takes 24;
// AVX2 and SSE have 16, so 12 leave room for the operands.
constexpr int kPeakAccumulators = 12;
constexpr int kPeakAccumulatorsAvx512 = 24;

// `iters` rounds of one FMA (or bf16 dot) on each of kPeakAccumulators registers (the AVX-512 loops:
// kPeakAccumulatorsAvx512). Each returns a value
// derived from the accumulators, so the loop cannot be dropped. The AVX2 and AVX-512 ones must only run on
// CPUs that have those extensions.
float fma_loop_scalar(int64_t iters);
float fma_loop_avx2(int64_t iters);
float fma_loop_avx512(int64_t iters);
float bf16_loop_avx512(int64_t iters);

// The memory loops over elements [begin, end), and the first touch of those elements. STREAM's triad,
// a[i] = b[i] + s·c[i], and its copy, a[i] = b[i], write an array they do not read; the in-place update,
// a[i] = s·a[i], reads and writes the same lines, as the Empirical Roofline Toolkit's kernel and our in-place
// ops (mul_, masked_fill_, softmax_) do, and so pays no write-allocate read for them. Plain stores, as our ops
// make: a non-temporal store would measure a write stream none of them has.
struct MemoryLoops {
  void (*triad)(double* a, const double* b, const double* c, double s, size_t begin, size_t end);
  void (*copy)(double* a, const double* b, size_t begin, size_t end);
  void (*update)(double* a, double s, size_t begin, size_t end);
};
// The loops at `isa`'s vector width (scalar: SSE2's two lanes). Memory bandwidth is the machine's, not an
// ISA's: machine_peaks() times the best ISA's, since narrower loops run out of instructions first (on a Zen 5
// VM the SSE2 update peaked at 105 GB/s where the AVX-512 one moved 140). Only for an ISA the CPU has.
MemoryLoops memory_loops(Isa isa);
void triad_first_touch(double* a, double* b, double* c, size_t begin, size_t end);

// How machine_peaks() times a loop (machine.cpp): `threads` threads run loop(iters) at once, `reps` times;
// the best combined rate in GFLOP/s, timed from the barrier that starts a repetition to the one the last
// thread reaches. Threads that share a core share its rate: 8 threads on 2 cores measure 2 cores' peak.
double team_gflops(int threads, float (*loop)(int64_t), int64_t iters, int reps, double flops_per_iter);

}  // namespace attnprof::analysis
