// The CUDA flash kernel's own source (src/cuda/flash_kernel.cuh), run on the CPU by the SIMT emulation of
// tests/simt_emulator.h: every tile configuration at head dims 64 and 128 against the fp64 reference, with
// the same tolerance and rules as the CPU variants, under both orders in which cp.async copies may land.
// This needs no GPU and no CUDA toolkit: it runs in every build. What it cannot show (speed, register
// pressure, bank conflicts, the real instruction timing) is for scripts/gpu-check.sh on a GPU.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "simt_emulator.h"  // first: the primitives the kernel is written in

#include "attention_cases.h"
#include "attnprof/attention.h"
#include "cuda/flash_kernel.cuh"
#include "cuda/fragment.h"

using namespace attnprof;
using attnprof::testing_cases::Case;
using attnprof::testing_cases::Inputs;
using attnprof::testing_cases::make_inputs;
namespace frag = attnprof::cuda::frag;
namespace kernels = attnprof::cuda::kernels;

namespace {

struct Emulated {
  AttnOutput out;
  std::vector<std::string> errors;
  uint64_t mmas = 0;  // mma.sync executed, per warp
};

// One launch of configuration C at head dim D, as flash.cu's launch<E, D, C> makes it; the element type
// (ElemBf16 or ElemF16) follows the inputs' dtype.
template <int D, int C>
Emulated run_flash(const Inputs& in, simt::Copies copies) {
  constexpr frag::TileConfig c = frag::kFlashConfigs[C];
  static_assert(c.supports(D));
  const AttnProblem p = AttnProblem::from(in.q, in.k, in.v, in.opt);
  const bool fp16 = p.dtype == DType::F16;
  Emulated e;
  e.out.out = Tensor::zeros({p.B, p.Hq, p.Nq, D}, p.dtype);
  e.out.lse = Tensor::full({p.B, p.Hq, p.Nq, 1}, DType::F32, std::nanf(""));
  const kernels::FlashParams fp{in.q.raw(), in.k.raw(), in.v.raw(), e.out.out.raw(), e.out.lse.data<float>(),
                                int(p.B),   int(p.Hq),  int(p.Hkv), int(p.Nq),       int(p.Nk),
                                D,          float(p.effective_scale()),                in.opt.is_causal,
                                fp16};
  simt::Device dev(copies);
  dev.add_buffer(in.q.raw(), in.q.nbytes(), "q", false);
  dev.add_buffer(in.k.raw(), in.k.nbytes(), "k", false);
  dev.add_buffer(in.v.raw(), in.v.nbytes(), "v", false);
  dev.add_buffer(e.out.out.raw(), e.out.out.nbytes(), "o", true);
  dev.add_buffer(e.out.lse.raw(), e.out.lse.nbytes(), "lse", true);
  auto* kernel = fp16 ? kernels::flash_fwd_kernel<kernels::ElemF16, D, c.warps, c.m_tiles, c.block_n, c.min_blocks(D)>
                      : kernels::flash_fwd_kernel<kernels::ElemBf16, D, c.warps, c.m_tiles, c.block_n, c.min_blocks(D)>;
  e.errors = dev.launch(unsigned(c.grid_blocks(fp.Nq, fp.B * fp.Hq)), unsigned(c.threads()), size_t(c.smem_bytes(D)),
                        [&fp, kernel] { kernel(fp); });
  e.mmas = dev.executed(simt::kMma);
  return e;
}

// Ragged and whole tiles, causal and not, grouped-query heads, Nq < Nk and Nq > Nk, one element, a scale
// other than 1/sqrt(D).
struct EmuCase {
  Case c;
  double scale;  // 0: the default 1/sqrt(D)
};
std::vector<EmuCase> cases(int64_t d) {
  return {{{1, 2, 2, 160, 160, d, MaskKind::Causal}, 0},  {{1, 4, 2, 77, 200, d, MaskKind::Causal}, 0},
          {{1, 1, 1, 100, 37, d, MaskKind::Causal}, 0},   {{2, 2, 1, 200, 77, d, MaskKind::None}, 0},
          {{2, 2, 1, 65, 65, d, MaskKind::Causal}, 0.3},  {{1, 1, 1, 1, 1, d, MaskKind::Causal}, 0}};
}

template <int D, int C>
void expect_config_matches_reference(simt::Copies copies, DType t = DType::BF16) {
  const Variant& flash = find_variant("flash");  // the tolerance every flash kernel is held to
  const Variant& naive = find_variant("naive");
  for (const auto& [c, scale] : cases(D)) {
    Inputs in = make_inputs(c, t, 7);
    if (scale != 0) in.opt.scale = scale;
    const Reference ref = reference_attention(in.q, in.k, in.v, in.opt);
    SCOPED_TRACE(fmt::format("{} {} scale {} cp.async {}", frag::kFlashConfigs[C].name, testing_cases::case_name(c, t),
                             scale, copies == simt::Copies::AtWait ? "at wait" : "at issue"));
    // The bar the CPU tests set for a half type: at most twice the naive kernel's error on the same inputs.
    const AttnOutput naive_out =
        naive.prepare(AttnProblem::from(in.q, in.k, in.v, in.opt), in.opt)->run(in.q, in.k, in.v);
    double naive_err = compare_to_reference(naive_out.out, ref, naive.tolerance(t)).max_abs;
    const Emulated e = run_flash<D, C>(in, copies);
    for (const std::string& err : e.errors) ADD_FAILURE() << err;
    testing_cases::expect_matches_reference(flash, e.out, ref, t, naive_err);
  }
}

}  // namespace

