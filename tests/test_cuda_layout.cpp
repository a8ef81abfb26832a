// The flash kernel's index math (src/cuda/fragment.h), checked on the CPU: no GPU or CUDA toolkit needed,
// the header is plain C++ and these are the functions flash.cu itself calls.
//   - fragment layouts of mma.m16n8k16 and ldmatrix against the PTX ISA's tables, written out here
//     independently, and the composed facts the kernel relies on (ldmatrix of K / ldmatrix.trans of V give
//     the B operands, the S accumulators are P's A operand);
//   - shared-memory addresses: 16-byte aligned, bank-conflict free for ldmatrix and the cp.async stores;
//   - the work decomposition, K/V tile ranges, causal skipping and the mask predicate against brute force;
//   - every tile configuration's resource needs against the limits of sm_80 and sm_90;
//   - a lane-by-lane emulation of the whole kernel (same loop structure, same index functions, bf16
//     rounding of P and O) against the fp64 reference, for every configuration, ragged shapes, Nq != Nk,
//     GQA, causal or not, D 64 and 128.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "attnprof/attention.h"
#include "attnprof/dtype.h"
#include "cuda/fragment.h"

using namespace attnprof;
namespace frag = attnprof::cuda::frag;
using frag::RowCol;

namespace attnprof::cuda::frag {
bool operator==(const RowCol& a, const RowCol& b) { return a.row == b.row && a.col == b.col; }
void PrintTo(const RowCol& a, std::ostream* os) { *os << "(" << a.row << ", " << a.col << ")"; }
}  // namespace attnprof::cuda::frag

namespace {

// ---- the PTX ISA's tables ("Matrix fragments for mma.m16n8k16 with floating point type"; "ldmatrix") ----
// groupID = lane / 4, threadID_in_group = lane % 4; element index i as the ISA numbers them.
RowCol ptx_a(int lane, int i) {  // a0..a7; register r holds a_{2r} (low half) and a_{2r+1}
  const int g = lane / 4, t = lane % 4;
  const bool upper = i == 2 || i == 3 || i == 6 || i == 7;
  return {upper ? g + 8 : g, t * 2 + (i & 1) + (i >= 4 ? 8 : 0)};
}
RowCol ptx_b(int lane, int i) {  // b0..b3 (row = k, col = n)
  const int g = lane / 4, t = lane % 4;
  return {t * 2 + (i & 1) + (i >= 2 ? 8 : 0), g};
}
RowCol ptx_c(int lane, int i) {  // c0..c3
  const int g = lane / 4, t = lane % 4;
  return {i < 2 ? g : g + 8, t * 2 + (i & 1)};
}
// ldmatrix.m8n8.x4: threads 8m..8m+7 give the row addresses of matrix m; destination register m of thread
// T holds row T/4, elements 2(T%4) and 2(T%4)+1 of matrix m (.trans: the matrix is read column-major, so
// those two are rows 2(T%4), 2(T%4)+1 of column T/4).
RowCol ptx_ldsm_dest(int lane, int half, bool trans) {
  return trans ? RowCol{2 * (lane % 4) + half, lane / 4} : RowCol{lane / 4, 2 * (lane % 4) + half};
}

template <class F>
void for_each_config(F&& f) {
  for (int c = 0; c < frag::kFlashConfigCount; ++c)
    for (int d : {64, 128})
      if (frag::kFlashConfigs[c].supports(d)) f(frag::kFlashConfigs[c], d);
}

}  // namespace

// ---- fragments -------------------------------------------------------------------------------------------
TEST(CudaLayout, MmaFragmentsFollowThePtxTables) {
  std::set<std::pair<int, int>> a, b, c;
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(frag::mma_a(lane, i / 2, i % 2), ptx_a(lane, i)) << "lane " << lane << " a" << i;
      a.insert({ptx_a(lane, i).row, ptx_a(lane, i).col});
    }
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(frag::mma_b(lane, i / 2, i % 2), ptx_b(lane, i)) << "lane " << lane << " b" << i;
      EXPECT_EQ(frag::mma_c(lane, i), ptx_c(lane, i)) << "lane " << lane << " c" << i;
      b.insert({ptx_b(lane, i).row, ptx_b(lane, i).col});
      c.insert({ptx_c(lane, i).row, ptx_c(lane, i).col});
    }
  }
  // Each element of A (16×16), B (16×8), C (16×8) belongs to exactly one (lane, element).
  EXPECT_EQ(a.size(), 256u);
  EXPECT_EQ(b.size(), 128u);
  EXPECT_EQ(c.size(), 128u);
}

