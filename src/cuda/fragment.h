// Internal: the index math of the flash kernel (flash_kernel.cuh), as __host__ __device__ functions so that the
// kernel and the host unit tests (tests/test_cuda_layout.cpp) run the same formulas. Pure integer code,
// no CUDA headers: it compiles as plain C++ too.
//
// Sources of the layouts (PTX ISA, "Warp-level matrix fragments" for mma.m16n8k16 with .bf16, and
// "ldmatrix"): lane = 4·groupID + threadID_in_group.
//   A 16×16 (.row), four .b32 registers of two bf16 each: a0,a1 (row g, cols 2t, 2t+1), a2,a3 (row g+8),
//     a4,a5 (row g, cols 2t+8, 2t+9), a6,a7 (row g+8, cols 2t+8, 2t+9)   [register r holds a_{2r}, a_{2r+1}]
//   B 16×8 (.col), two registers: b0,b1 (rows k = 2t, 2t+1, col n = g), b2,b3 (rows 2t+8, 2t+9)
//   C/D 16×8 fp32, four registers: c0,c1 (row g, cols 2t, 2t+1), c2,c3 (row g+8)
//   ldmatrix .m8n8 .x4: lane l supplies the address of row l%8 of matrix l/8 (16 contiguous bytes);
//     destination register m of lane l receives row l/4, columns 2(l%4), 2(l%4)+1 of matrix m, or with
//     .trans the elements at rows 2(l%4), 2(l%4)+1 of column l/4.
#pragma once

#include "host_device.h"  // same directory: found from any include path

namespace attnprof::cuda::frag {

struct RowCol {
  int row, col;
};

// ---- mma.m16n8k16 fragments --------------------------------------------------------------------------
// Element `half` (0: low 16 bits, 1: high) of A register `reg` (0..3) of `lane`.
ATTNPROF_HD RowCol mma_a(int lane, int reg, int half) {
  return {(lane >> 2) + (reg & 1) * 8, (lane & 3) * 2 + (reg >> 1) * 8 + half};
}
// Element `half` of B register `reg` (0..1): row = k, col = n.
ATTNPROF_HD RowCol mma_b(int lane, int reg, int half) { return {(lane & 3) * 2 + reg * 8 + half, lane >> 2}; }
// Accumulator element `e` (0..3) of C/D.
ATTNPROF_HD RowCol mma_c(int lane, int e) { return {(lane >> 2) + (e >> 1) * 8, (lane & 3) * 2 + (e & 1)}; }

// ---- ldmatrix.x4 --------------------------------------------------------------------------------------
// (matrix, row) whose address `lane` supplies.
ATTNPROF_HD RowCol ldsm_source(int lane) { return {lane >> 3, lane & 7}; }
// Element `half` that `lane` receives in each destination register: (row, col) inside that 8×8 matrix.
ATTNPROF_HD RowCol ldsm_dest(int lane, int half, bool trans) {
  return trans ? RowCol{(lane & 3) * 2 + half, lane >> 2} : RowCol{lane >> 2, (lane & 3) * 2 + half};
}

// K tile in shared memory: row = key, `stride` elements per row. One ldmatrix.x4 (not transposed) gives
// the B fragments of n-tiles 2·ntp (registers 0, 1) and 2·ntp+1 (registers 2, 3) for the 16 head-dim
// columns of chunk kc: matrix m covers keys 16·ntp + 8·(m/2) .. +7 and columns 16·kc + 8·(m%2) .. +7.
ATTNPROF_HD int k_ldsm_offset(int lane, int ntp, int kc, int stride) {
  const int m = lane >> 3;
  return (ntp * 16 + (m >> 1) * 8 + (lane & 7)) * stride + kc * 16 + (m & 1) * 8;
}
// V tile: row = key. One ldmatrix.x4.trans gives the B fragments (k = key, n = head dim) of keys
// 16·kc .. +15 for d-tiles 2·dt2 (registers 0, 1) and 2·dt2+1 (registers 2, 3): matrix m covers keys
// 16·kc + 8·(m%2) .. +7 and columns 16·dt2 + 8·(m/2) .. +7.
ATTNPROF_HD int v_ldsm_offset(int lane, int kc, int dt2, int stride) {
  const int m = lane >> 3;
  return (kc * 16 + (m & 1) * 8 + (lane & 7)) * stride + dt2 * 16 + (m >> 1) * 8;
}

// The S accumulators of n-tiles 2kc and 2kc+1, packed to bf16 pairs, are the A fragment of P for keys
// 16kc .. 16kc+15: A register r takes n-tile 2kc + r/2, accumulator elements 2(r%2), 2(r%2)+1.
ATTNPROF_HD int p_ntile(int kc, int reg) { return 2 * kc + (reg >> 1); }
ATTNPROF_HD int p_elem(int reg, int half) { return (reg & 1) * 2 + half; }

// ---- the tile configuration ---------------------------------------------------------------------------
// A thread block owns block_m = warps · m_tiles · 16 query rows; warp w owns the contiguous rows
// [16·m_tiles·w, 16·m_tiles·(w+1)) of the block, m-tile i of it the 16 rows from 16·(m_tiles·w + i).
// K/V tiles of block_n keys are double-buffered in shared memory, rows padded to D + 8 elements.
struct TileConfig {
  const char* name;
  int warps, m_tiles, block_n;
  bool d64, d128;  // head dims it is compiled for (m_tiles = 2 at D = 128 would not fit in registers)
  // __launch_bounds__ minimum blocks per SM at D = 64 (0: none), which caps registers at 65536 /
  // (threads · blocks); set only where ptxas then still spills nothing (docs/gpu.md has the numbers).
  int min_blocks64;

