// The flash variant's entry point: validate, describe the tensors to the kernel, dispatch per ISA.
#include "attention/flash/flash.h"

#include <algorithm>
#include <atomic>
#include <tuple>

#include <fmt/format.h>

#include "attention/variants.h"
#include "attnprof/allocator.h"
#include "attnprof/error.h"
#include "attnprof/isa.h"
#include "attnprof/ops.h"
#include "attnprof/profiler.h"

namespace attnprof {

namespace flash {

ThreadScratch::ThreadScratch(size_t bytes_per_thread, int threads)
    : stride_(footprint(bytes_per_thread, 1)), threads_(threads < 1 ? 1 : threads) {
  base_ = static_cast<char*>(tracked_alloc(footprint(bytes_per_thread, threads_)));
}

ThreadScratch::~ThreadScratch() { tracked_free(base_, stride_ * size_t(threads_)); }

const Body& body() {
  static constexpr Body kScalar{forward_scalar, tiles_scalar, scratch_bytes_scalar};
  static constexpr Body kAvx2{forward_avx2, tiles_avx2, scratch_bytes_avx2};
  static constexpr Body kAvx512{forward_avx512, tiles_avx512, scratch_bytes_avx512};
  switch (best_isa()) {  // asked each time: ATTNPROF_ISA and the tests' overrides change it
    case Isa::AVX512: return kAvx512;
    case Isa::AVX2: return kAvx2;
    case Isa::Scalar: break;
  }
  return kScalar;
}

namespace {
// set_flash_block's sizes, rows << 32 | cols (0 = the body's default), one word: a forward on another thread
// reads both at once, never the rows of one call with the cols of another.
std::atomic<uint64_t> g_block{0};
}  // namespace

}  // namespace flash

std::string flash_block_problem(FlashBlock b) {
  const flash::BodyTiles t = flash::body().tiles();
  for (const auto& [what, n, multiple] : {std::tuple{"query blocks of", b.rows, t.row_multiple},
                                          std::tuple{"key blocks of", b.cols, t.col_multiple}}) {
    if (n < 1 || n > kFlashMaxBlock)
      return fmt::format("the flash kernel takes {} 1 to {}, got {}", what, kFlashMaxBlock, n);
    if (n % multiple != 0)
      return fmt::format("the {} flash body takes {} a multiple of {}, got {}", isa_name(best_isa()), what, multiple,
                         n);
  }
  return "";
}

void set_flash_block(FlashBlock b) {
  const bool reset = b.rows == 0 && b.cols == 0;
  if (const std::string why = reset ? "" : flash_block_problem(b); !why.empty()) ATTNPROF_FAIL("{}", why);
  flash::g_block.store(uint64_t(b.rows) << 32 | uint64_t(b.cols), std::memory_order_relaxed);
}

FlashBlock flash_block_default() {
  const flash::BodyTiles t = flash::body().tiles();
  return {t.rows, t.cols};
}

FlashBlock flash_block() {
  const uint64_t word = flash::g_block.load(std::memory_order_relaxed);
  const FlashBlock set{int64_t(word >> 32), int64_t(word & 0xffffffffu)};
  return set.rows > 0 ? set : flash_block_default();
}

bool flash_block_is_default() {
  const FlashBlock b = flash_block(), d = flash_block_default();
  return b.rows == d.rows && b.cols == d.cols;
}

int64_t flash_block_rows() { return flash_block().rows; }

FlashTiles flash_tiles(const AttnProblem& p, int64_t br, int64_t bc, int64_t panel) {
  ATTNPROF_CHECK(br > 0 && bc > 0 && panel > 0, "flash_tiles needs positive block sizes, got {} x {} (panel {})", br,
                 bc, panel);
  FlashTiles t;
  t.block_rows = br;
  t.block_cols = bc;
  t.panel_rows = panel;
  t.q_blocks = (p.Nq + br - 1) / br;
  t.kv_blocks = (p.Nk + bc - 1) / bc;
  const bool causal = p.mask == MaskKind::Causal;
  for (int64_t qb = 0; qb < t.q_blocks; ++qb) {
    const int64_t i0 = qb * br, rows = std::min(br, p.Nq - i0);
    // As the bodies loop: causal (top-left) keys up to the block's last row, else all.
    const int64_t kv_end = causal ? std::min(p.Nk, i0 + rows) : p.Nk;
    for (int64_t j0 = 0; j0 < kv_end; j0 += bc) {
      ++t.computed;
      const int64_t cols = std::min(bc, kv_end - j0);
      const bool diagonal = causal && j0 + cols - 1 > i0;
      if (diagonal) ++t.diagonal;
      // Each panel's keys, as the SIMD bodies' scores() clamps them: those its last row sees.
      for (int64_t r0 = 0; r0 < rows; r0 += panel) {
        const int64_t kc = diagonal ? std::clamp<int64_t>(i0 + r0 + panel - j0, 0, cols) : cols;
        t.scores += double(std::min(panel, rows - r0)) * double(kc);
      }
    }
  }
  return t;
}

FlashTiles flash_tiles(const AttnProblem& p) {
  const FlashBlock b = flash_block();
  const int64_t panel = flash::body().tiles().panel_rows;
  return flash_tiles(p, b.rows, b.cols, panel > 0 ? panel : b.rows);
}

std::string describe_flash_tiles(const FlashTiles& t, const AttnProblem& p) {
  const int64_t skipped = t.pairs() - t.computed;
  const double all = double(p.Nq) * double(p.Nk);
  std::string s = fmt::format("tiles of {} query rows × {} keys: per head {} of {} tile pairs visited", t.block_rows,
                              t.block_cols, t.computed, t.pairs());
  if (skipped > 0) s += fmt::format(", {} above the diagonal skipped", skipped);
  // "it" only where the clause before named the diagonal.
  const char* diagonal = skipped > 0 ? "it" : "the diagonal";
  if (t.diagonal > 0)
    s += t.panel_rows < t.block_rows
             ? fmt::format(", the {} that straddle {} computed up to it in panels of {} rows", t.diagonal, diagonal,
                           t.panel_rows)
             : fmt::format(", the {} that straddle {} computed whole and masked", t.diagonal, diagonal);
  s += fmt::format(": Q·Kᵀ computes {:.1f} % of the {}×{} scores", 100.0 * t.scores / all, p.Nq, p.Nk);
  if (p.mask == MaskKind::Causal)
    s += fmt::format(" (causal needs {:.1f} %)", 100.0 * causal_visible_pairs(p.Nq, p.Nk) / all);
  return s;
}

double flash_bytes(const AttnProblem& p, int64_t br) {
  // Q and O once; K and V rows once per Q block that reads them: every key without a mask, causal only the
  // keys up to the block's last row (top-left: none past Nq).
  ATTNPROF_CHECK(br > 0, "flash_bytes needs a positive block height, got {}", br);
  const double es = double(dtype_size(p.dtype));
  const int64_t q_blocks = (p.Nq + br - 1) / br;
  double kv_rows = 0.0;  // K (or V) rows read, summed over the Q blocks
  for (int64_t qb = 0; qb < q_blocks; ++qb)
    kv_rows += p.mask == MaskKind::Causal ? double(std::min(p.Nk, std::min(p.Nq, (qb + 1) * br))) : double(p.Nk);
  const double qo = 2.0 * es * double(p.B * p.Hq * p.Nq * p.D);
  const double kv = 2.0 * es * double(p.B * p.Hq * p.D) * kv_rows;
  // An explicit mask is read through its strides, its broadcast dims from cache: its own size once, as the
  // elementwise ops count it (what a copy of it reads).
  const double m = p.mask == MaskKind::Bool || p.mask == MaskKind::Additive
                       ? ops::copy_cost(p.mask_shape, p.mask_dtype, p.mask_dtype).bytes_read
                       : 0.0;
  return qo + kv + m + double(p.B * p.Hq * p.Nq) * 4.0;  // + logsumexp
}

namespace {
// O and its fp32 logsumexp: what a flash forward writes, and allocates beside its scratch.
double flash_output_bytes(const AttnProblem& p) {
  return double(dtype_size(p.dtype) * p.B * p.Hq * p.Nq * p.D) + 4.0 * double(p.B * p.Hq * p.Nq);
}
}  // namespace

OpCost flash_cost(const AttnProblem& p, int64_t block_rows) {
  // Written: O and the fp32 logsumexp; read: the rest (Q, K/V per block, the mask).
  const double written = flash_output_bytes(p);
  return fused_attention_cost(p, flash_bytes(p, block_rows) - written, written);
}

OpCost flash_cost(const AttnProblem& p) { return flash_cost(p, flash_block_rows()); }

double flash_peak_bytes(const AttnProblem& p) {
  const FlashBlock b = flash_block();
  const size_t scratch = flash::body().scratch_bytes(p.D, b.rows, b.cols);
  // The threads as the bodies take them: one when the call is one task.
  const int64_t br = b.rows, tasks = p.B * p.Hq * ((p.Nq + br - 1) / br);
  return flash_output_bytes(p) + double(flash::ThreadScratch::footprint(scratch, tasks > 1 ? ops::num_threads() : 1));
}

void check_flash_fits(const AttnProblem& p, std::string_view what) {
  check_memory_budget(flash_peak_bytes(p), fmt::format("{} at {} (its output and per-thread scratch)", what, p.str()),
                      kSmallerShapeHint);
}

AttnOutput flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnOptions& o) {
  ATTNPROF_OP_ZONE(z, "flash_attention_fwd");
  const AttnProblem p = AttnProblem::from(q, k, v, o);
  // The block sizes this forward runs, checked against the body that runs it (ATTNPROF_ISA may have changed).
  const FlashBlock block = flash_block();
  if (const std::string why = flash_block_problem(block); !why.empty()) ATTNPROF_FAIL("{}", why);
  ATTNPROF_CHECK(p.D <= variants::kFlashMaxHeadDim, "the flash kernel supports head dims up to {}, got D={}",
                 variants::kFlashMaxHeadDim, p.D);
  z.add_shape(q.shape(), dtype_name(q.dtype()).data());
  z.add_shape(k.shape(), dtype_name(k.dtype()).data());
  z.add_shape(v.shape(), dtype_name(v.dtype()).data());
  z.set_cost(flash_cost(p, block.rows));  // the blocks this forward runs, read once above
  const Tensor qc = q.stride(3) == 1 ? q : q.contiguous();
  const Tensor kc = k.stride(3) == 1 ? k : k.contiguous();
  const Tensor vc = v.stride(3) == 1 ? v : v.contiguous();
  AttnOutput out{Tensor::empty({p.B, p.Hq, p.Nq, p.D}, p.dtype), Tensor::empty({p.B, p.Hq, p.Nq, 1}, DType::F32)};
  flash::Params fp;
  fp.B = p.B, fp.Hq = p.Hq, fp.Hkv = p.Hkv, fp.Nq = p.Nq, fp.Nk = p.Nk, fp.D = p.D;
  fp.dtype = p.dtype;
  fp.scale = float(p.effective_scale());
  fp.mask = p.mask;
  fp.q = qc.raw(), fp.k = kc.raw(), fp.v = vc.raw(), fp.o = out.out.raw();
  fp.lse = out.lse.data<float>();
  fp.qs = qc.strides(), fp.ks = kc.strides(), fp.vs = vc.strides(), fp.os = out.out.strides();
  fp.br = block.rows, fp.bc = block.cols;
  Tensor mask;
  if (p.mask == MaskKind::Bool || p.mask == MaskKind::Additive) {
    // The kernels read a mask through its strides, so broadcast dims stay stride 0 and are never made
    // B·Hq·Nq·Nk. Only a mask whose keys are not adjacent (a transposed view) is copied, at its own shape.
    mask = o.attn_mask.shape(3) > 1 && o.attn_mask.stride(3) != 1 ? o.attn_mask.contiguous() : o.attn_mask;
    mask = mask.expand({p.B, p.Hq, p.Nq, p.Nk});
    fp.mask_ptr = mask.raw();
    fp.mask_dtype = mask.dtype();
    fp.ms = mask.strides();
  }
  flash::body().forward(fp);
  return out;
}

namespace variants {

namespace {
class FlashRunner final : public Runner {
 public:
  FlashRunner(const AttnProblem& p, const AttnOptions& o) : o_(o) { check_flash_fits(p, "flash"); }
  AttnOutput run(const Tensor& q, const Tensor& k, const Tensor& v) override { return flash_attention(q, k, v, o_); }

 private:
  AttnOptions o_;
};
}  // namespace

std::unique_ptr<Runner> make_flash(const AttnProblem& p, const AttnOptions& o) {
  return std::make_unique<FlashRunner>(p, o);
}

}  // namespace variants
}  // namespace attnprof
