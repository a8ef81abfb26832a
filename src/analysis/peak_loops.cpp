// The loops machine_peaks() times: FMA and bf16-dot throughput per ISA, and the memory loops. This file is
// compiled at -O2 in every build type (src/CMakeLists.txt) and left out of the sanitizers' instrumentation:
// a ceiling measured at -O0, with a shadow check on every load or with the accumulators kept in a
// redzoned stack array, would be a fraction of the machine's, and the peaks cache is shared by every build
// on the machine. The loops touch only their own registers and the caller's arrays within [begin, end).
//
// Why the loops look the way they do (Zen 4 numbers from docs/FIELD-NOTES): FMA latency is 4 cycles and
// there are two FMA pipes, so at least 8 independent accumulator chains are needed to keep both pipes busy;
// we use 12, and 24 in the AVX-512 loops (peak_loops.h says why). 512-bit FMAs are double-pumped on Zen 4, so the AVX-512 loop reaches the same FLOP/cycle as
// AVX2; vdpbf16ps does 16 lanes × 2 products per instruction (64 FLOP/cycle/core).
#include "analysis/peak_loops.h"

#include <immintrin.h>

#include "core/isa_target.h"

// Not instrumented by AddressSanitizer or UndefinedBehaviorSanitizer (ATTNPROF_SANITIZE builds).
#define ATTNPROF_PEAK_LOOP __attribute__((no_sanitize("address", "undefined")))

namespace attnprof::analysis {

// ---- per-ISA throughput loops (compiled with the target pragmas, baseline code outside) ----
// Each returns a value derived from the accumulators so the compiler cannot drop the loop.

// The baseline target's peak: x86-64 code built without ISA flags has SSE2's 128-bit registers and no FMA, and
// that is what the compiler makes of our scalar-target kernels (their loops are vectorised 4 lanes wide at -O3),
// so their ceiling is 4-lane mulps + addps, not one float at a time. The accumulators are __m128 values, kept
// in registers: written as a float array the loop was vectorised but its chains went through memory each
// round, which measured a store-forwarding latency (11 GFLOP/s on 2 Zen 5 cores) that the scalar-target flash
// kernel itself beat.
ATTNPROF_PEAK_LOOP float fma_loop_scalar(int64_t iters) {
  __m128 acc[kPeakAccumulators];
  for (int j = 0; j < kPeakAccumulators; ++j) acc[j] = _mm_set1_ps(float(j) * 1e-3f);
  const __m128 a = _mm_set1_ps(0.999999f), b = _mm_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kPeakAccumulators; ++j) acc[j] = _mm_add_ps(_mm_mul_ps(acc[j], a), b);
  }
  __m128 s = acc[0];
  for (int j = 1; j < kPeakAccumulators; ++j) s = _mm_add_ps(s, acc[j]);
  float out[4];
  _mm_storeu_ps(out, s);
  return out[0] + out[3];
}