TEST(CudaLayout, LdmatrixGivesTheBOperandAndAccumulatorsGiveTheAOperand) {
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(frag::ldsm_source(lane), (RowCol{lane / 8, lane % 8}));
    for (int h = 0; h < 2; ++h) {
      EXPECT_EQ(frag::ldsm_dest(lane, h, false), ptx_ldsm_dest(lane, h, false));
      EXPECT_EQ(frag::ldsm_dest(lane, h, true), ptx_ldsm_dest(lane, h, true));
      // An 8×8 block stored with rows = n (K: rows are keys) read without .trans is B's (k, n) element;
      // stored with rows = k (V: rows are keys, the k of P·V) read with .trans, likewise.
      const RowCol nk = ptx_ldsm_dest(lane, h, false), kn = ptx_ldsm_dest(lane, h, true);
      EXPECT_EQ((RowCol{nk.col, nk.row}), ptx_b(lane, h));
      EXPECT_EQ(kn, ptx_b(lane, h));
    }
    // P·V: the S accumulators of n-tiles 2kc, 2kc+1 (columns 16kc..16kc+15) are P's A fragment for k-chunk kc.
    for (int kc = 0; kc < 8; ++kc)
      for (int reg = 0; reg < 4; ++reg)
        for (int h = 0; h < 2; ++h) {
          const RowCol acc = ptx_c(lane, frag::p_elem(reg, h));
          const RowCol in_p{acc.row, frag::p_ntile(kc, reg) * 8 + acc.col - kc * 16};
          EXPECT_EQ(in_p, ptx_a(lane, 2 * reg + h)) << "lane " << lane << " reg " << reg << " half " << h;
        }
  }
}

TEST(CudaLayout, KAndVLdmatrixAddressesDeliverTheOperandsTheMmasNeed) {
  for (int d : {64, 128}) {
    const int stride = frag::TileConfig::stride(d);
    for (int block_n : {64, 128})
      for (int lane = 0; lane < 32; ++lane)
        for (int m = 0; m < 4; ++m)  // destination register
          for (int h = 0; h < 2; ++h) {
            // Q·Kᵀ: register m is B register m%2 of n-tile 2ntp + m/2; B(k, n) = K[key n][d k].
            for (int ntp = 0; ntp < block_n / 16; ++ntp)
              for (int kc = 0; kc < d / 16; ++kc) {
                const RowCol got = ptx_ldsm_dest(lane, h, false);
                const int src = 8 * m + got.row;  // the lane that addressed that row of matrix m
                const int at = frag::k_ldsm_offset(src, ntp, kc, stride) + got.col;
                const RowCol bk = ptx_b(lane, 2 * (m % 2) + h);
                const int key = (2 * ntp + m / 2) * 8 + bk.col, dd = kc * 16 + bk.row;
                ASSERT_EQ(at, key * stride + dd) << "K: d " << d << " lane " << lane << " reg " << m;
              }
            // P·V: register m is B register m%2 of d-tile 2dt2 + m/2; B(k, n) = V[key k][d n].
            for (int kc = 0; kc < block_n / 16; ++kc)
              for (int dt2 = 0; dt2 < d / 16; ++dt2) {
                const RowCol got = ptx_ldsm_dest(lane, h, true);
                const int src = 8 * m + got.row;
                const int at = frag::v_ldsm_offset(src, kc, dt2, stride) + got.col;
                const RowCol bv = ptx_b(lane, 2 * (m % 2) + h);
                const int key = kc * 16 + bv.row, dd = (2 * dt2 + m / 2) * 8 + bv.col;
                ASSERT_EQ(at, key * stride + dd) << "V: d " << d << " lane " << lane << " reg " << m;
              }
          }
  }
}

