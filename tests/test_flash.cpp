// The flash kernel beyond the generic registry test (test_attention.cpp): every head-dim remainder of the
// micro-kernels, one query row against a long key sequence, logsumexp accuracy, masks that empty whole rows,
// non-contiguous inputs, and the memory contract (no N×N buffer: peak growth bounded by output + scratch).
// Every case runs on every ISA target of this CPU (AVX-512 runs bf16 through vdpbf16ps where the CPU has
// AVX512_BF16; AVX2 converts bf16 to fp32 while packing; scalar is the portable fallback).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "attnprof/allocator.h"
#include "attnprof/attention.h"
#include "attnprof/error.h"
#include "attnprof/isa.h"
#include "attnprof/ops.h"

using namespace attnprof;

namespace {

struct Inputs {
  Tensor q, k, v;
  AttnOptions opt;
};

Inputs make(int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nk, int64_t D, DType t, bool causal,
            uint64_t seed = 7) {
  Inputs in;
  in.q = Tensor::empty({B, Hq, Nq, D}, t);
  in.k = Tensor::empty({B, Hkv, Nk, D}, t);
  in.v = Tensor::empty({B, Hkv, Nk, D}, t);
  fill_randn(in.q, seed);
  fill_randn(in.k, seed + 1);
  fill_randn(in.v, seed + 2);
  in.opt.is_causal = causal;
  return in;
}

const Tolerance kLseTol{1e-4, 1e-5};

// Runs flash on the ISA chosen now and checks output and logsumexp against the fp64 reference.
void check_this_isa(const Inputs& in, const Reference& ref, const std::string& what) {
  const Tolerance tol = find_variant("flash").tolerance(in.q.dtype());
  const AttnOutput out = flash_attention(in.q, in.k, in.v, in.opt);
  const ErrorStats e = compare_to_reference(out.out, ref, tol);
  EXPECT_TRUE(e.ok()) << what << " isa=" << isa_name(best_isa()) << ": " << e.violations << " of " << e.count
                      << " out of tolerance, max_abs=" << e.max_abs;
  const ErrorStats el = compare_lse(out.lse, ref, kLseTol);
  EXPECT_TRUE(el.ok()) << what << " isa=" << isa_name(best_isa()) << ": lse max_abs=" << el.max_abs;
}

// ... on every ISA.
void check_all_isas(const Inputs& in, const std::string& what) {
  const Reference ref = reference_attention(in.q, in.k, in.v, in.opt);
  for (Isa isa : available_isas()) {
    IsaOverride use(isa);
    check_this_isa(in, ref, what);
  }
}

}  // namespace

// D from 16 to 256 in steps that hit every remainder of the vector width (16 and 8 lanes), of the 4-vector
// P·V micro-tile, and odd D (bf16 pairs padded with a zero).
TEST(Flash, EveryHeadDimTail) {
  for (int64_t D : {16, 17, 23, 24, 31, 33, 40, 48, 63, 65, 72, 80, 96, 100, 112, 127, 136, 160, 176, 200, 255, 256})
    for (DType t : {DType::F32, DType::BF16, DType::F16})
      for (bool causal : {false, true}) {
        // Nq = 131 covers a full 128-row block, a ragged block and 6-row micro-tile remainders.
        Inputs in = make(1, 2, 1, 131, 75, D, t, causal, uint64_t(D));
        check_all_isas(in, fmt::format("D={} {} {}", D, dtype_name(t), causal ? "causal" : "none"));
      }
}

TEST(Flash, OneQueryRowLongKeys) {
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    Inputs in = make(1, 2, 2, 1, 4096, 64, t, false);
    check_all_isas(in, fmt::format("Nq=1 Nk=4096 {}", dtype_name(t)));
    // Causal is top-left aligned: the single query sees key 0 only, so the output is v[0].
    in.opt.is_causal = true;
    check_all_isas(in, fmt::format("Nq=1 Nk=4096 causal {}", dtype_name(t)));
    const AttnOutput o = flash_attention(in.q, in.k, in.v, in.opt);
    for (int64_t d = 0; d < 64; ++d) EXPECT_NEAR(o.out.get(0, 1, 0, d), in.v.get(0, 1, 0, d), 1e-2);
  }
}

