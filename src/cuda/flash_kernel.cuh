// Internal: the FlashAttention-2 forward kernel for bf16 and fp16 on tensor cores (sm_80+: mma.sync m16n8k16,
// ldmatrix, cp.async).
//
// One thread block per (query tile, batch × head); each warp owns 16·m_tiles query rows for the whole
// pass, so the softmax statistics (running max m, running sum l) never leave registers (FA2, section 3.1):
//   for each K/V tile of block_n keys (causal: only tiles at or left of the diagonal):
//     S = Q·Kᵀ (mma, fp32 accumulators)   mask only diagonal / ragged tiles
//     m_new = max(m, rowmax(S·scale));  P = exp2(S·scale·log2e − m_new);  l = l·α + rowsum(P)
//     O = O·α + P·V   (P re-used from the accumulators as the A operand, rounded to the input type)
//   O /= l once at the end; lse = (m + log2 l)·ln 2.
// K/V tiles are double-buffered in shared memory with cp.async, so the next tile loads while this one
// computes. Heavy (causal) query tiles are scheduled first to balance the tail.
//
// The tile shape is a template parameter (fragment.h: kFlashConfigs): query rows per block = warps ×
// m_tiles × 16, keys per tile = block_n. Every configuration runs the same per-warp code; with m_tiles = 2
// each K/V fragment loaded from shared memory feeds two MMAs, halving shared-memory traffic per FLOP.
// Row stride D+8 elements (16 bytes of skew) keeps the ldmatrix loads of K and V and the cp.async stores
// bank-conflict free (tests/test_cuda_layout.cpp checks both). All index math is in fragment.h.
//
// The element type is a template parameter too (ElemBf16, ElemF16): it picks the MMA and the rounding of P
// and O; data movement is the same 16-bit copies for both.
//
// Written in the primitives of flash_ptx.cuh (cp_async16, ldmatrix_x4, mma_bf16, ...), which the includer
// defines first: flash.cu includes flash_ptx.cuh (PTX), tests/test_cuda_flash_emulated.cpp the host
// emulation of tests/simt_emulator.h, which runs this source for every tile configuration against the fp64
// reference. The kernel lives in an unnamed namespace so that the two never share a symbol.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/flash_params.h"
#include "cuda/fragment.h"

namespace attnprof::cuda::kernels {
namespace {

// The kernel's two element types: the storage type, the MMA that multiplies it (fp32 accumulate) and the
// rounding of two fp32 values into one register of the type (lo in the low half).
struct ElemBf16 {
  using T = bf16;
  static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_bf16(c, a, b0, b1);
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) { return pack_bf16(lo, hi); }
};
struct ElemF16 {
  using T = f16;
  static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_f16(c, a, b0, b1);
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) { return pack_f16(lo, hi); }
};

template <class E, int D, int kWarps, int kMTiles, int kBlockN, int kMinBlocks>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks) flash_fwd_kernel(const FlashParams p) {
  using T = typename E::T;
  constexpr int kThreads = kWarps * 32;
  constexpr int kWarpRows = kMTiles * 16;
  constexpr int kBlockM = kWarps * kWarpRows;
  constexpr int kStride = frag::TileConfig::stride(D);
  constexpr int kTileElems = kBlockN * kStride;
  constexpr int kNT = kBlockN / 8;   // 8-key n-tiles of S
  constexpr int kKC = D / 16;        // 16-wide k-chunks of Q·Kᵀ
  constexpr int kDT = D / 8;         // 8-wide n-tiles of O
  constexpr int kChunksPerRow = D / 8;  // 16-byte chunks per K/V row
  static_assert(kBlockN % 16 == 0 && (kBlockN * kChunksPerRow) % kThreads == 0, "tile copy must divide evenly");

  T* smem = reinterpret_cast<T*>(dynamic_smem());

  const int m_blocks = frag::ceil_div(p.Nq, kBlockM);
  const frag::BlockWork work = frag::block_work(int(blockIdx.x), m_blocks, p.B * p.Hq);
  const int b = work.bh / p.Hq, h = work.bh - b * p.Hq, kvh = h / (p.Hq / p.Hkv);
  const int64_t q_row0 = int64_t(work.bh) * p.Nq;  // row of this head's query 0 in [B·Hq·Nq, D] (and lse)
  const T* Q = static_cast<const T*>(p.q) + q_row0 * D;
  const T* K = static_cast<const T*>(p.k) + (int64_t(b) * p.Hkv + kvh) * p.Nk * D;
  const T* V = static_cast<const T*>(p.v) + (int64_t(b) * p.Hkv + kvh) * p.Nk * D;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int m0 = work.m_block * kBlockM;
  const int r0 = m0 + warp * kWarpRows;  // the warp's first query row

  // Q fragments of the warp's rows, all of D, in registers for the whole pass (zero past Nq). `full`
  // spares the per-row test where no row is past Nq: ptxas then fits the 128-register configurations
  // without spilling.
  uint32_t qf[kMTiles][kKC][4];
  const bool full = r0 + kWarpRows <= p.Nq;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int kc = 0; kc < kKC; ++kc)