// ---- shared memory ---------------------------------------------------------------------------------------
namespace {
// 16-byte accesses, 8 per wavefront: conflict free when the 8 land in 8 distinct groups of 4 banks.
::testing::AssertionResult conflict_free(const std::vector<int>& byte_addrs) {
  std::set<int> groups;
  for (int a : byte_addrs) {
    if (a % 16 != 0) return ::testing::AssertionFailure() << "address " << a << " not 16-byte aligned";
    groups.insert((a / 4) % 32 / 4);
  }
  if (groups.size() != byte_addrs.size())
    return ::testing::AssertionFailure() << byte_addrs.size() << " accesses share " << groups.size() << " bank groups";
  return ::testing::AssertionSuccess();
}
}  // namespace

TEST(CudaLayout, SharedMemoryAccessesAreAlignedAndBankConflictFree) {
  for_each_config([](const frag::TileConfig& c, int d) {
    SCOPED_TRACE(std::string(c.name) + " D=" + std::to_string(d));
    const int stride = frag::TileConfig::stride(d), tile_bytes = c.block_n * stride * 2;
    for (int stage_tile = 0; stage_tile < 4; ++stage_tile) {  // K0, V0, K1, V1
      const int base = stage_tile * tile_bytes;
      ASSERT_EQ(base % 16, 0);
      for (int m = 0; m < 4; ++m) {  // one ldmatrix phase per matrix: its 8 row addresses
        for (int ntp = 0; ntp < c.block_n / 16; ++ntp)
          for (int kc = 0; kc < d / 16; ++kc) {
            std::vector<int> a;
            for (int l = 8 * m; l < 8 * m + 8; ++l) a.push_back(base + 2 * frag::k_ldsm_offset(l, ntp, kc, stride));
            ASSERT_TRUE(conflict_free(a)) << "K ldmatrix ntp " << ntp << " kc " << kc << " matrix " << m;
          }
        for (int kc = 0; kc < c.block_n / 16; ++kc)
          for (int dt2 = 0; dt2 < d / 16; ++dt2) {
            std::vector<int> a;
            for (int l = 8 * m; l < 8 * m + 8; ++l) a.push_back(base + 2 * frag::v_ldsm_offset(l, kc, dt2, stride));
            ASSERT_TRUE(conflict_free(a)) << "V ldmatrix kc " << kc << " dt2 " << dt2 << " matrix " << m;
          }
      }
      // cp.async stores: 8 consecutive threads per wavefront.
      for (int i = 0; i < c.chunks_per_thread(d); ++i)
        for (int t0 = 0; t0 < c.threads(); t0 += 8) {
          std::vector<int> a;
          for (int t = t0; t < t0 + 8; ++t) {
            const RowCol rc = frag::copy_chunk(i, t, c.threads(), d);
            a.push_back(base + 2 * (rc.row * stride + rc.col));
          }
          ASSERT_TRUE(conflict_free(a)) << "cp.async round " << i << " threads " << t0 << "..";
        }
    }
  });
}

TEST(CudaLayout, TileCopyWritesEveryChunkOnceAndNeverThePadding) {
  for_each_config([](const frag::TileConfig& c, int d) {
    SCOPED_TRACE(std::string(c.name) + " D=" + std::to_string(d));
    ASSERT_EQ(c.chunks_per_thread(d) * c.threads(), c.block_n * d / 8) << "the copy must divide evenly";
    std::set<std::pair<int, int>> seen;
    for (int i = 0; i < c.chunks_per_thread(d); ++i)
      for (int t = 0; t < c.threads(); ++t) {
        const RowCol rc = frag::copy_chunk(i, t, c.threads(), d);
        ASSERT_GE(rc.row, 0);
        ASSERT_LT(rc.row, c.block_n);
        ASSERT_EQ(rc.col % 8, 0);
        ASSERT_LE(rc.col + 8, d) << "past the row into the padding";
        seen.insert({rc.row, rc.col});
      }
    EXPECT_EQ(int(seen.size()), c.block_n * d / 8);
  });
}

