// The flash forward compiled for the avx512 target (see flash_simd.h and core/isa_target.h).
// gcc 12 reports its own _mm512_undefined_* placeholders as uninitialised; they are not.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
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

ATTNPROF_TARGET_BEGIN(ATTNPROF_FEATURES_AVX512)
#include "ops/vec_avx512.h"
#define FLASH_NS avx512
#define FLASH_VEC ::attnprof::simd::Avx512
#define FLASH_BF16_DOT 1
#include "attention/flash/flash_simd.h"

namespace attnprof::flash {
void forward_avx512(const Params& p) { avx512::forward(p, p.dtype == DType::BF16 && cpu_has_avx512_bf16()); }
BodyTiles tiles_avx512() { return {avx512::kBr, avx512::kBc, avx512::kRowMultiple, avx512::kColMultiple, avx512::kRp}; }
size_t scratch_bytes_avx512(int64_t D, int64_t br, int64_t bc) { return avx512::scratch_bytes(D, br, bc); }
}  // namespace attnprof::flash
ATTNPROF_TARGET_END
