// attnprof/attention.h: attention the ways practitioners write it, one registry of variants, and the
// fp64 reference they are all checked against.
//
//   AttnOptions opt{.is_causal = true};
//   Tensor o = scaled_dot_product_attention(q, k, v, opt, SdpaBackend::Auto);
//
//   for (const Variant& v : registry()) {                   // naive, inplace, sdpa-math, sdpa-flash, flash
//     AttnProblem p = AttnProblem::from(q, k, v_, opt);
//     if (auto why = v.unsupported(p)) continue;            // a reason string when it cannot run
//     auto runner = v.prepare(p, opt);                       // one-time set-up (the blog's mask built once)
//     AttnOutput out = runner->run(q, k, v_);
//     ErrorStats e = compare_to_reference(out.out, reference_attention(q, k, v_, opt), v.tolerance(p.dtype));
//   }
//
// Shapes: q [B, Hq, Nq, D], k and v [B, Hkv, Nk, D] with Hq % Hkv == 0 (grouped-query attention).
// Masks follow PyTorch's scaled_dot_product_attention: is_causal is top-left aligned (query i sees keys
// j <= i); a Bool attn_mask is true where attention is allowed; an fp32 attn_mask is added to the scores;
// masks broadcast as [B|1, H|1, Nq, Nk]; is_causal and attn_mask together are an error. A query row that
// can see no key at all gives zeros (and logsumexp -inf), as PyTorch's flash kernels do.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnprof/cost.h"
#include "attnprof/tensor.h"

namespace attnprof {

enum class MaskKind { None, Causal, Bool, Additive };
std::string_view mask_kind_name(MaskKind m);

struct AttnOptions {
  bool is_causal = false;
  Tensor attn_mask;              // optional: Bool (true = attend) or additive fp32/bf16
  std::optional<double> scale;   // default 1/sqrt(D)
};

struct AttnOutput {
  Tensor out;  // [B, Hq, Nq, D], the input dtype
  Tensor lse;  // [B, Hq, Nq, 1] fp32 natural-log logsumexp of the scaled, masked scores; empty if not produced
};

// The shape-level description of one attention call: what cost models and support checks read.
struct AttnProblem {
  int64_t B = 1, Hq = 1, Hkv = 1, Nq = 1, Nk = 1, D = 64;
  DType dtype = DType::F32;
  MaskKind mask = MaskKind::None;
  Shape4 mask_shape{1, 1, 1, 1};  // for Bool/Additive masks
  DType mask_dtype = DType::Bool;  // an additive mask's dtype (fp32, or the problem's half type) is billed by add
  double scale = 0.0;             // 0 = 1/sqrt(D)

  double effective_scale() const;
  std::string str() const;  // "B=8 Hq=16 Hkv=16 Nq=1024 Nk=1024 D=64 bf16 causal"
  // Validates q/k/v/options (shapes, dtypes, head dims, GQA, mask broadcast, empties) and describes them.
  static AttnProblem from(const Tensor& q, const Tensor& k, const Tensor& v, const AttnOptions& o);
  // The same checks and description from shapes alone, for tensors of `dtype` (the CUDA backend's device
  // tensors); the caller has checked the dtypes.
  static AttnProblem from_shapes(const Shape4& q, const Shape4& k, const Shape4& v, DType dtype, const AttnOptions& o);
};

// FlashAttention's FLOP convention: 4·B·Hq·Nq·Nk·D for the forward, halved when causal (Nq == Nk).
// With Nq != Nk, causal counts the pairs the top-left aligned mask leaves visible: Nq²/2 when Nq <= Nk
// (keys past Nq are never seen), Nq·Nk − Nk²/2 when Nq > Nk (rows past Nk see every key) — not half of
// Nq·Nk, which would be 32× too many at Nq=128, Nk=4096.
// Every variant reports these "useful" FLOPs so that GFLOP/s compare across variants.
double attention_flops(const AttnProblem& p);
// The area of the visible region of an nq × nk causal (top-left) score matrix, diagonal counted half.
double causal_visible_pairs(int64_t nq, int64_t nk);
// The cost of a fused kernel (flash, cuDNN): attention_flops, all on bf16 dot-product units for a bf16 problem
// (its two GEMMs; the softmax's arithmetic is outside the convention), and the bytes it moves.
OpCost fused_attention_cost(const AttnProblem& p, double bytes_read, double bytes_written);
// Bytes of q, k, v and the output: the floor any implementation must move.
double attention_io_bytes(const AttnProblem& p);

// --- reference -------------------------------------------------------------------------------------
struct Reference {
  Shape4 shape{};            // of the output
  std::vector<double> out;   // row-major [B, Hq, Nq, D]
  std::vector<double> lse;   // [B, Hq, Nq]
  // The largest |score| (q·k times the scale, plus an additive mask) over the visible pairs: how far a half-
  // precision score stored between ops is from its value, which says why an unfused bf16 path can miss.
  double max_abs_score = 0.0;
};
// Plain fp64 attention straight from the definition (the oracle every variant is validated against).
Reference reference_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnOptions& o);
// What reference_attention holds while it computes p: its fp64 output and logsumexp, and K and V in fp64
// (4× bf16 inputs of the same shape); the per-thread rows are negligible.
double reference_bytes(const AttnProblem& p);

