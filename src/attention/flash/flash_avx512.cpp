// The flash forward compiled for the avx512 target (see flash_body.h and core/isa_target.h).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attention/flash/flash.h"
#include "core/isa_target.h"

ATTNPROF_TARGET_BEGIN(ATTNPROF_FEATURES_AVX512)
#define FLASH_NS avx512
#include "attention/flash/flash_body.h"

namespace attnprof::flash {
void forward_avx512(const Params& p) { avx512::forward(p); }
}  // namespace attnprof::flash
ATTNPROF_TARGET_END