  constexpr int block_m() const { return warps * m_tiles * 16; }
  constexpr int threads() const { return warps * 32; }
  constexpr bool supports(int d) const { return (d == 64 && d64) || (d == 128 && d128); }
  constexpr int min_blocks(int d) const { return d == 64 ? min_blocks64 : 0; }
  static constexpr int stride(int d) { return d + 8; }  // elements: 16 bytes of skew per row
  constexpr int smem_bytes(int d) const { return 2 /*stages*/ * 2 /*K, V*/ * block_n * stride(d) * 2; }
  // Thread blocks of a launch: one per (query tile, batch·head).
  constexpr long long grid_blocks(int nq, int bh) const { return (long long)((nq + block_m() - 1) / block_m()) * bh; }
  // 16-byte chunks of one K (or V) tile each thread copies per stage.
  constexpr int chunks_per_thread(int d) const { return block_n * (d / 8) / threads(); }
};

// Every configuration flash.cu compiles; attnprof-gpu-timing times them all. Index 0 is the default.
inline constexpr TileConfig kFlashConfigs[] = {
    {"m128w4x2n64", 4, 2, 64, true, false, 0},  // FA2's D=64 shape: 4 warps × 32 rows, K/V fragments used twice
    {"m128w8n64", 8, 1, 64, true, true, 0},     // 8 warps × 16 rows: one K/V tile feeds 128 rows
    {"m64w4n64", 4, 1, 64, true, true, 3},      // 4 warps × 16 rows
    {"m128w8n128", 8, 1, 128, true, false, 0},  // 128-key tiles: half the barriers per key
};
inline constexpr int kFlashConfigCount = int(sizeof(kFlashConfigs) / sizeof(kFlashConfigs[0]));

// The configuration flash_forward uses for head dim d unless told otherwise.
ATTNPROF_HD int default_config(int d) { return d == 64 ? 0 : 1; }

// The cp.async copy of a K or V tile: in round i (0 .. chunks_per_thread-1) thread t copies the 16-byte
// chunk at (row, first element col) of the block_n × d tile.
ATTNPROF_HD RowCol copy_chunk(int i, int t, int threads, int d) {
  const int c = i * threads + t;
  return {c / (d / 8), (c % (d / 8)) * 8};
}

// ---- work decomposition -------------------------------------------------------------------------------
// The grid is one-dimensional (no 65535 limit on any axis): block index → (query tile, batch·head).
// All batch·heads of the last (for causal the heaviest) query tile come first, so the longest blocks
// start first and the tail is short.
struct BlockWork {
  int m_block;  // query tile
  int bh;       // b · Hq + h
};
ATTNPROF_HD BlockWork block_work(int block, int m_blocks, int bh_count) {
  return {m_blocks - 1 - block / bh_count, block % bh_count};
}
ATTNPROF_HD int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Causal convention (PyTorch's is_causal, the CPU reference's): top-left aligned, query i sees key j
// iff j <= i, whatever Nq and Nk are.
ATTNPROF_HD bool visible(int q, int k, int nk, bool causal) { return k < nk && (!causal || k <= q); }

// Number of K/V tiles a query tile starting at row m0 visits: [0, n). With causal, tiles wholly right of
// the tile's last real row are skipped. Every visible (q < nq, k) pair of the tile lies in [0, n).
ATTNPROF_HD int kv_tiles(int m0, int block_m, int block_n, int nq, int nk, bool causal) {
  int n = ceil_div(nk, block_n);
  if (causal) {
    const int last_row = (m0 + block_m < nq ? m0 + block_m : nq) - 1;
    const int c = last_row / block_n + 1;
    n = c < n ? c : n;
  }
  return n;
}

// A warp owning rows [r0, r0 + rows) computes K/V tiles [0, n) of its block's tiles: the tiles with a
// visible (row < nq, key) pair; it leaves its state alone for the rest (their K/V are still loaded and the
// barriers still reached by the whole block).
ATTNPROF_HD int warp_kv_tiles(int r0, int rows, int block_n, int nq, int nk, bool causal) {
  return r0 >= nq ? 0 : kv_tiles(r0, rows, block_n, nq, nk, causal);
}
// A warp owning rows [r0, ...) and a K/V tile of keys [n0, n0 + block_n):
// needs_mask: some pair may be invisible, so the scores get the per-element predicate `visible`. When
// false, every pair of every row of the warp (padding rows past nq included) is visible.
ATTNPROF_HD bool warp_tile_needs_mask(int r0, int n0, int block_n, int nk, bool causal) {
  return n0 + block_n > nk || (causal && n0 + block_n - 1 > r0);
}

}  // namespace attnprof::cuda::frag