struct Tolerance {
  double atol = 0.0;
  double rtol = 0.0;
};

struct ErrorStats {
  double max_abs = 0.0;       // max |x - ref|
  double max_rel = 0.0;       // max |x - ref| / max(|ref|, 1e-6): large where ref ≈ 0, see tol_used
  double tol_used = 0.0;      // max |x - ref| / (atol + rtol·|ref|): the margin to the tolerance (ok at <= 1)
  double nmse = 0.0;          // sum (x-ref)^2 / sum ref^2
  int64_t violations = 0;     // elements with |x - ref| > atol + rtol·|ref| (or non-finite)
  int64_t non_finite = 0;     // elements that are NaN or ±inf: then max_abs, max_rel, tol_used and nmse are inf
  int64_t count = 0;
  bool ok() const { return violations == 0; }
};
ErrorStats compare_to_reference(const Tensor& out, const Reference& ref, const Tolerance& tol);
ErrorStats compare_lse(const Tensor& lse, const Reference& ref, const Tolerance& tol);

// --- SDPA --------------------------------------------------------------------------------------------
enum class SdpaBackend { Auto, Math, Flash };
SdpaBackend parse_sdpa_backend(std::string_view s);  // auto|math|flash, else Error
std::string_view sdpa_backend_name(SdpaBackend b);
// nullopt when `b` can serve the problem, else the reason (explicit backends that cannot serve are errors).
std::optional<std::string> sdpa_backend_unsupported(SdpaBackend b, const AttnProblem& p);
// What Auto picks for this problem: the fastest backend that supports it.
SdpaBackend sdpa_select_backend(const AttnProblem& p);
// What Auto picks and, when it is not flash, why: "sdpa (auto) selects flash", "sdpa (auto) selects math: the
// flash backend supports head dims up to 256, got D=320". PyTorch warns when it falls back; so do the tools.
std::string sdpa_selection_note(const AttnProblem& p);
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnOptions& o,
                                    SdpaBackend backend = SdpaBackend::Auto);

// --- the hand-written FlashAttention-2-style CPU kernel ---------------------------------------------
AttnOutput flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnOptions& o);
// Bytes a flash kernel moves: Q and O once, K and V once per block of `block_rows` queries that visits them,
// an explicit mask once at its own size, and the logsumexp.
double flash_bytes(const AttnProblem& p, int64_t block_rows);
// The CPU flash kernel's block sizes: `rows` queries against `cols` keys per tile. Process-wide, as the thread
// count is (ops::set_num_threads); {0, 0} means the tuned default of the body best_isa() runs (256 × 64 for
// AVX2/AVX-512, 64 × 64 scalar). The CUDA kernel's are its own (src/cuda).
struct FlashBlock {
  int64_t rows = 0, cols = 0;
};
inline constexpr int64_t kFlashMaxBlock = 1024;  // per side: a thread's scratch grows with rows × cols
// The bodies' defaults (measured: docs/performance.md, "Tile sizes").
inline constexpr FlashBlock kFlashSimdDefaultBlock{256, 64};   // AVX2, AVX-512
inline constexpr FlashBlock kFlashScalarDefaultBlock{64, 64};
// "" when the body best_isa() runs takes `b`, else why not, naming the size: "the avx512 flash body takes query
// blocks of a multiple of 64, got 100".
std::string flash_block_problem(FlashBlock b);
// Sets the block sizes of every later CPU flash forward (flash, sdpa-flash), or with {0, 0} returns to the
// defaults: Error when flash_block_problem names a problem. flash_attention checks them again (ATTNPROF_ISA may
// choose another body after this call).
void set_flash_block(FlashBlock b);
FlashBlock flash_block();          // what the next CPU flash forward runs: the set sizes, else the defaults
FlashBlock flash_block_default();  // the defaults of the body best_isa() runs
bool flash_block_is_default();     // no sizes set (or the set ones are the defaults)
// The query block height the next CPU flash forward runs (flash_block().rows).
int64_t flash_block_rows();
// How a flash forward tiles one head: blocks of `block_rows` queries against blocks of `block_cols` keys. Causal,
// the pairs wholly above the diagonal are skipped; in a pair that straddles it each panel of `panel_rows` rows
// computes the keys its last row sees (the scalar body: the whole tile, its panel being its block).
struct FlashTiles {
  int64_t block_rows = 0, block_cols = 0, panel_rows = 0;
  int64_t q_blocks = 0, kv_blocks = 0;  // per head
  int64_t computed = 0;                 // (Q block, K/V block) pairs one head visits
  int64_t diagonal = 0;                 // of those, the pairs some of whose scores are masked (causal)
  double scores = 0;                    // (query, key) scores one head's Q·Kᵀ computes, padded rows left out
  int64_t pairs() const { return q_blocks * kv_blocks; }
};
FlashTiles flash_tiles(const AttnProblem& p, int64_t block_rows, int64_t block_cols, int64_t panel_rows);
FlashTiles flash_tiles(const AttnProblem& p);  // the CPU body best_isa() runs, at flash_block()
// "tiles of 256 query rows × 64 keys: per head 40 of 64 tile pairs visited, 24 above the diagonal skipped, the
// 16 that straddle it computed up to it in panels of 64 rows: Q·Kᵀ computes 56.2 % of the N×N scores (causal
// needs 50.0 %)" — what profile prints for the flash variants.
std::string describe_flash_tiles(const FlashTiles& t, const AttnProblem& p);
// A fused forward's cost model (the flash variants, SDPA's flash backend, cuDNN): fused_attention_cost with
// flash_bytes, O and the logsumexp written and the rest read; the one-argument form for the CPU kernel, the
// other for a GPU kernel's thread-block height.
OpCost flash_cost(const AttnProblem& p);
OpCost flash_cost(const AttnProblem& p, int64_t block_rows);
// Bytes one CPU flash forward allocates beyond its inputs at its peak: the output, its fp32 logsumexp and every
// thread's scratch (page-rounded, for the threads a call at this size runs on); O(N·D), never N×N. A copy made
// of an input or mask whose last dim is not contiguous comes on top.
double flash_peak_bytes(const AttnProblem& p);
// OutOfBudget, named after `what` ("flash", "SDPA flash backend"), when flash_peak_bytes does not fit beside
// what is live: the check the flash variants' prepare makes.
void check_flash_fits(const AttnProblem& p, std::string_view what);