// Every configuration of kFlashConfigs the launcher can pick, at every head dim it is compiled for.
static_assert(frag::kFlashConfigCount == 4, "a new tile configuration needs its emulated test below");
static_assert(frag::kFlashConfigs[0].supports(64) && !frag::kFlashConfigs[0].supports(128));
static_assert(frag::kFlashConfigs[1].supports(64) && frag::kFlashConfigs[1].supports(128));
static_assert(frag::kFlashConfigs[2].supports(64) && frag::kFlashConfigs[2].supports(128));
static_assert(frag::kFlashConfigs[3].supports(64) && !frag::kFlashConfigs[3].supports(128));

// The sanitizer suite runs the emulator for its own memory safety (the kernel's addresses are the emulator's
// to check: every access is bounds-checked against the launch's buffers in every build), which one pass of
// each default configuration exercises fully. The numbers of the other configurations, the early cp.async
// landings and the MMA counts are the release suite's: each costs half a minute to a minute of fiber
// switching under ASan, and CI has 2 cores.
#if defined(ATTNPROF_SANITIZED)
#define RELEASE_SUITE_ONLY(what) GTEST_SKIP() << what << ": run by the release suite, not under sanitizers"
#else
#define RELEASE_SUITE_ONLY(what) (void)0
#endif

