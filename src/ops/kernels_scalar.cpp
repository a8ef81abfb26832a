// The elementwise row kernels for the baseline target, and the run-time choice between targets.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "attnprof/isa.h"
#include "ops/kernels.h"
#include "ops/vec_scalar.h"

#define KERNELS_NS scalar
#define KERNELS_VEC ::attnprof::simd::Scalar
#include "ops/kernels_body.h"

namespace attnprof::ops::detail {

const RowKernels& row_kernels_scalar() { return scalar::table(); }

const RowKernels& row_kernels() {
  switch (best_isa()) {
    case Isa::AVX512: return row_kernels_avx512();
    case Isa::AVX2: return row_kernels_avx2();
    case Isa::Scalar: break;
  }
  return row_kernels_scalar();
}

}  // namespace attnprof::ops::detail