TEST(CudaLayout, ConfigurationsFitSm80AndSm90) {
  std::set<std::string> names;
  for (int c = 0; c < frag::kFlashConfigCount; ++c) {
    const frag::TileConfig& tc = frag::kFlashConfigs[c];
    names.insert(tc.name);
    EXPECT_TRUE(tc.m_tiles == 1 || tc.m_tiles == 2) << tc.name;
    EXPECT_EQ(tc.block_n % 16, 0) << tc.name;
    EXPECT_LE(tc.threads(), 1024) << tc.name;
    EXPECT_TRUE(tc.d64 || tc.d128) << tc.name;
    for (int d : {64, 128}) {
      if (!tc.supports(d)) continue;
      const int smem = tc.smem_bytes(d);
      // Opt-in maxima per block: 163 KiB on sm_80, 227 KiB on sm_90. Per SM (1 KiB reserved per block):
      // 164 KiB and 228 KiB, so the blocks per SM that __launch_bounds__ asks for must fit on sm_80.
      EXPECT_LE(smem, 163 * 1024) << tc.name << " D=" << d;
      const int blocks = tc.min_blocks(d);
      EXPECT_LE(blocks * (smem + 1024), 164 * 1024) << tc.name << " D=" << d;
      EXPECT_LE(blocks * tc.threads(), 2048) << tc.name << " D=" << d;
    }
  }
  EXPECT_EQ(int(names.size()), frag::kFlashConfigCount) << "names must be unique";
  for (int d : {64, 128}) {
    const int def = frag::default_config(d);
    ASSERT_GE(def, 0);
    ASSERT_LT(def, frag::kFlashConfigCount);
    EXPECT_TRUE(frag::kFlashConfigs[def].supports(d)) << "the default for D=" << d;
  }
}

// ---- work decomposition, tile ranges, masking -------------------------------------------------------------
TEST(CudaLayout, GridMapsEveryQueryTileAndHeadOnceHeaviestFirst) {
  for (int m_blocks : {1, 2, 7, 16})
    for (int bh : {1, 3, 128}) {
      std::set<std::pair<int, int>> seen;
      int prev = m_blocks;
      for (int blk = 0; blk < m_blocks * bh; ++blk) {
        const frag::BlockWork w = frag::block_work(blk, m_blocks, bh);
        ASSERT_GE(w.m_block, 0);
        ASSERT_LT(w.m_block, m_blocks);
        ASSERT_GE(w.bh, 0);
        ASSERT_LT(w.bh, bh);
        ASSERT_LE(w.m_block, prev) << "query tiles are handed out from the last (heaviest) down";
        prev = w.m_block;
        seen.insert({w.m_block, w.bh});
      }
      EXPECT_EQ(int(seen.size()), m_blocks * bh);
    }
}

TEST(CudaLayout, CausalConventionIsTopLeftLikeTheReference) {
  // The reference (src/attention/reference.cpp) masks key j of query i when j > i, for any Nq, Nk.
  EXPECT_TRUE(frag::visible(0, 0, 10, true));
  EXPECT_FALSE(frag::visible(0, 1, 10, true));
  EXPECT_TRUE(frag::visible(5, 5, 10, true));
  EXPECT_TRUE(frag::visible(50, 9, 10, true)) << "Nq > Nk: late queries see every key";
  EXPECT_FALSE(frag::visible(50, 10, 10, true)) << "keys past Nk never";
  EXPECT_TRUE(frag::visible(0, 9, 10, false));
  EXPECT_FALSE(frag::visible(0, 10, 10, false));
}