TEST(CudaFlashEmulated, Config0D64MatchesReference) { expect_config_matches_reference<64, 0>(simt::Copies::AtWait); }
TEST(CudaFlashEmulated, Config1D64MatchesReference) {
  RELEASE_SUITE_ONLY("non-default tile configuration");
  expect_config_matches_reference<64, 1>(simt::Copies::AtWait);
}
TEST(CudaFlashEmulated, Config2D64MatchesReference) {
  RELEASE_SUITE_ONLY("non-default tile configuration");
  expect_config_matches_reference<64, 2>(simt::Copies::AtWait);
}
TEST(CudaFlashEmulated, Config3D64MatchesReference) {
  RELEASE_SUITE_ONLY("non-default tile configuration");
  expect_config_matches_reference<64, 3>(simt::Copies::AtWait);
}
TEST(CudaFlashEmulated, Config1D128MatchesReference) { expect_config_matches_reference<128, 1>(simt::Copies::AtWait); }
TEST(CudaFlashEmulated, Config2D128MatchesReference) {
  RELEASE_SUITE_ONLY("non-default tile configuration");
  expect_config_matches_reference<128, 2>(simt::Copies::AtWait);
}
// The copies of the next K/V tile land as soon as they are issued: a stage refilled while a warp still
// reads it would show here.
TEST(CudaFlashEmulated, DefaultConfigsMatchReferenceWithEarlyCopies) {
  RELEASE_SUITE_ONLY("the default configurations again, with cp.async landing at issue");
  static_assert(frag::default_config(64) == 0 && frag::default_config(128) == 1);
  expect_config_matches_reference<64, 0>(simt::Copies::AtIssue);
  expect_config_matches_reference<128, 1>(simt::Copies::AtIssue);
}

// The fp16 kernels (mma.sync .f16, P and O rounded to fp16): the default configurations against fp64 with
// fp16's tolerance. Their addresses are the bf16 kernels', which the sanitizer suite runs.
TEST(CudaFlashEmulated, Fp16DefaultConfigsMatchReference) {
  RELEASE_SUITE_ONLY("fp16 (the same memory accesses as bf16)");
  expect_config_matches_reference<64, 0>(simt::Copies::AtWait, DType::F16);
  expect_config_matches_reference<128, 1>(simt::Copies::AtWait, DType::F16);
}

// Causal block skipping, seen in the instructions executed: a warp runs the MMAs of a K/V tile only when
// some row of its own sees some key of the tile. The tiles are counted by brute force over (row, key) pairs,
// not with the kernel's tile functions.
TEST(CudaFlashEmulated, CausalSkipsTheTilesNoRowOfTheWarpSees) {
  RELEASE_SUITE_ONLY("MMA counts of the default D=64 configuration");
  constexpr int D = 64, C = 0;
  constexpr frag::TileConfig c = frag::kFlashConfigs[C];
  constexpr int64_t kWarpRows = 16 * c.m_tiles;
  // Per warp and tile: S = Q·Kᵀ (block_n/8 n-tiles × D/16 k-chunks) and O += P·V (block_n/16 × D/8).
  constexpr uint64_t kMmasPerTile = uint64_t(c.m_tiles) * (c.block_n / 8 * D / 16 + c.block_n / 16 * D / 8);
  for (const auto [nq, nk] : {std::pair{256, 256}, std::pair{200, 230}, std::pair{130, 70}}) {
    uint64_t mmas[2] = {0, 0};
    for (bool causal : {false, true}) {
      const Case cs{1, 1, 1, nq, nk, D, causal ? MaskKind::Causal : MaskKind::None};
      SCOPED_TRACE(testing_cases::case_name(cs, DType::BF16));
      const Inputs in = make_inputs(cs, DType::BF16, 3);
      const Emulated e = run_flash<D, C>(in, simt::Copies::AtWait);
      for (const std::string& err : e.errors) ADD_FAILURE() << err;
      uint64_t pairs = 0;  // (warp, tile) pairs with a visible (row, key)
      const int64_t warps = (nq + c.block_m() - 1) / c.block_m() * c.warps;
      for (int64_t w = 0; w < warps; ++w)
        for (int64_t t = 0; t * c.block_n < nk; ++t) {
          bool seen = false;
          for (int64_t row = w * kWarpRows; row < std::min<int64_t>((w + 1) * kWarpRows, nq) && !seen; ++row)
            for (int64_t key = t * c.block_n; key < std::min<int64_t>((t + 1) * c.block_n, nk) && !seen; ++key)
              seen = !causal || key <= row;
          pairs += seen;
        }
      EXPECT_EQ(e.mmas, pairs * kMmasPerTile * uint64_t(cs.B * cs.Hq));
      mmas[causal] = e.mmas;
    }
    if (nq == nk) EXPECT_LT(double(mmas[1]), 0.7 * double(mmas[0])) << "causal should skip about half the tiles";
  }
}

