// The flash forward compiled for the avx2 target (see flash_body.h and core/isa_target.h).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attention/flash/flash.h"
#include "core/isa_target.h"

ATTNPROF_TARGET_BEGIN(ATTNPROF_FEATURES_AVX2)
#define FLASH_NS avx2
#include "attention/flash/flash_body.h"

namespace attnprof::flash {
void forward_avx2(const Params& p) { avx2::forward(p); }
}  // namespace attnprof::flash
ATTNPROF_TARGET_END