#pragma unroll
      for (int reg = 0; reg < 4; ++reg) {
        const frag::RowCol rc = frag::mma_a(lane, reg, 0);  // half 1 is the next column: one 32-bit load
        const int row = r0 + mt * 16 + rc.row;
        qf[mt][kc][reg] = (full || row < p.Nq) ? ld32(Q + int64_t(row) * D + kc * 16 + rc.col) : 0u;
      }

  const int n_tiles = frag::kv_tiles(m0, kBlockM, kBlockN, p.Nq, p.Nk, p.causal);  // >= 1: key 0 is visible
  // Of those, the tiles in which the warp's own rows see any key: with causal, the warps above the diagonal
  // stop early; a warp whose rows all lie past Nq does nothing.
  const int warp_tiles = frag::warp_kv_tiles(r0, kWarpRows, kBlockN, p.Nq, p.Nk, p.causal);

  auto load_tile = [&](int nb, int stage) {
    T* ks = smem + (2 * stage) * kTileElems;
    T* vs = ks + kTileElems;
#pragma unroll 1  // unrolled, the copy's addresses stay live across the loop: +50 registers
    for (int i = 0; i < kBlockN * kChunksPerRow / kThreads; ++i) {
      const frag::RowCol rc = frag::copy_chunk(i, int(threadIdx.x), kThreads, D);
      const int key = nb * kBlockN + rc.row;
      const bool ok = key < p.Nk;
      const int64_t off = int64_t(ok ? key : 0) * D + rc.col;  // keys past Nk: zero-filled (their P is 0 too)
      cp_async16(ks + rc.row * kStride + rc.col, K + off, ok);
      cp_async16(vs + rc.row * kStride + rc.col, V + off, ok);
    }
    cp_async_commit();
  };

  float o[kMTiles][kDT][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int i = 0; i < kDT; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
  float m_r[kMTiles][2], l_r[kMTiles][2];  // per row half (r = 0: row g, r = 1: row g+8)
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    m_r[mt][0] = m_r[mt][1] = -INFINITY;  // running max of scaled scores, log2 domain
    l_r[mt][0] = l_r[mt][1] = 0.0f;       // this thread's partial running sums
  }
  const float sl2 = p.scale * 1.4426950408889634f;  // > 0 (the host refuses other scales)

  load_tile(0, 0);
  for (int nb = 0; nb < n_tiles; ++nb) {
    const int stage = nb & 1;
    if (nb + 1 < n_tiles) {
      load_tile(nb + 1, stage ^ 1);  // that stage was last read before the previous iteration's barrier
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const T* ks = smem + (2 * stage) * kTileElems;
    const T* vs = ks + kTileElems;
    const int n0 = nb * kBlockN;

    // A warp whose rows see none of this tile's keys leaves its state alone. Warp-uniform branch; the
    // barriers stay outside it.
    if (nb < warp_tiles) {
      // S = Q·Kᵀ: one ldmatrix.x4 of K gives the B fragments of two n-tiles for 16 of D, used by every m-tile.
      float s[kMTiles][kNT][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
      for (int ntp = 0; ntp < kNT / 2; ++ntp)
#pragma unroll
        for (int kc = 0; kc < kKC; ++kc) {
          uint32_t bk[4];
          ldmatrix_x4(bk, ks + frag::k_ldsm_offset(lane, ntp, kc, kStride));
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            E::mma(s[mt][2 * ntp], qf[mt][kc], bk[0], bk[1]);
            E::mma(s[mt][2 * ntp + 1], qf[mt][kc], bk[2], bk[3]);
          }
        }

      // Keys past Nk and, on diagonal tiles, keys after the query: -inf.
      if (frag::warp_tile_needs_mask(r0, n0, kBlockN, p.Nk, p.causal)) {
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const frag::RowCol rc = frag::mma_c(lane, e);
              if (!frag::visible(r0 + mt * 16 + rc.row, n0 + nt * 8 + rc.col, p.Nk, p.causal))
                s[mt][nt][e] = -INFINITY;
            }
      }

      // Online softmax per row half; a row lives in one quad (4 lanes), so two xor-shuffles reduce it.
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float mx = -INFINITY;
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float m_new = fmaxf(m_r[mt][r], mx * sl2);
          // A row with no visible key so far keeps m = -inf; subtracting 0 instead keeps exp2 from NaN.
          const float m_use = m_new == -INFINITY ? 0.0f : m_new;
          const float alpha = exp2_ftz(m_r[mt][r] - m_use);
          m_r[mt][r] = m_new;
          float rs = 0.0f;
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float pv = exp2_ftz(fmaf(s[mt][nt][2 * r + e], sl2, -m_use));
              s[mt][nt][2 * r + e] = pv;
              rs += pv;
            }
          l_r[mt][r] = l_r[mt][r] * alpha + rs;
#pragma unroll
          for (int dt = 0; dt < kDT; ++dt) {
            o[mt][dt][2 * r] *= alpha;
            o[mt][dt][2 * r + 1] *= alpha;
          }
        }

      // O += P·V: the S accumulators of n-tiles 2kc, 2kc+1 are the A fragment of keys 16kc..16kc+15;
      // one ldmatrix.x4.trans of V gives the B fragments of two d-tiles, used by every m-tile.