// What a refusal over the memory budget suggests for the paths that hold N×N scores (naive, inplace,
// sdpa-math): one sentence, the same from the library and the command line.
inline constexpr const char* kNoScoresHint = "try flash or sdpa-flash, which need no N×N buffer";
// ... and for everything else over it (the inputs, their reference, flash's output).
inline constexpr const char* kSmallerShapeHint = "run a smaller --shape";

// --- the registry ------------------------------------------------------------------------------------
class Runner {
 public:
  virtual ~Runner() = default;
  virtual AttnOutput run(const Tensor& q, const Tensor& k, const Tensor& v) = 0;
};

struct Variant {
  std::string name;        // "naive", "inplace", "sdpa-math", "sdpa-flash", "flash"
  std::string backend;     // "cpu"
  std::string annotation;  // the record_function name the blog used: attn_fwd, sdpa_fwd, flash_kernel_fwd
  std::string summary;     // one line for --help and reports
  std::function<std::optional<std::string>(const AttnProblem&)> unsupported;  // reason, or nullopt
  std::function<OpCost(const AttnProblem&)> cost;  // whole forward: attention FLOPs, bytes moved
  std::function<Tolerance(DType)> tolerance;
  // One-time set-up outside the timed region (e.g. the causal mask the blog builds once). May throw
  // OutOfBudget when the variant would not fit in the memory budget.
  std::function<std::unique_ptr<Runner>(const AttnProblem&, const AttnOptions&)> prepare;
  // Bytes one forward allocates beyond its inputs at its worst moment: the figure prepare checks against the
  // memory budget, here so a caller can check it before drawing gigabytes of inputs. Empty where it is not
  // host memory (the CUDA variants, whose prepare checks the device's).
  std::function<double(const AttnProblem&)> peak_bytes = nullptr;
};

const std::vector<Variant>& registry();
const Variant& find_variant(std::string_view name);  // Error listing the known names when not found
std::string variant_names();                         // "naive, inplace, sdpa-math, sdpa-flash, flash"
std::vector<std::string> variant_name_list(const std::vector<Variant>& reg);  // reg's names, in its order

// Bytes the naive (or in-place) path allocates at its peak beyond its inputs q, k and v, which the caller
// already holds (the budget check adds the live bytes to it). matmul_scratch is the most either matmul
// allocates beside its operands: naive_matmul_scratch_bytes(p) on the CPU (the widened half-precision
// sgemm's fp32 panels), 0 on a GPU, where cuBLAS's workspace is not ours.
double naive_peak_bytes(const AttnProblem& p, bool inplace, double matmul_scratch);
double naive_matmul_scratch_bytes(const AttnProblem& p);
// The same for SDPA's math backend, which computes in fp32 (see sdpa.cpp for its moments).
double sdpa_math_peak_bytes(const AttnProblem& p);

}  // namespace attnprof