TEST(CudaLayout, TileRangesAndMaskPredicateAgreeWithBruteForce) {
  const int sizes[] = {1, 2, 15, 16, 17, 33, 63, 64, 65, 100, 127, 128, 129, 200, 256, 257};
  for (int c = 0; c < frag::kFlashConfigCount; ++c) {
    const frag::TileConfig& tc = frag::kFlashConfigs[c];
    const int bm = tc.block_m(), bn = tc.block_n, wr = 16 * tc.m_tiles;
    for (int nq : sizes)
      for (int nk : sizes)
        for (bool causal : {false, true}) {
          SCOPED_TRACE(std::string(tc.name) + " nq " + std::to_string(nq) + " nk " + std::to_string(nk) +
                       (causal ? " causal" : ""));
          // Last tile with a visible pair, +1, for real rows [r0, min(r0 + rows, nq)).
          auto brute = [&](int r0, int rows) {
            int n = 0;
            for (int q = r0; q < std::min(r0 + rows, nq); ++q)
              for (int k = 0; k < nk; ++k)
                if (frag::visible(q, k, nk, causal)) n = std::max(n, k / bn + 1);
            return n;
          };
          for (int mb = 0; mb < frag::ceil_div(nq, bm); ++mb) {
            const int m0 = mb * bm, n_tiles = frag::kv_tiles(m0, bm, bn, nq, nk, causal);
            ASSERT_EQ(n_tiles, brute(m0, bm));
            ASSERT_GE(n_tiles, 1) << "every block has work (key 0 is visible to every query)";
            for (int w = 0; w < tc.warps; ++w) {
              const int r0 = m0 + w * wr;
              const int wt = frag::warp_kv_tiles(r0, wr, bn, nq, nk, causal);
              ASSERT_EQ(wt, brute(r0, wr)) << "warp " << w;
              ASSERT_LE(wt, n_tiles);
              for (int nb = 0; nb < wt; ++nb) {
                const int n0 = nb * bn;
                if (frag::warp_tile_needs_mask(r0, n0, bn, nk, causal)) continue;
                // Unmasked: every pair of the warp's rows (padding rows past nq included) is visible.
                for (int q = r0; q < r0 + wr; ++q)
                  for (int k = n0; k < n0 + bn; ++k)
                    ASSERT_TRUE(frag::visible(q, k, nk, causal)) << "warp " << w << " tile " << nb << " q " << q
                                                                 << " k " << k;
              }
            }
          }
        }
  }
}

// ---- the kernel, emulated lane by lane ---------------------------------------------------------------
namespace {

float bf16_round(float x) { return bf16_to_float(float_to_bf16(x)); }

using Acc = std::array<std::array<float, 4>, 32>;                // C/D fragment of every lane
using AFrag = std::array<std::array<float, 8>, 32>;              // A: a0..a7 of every lane
using BFrag = std::array<std::array<float, 4>, 32>;              // B: b0..b3 of every lane
using Ldsm = std::array<std::array<std::array<float, 2>, 4>, 32>;  // ldmatrix.x4: [lane][register][half]

// mma.m16n8k16 through the ISA's tables (not fragment.h): C += A·B.
void emu_mma(Acc& c, const AFrag& a, const BFrag& b) {
  double A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    for (int i = 0; i < 8; ++i) A[ptx_a(l, i).row][ptx_a(l, i).col] = a[size_t(l)][size_t(i)];
    for (int i = 0; i < 4; ++i) B[ptx_b(l, i).row][ptx_b(l, i).col] = b[size_t(l)][size_t(i)];
  }
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < 4; ++i) {
      const RowCol rc = ptx_c(l, i);
      double s = c[size_t(l)][size_t(i)];
      for (int k = 0; k < 16; ++k) s += A[rc.row][k] * B[k][rc.col];
      c[size_t(l)][size_t(i)] = float(s);
    }
}

// ldmatrix.x4 through the ISA's description: `addr[l]` is the element offset lane l supplies.
Ldsm emu_ldsm(const std::vector<float>& smem, const std::array<int, 32>& addr, bool trans) {
  Ldsm out{};
  for (int t = 0; t < 32; ++t)
    for (int m = 0; m < 4; ++m)
      for (int h = 0; h < 2; ++h) {
        const RowCol rc = ptx_ldsm_dest(t, h, trans);
        out[size_t(t)][size_t(m)][size_t(h)] = smem.at(size_t(addr[size_t(8 * m + rc.row)] + rc.col));
      }
  return out;
}

BFrag b_regs(const Ldsm& r, int first) {  // registers first, first+1 as one B operand
  BFrag b{};
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < 4; ++i) b[size_t(l)][size_t(i)] = r[size_t(l)][size_t(first + i / 2)][size_t(i % 2)];
  return b;
}