TEST(Flash, LongSequenceAndRaggedCausal) {
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    check_all_isas(make(1, 1, 1, 1500, 1500, 64, t, true), fmt::format("N=1500 causal {}", dtype_name(t)));
    check_all_isas(make(1, 2, 1, 300, 1100, 128, t, true), fmt::format("Nq<Nk causal GQA {}", dtype_name(t)));
    check_all_isas(make(1, 2, 2, 700, 129, 40, t, true), fmt::format("Nq>Nk causal {}", dtype_name(t)));
  }
}

// Causal lengths on both sides of every block and vector boundary (16-lane row groups, 64-key blocks,
// 256-row query blocks), where a diagonal block's row groups see all, part or none of its keys.
TEST(Flash, CausalBlockBoundaries) {
  const int64_t lengths[] = {1, 17, 63, 65, 255, 257, 330};
  for (DType t : {DType::F32, DType::BF16})
    for (int64_t nq : lengths)
      for (int64_t nk : lengths)
        check_all_isas(make(1, 1, 1, nq, nk, 24, t, true, uint64_t(nq * 1000 + nk)),
                       fmt::format("Nq={} Nk={} causal {}", nq, nk, dtype_name(t)));
}

TEST(Flash, LogsumexpMatchesReference) {
  // Scores of magnitude ~30 (scale 4): the running max and exp2 range reduction must keep lse exact.
  Inputs in = make(2, 2, 2, 200, 333, 32, DType::F32, false);
  in.opt.scale = 4.0;
  check_all_isas(in, "large scale");
}

// Scaled scores of magnitude ~1e11 (q times 1e10, fp32): every exponent must stay <= 0. An FMA
// s·scale - round(max·scale) gives the row maximum the rounding residual as its exponent, past exp2's range at
// this size, and the row becomes inf or NaN.
TEST(Flash, HugeScoresStayFinite) {
  for (bool causal : {false, true}) {
    Inputs in = make(1, 2, 2, 100, 100, 32, DType::F32, causal, 5);
    float* q = static_cast<float*>(in.q.raw());
    for (int64_t i = 0; i < in.q.numel(); ++i) q[i] *= 1e10f;
    check_all_isas(in, fmt::format("q x 1e10 {}", causal ? "causal" : "none"));
  }
}

// The kernel applies a positive scale inside the exponent and finds the row maxima on unscaled scores; a
// negative scale reverses their order and takes the other path (scores scaled first). Both against fp64,
// causal (diagonal blocks) and not, fp32 and bf16, on every ISA.
TEST(Flash, PositiveAndNegativeScales) {
  for (double scale : {0.3, -0.3, -4.0})
    for (DType t : {DType::F32, DType::BF16})
      for (bool causal : {false, true}) {
        Inputs in = make(1, 2, 2, 300, 300, 64, t, causal, 11);
        in.opt.scale = scale;
        check_all_isas(in, fmt::format("scale={} {} {}", scale, dtype_name(t), causal ? "causal" : "none"));
      }
}

TEST(Flash, MasksThatEmptyRows) {
  for (DType t : {DType::F32, DType::BF16}) {
    // Additive mask with -inf over every key of rows 3 and 70 (row 70 in the second Q block); others random.
    Inputs in = make(1, 2, 2, 140, 90, 48, t, false);
    in.opt.attn_mask = Tensor::empty({1, 1, 140, 90}, DType::F32);
    fill_randn(in.opt.attn_mask, 99);
    for (int64_t j = 0; j < 90; ++j) {
      in.opt.attn_mask.set(0, 0, 3, j, -std::numeric_limits<float>::infinity());
      in.opt.attn_mask.set(0, 0, 70, j, -std::numeric_limits<float>::infinity());
    }
    check_all_isas(in, fmt::format("additive -inf rows {}", dtype_name(t)));
    for (Isa isa : available_isas()) {
      IsaOverride use(isa);
      const AttnOutput o = flash_attention(in.q, in.k, in.v, in.opt);
      for (int64_t d = 0; d < 48; ++d) EXPECT_EQ(o.out.get(0, 1, 70, d), 0.0f) << isa_name(isa);
      EXPECT_TRUE(std::isinf(o.lse.get(0, 1, 3, 0)) && o.lse.get(0, 1, 3, 0) < 0) << isa_name(isa);
    }
    // Bool mask whose only visible key of row 5 is the last one of the second K block.
    Inputs b = make(1, 1, 1, 10, 130, 24, t, false);
    b.opt.attn_mask = Tensor::full({1, 1, 10, 130}, DType::Bool, 1.0f);
    for (int64_t j = 0; j < 130; ++j) b.opt.attn_mask.set(0, 0, 5, j, j == 127 ? 1.0f : 0.0f);
    check_all_isas(b, fmt::format("bool single key {}", dtype_name(t)));
  }
}

