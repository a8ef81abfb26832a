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
#include "attnprof/error.h"
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
BodyTiles tiles_avx2() { return {avx2::kBr, avx2::kBc, avx2::kRowMultiple, avx2::kColMultiple, avx2::kRp}; }
size_t scratch_bytes_avx2(int64_t D, int64_t br, int64_t bc) { return avx2::scratch_bytes(D, br, bc); }
}  // namespace attnprof::flash
ATTNPROF_TARGET_END