// The kernel of src/cuda/flash.cu, one block and warp at a time, lane by lane, with its index functions.
// Shared-memory padding starts as NaN, so reading it anywhere poisons the result.
void emulate_flash(const frag::TileConfig& tc, const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                   float scale, Tensor& out, Tensor& lse) {
  const int B = int(q.shape(0)), Hq = int(q.shape(1)), Nq = int(q.shape(2)), D = int(q.shape(3));
  const int Hkv = int(k.shape(1)), Nk = int(k.shape(2));
  const int BM = tc.block_m(), BN = tc.block_n, WR = 16 * tc.m_tiles, MT = tc.m_tiles;
  const int stride = frag::TileConfig::stride(D);
  const float sl2 = scale * 1.4426950408889634f, ninf = -std::numeric_limits<float>::infinity();
  const int m_blocks = frag::ceil_div(Nq, BM);
  for (int blk = 0; blk < m_blocks * B * Hq; ++blk) {
    const frag::BlockWork work = frag::block_work(blk, m_blocks, B * Hq);
    const int b = work.bh / Hq, h = work.bh % Hq, kvh = h / (Hq / Hkv);
    const int m0 = work.m_block * BM;
    const int n_tiles = frag::kv_tiles(m0, BM, BN, Nq, Nk, causal);
    // The block's K/V tiles, as the cp.async copy fills them (keys past Nk zero-filled).
    std::vector<std::vector<float>> ks(static_cast<size_t>(n_tiles)), vs(static_cast<size_t>(n_tiles));
    for (int nb = 0; nb < n_tiles; ++nb) {
      ks[size_t(nb)].assign(size_t(BN * stride), std::numeric_limits<float>::quiet_NaN());
      vs[size_t(nb)] = ks[size_t(nb)];
      for (int i = 0; i < tc.chunks_per_thread(D); ++i)
        for (int t = 0; t < tc.threads(); ++t) {
          const RowCol rc = frag::copy_chunk(i, t, tc.threads(), D);
          const int key = nb * BN + rc.row;
          for (int e = 0; e < 8; ++e) {
            ks[size_t(nb)][size_t(rc.row * stride + rc.col + e)] = key < Nk ? k.get(b, kvh, key, rc.col + e) : 0.0f;
            vs[size_t(nb)][size_t(rc.row * stride + rc.col + e)] = key < Nk ? v.get(b, kvh, key, rc.col + e) : 0.0f;
          }
        }
    }
    for (int w = 0; w < tc.warps; ++w) {
      const int r0 = m0 + w * WR;
      std::vector<std::vector<AFrag>> qf(size_t(MT), std::vector<AFrag>(size_t(D / 16)));
      for (int mt = 0; mt < MT; ++mt)
        for (int kc = 0; kc < D / 16; ++kc)
          for (int l = 0; l < 32; ++l)
            for (int reg = 0; reg < 4; ++reg) {
              const RowCol rc = frag::mma_a(l, reg, 0);
              const int row = r0 + mt * 16 + rc.row;
              for (int hf = 0; hf < 2; ++hf)
                qf[size_t(mt)][size_t(kc)][size_t(l)][size_t(2 * reg + hf)] =
                    row < Nq ? q.get(b, h, row, kc * 16 + rc.col + hf) : 0.0f;
            }
      std::vector<std::vector<Acc>> o(size_t(MT), std::vector<Acc>(size_t(D / 8), Acc{}));
      std::vector<std::array<std::array<float, 2>, 32>> m_r(static_cast<size_t>(MT)), l_r(static_cast<size_t>(MT));
      for (auto& x : m_r)
        for (auto& y : x) y = {ninf, ninf};
      for (auto& x : l_r)
        for (auto& y : x) y = {0.0f, 0.0f};
      const int warp_tiles = frag::warp_kv_tiles(r0, WR, BN, Nq, Nk, causal);
      for (int nb = 0; nb < n_tiles; ++nb) {
        if (nb >= warp_tiles) continue;
        const int n0 = nb * BN;
        std::vector<std::vector<Acc>> s(size_t(MT), std::vector<Acc>(size_t(BN / 8), Acc{}));
        for (int ntp = 0; ntp < BN / 16; ++ntp)
          for (int kc = 0; kc < D / 16; ++kc) {
            std::array<int, 32> addr{};
            for (int l = 0; l < 32; ++l) addr[size_t(l)] = frag::k_ldsm_offset(l, ntp, kc, stride);
            const Ldsm bk = emu_ldsm(ks[size_t(nb)], addr, false);
            for (int mt = 0; mt < MT; ++mt) {
              emu_mma(s[size_t(mt)][size_t(2 * ntp)], qf[size_t(mt)][size_t(kc)], b_regs(bk, 0));
              emu_mma(s[size_t(mt)][size_t(2 * ntp + 1)], qf[size_t(mt)][size_t(kc)], b_regs(bk, 2));
            }
          }
        if (frag::warp_tile_needs_mask(r0, n0, BN, Nk, causal))
          for (int mt = 0; mt < MT; ++mt)
            for (int nt = 0; nt < BN / 8; ++nt)
              for (int l = 0; l < 32; ++l)
                for (int e = 0; e < 4; ++e) {
                  const RowCol rc = frag::mma_c(l, e);
                  if (!frag::visible(r0 + mt * 16 + rc.row, n0 + nt * 8 + rc.col, Nk, causal))
                    s[size_t(mt)][size_t(nt)][size_t(l)][size_t(e)] = ninf;
                }
        for (int mt = 0; mt < MT; ++mt)
          for (int r = 0; r < 2; ++r) {
            std::array<float, 32> mx{};
            for (int l = 0; l < 32; ++l) {
              mx[size_t(l)] = ninf;
              for (int nt = 0; nt < BN / 8; ++nt)
                for (int e = 0; e < 2; ++e) mx[size_t(l)] = std::fmax(mx[size_t(l)], s[size_t(mt)][size_t(nt)][size_t(l)][size_t(2 * r + e)]);
            }
            for (int l = 0; l < 32; ++l) {  // the quad's xor-shuffle reduction
              const int q0 = l & ~3;
              float qm = ninf;
              for (int j = 0; j < 4; ++j) qm = std::fmax(qm, mx[size_t(q0 + j)]);
              const float m_new = std::fmax(m_r[size_t(mt)][size_t(l)][size_t(r)], qm * sl2);
              const float m_use = m_new == ninf ? 0.0f : m_new;
              const float alpha = std::exp2(m_r[size_t(mt)][size_t(l)][size_t(r)] - m_use);
              m_r[size_t(mt)][size_t(l)][size_t(r)] = m_new;
              float rs = 0.0f;
              for (int nt = 0; nt < BN / 8; ++nt)
                for (int e = 0; e < 2; ++e) {
                  float& x = s[size_t(mt)][size_t(nt)][size_t(l)][size_t(2 * r + e)];
                  x = std::exp2(std::fma(x, sl2, -m_use));
                  rs += x;
                }
              l_r[size_t(mt)][size_t(l)][size_t(r)] = l_r[size_t(mt)][size_t(l)][size_t(r)] * alpha + rs;
              for (int dt = 0; dt < D / 8; ++dt) {
                o[size_t(mt)][size_t(dt)][size_t(l)][size_t(2 * r)] *= alpha;
                o[size_t(mt)][size_t(dt)][size_t(l)][size_t(2 * r + 1)] *= alpha;
              }
            }
          }
        for (int kc = 0; kc < BN / 16; ++kc) {
          std::vector<AFrag> a(static_cast<size_t>(MT));
          for (int mt = 0; mt < MT; ++mt)
            for (int l = 0; l < 32; ++l)
              for (int reg = 0; reg < 4; ++reg)
                for (int hf = 0; hf < 2; ++hf)
                  a[size_t(mt)][size_t(l)][size_t(2 * reg + hf)] = bf16_round(
                      s[size_t(mt)][size_t(frag::p_ntile(kc, reg))][size_t(l)][size_t(frag::p_elem(reg, hf))]);
          for (int dt2 = 0; dt2 < D / 16; ++dt2) {
            std::array<int, 32> addr{};
            for (int l = 0; l < 32; ++l) addr[size_t(l)] = frag::v_ldsm_offset(l, kc, dt2, stride);
            const Ldsm bv = emu_ldsm(vs[size_t(nb)], addr, true);
            for (int mt = 0; mt < MT; ++mt) {
              emu_mma(o[size_t(mt)][size_t(2 * dt2)], a[size_t(mt)], b_regs(bv, 0));
              emu_mma(o[size_t(mt)][size_t(2 * dt2 + 1)], a[size_t(mt)], b_regs(bv, 2));
            }
          }
        }
      }
      // Epilogue.
      for (int mt = 0; mt < MT; ++mt)
        for (int r = 0; r < 2; ++r)
          for (int l = 0; l < 32; ++l) {
            const int q0 = l & ~3;
            float lsum = 0.0f;
            for (int j = 0; j < 4; ++j) lsum += l_r[size_t(mt)][size_t(q0 + j)][size_t(r)];
            const float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
            const RowCol rc = frag::mma_c(l, 2 * r);
            const int row = r0 + mt * 16 + rc.row;
            if (row >= Nq) continue;
            for (int dt = 0; dt < D / 8; ++dt)
              for (int e = 0; e < 2; ++e)
                out.set(b, h, row, dt * 8 + rc.col + e, o[size_t(mt)][size_t(dt)][size_t(l)][size_t(2 * r + e)] * inv);
            if ((l & 3) == 0)
              lse.set(b, h, row, 0,
                      lsum > 0.0f ? (m_r[size_t(mt)][size_t(l)][size_t(r)] + std::log2(lsum)) * 0.6931471805599453f
                                  : ninf);
          }
    }
  }
}