// A mask broadcast over any dim is read through stride 0, never expanded to B·Hq·Nq·Nk: a per-query mask
// [1,1,N,1] (every key of a row kept or dropped), a key-padding mask [B,1,1,N] and a transposed [1,1,N,N]
// view all give the reference's output, and the forward's peak grows by at most the output, the logsumexp,
// the per-thread scratch and one copy of the mask at its own shape.
TEST(Flash, BroadcastMasksAreReadInPlace) {
  const int64_t B = 2, H = 4, N = 1024, D = 32;
  Tensor per_query = Tensor::empty({1, 1, N, 1}, DType::Bool);
  Tensor key_pad = Tensor::empty({B, 1, 1, N}, DType::F32);
  Tensor square = Tensor::empty({1, 1, N, N}, DType::F32);
  for (int64_t i = 0; i < N; ++i) {
    per_query.set(0, 0, i, 0, i % 7 == 3 ? 0.0f : 1.0f);
    for (int64_t b = 0; b < B; ++b) key_pad.set(b, 0, 0, i, i >= N - 100 * (b + 1) ? -1e4f : 0.0f);
  }
  fill_randn(square, 11);
  struct Case {
    const char* what;
    Tensor mask;
  };
  for (const Case& c : {Case{"per-query bool [1,1,N,1]", per_query}, Case{"key padding [B,1,1,N]", key_pad},
                        Case{"transposed [1,1,N,N]", square.transpose()}}) {
    Inputs in = make(B, H, H, N, N, D, DType::F32, false);
    in.opt.attn_mask = c.mask;
    const Reference ref = reference_attention(in.q, in.k, in.v, in.opt);
    for (Isa isa : available_isas()) {
      IsaOverride use(isa);
      const int64_t live = memory_stats().current_bytes;
      reset_peak_memory();
      AttnOutput out = flash_attention(in.q, in.k, in.v, in.opt);
      const int64_t growth = memory_stats().peak_bytes - live;
      const int64_t bound = int64_t(out.out.nbytes() + out.lse.nbytes() + c.mask.nbytes()) +
                            int64_t(ops::num_threads()) * (1 << 20);
      EXPECT_LE(growth, bound) << c.what << " isa=" << isa_name(isa);
      const ErrorStats e = compare_to_reference(out.out, ref, find_variant("flash").tolerance(DType::F32));
      EXPECT_TRUE(e.ok()) << c.what << " isa=" << isa_name(isa) << ": max_abs=" << e.max_abs;
    }
  }
}

TEST(Flash, NonContiguousInputs) {
  // k given as the transpose of a [B, H, D, N] tensor: last-dim stride != 1.
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    Inputs in = make(1, 2, 2, 65, 65, 40, t, true);
    Tensor kt = Tensor::empty({1, 2, 40, 65}, t);
    fill_randn(kt, 5);
    in.k = kt.transpose();
    check_all_isas(in, fmt::format("transposed k {}", dtype_name(t)));
  }
}

// Flash allocates no N×N buffer: during a forward the tracked peak grows by at most the output, the
// logsumexp and 1 MiB of scratch per thread, far below one head's N×N scores (16 MiB at N = 2048).
TEST(Flash, PeakMemoryIsOutputPlusScratch) {
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (int64_t D : {64, 256}) {
      Inputs in = make(1, 4, 4, 2048, 2048, D, t, true);
      const int64_t live = memory_stats().current_bytes;
      reset_peak_memory();
      AttnOutput out = flash_attention(in.q, in.k, in.v, in.opt);
      const int64_t growth = memory_stats().peak_bytes - live;
      const int64_t bound = int64_t(out.out.nbytes() + out.lse.nbytes()) + int64_t(ops::num_threads()) * (1 << 20);
      EXPECT_GT(growth, int64_t(out.out.nbytes()));
      EXPECT_LE(growth, bound) << dtype_name(t) << " D=" << D;
      EXPECT_LT(growth, 2048 * 2048 * 4);
    }
}

