// The flash kernel's index math (src/cuda/fragment.h), checked on the CPU: no GPU or CUDA toolkit needed,
// the header is plain C++ and these are the functions the kernel (flash_kernel.cuh) itself calls.
//   - fragment layouts of mma.m16n8k16 and ldmatrix against the PTX ISA's tables, written out here
//     independently, and the composed facts the kernel relies on (ldmatrix of K / ldmatrix.trans of V give
//     the B operands, the S accumulators are P's A operand);
//   - shared-memory addresses: 16-byte aligned, bank-conflict free for ldmatrix and the cp.async stores;
//   - the work decomposition, K/V tile ranges, causal skipping and the mask predicate against brute force;
//   - every tile configuration's resource needs against the limits of sm_80 and sm_90.
// The kernel itself, its own source executed lane by lane, is test_cuda_flash_emulated.cpp.
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
#include "ptx_tables.h"

using namespace attnprof;
namespace frag = attnprof::cuda::frag;
using frag::RowCol;
using namespace attnprof::testing_ptx;

namespace attnprof::cuda::frag {
bool operator==(const RowCol& a, const RowCol& b) { return a.row == b.row && a.col == b.col; }
void PrintTo(const RowCol& a, std::ostream* os) { *os << "(" << a.row << ", " << a.col << ")"; }
}  // namespace attnprof::cuda::frag

namespace {

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