struct EmuCase {
  int64_t B, Hq, Hkv, Nq, Nk;
  bool causal;
  double scale;  // 0: 1/sqrt(D)
};

}  // namespace

TEST(CudaLayout, EmulatedKernelMatchesTheReferenceInEveryConfiguration) {
  const EmuCase cases[] = {
      {1, 1, 1, 1, 1, false, 0},    {1, 2, 1, 37, 100, true, 0},  {1, 1, 1, 100, 37, true, 0},
      {2, 2, 1, 65, 65, true, 0.3}, {1, 2, 2, 129, 70, false, 0}, {1, 1, 1, 130, 200, true, 0},
  };
  for_each_config([&](const frag::TileConfig& tc, int d) {
    uint64_t seed = 11;
    for (const EmuCase& c : cases) {
      Tensor q = Tensor::empty({c.B, c.Hq, c.Nq, d}, DType::BF16), k = Tensor::empty({c.B, c.Hkv, c.Nk, d}, DType::BF16),
             v = Tensor::empty({c.B, c.Hkv, c.Nk, d}, DType::BF16);
      fill_randn(q, seed++);
      fill_randn(k, seed++);
      fill_randn(v, seed++);
      AttnOptions opt;
      opt.is_causal = c.causal;
      if (c.scale != 0) opt.scale = c.scale;
      const AttnProblem p = AttnProblem::from(q, k, v, opt);
      SCOPED_TRACE(std::string(tc.name) + " " + p.str());
      Tensor out = Tensor::empty(q.shape(), DType::BF16), lse = Tensor::empty({c.B, c.Hq, c.Nq, 1}, DType::F32);
      for (int64_t i = 0; i < out.numel(); ++i) out.data<uint16_t>()[i] = 0x7fc0;  // NaN: unwritten shows up
      emulate_flash(tc, q, k, v, c.causal, float(p.effective_scale()), out, lse);
      const Reference ref = reference_attention(q, k, v, opt);
      const ErrorStats e = compare_to_reference(out, ref, Tolerance{2e-2, 2e-2});  // the flash variant's bf16 tolerance
      EXPECT_TRUE(e.ok()) << e.violations << " of " << e.count << " off, max_abs " << e.max_abs;
      EXPECT_LT(e.max_abs, 1e-2);
      EXPECT_TRUE(compare_lse(lse, ref, Tolerance{1e-3, 1e-3}).ok());
    }
  });
}