// How a head is tiled, as the bodies loop: causal, the tile pairs wholly above the diagonal are skipped, and in
// those that straddle it each panel of rows computes the keys its last row sees (the SIMD bodies' panels; the
// scalar body's panel is its block, so it computes such a tile whole); without a mask every score.
TEST(Flash, TilesCountWhatTheBodiesCompute) {
  AttnProblem p;
  p.B = 8, p.Hq = p.Hkv = 16, p.Nq = p.Nk = 1024, p.D = 64;
  p.dtype = DType::BF16;
  p.mask = MaskKind::Causal;
  FlashTiles t = flash_tiles(p, 256, 64, 64);
  EXPECT_EQ(t.q_blocks, 4);
  EXPECT_EQ(t.kv_blocks, 16);
  EXPECT_EQ(t.computed, 4 + 8 + 12 + 16);  // block qb reads the keys up to its last row
  EXPECT_EQ(t.diagonal, 16);               // the 4 key blocks under each 256-row block's diagonal
  // Per block: qb·4 whole tiles left of the diagonal, then its 4 straddling tiles computed by 4, 3, 2, 1 panels.
  EXPECT_EQ(t.scores, 4 * (4 + 3 + 2 + 1) * 64.0 * 64 + (0 + 1 + 2 + 3) * 4 * 256.0 * 64);
  EXPECT_EQ(describe_flash_tiles(t, p),
            "tiles of 256 query rows × 64 keys: per head 40 of 64 tile pairs visited, 24 above the diagonal skipped, "
            "the 16 that straddle it computed up to it in panels of 64 rows: Q·Kᵀ computes 53.1 % of the 1024×1024 "
            "scores (causal needs 50.0 %)");
  // The scalar body: 64-row blocks that are their own panel, the straddling tile computed whole.
  t = flash_tiles(p, 64, 64, 64);
  EXPECT_EQ(t.computed, 16 * 17 / 2);
  EXPECT_EQ(t.diagonal, 16);
  EXPECT_EQ(t.scores, 136 * 64.0 * 64);
  EXPECT_NE(describe_flash_tiles(t, p).find("the 16 that straddle it computed whole and masked"), std::string::npos);
  // One block of queries: nothing to skip, so the clause names the diagonal itself.
  p.Nq = p.Nk = 256;
  t = flash_tiles(p, 256, 64, 64);
  EXPECT_EQ(t.computed, t.pairs());
  EXPECT_EQ(describe_flash_tiles(t, p),
            "tiles of 256 query rows × 64 keys: per head 4 of 4 tile pairs visited, the 4 that straddle the diagonal "
            "computed up to it in panels of 64 rows: Q·Kᵀ computes 62.5 % of the 256×256 scores (causal needs 50.0 %)");
  // Ragged, more keys than queries (top-left): the last 44-row block reads keys 0..299.
  p.Nq = 300, p.Nk = 700;
  t = flash_tiles(p, 256, 64, 64);
  EXPECT_EQ(t.pairs(), 2 * 11);
  EXPECT_EQ(t.computed, 4 + 5);
  EXPECT_EQ(t.diagonal, 4 + 1);
  EXPECT_EQ(t.scores, 10 * 64.0 * 64 + 4 * 44.0 * 64 + 44.0 * 44);
  p.mask = MaskKind::None;
  t = flash_tiles(p, 256, 64, 64);
  EXPECT_EQ(t.computed, t.pairs());
  EXPECT_EQ(t.diagonal, 0);
  EXPECT_EQ(t.scores, 300.0 * 700);
  EXPECT_EQ(describe_flash_tiles(t, p), "tiles of 256 query rows × 64 keys: per head 22 of 22 tile pairs visited: "
                                        "Q·Kᵀ computes 100.0 % of the 300×700 scores");
  // The body that runs sets the tiles.
  for (Isa isa : available_isas()) {
    IsaOverride use(isa);
    EXPECT_EQ(flash_tiles(p).block_rows, flash_block_rows()) << isa_name(isa);
    EXPECT_EQ(flash_tiles(p).block_cols, 64) << isa_name(isa);
    EXPECT_EQ(flash_tiles(p).panel_rows, isa == Isa::Scalar ? 64 : isa == Isa::AVX2 ? 16 : 64) << isa_name(isa);
  }
}

