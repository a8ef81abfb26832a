// Internal: compile the code between ATTNPROF_TARGET_BEGIN(features) and ATTNPROF_TARGET_END for one SIMD
// target, Highway-style. We use target pragmas rather than per-file -m flags on purpose: with -mavx512f on
// a whole file, inline functions and template instantiations from shared headers (std::vector, our
// dtype helpers) could be emitted with AVX-512 code and chosen by the linker for callers elsewhere,
// which would crash CPUs without AVX-512. Headers included *before* the pragma keep baseline codegen.
#pragma once

#define ATTNPROF_PRAGMA(x) _Pragma(#x)

#if defined(__clang__)
#define ATTNPROF_TARGET_BEGIN(features) \
  ATTNPROF_PRAGMA(clang attribute push(__attribute__((target(features))), apply_to = function))
#define ATTNPROF_TARGET_END ATTNPROF_PRAGMA(clang attribute pop)
#else
#define ATTNPROF_TARGET_BEGIN(features) \
  ATTNPROF_PRAGMA(GCC push_options)     \
  ATTNPROF_PRAGMA(GCC target(features))
#define ATTNPROF_TARGET_END ATTNPROF_PRAGMA(GCC pop_options)
#endif

#define ATTNPROF_FEATURES_AVX2 "avx2,fma,f16c,bmi2"
#define ATTNPROF_FEATURES_AVX512 "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c,bmi2"
