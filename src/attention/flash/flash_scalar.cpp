// The flash forward for the baseline target (see flash_body.h).
#define FLASH_NS scalar
#include "attention/flash/flash_body.h"

namespace attnprof::flash {
void forward_scalar(const Params& p) { scalar::forward(p); }
int64_t block_rows_scalar() { return scalar::kBr; }
int64_t block_cols_scalar() { return scalar::kBc; }
int64_t panel_rows_scalar() { return scalar::kBr; }
size_t scratch_bytes_scalar(int64_t D) { return scalar::scratch_bytes(D); }
}  // namespace attnprof::flash