// The bytes model follows the body that runs: K and V stream once per query block, 256 rows in the SIMD
// bodies and 64 in the scalar one, so the scalar kernel reads them about four times as often. An explicit
// mask adds its own size once.
TEST(Flash, BytesModelFollowsTheBlockHeightOfTheBodyThatRuns) {
  AttnProblem p;
  p.B = 2, p.Hq = p.Hkv = 3, p.Nq = p.Nk = 1024, p.D = 64;
  p.dtype = DType::BF16;
  p.mask = MaskKind::Causal;
  const double qo = 2.0 * 2 * p.B * p.Hq * p.Nq * p.D, lse = 4.0 * p.B * p.Hq * p.Nq;
  auto kv = [&](double rows) { return 2.0 * 2 * p.B * p.Hq * p.D * rows; };
  // Causal: block qb reads the keys up to its last row.
  EXPECT_DOUBLE_EQ(flash_bytes(p, 256), qo + kv(256 + 512 + 768 + 1024) + lse);
  EXPECT_DOUBLE_EQ(flash_bytes(p, 64), qo + kv(64.0 * (16 * 17 / 2)) + lse);
  for (Isa isa : available_isas()) {
    IsaOverride use(isa);
    const int64_t want = isa == Isa::Scalar ? 64 : 256;
    EXPECT_EQ(flash_block_rows(), want) << isa_name(isa);
    EXPECT_DOUBLE_EQ(flash_cost(p).bytes(), flash_bytes(p, want)) << isa_name(isa);
    // What the kernel writes is O and the logsumexp; the rest is read. The variants' cost and the zone's agree.
    EXPECT_DOUBLE_EQ(flash_cost(p).bytes_written, qo / 2 + lse) << isa_name(isa);
  }
  AttnProblem m = p;
  m.mask = MaskKind::Additive;
  m.mask_shape = {1, 1, p.Nq, p.Nk};
  m.mask_dtype = DType::F32;
  EXPECT_DOUBLE_EQ(flash_bytes(m, 256), qo + kv(4.0 * 1024) + 4.0 * p.Nq * p.Nk + lse);
  EXPECT_THROW(flash_bytes(p, 0), Error);
}

namespace {
// Sets the flash kernel's blocks for one scope and returns to the defaults after it (a failed test too).
struct BlockOverride {
  explicit BlockOverride(FlashBlock b) { set_flash_block(b); }
  ~BlockOverride() { set_flash_block({0, 0}); }
  BlockOverride(const BlockOverride&) = delete;
  BlockOverride& operator=(const BlockOverride&) = delete;
};
}  // namespace

