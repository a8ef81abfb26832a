// The flash forward for the baseline target (see flash_body.h).
#define FLASH_NS scalar
#include "attention/flash/flash_body.h"

namespace attnprof::flash {
void forward_scalar(const Params& p) { scalar::forward(p); }
BodyTiles tiles_scalar() { return {scalar::kBr, scalar::kBc, scalar::kRowMultiple, scalar::kColMultiple, 0}; }
size_t scratch_bytes_scalar(int64_t D, int64_t br, int64_t bc) { return scalar::scratch_bytes(D, br, bc); }
}  // namespace attnprof::flash