// ---- the emulation itself --------------------------------------------------------------------------------
// Its mma layouts from the PTX tables, checked on one 16×16·16×8 product whose fragments are filled the way
// the PTX ISA draws them (A row-major by element index, B by k), against a plain triple loop.
// Both element types: the same small integers have different bits in bf16 and fp16, so an MMA that read one
// type as the other would compute garbage.
TEST(SimtEmulator, MmaComputesTheDocumentedProduct) {
  float A[16][16], B[16][8];
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 16; ++k) A[i][k] = float((i * 3 + k * 5) % 7 - 3);
  for (int k = 0; k < 16; ++k)
    for (int j = 0; j < 8; ++j) B[k][j] = float((k * 2 + j * 7) % 5 - 2);
  for (bool fp16 : {false, true}) {
  SCOPED_TRACE(fp16 ? "fp16" : "bf16");
  const auto pack = fp16 ? kernels::pack_f16 : kernels::pack_bf16;
  const auto mma = fp16 ? kernels::mma_f16 : kernels::mma_bf16;
  std::vector<std::array<float, 4>> d(32);
  simt::Device dev;
  const auto errors = dev.launch(1, 32, 0, [&] {
    const int l = int(threadIdx.x), g = l / 4, t = l % 4;
    uint32_t a[4], b[2];
    for (int r = 0; r < 4; ++r)  // a0,a1: row g; a2,a3: row g+8; a4..a7 the same 8 columns further
      a[r] = pack(A[g + 8 * (r % 2)][2 * t + 8 * (r / 2)], A[g + 8 * (r % 2)][2 * t + 8 * (r / 2) + 1]);
    for (int r = 0; r < 2; ++r) b[r] = pack(B[2 * t + 8 * r][g], B[2 * t + 8 * r + 1][g]);
    float c[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    mma(c, a, b[0], b[1]);
    d[size_t(l)] = {c[0], c[1], c[2], c[3]};
  });
  EXPECT_TRUE(errors.empty()) << errors.front();
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < 4; ++i) {
      const int row = l / 4 + 8 * (i / 2), col = 2 * (l % 4) + i % 2;
      float want = float(i + 1);
      for (int k = 0; k < 16; ++k) want += A[row][k] * B[k][col];
      EXPECT_EQ(d[size_t(l)][size_t(i)], want) << "lane " << l << " c" << i;
    }
  }
}

// ldmatrix.x4 and .trans of four 8×8 matrices of a 16×16 tile: lane l supplies row l%8 of matrix l/8.
TEST(SimtEmulator, LdmatrixDeliversRowsAndColumns) {
  constexpr int kStride = 24;  // elements per shared row
  std::vector<std::array<uint32_t, 4>> plain(32), trans(32);
  simt::Device dev;
  const auto errors = dev.launch(1, 32, 16 * kStride * 2, [&] {
    auto* s = reinterpret_cast<uint16_t*>(kernels::dynamic_smem());
    const int l = int(threadIdx.x);
    if (l < 16)
      for (int c = 0; c < 16; ++c) s[l * kStride + c] = uint16_t(100 * l + c);  // raw 16-bit values
    __syncthreads();
    const int m = l / 8, row = (m % 2) * 8 + l % 8, col = (m / 2) * 8;  // matrix m: rows 8(m%2).., cols 8(m/2)..
    uint32_t r[4];
    kernels::ldmatrix_x4(r, s + row * kStride + col);
    plain[size_t(l)] = {r[0], r[1], r[2], r[3]};
    kernels::ldmatrix_x4_trans(r, s + row * kStride + col);
    trans[size_t(l)] = {r[0], r[1], r[2], r[3]};
  });
  EXPECT_TRUE(errors.empty()) << errors.front();
  auto at = [](int m, int r, int c) { return uint32_t(100 * ((m % 2) * 8 + r) + (m / 2) * 8 + c); };
  for (int l = 0; l < 32; ++l)
    for (int m = 0; m < 4; ++m) {
      EXPECT_EQ(plain[size_t(l)][size_t(m)], at(m, l / 4, 2 * (l % 4)) | at(m, l / 4, 2 * (l % 4) + 1) << 16);
      EXPECT_EQ(trans[size_t(l)][size_t(m)], at(m, 2 * (l % 4), l / 4) | at(m, 2 * (l % 4) + 1, l / 4) << 16);
    }
}

