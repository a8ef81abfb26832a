// The elementwise row kernels compiled for the avx2 target (see kernels_body.h and core/isa_target.h).
// Std and intrinsic headers come before the target pragma so that their inline code keeps baseline codegen.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "attnprof/dtype.h"
#include "core/isa_target.h"
#include "ops/kernels.h"


ATTNPROF_TARGET_BEGIN(ATTNPROF_FEATURES_AVX2)
#include "ops/vec_avx2.h"
#define KERNELS_NS avx2
#define KERNELS_VEC ::attnprof::simd::Avx2
#include "ops/kernels_body.h"

namespace attnprof::ops::detail {
const RowKernels& row_kernels_avx2() { return avx2::table(); }
}  // namespace attnprof::ops::detail
ATTNPROF_TARGET_END
