// Internal: the flash kernel's parameter block and its per-ISA entry points.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "attnprof/attention.h"
#include "attnprof/profiler.h"

namespace attnprof::flash {

struct Params {
  int64_t B = 0, Hq = 0, Hkv = 0, Nq = 0, Nk = 0, D = 0;
  DType dtype = DType::F32;
  float scale = 1.0f;
  MaskKind mask = MaskKind::None;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;                 // [B, Hq, Nq] contiguous
  Shape4 qs{}, ks{}, vs{}, os{};        // strides in elements (last dim must be 1)
  const void* mask_ptr = nullptr;       // Bool (1 = attend) or additive
  DType mask_dtype = DType::Bool;
  Shape4 ms{};                          // mask strides after broadcasting to [B, Hq, Nq, Nk] (0 = broadcast)
  int64_t br = 0, bc = 0;               // query rows and keys per block: flash_block()'s, which the body takes
};

// One body's tiles: its tuned default block sizes, what sizes chosen at run time must be multiples of, and the
// query rows per Q·Kᵀ panel: a tile that straddles the diagonal computes, for each panel, only the keys the
// panel's last row sees (the SIMD bodies); 0 for the scalar body, which computes the whole tile (its panel is
// its block).
struct BodyTiles {
  int64_t rows, cols, row_multiple, col_multiple, panel_rows;
};

// Every thread's scratch for one kernel call, allocated by the calling thread before the parallel region
// opens. The profiler bills memory to the zone open on the allocating thread and an OpenMP worker has none,
// so scratch a worker allocated itself would belong to no op; and a failed allocation throws here instead
// of inside the region. Each thread's slice is whole pages long, so two threads' slices never share a cache
// line (the block itself is 64-byte aligned, page-aligned only from 2 MiB). Defined in flash.cpp (baseline
// code).
class ThreadScratch {
 public:
  ThreadScratch(size_t bytes_per_thread, int threads);
  ~ThreadScratch();
  // What one allocates: each thread's slice rounded up to whole pages (flash_peak_bytes counts it ahead).
  static size_t footprint(size_t bytes_per_thread, int threads) {
    return (bytes_per_thread + 4095) / 4096 * 4096 * size_t(threads < 1 ? 1 : threads);
  }
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;
  int threads() const { return threads_; }
  float* slice(int thread) const { return reinterpret_cast<float*>(base_ + stride_ * size_t(thread)); }

 private:
  size_t stride_ = 0;
  int threads_ = 1;
  char* base_ = nullptr;
};

// The steps each body times under the profiler (WorkShare::phases), in the order they run per K/V block.
enum Phase : int { kPhaseLoad, kPhaseScores, kPhaseMask, kPhaseSoftmax, kPhasePv, kPhaseStore };
inline constexpr std::array<const char*, 6> kPhaseNames{"load Q, K, V", "Q·Kᵀ", "mask", "online softmax", "P·V",
                                                        "store O"};
// Each (batch, head, Q block) task is one work item (WorkShare::begin_item): a slice per tile in the trace, its
// inner count the K/V blocks it visited (causal: those left of the diagonal and the diagonal's own).
inline constexpr prof::ItemNames kTileNames{"Q block", {"batch", "head", "Q block"}, "K/V blocks"};

// One body per target (flash_scalar.cpp, flash_avx2.cpp, flash_avx512.cpp), each runs the whole forward.
void forward_scalar(const Params& p);
void forward_avx2(const Params& p);
void forward_avx512(const Params& p);
BodyTiles tiles_scalar();
BodyTiles tiles_avx2();
BodyTiles tiles_avx512();
// Bytes of scratch one thread of each body takes at head dim D and blocks of br × bc (ThreadScratch rounds each
// thread's to pages).
size_t scratch_bytes_scalar(int64_t D, int64_t br, int64_t bc);
size_t scratch_bytes_avx2(int64_t D, int64_t br, int64_t bc);
size_t scratch_bytes_avx512(int64_t D, int64_t br, int64_t bc);

// One body's entry points, as the ISA it was compiled for is chosen: body() gives best_isa()'s, so the forward,
// its tile sizes (flash_tiles, flash_bytes) and its scratch (flash_peak_bytes) are always the same body's.
struct Body {
  void (*forward)(const Params& p);
  BodyTiles (*tiles)();
  size_t (*scratch_bytes)(int64_t D, int64_t br, int64_t bc);
};
const Body& body();

}  // namespace attnprof::flash