ATTNPROF_TARGET_BEGIN(ATTNPROF_FEATURES_AVX2)
ATTNPROF_PEAK_LOOP float fma_loop_avx2(int64_t iters) {
  __m256 acc[kPeakAccumulators];
  for (int j = 0; j < kPeakAccumulators; ++j) acc[j] = _mm256_set1_ps(float(j) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kPeakAccumulators; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  }
  __m256 s = acc[0];
  for (int j = 1; j < kPeakAccumulators; ++j) s = _mm256_add_ps(s, acc[j]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}
ATTNPROF_TARGET_END

ATTNPROF_TARGET_BEGIN(ATTNPROF_FEATURES_AVX512)
ATTNPROF_PEAK_LOOP float fma_loop_avx512(int64_t iters) {
  __m512 acc[kPeakAccumulatorsAvx512];
  for (int j = 0; j < kPeakAccumulatorsAvx512; ++j) acc[j] = _mm512_set1_ps(float(j) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 24
    for (int j = 0; j < kPeakAccumulatorsAvx512; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  }
  __m512 s = acc[0];
  for (int j = 1; j < kPeakAccumulatorsAvx512; ++j) s = _mm512_add_ps(s, acc[j]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0] + out[15];
}

ATTNPROF_PEAK_LOOP float bf16_loop_avx512(int64_t iters) {
  __m512 acc[kPeakAccumulatorsAvx512];
  for (int j = 0; j < kPeakAccumulatorsAvx512; ++j) acc[j] = _mm512_set1_ps(float(j) * 1e-3f);
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(2e-3f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(-1e-4f));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 24
    for (int j = 0; j < kPeakAccumulatorsAvx512; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
  }
  __m512 s = acc[0];
  for (int j = 1; j < kPeakAccumulatorsAvx512; ++j) s = _mm512_add_ps(s, acc[j]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0] + out[15];
}
ATTNPROF_TARGET_END

ATTNPROF_PEAK_LOOP void triad_first_touch(double* a, double* b, double* c, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    a[i] = 0.0;
    b[i] = 1.0;
    c[i] = 2.0;
  }
}

// ---- the memory loops, one set per vector width ----
// Each round handles four vectors, written out so that four loads are in flight whatever the compiler unrolls,
// and the elements past the last whole round one at a time: `L` doubles to a `vec`, with its load, store,
// broadcast, multiply and fused multiply-add.
#define ATTNPROF_MEMORY_LOOPS(suffix, L, vec, load, store, set1, mul, fmadd)                                          \
  ATTNPROF_PEAK_LOOP void triad_##suffix(double* a, const double* b, const double* c, double s, size_t begin,         \
                                         size_t end) {                                                                \
    const vec vs = set1(s);                                                                                           \
    size_t i = begin;                                                                                                 \
    for (; i + 4 * L <= end; i += 4 * L) {                                                                            \
      store(a + i, fmadd(vs, load(c + i), load(b + i)));                                                              \
      store(a + i + L, fmadd(vs, load(c + i + L), load(b + i + L)));                                                  \
      store(a + i + 2 * L, fmadd(vs, load(c + i + 2 * L), load(b + i + 2 * L)));                                      \
      store(a + i + 3 * L, fmadd(vs, load(c + i + 3 * L), load(b + i + 3 * L)));                                      \
    }                                                                                                                 \
    for (; i < end; ++i) a[i] = b[i] + s * c[i];                                                                      \
  }                                                                                                                   \
  ATTNPROF_PEAK_LOOP void copy_##suffix(double* a, const double* b, size_t begin, size_t end) {                       \
    size_t i = begin;                                                                                                 \
    for (; i + 4 * L <= end; i += 4 * L) {                                                                            \
      store(a + i, load(b + i));                                                                                      \
      store(a + i + L, load(b + i + L));                                                                              \
      store(a + i + 2 * L, load(b + i + 2 * L));                                                                      \
      store(a + i + 3 * L, load(b + i + 3 * L));                                                                      \
    }                                                                                                                 \
    for (; i < end; ++i) a[i] = b[i];                                                                                 \
  }                                                                                                                   \
  ATTNPROF_PEAK_LOOP void update_##suffix(double* a, double s, size_t begin, size_t end) {                            \
    const vec vs = set1(s);                                                                                           \
    size_t i = begin;                                                                                                 \
    for (; i + 4 * L <= end; i += 4 * L) {                                                                            \
      store(a + i, mul(vs, load(a + i)));                                                                             \
      store(a + i + L, mul(vs, load(a + i + L)));                                                                     \
      store(a + i + 2 * L, mul(vs, load(a + i + 2 * L)));                                                             \
      store(a + i + 3 * L, mul(vs, load(a + i + 3 * L)));                                                             \
    }                                                                                                                 \
    for (; i < end; ++i) a[i] = s * a[i];                                                                             \
  }

namespace {
inline __m128d sse2_fmadd(__m128d x, __m128d y, __m128d z) { return _mm_add_pd(_mm_mul_pd(x, y), z); }
ATTNPROF_MEMORY_LOOPS(sse2, 2, __m128d, _mm_loadu_pd, _mm_storeu_pd, _mm_set1_pd, _mm_mul_pd, sse2_fmadd)
}  // namespace

ATTNPROF_TARGET_BEGIN(ATTNPROF_FEATURES_AVX2)
namespace {
ATTNPROF_MEMORY_LOOPS(avx2, 4, __m256d, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_set1_pd, _mm256_mul_pd,
                      _mm256_fmadd_pd)
}  // namespace
ATTNPROF_TARGET_END

ATTNPROF_TARGET_BEGIN(ATTNPROF_FEATURES_AVX512)
namespace {
ATTNPROF_MEMORY_LOOPS(avx512, 8, __m512d, _mm512_loadu_pd, _mm512_storeu_pd, _mm512_set1_pd, _mm512_mul_pd,
                      _mm512_fmadd_pd)
}  // namespace
ATTNPROF_TARGET_END
#undef ATTNPROF_MEMORY_LOOPS

MemoryLoops memory_loops(Isa isa) {
  switch (isa) {
    case Isa::AVX512: return {triad_avx512, copy_avx512, update_avx512};
    case Isa::AVX2: return {triad_avx2, copy_avx2, update_avx2};
    case Isa::Scalar: break;
  }
  return {triad_sse2, copy_sse2, update_sse2};
}

}  // namespace attnprof::analysis