#pragma unroll
      for (int kc = 0; kc < kBlockN / 16; ++kc) {
        uint32_t a[kMTiles][4];
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int reg = 0; reg < 4; ++reg)
            a[mt][reg] = E::pack(s[mt][frag::p_ntile(kc, reg)][frag::p_elem(reg, 0)],
                                 s[mt][frag::p_ntile(kc, reg)][frag::p_elem(reg, 1)]);
#pragma unroll
        for (int dt2 = 0; dt2 < D / 16; ++dt2) {
          uint32_t bv[4];
          ldmatrix_x4_trans(bv, vs + frag::v_ldsm_offset(lane, kc, dt2, kStride));
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            E::mma(o[mt][2 * dt2], a[mt], bv[0], bv[1]);
            E::mma(o[mt][2 * dt2 + 1], a[mt], bv[2], bv[3]);
          }
        }
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }

  // Epilogue: finish the row sums across the quad, normalise once, store O (rounded) and the logsumexp.
  // A row that saw no key (l = 0) stores zeros and lse = -inf, the reference's convention.
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = l_r[mt][r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      const frag::RowCol rc = frag::mma_c(lane, 2 * r);
      const int row = r0 + mt * 16 + rc.row;
      if (row >= p.Nq) continue;
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt)
        st32(static_cast<T*>(p.o) + (q_row0 + row) * D + dt * 8 + rc.col,
             E::pack(o[mt][dt][2 * r] * inv, o[mt][dt][2 * r + 1] * inv));
      if (p.lse && (lane & 3) == 0)
        st_f32(p.lse + q_row0 + row, l > 0.0f ? (m_r[mt][r] + log2f(l)) * 0.6931471805599453f : -INFINITY);
    }
}

}  // namespace
}  // namespace attnprof::cuda::kernels