// Block sizes chosen at run time (--flash-block): every size a body takes gives the reference's output and
// logsumexp, with ragged ends on both sides (N = 300 against blocks that do not divide it), causal or not, and
// bf16 or fp32 (vdpbf16ps pairs keys, so a body's key blocks are even). The cost model, the tile count and the
// peak memory follow the blocks that run.
TEST(Flash, EveryBlockSizeABodyTakesMatchesTheReference) {
  for (Isa isa : available_isas()) {
    IsaOverride use(isa);
    const FlashBlock dflt = flash_block_default();
    // Sizes from the smallest each body takes to past the problem, its multiples kept.
    const std::vector<FlashBlock> blocks =
        isa == Isa::Scalar ? std::vector<FlashBlock>{{1, 1}, {7, 5}, {33, 64}, {512, 3}}
        : isa == Isa::AVX2 ? std::vector<FlashBlock>{{16, 2}, {48, 30}, {128, 128}, {512, 64}}
                           : std::vector<FlashBlock>{{64, 2}, {64, 64}, {128, 30}, {192, 96}, {512, 512}};
    for (const FlashBlock b : blocks)
      for (DType t : {DType::F32, DType::BF16})
        for (bool causal : {true, false}) {
          const Inputs in = make(1, 2, 2, 300, 300, 40, t, causal);
          const Reference ref = reference_attention(in.q, in.k, in.v, in.opt);
          BlockOverride set(b);
          EXPECT_EQ(flash_block().rows, b.rows);
          EXPECT_EQ(flash_block().cols, b.cols);
          const AttnOutput out = flash_attention(in.q, in.k, in.v, in.opt);
          const std::string what = fmt::format("{} {}x{} {} causal={}", isa_name(isa), b.rows, b.cols, dtype_name(t),
                                               causal);
          const ErrorStats e = compare_to_reference(out.out, ref, find_variant("flash").tolerance(t));
          EXPECT_TRUE(e.ok()) << what << ": " << e.violations << " of " << e.count << ", max_abs=" << e.max_abs;
          EXPECT_TRUE(compare_lse(out.lse, ref, kLseTol).ok()) << what;
          const AttnProblem p = AttnProblem::from(in.q, in.k, in.v, in.opt);
          EXPECT_DOUBLE_EQ(flash_cost(p).bytes(), flash_bytes(p, b.rows)) << what;
          EXPECT_EQ(flash_tiles(p).block_rows, b.rows) << what;
          EXPECT_EQ(flash_tiles(p).block_cols, b.cols) << what;
        }
    // Grouped heads, Nq != Nk both ways, an odd head dim, fp16 and an explicit mask, on one size of each body.
    {
      BlockOverride set(blocks[1]);
      const std::string size = fmt::format("{}x{}", blocks[1].rows, blocks[1].cols);
      Inputs masked = make(2, 2, 2, 130, 140, 48, DType::BF16, false);
      masked.opt.attn_mask = Tensor::empty({1, 1, 130, 140}, DType::F32);
      fill_randn(masked.opt.attn_mask, 5);
      for (const auto& [in, what] : std::vector<std::pair<Inputs, std::string>>{
               {make(1, 4, 2, 130, 333, 33, DType::F16, true), "gqa fp16 causal 130x333"},
               {make(1, 2, 1, 333, 130, 24, DType::BF16, true), "causal 333x130"},
               {masked, "additive mask"}})
        check_this_isa(in, reference_attention(in.q, in.k, in.v, in.opt), size + " " + what);
    }
    // Back to the defaults with {0, 0}.
    EXPECT_EQ(flash_block().rows, dflt.rows) << isa_name(isa);
    EXPECT_TRUE(flash_block_is_default());
  }
}

// A size a body cannot take is refused by name, and the blocks stay as they were; a body chosen after the
// blocks were set (ATTNPROF_ISA) refuses to run them rather than overrunning its scratch.
TEST(Flash, BlockSizesABodyCannotTakeAreRefused) {
  EXPECT_NE(flash_block_problem({0, 64}).find("query blocks of 1 to 1024, got 0"), std::string::npos);
  EXPECT_NE(flash_block_problem({64, 2000}).find("key blocks of 1 to 1024, got 2000"), std::string::npos);
  for (Isa isa : available_isas()) {
    if (isa == Isa::Scalar) continue;
    IsaOverride use(isa);
    const int64_t rows = isa == Isa::AVX2 ? 16 : 64;
    EXPECT_EQ(flash_block_problem({rows + 8, 64}),
              fmt::format("the {} flash body takes query blocks of a multiple of {}, got {}", isa_name(isa), rows,
                          rows + 8));
    EXPECT_NE(flash_block_problem({rows, 63}).find("key blocks of a multiple of 2, got 63"), std::string::npos);
    EXPECT_THROW(set_flash_block({rows + 8, 64}), Error);
    EXPECT_TRUE(flash_block_is_default()) << "a refused size leaves the blocks as they were";
  }
  {
    IsaOverride scalar(Isa::Scalar);
    BlockOverride set({7, 5});  // the scalar body takes any size
    for (Isa isa : available_isas()) {
      if (isa == Isa::Scalar) continue;
      IsaOverride use(isa);
      const Inputs in = make(1, 1, 1, 64, 64, 32, DType::F32, true);
      try {
        (void)flash_attention(in.q, in.k, in.v, in.opt);
        ADD_FAILURE() << isa_name(isa) << " ran blocks of 7 rows";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("query blocks of a multiple of"), std::string::npos) << e.what();
      }
    }
  }
}
