// The elementwise row kernels compiled for the avx512 target (see kernels_body.h and core/isa_target.h).
// Std and intrinsic headers come before the target pragma so that their inline code keeps baseline codegen.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "attnprof/dtype.h"
#include "core/isa_target.h"
#include "ops/kernels.h"
// gcc 12 reports its own _mm512_undefined_* placeholders as uninitialised; they are not.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

ATTNPROF_TARGET_BEGIN(ATTNPROF_FEATURES_AVX512)
#include "ops/vec_avx512.h"
#define KERNELS_NS avx512
#define KERNELS_VEC ::attnprof::simd::Avx512
#include "ops/kernels_body.h"

namespace attnprof::ops::detail {
const RowKernels& row_kernels_avx512() { return avx512::table(); }
}  // namespace attnprof::ops::detail
ATTNPROF_TARGET_END
