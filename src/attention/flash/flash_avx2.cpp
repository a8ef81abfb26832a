// The flash forward compiled for the avx2 target (see flash_simd.h and core/isa_target.h).
// Std and intrinsic headers come before the target pragma so that their inline code keeps baseline codegen.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "attention/flash/flash.h"
#include "attnprof/isa.h"
#include "attnprof/profiler.h"
#include "core/isa_target.h"

ATTNPROF_TARGET_BEGIN(ATTNPROF_FEATURES_AVX2)
#include "ops/vec_avx2.h"
#define FLASH_NS avx2
#define FLASH_VEC ::attnprof::simd::Avx2
#define FLASH_BF16_DOT 0
#include "attention/flash/flash_simd.h"

namespace attnprof::flash {
void forward_avx2(const Params& p) { avx2::forward(p, false); }
int64_t block_rows_avx2() { return avx2::kBr; }
int64_t block_cols_avx2() { return avx2::kBc; }
int64_t panel_rows_avx2() { return avx2::kRp; }
size_t scratch_bytes_avx2(int64_t D) { return avx2::scratch_bytes(D); }
}  // namespace attnprof::flash
ATTNPROF_TARGET_END