// The checks that make a wrong kernel fail loudly instead of hanging or passing.
TEST(SimtEmulator, ReportsDivergenceBadAddressesAndUnwaitedCopies) {
  const std::vector<uint16_t> global(64, 0);
  {  // a shuffle only half the warp reaches
    simt::Device dev;
    const auto errors = dev.launch(1, 32, 0, [] {
      if (threadIdx.x < 16) (void)__shfl_xor_sync(0xffffffffu, 1.0f, 1);
    });
    ASSERT_FALSE(errors.empty());
    EXPECT_NE(errors.front().find("shfl.sync"), std::string::npos) << errors.front();
  }
  {  // a barrier one warp skips
    simt::Device dev;
    const auto errors = dev.launch(1, 64, 0, [] {
      if (threadIdx.x < 32) __syncthreads();
    });
    ASSERT_FALSE(errors.empty());
    EXPECT_NE(errors.front().find("__syncthreads"), std::string::npos) << errors.front();
  }
  {  // cp.async past the shared memory, from outside the buffers, misaligned; a group never waited for
    simt::Device dev;
    dev.add_buffer(global.data(), global.size() * 2, "g", false);
    const auto errors = dev.launch(1, 32, 64, [&] {
      if (threadIdx.x != 0) return;
      unsigned char* s = kernels::dynamic_smem();
      kernels::cp_async16(s + 64, global.data(), true);
      kernels::cp_async16(s, global.data() + 64, true);
      kernels::cp_async16(s + 8, global.data(), true);
      kernels::cp_async16(s, global.data(), true);
      kernels::cp_async_commit();
    });
    ASSERT_EQ(errors.size(), 4u);
    EXPECT_NE(errors[0].find("past the 64 bytes"), std::string::npos) << errors[0];
    EXPECT_NE(errors[1].find("outside every buffer"), std::string::npos) << errors[1];
    EXPECT_NE(errors[2].find("not 16-byte aligned"), std::string::npos) << errors[2];
    EXPECT_NE(errors[3].find("never waited for"), std::string::npos) << errors[3];
  }
  {  // a store into an input
    simt::Device dev;
    dev.add_buffer(global.data(), global.size() * 2, "q", false);
    const auto errors = dev.launch(1, 32, 0, [&] {
      if (threadIdx.x == 0) kernels::st32(const_cast<uint16_t*>(global.data()), 1u);
    });
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("read-only buffer q"), std::string::npos) << errors[0];
  }
}

// A warp whose lane 0 waits at __syncthreads while the others wait in a shuffle for it never finishes: the
// emulator says where each thread is and aborts rather than hang.
TEST(SimtEmulatorDeathTest, DeadlockIsReportedNotHung) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        simt::Device dev;
        dev.set_deadlock_timeout(std::chrono::milliseconds(300));
        (void)dev.launch(1, 32, 0, [] {
          if (threadIdx.x == 0)
            __syncthreads();
          else
            (void)__shfl_xor_sync(0xffffffffu, 1.0f, 1);
        });
      },
      R"(deadlock in block 0 .*thread 0 \(warp 0 lane 0\): in __syncthreads.*thread 1 \(warp 0 lane 1\): shfl\.sync)");
}
