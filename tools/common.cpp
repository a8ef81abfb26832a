#include "common.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>

#include <fmt/ranges.h>

#include "attnprof/allocator.h"
#include "attnprof/cuda.h"
#include "attnprof/html.h"
#include "attnprof/error.h"
#include "attnprof/npy.h"
#include "attnprof/isa.h"
#include "attnprof/ops.h"
#include "attnprof/report.h"

namespace attnprof::cli {
namespace {

// f(), with an error it throws prefixed by the option (or variable) whose value caused it: the library's
// parsers ("unsupported dtype 'int8'") do not know which option the user typed.
template <class F>
auto with_option(std::string_view option, F&& f) {
  try {
    return f();
  } catch (const OutOfBudget&) {
    throw;
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", option, e.what()));
  }
}

}  // namespace

std::optional<__int128> plain_decimal(std::string_view s) {
  const bool neg = !s.empty() && s[0] == '-';
  const std::string_view digits = s.substr(neg ? 1 : 0);
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  constexpr __int128 kPastAnyRange = (__int128(1) << 64) + 1;
  __int128 v = 0;
  for (char c : digits) {
    v = v * 10 + (c - '0');
    if (v >= kPastAnyRange) {
      v = kPastAnyRange;
      break;
    }
  }
  return neg ? -v : v;
}

namespace {

// One field of --shape (a leading '-' is read, to say the field must be positive). Errors quote the whole
// value and name the field.
int64_t parse_shape_field(const std::string& shape, const std::string& field, const char* name) {
  if (field.empty()) ATTNPROF_FAIL("malformed --shape '{}': {} is empty", shape, name);
  const std::optional<__int128> v = plain_decimal(field);
  if (!v) ATTNPROF_FAIL("malformed --shape '{}': {} ('{}') is not a decimal integer", shape, name, field);
  constexpr __int128 kMax = std::numeric_limits<int64_t>::max();
  if (*v > kMax || *v < -kMax)
    ATTNPROF_FAIL("malformed --shape '{}': {} ('{}') is out of range: expected 1..{}", shape, name, field,
                  std::numeric_limits<int64_t>::max());
  if (*v <= 0) ATTNPROF_FAIL("--shape '{}': {} must be positive, got {}", shape, name, int64_t(*v));
  return int64_t(*v);
}

Shape4 parse_shape(const std::string& s) {
  const std::vector<std::string> parts = split_list(s);
  if (parts.size() != 4) ATTNPROF_FAIL("malformed --shape '{}': expected B,H,N,D (four positive integers)", s);
  static const char* names[4] = {"B", "H", "N", "D"};
  Shape4 out{};
  for (int i = 0; i < 4; ++i) out[size_t(i)] = parse_shape_field(s, parts[size_t(i)], names[i]);
  return out;
}

// --memory-budget: plain decimal digits, then at most one unit letter K, M, G or T (either case; binary, 1K =
// 1024 bytes), nothing else: no sign, space, fraction, exponent, hex or "B"/"iB" suffix. Past 9e18 bytes is too
// large (int64_t holds 9.2e18).
int64_t parse_bytes(const std::string& s) {
  std::string_view digits = s;
  int shift = 0;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      case 'T': case 't': shift = 40; break;
      default: break;
    }
    if (shift > 0) digits.remove_suffix(1);
  }
  const std::optional<__int128> v = digits.starts_with('-') ? std::nullopt : plain_decimal(digits);
  if (!v)
    ATTNPROF_FAIL("malformed --memory-budget '{}': expected a whole number of bytes, optionally followed by one unit "
                  "letter K, M, G or T (1K = 1024), e.g. 8G, 512M or 1073741824",
                  s);
  const __int128 bytes = *v << shift;  // *v is at most 2^64 + 1: no overflow
  if (bytes < 1) ATTNPROF_FAIL("--memory-budget must be a positive size, got '{}'", s);
  constexpr __int128 kMaxBudget = __int128(9'000'000'000'000'000'000ULL);
  if (bytes > kMaxBudget) ATTNPROF_FAIL("--memory-budget '{}' is too large: at most 9e18 bytes (about 7.8 EiB)", s);
  return int64_t(bytes);
}

}  // namespace

bool use_files(const CommonOptions& o) { return !o.q_path.empty() || !o.k_path.empty() || !o.v_path.empty(); }

int hardware_threads() { return ops::available_cpus(); }

std::string oversubscribed_line(int threads) {
  const int cpus = hardware_threads();
  if (threads <= cpus) return "";
  return fmt::format("Oversubscribed: {} on the {} attnprof may run on: the threads of each parallel op took "
                     "turns on them, so the op waited for the last (the threads' Working falls), whatever else ran; "
                     "--threads {} gives each thread a CPU.\n",
                     threads_text(threads), cpus_text(cpus), cpus);
}

std::string uneven_text(const analysis::KeyAverages& ka) {
  std::string text;
  for (const std::string& line : report::uneven_op_notes(ka)) text += line + "\n";
  return text;
}

namespace {
// A count as libgomp reads OMP_NUM_THREADS's items and OMP_THREAD_LIMIT (strtoul in base 10 between white space):
// an optional '+', decimal digits, 1 .. 2^63 - 1. nullopt for what OpenMP ignores ("abc", "0", "-1", "2x", a
// value past 2^63).
std::optional<int64_t> openmp_count(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  s.remove_prefix(std::min(s.size(), s.find_first_not_of(kSpace)));
  s.remove_suffix(s.size() - std::min(s.size(), s.find_last_not_of(kSpace) + 1));
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  const std::optional<__int128> n = plain_decimal(s);
  if (!n || *n < 1 || *n > std::numeric_limits<int64_t>::max()) return std::nullopt;
  return int64_t(*n);
}
}  // namespace

int default_threads() {
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (!env) return std::min(hardware_threads(), ops::thread_limit());  // set but empty: OpenMP ignores it, refused
  // OpenMP reads a comma-separated list, one count per nesting level; the first is the team attnprof runs. A list
  // with an element that is no positive count ("1,", "2,abc", "1,0") is ignored whole by OpenMP: refused here.
  const std::string_view value(env);
  const int limit = hardware_threads() * 4;
  const auto refuse = [&] {
    ATTNPROF_FAIL("OMP_NUM_THREADS='{}' is not a thread count attnprof runs (1..{}: at most 4 × the {} CPUs it may "
                  "use; a list, one positive count per nesting level, as OpenMP reads it); without --threads "
                  "attnprof follows it, as OpenMP does: correct or unset it, or pass --threads",
                  value, limit, hardware_threads());
  };
  std::optional<int64_t> first;
  for (size_t at = 0;;) {
    const size_t comma = value.find(',', at);
    const std::optional<int64_t> n =
        openmp_count(value.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at));
    if (!n) refuse();
    if (!first) first = n;
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  if (*first > limit) refuse();
  return std::min(int(*first), ops::thread_limit());
}

CLI::Validator decimal_check(std::string flag, __int128 lo, __int128 hi, std::string note) {
  return CLI::Validator(
      [flag = std::move(flag), lo, hi, note = std::move(note)](const std::string& s) -> std::string {
        const std::optional<__int128> v = plain_decimal(s);
        if (!v) ATTNPROF_FAIL("{} '{}' is not a decimal integer", flag, s);
        if (*v < lo || *v > hi)
          ATTNPROF_FAIL("{} '{}' is out of range: expected {}..{}{}", flag, s, lo, hi, note.empty() ? "" : " " + note);
        return std::string();
      },
      "", kDecimalCheck);
}

void add_common_options(CLI::App* sub, CommonOptions& o, const Defaults& d) {
  o.shape_opt = sub->add_option("--shape", o.shape, "B,H,N,D of the queries (default: the blog's 8,16,1024,64)");
  add_integer_option<int64_t>(sub, "--kv-len", o.kv_len, "key/value sequence length (default: N)", 1);
  add_integer_option<int64_t>(sub, "--kv-heads", o.kv_heads, "key/value heads for grouped-query attention (default: H)",
                              1);
  o.dtype_opt = sub->add_option("--dtype", o.dtype, "fp32 | bf16 | fp16 (default: bf16, as the blog)");
  // Two flags rather than CLI11's "--causal,!--no-causal", whose help line reads "--causal,--no-causal{false}".
  // CLI11 runs flag callbacks in the order they are defined, not given, so both at once is refused.
  auto causal_flag = [&o](bool on) {
    if (o.causal_flag_seen && o.causal != on) throw CLI::ValidationError("--causal and --no-causal contradict each other");
    o.causal_flag_seen = true;
    o.causal = on;
  };
  sub->add_flag_callback("--causal", [=] { causal_flag(true); }, "causal mask (the default, as the blog)");
  sub->add_flag_callback("--no-causal", [=] { causal_flag(false); }, "no mask: every query sees every key");
  const int max_threads = hardware_threads() * 4;
  add_integer_option(sub, "--threads", o.threads,
                     fmt::format("threads for OpenMP and BLAS, 1..{} (default, or 0: OMP_NUM_THREADS when set, as "
                                 "OpenMP and PyTorch read it, else the {} attnprof may run on)",
                                 max_threads, cpus_text(hardware_threads())),
                     0, max_threads,
                     fmt::format("(0: OMP_NUM_THREADS, else the {} attnprof may run on; at most 4 × {})",
                                 cpus_text(hardware_threads()), hardware_threads()));
  if (o.warmup < 0) o.warmup = d.warmup;
  if (o.iters < 0) o.iters = d.iters;
  o.warmup_opt = add_integer_option(sub, "--warmup", o.warmup,
                                    fmt::format("warm-up forwards before timing (default {}, on the CPU then more until "
                                                "{:g} s of them have run, more on a machine of many CPUs: what "
                                                "/proc/stat needs to tell whether other work shared them; given, "
                                                "exactly this many)",
                                                d.warmup, kWarmupFloorS),
                                    0, kMaxForwards);
  o.iters_opt = add_integer_option(sub, "--iters", o.iters, "timed forwards", 1, kMaxForwards,
                     "(every profiled forward is kept in memory until the run ends)")
      ->capture_default_str();
  // Checked here, not by CLI11, which reads -1 as 2^64-1 and clamps 2^64 to 2^64-1.
  o.seed_opt = add_integer_option(sub, "--seed", o.seed, "seed of the random inputs (q: seed, k: seed+1, v: seed+2)");
  o.seed_opt->capture_default_str();
  CLI::Option* json = sub->add_flag("--json", o.json, "print machine-readable JSON on stdout (progress stays on stderr)");
  sub->add_flag("--brief", o.brief,
                "print the tables and what the run found (speed-ups, checks, warnings) without the lines that define "
                "the columns; the .txt files keep them")
      ->excludes(json);
  sub->add_flag("--html", o.html, "also write report.html (charts of every result in --out; see attnprof report)");
  sub->add_option("--flash-block", o.flash_block,
                  // The bodies' defaults, not the running one's: asking the body reads ATTNPROF_ISA, whose error
                  // belongs to the run, not to building the options.
                  fmt::format("the CPU flash kernel's blocks (flash, sdpa-flash): ROWSxCOLS queries × keys per tile, "
                              "each 1..{} (default {}x{} on AVX2 and AVX-512, {}x{} scalar; AVX-512 rows are a "
                              "multiple of 64, AVX2 rows of 16, and both take an even number of keys)",
                              kFlashMaxBlock, kFlashSimdDefaultBlock.rows, kFlashSimdDefaultBlock.cols,
                              kFlashScalarDefaultBlock.rows, kFlashScalarDefaultBlock.cols));
  sub->add_option("--out", o.out, "output directory")->capture_default_str();
  sub->add_option("--memory-budget", o.memory_budget,
                  "bytes the inputs, their fp64 reference and what a forward allocates may use together: digits, "
                  "optionally followed by K, M, G or T (1K = 1024), e.g. 8G (default: physical memory, or this process's "
                  "cgroup memory limit, or what its address-space limit (ulimit -v) leaves, where smaller)");
  if (d.file_inputs) {
    sub->add_option("--q", o.q_path, "queries from a .npy file [B,H,Nq,D] (<f4 fp32, <f2 fp16, <u2 bf16 bits, <f8 -> fp32)");
    sub->add_option("--k", o.k_path, "keys from a .npy file [B,Hkv,Nk,D]");
    sub->add_option("--v", o.v_path, "values from a .npy file [B,Hkv,Nk,D]");
  }
  if (d.save_output)
    sub->add_option("--save-output", o.save_output, "write the attention output to this .npy file");
  if (d.traces)
    sub->add_flag("--gzip", o.gzip, "write traces gzip-compressed (<variant>.trace.json.gz; Perfetto opens them as they are)");
}

void check_flash_block_applies(const CommonOptions& o, const std::vector<const Variant*>& variants,
                               const std::string& asked) {
  if (o.flash_block.empty()) return;
  if (asked == "sdpa" && variants.size() == 1 && variants.front()->name == "sdpa-math")
    ATTNPROF_FAIL("--flash-block sets the CPU flash kernel's blocks, and sdpa selects its math backend here, which "
                  "does not run it (--backend flash does, where the problem allows it)");
  if (runs_cpu_flash(variants)) return;
  std::vector<std::string> names;
  for (const Variant* v : variants) names.push_back(v->name);
  const std::string last = names.back();
  names.pop_back();
  ATTNPROF_FAIL("--flash-block sets the CPU flash kernel's blocks, which {}{} run (flash and sdpa-flash do)",
                names.empty() ? last : fmt::format("{} and {}", fmt::join(names, ", "), last),
                names.empty() ? " does not" : " do not");
}

bool runs_cpu_flash(const std::vector<const Variant*>& variants) {
  return std::any_of(variants.begin(), variants.end(),
                     [](const Variant* v) { return v->name == "flash" || v->name == "sdpa-flash"; });
}

std::string flash_block_note(const std::vector<FlashBlock>& several) {
  if (several.size() > 1) {
    std::vector<std::string> each;
    for (const FlashBlock& b : several) each.push_back(fmt::format("{}×{}", b.rows, b.cols));
    return fmt::format(", flash blocks {}", fmt::join(each, ", "));
  }
  if (flash_block_is_default()) return "";
  const FlashBlock b = flash_block();
  return fmt::format(", flash blocks {}×{}", b.rows, b.cols);
}

double warmup_floor_s(const CommonOptions& o) {
  // At least the stretch /proc/stat needs to judge the other work beside the forwards (0.1 s on 2 CPUs, more
  // on many), so a default run is never too short to say whether it shared the CPUs.
  return o.warmup_opt && o.warmup_opt->count() > 0 ? 0.0 : std::max(kWarmupFloorS, analysis::other_work_min_seconds());
}

std::string trace_file(const std::string& variant, const CommonOptions& o) {
  return variant + (o.gzip ? ".trace.json.gz" : ".trace.json");
}

void remove_other_format_trace(const std::string& out, const std::string& variant, const CommonOptions& o) {
  CommonOptions other = o;
  other.gzip = !o.gzip;
  std::error_code ec;
  std::filesystem::remove(out_path(out, trace_file(variant, other)), ec);
}

// OMP_THREAD_LIMIT as OpenMP reads it (openmp_count). Anything else OpenMP ignores
// with a warning, as no limit at all, and attnprof would follow it there without a word: refused, as a bad
// OMP_NUM_THREADS is.
void check_thread_limit_variable() {
  const char* env = std::getenv("OMP_THREAD_LIMIT");
  if (!env) return;  // set but empty, OpenMP ignores it too: refused below
  if (!openmp_count(env))
    ATTNPROF_FAIL("OMP_THREAD_LIMIT='{}' is not a thread count (one positive integer, as OpenMP reads it): OpenMP "
                  "ignores it, as no limit at all; correct or unset it",
                  env);
}

namespace {
// One ROWSxCOLS of --flash-block: two plain decimal counts (an 'x' or '×' between them), checked against the
// body that runs.
FlashBlock parse_flash_block(const std::string& s) {
  const size_t x = s.find('x') != std::string::npos ? s.find('x') : s.find("×");
  const size_t after = x == std::string::npos ? x : x + (s[x] == 'x' ? 1 : std::string_view("×").size());
  const auto digits = [](std::string_view d) {
    return !d.empty() && std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  const std::string_view rows = x == std::string::npos ? "" : std::string_view(s).substr(0, x);
  const std::string_view cols = x == std::string::npos ? "" : std::string_view(s).substr(after);
  ATTNPROF_CHECK(digits(rows) && digits(cols),
                 "--flash-block '{}' is not ROWSxCOLS (query rows by keys per tile, e.g. 128x64)", s);
  // Past nine digits no count is in range: said as the range, without parsing what may overflow.
  for (const auto& [what, d] : {std::pair{"query blocks of", rows}, std::pair{"key blocks of", cols}})
    if (d.size() > 9)
      ATTNPROF_FAIL("--flash-block {}: the flash kernel takes {} 1 to {}, got {}", s, what, kFlashMaxBlock, d);
  const FlashBlock b{std::stoll(std::string(rows)), std::stoll(std::string(cols))};
  if (const std::string why = flash_block_problem(b); !why.empty()) ATTNPROF_FAIL("--flash-block {}: {}", s, why);
  return b;
}
}  // namespace

std::vector<FlashBlock> flash_blocks(const CommonOptions& o) {
  std::vector<FlashBlock> blocks;
  if (o.flash_block.empty()) return blocks;
  for (const std::string& item : split_list(o.flash_block)) {
    ATTNPROF_CHECK(!item.empty(), "--flash-block '{}' holds an empty size (two commas in a row, or one at an end)",
                   o.flash_block);
    const FlashBlock b = parse_flash_block(item);
    for (const FlashBlock& seen : blocks)
      ATTNPROF_CHECK(seen.rows != b.rows || seen.cols != b.cols, "--flash-block names {}x{} twice", b.rows, b.cols);
    blocks.push_back(b);
  }
  return blocks;
}

void apply_runtime_options(const CommonOptions& o, bool gpu, bool block_list) {
  check_thread_limit_variable();
  if (!o.flash_block.empty()) {
    ATTNPROF_CHECK(!gpu, "--flash-block sets the CPU flash kernel's blocks; the CUDA kernel's are chosen per head dim "
                         "(drop it, or --device cuda)");
    const std::vector<FlashBlock> blocks = flash_blocks(o);
    ATTNPROF_CHECK(blocks.size() == 1 || block_list,
                   "--flash-block '{}' names {} sizes: this command runs one (compare runs the flash variants once "
                   "per size of a list)", o.flash_block, blocks.size());
    if (blocks.size() == 1) set_flash_block(blocks.front());
  }
  const int limit = hardware_threads() * 4;
  if (o.threads != 0 && (o.threads < 1 || o.threads > limit))
    ATTNPROF_FAIL("--threads {} is out of range: expected 1..{} (4 × the {} attnprof may run on)", o.threads,
                  limit, cpus_text(hardware_threads()));
  if (o.threads > ops::thread_limit())
    ATTNPROF_FAIL("--threads {} is more than OMP_THREAD_LIMIT={} lets an OpenMP team have: pass --threads {} or less, "
                  "or raise or unset OMP_THREAD_LIMIT",
                  o.threads, ops::thread_limit(), ops::thread_limit());
  ops::set_num_threads(o.threads == 0 ? default_threads() : o.threads);
  // The option checks refuse these first (add_common_options); kept for callers that fill CommonOptions.
  if (o.warmup < 0 || o.warmup > kMaxForwards)
    ATTNPROF_FAIL("--warmup {} is out of range: expected 0..{}", o.warmup, kMaxForwards);
  if (o.iters < 1 || o.iters > kMaxForwards)
    ATTNPROF_FAIL("--iters {} is out of range: expected 1..{} (every profiled forward is kept in memory until the "
                  "run ends)",
                  o.iters, kMaxForwards);
  set_memory_budget(o.memory_budget.empty() ? 0 : parse_bytes(o.memory_budget));
  (void)with_option("ATTNPROF_ISA", [] { return best_isa(); });  // a bad override, before any work
}

AttnProblem problem_of(const CommonOptions& o, int64_t seq) {
  const Shape4 s = parse_shape(o.shape);
  const int64_t B = s[0], Hq = s[1], Nq = seq > 0 ? seq : s[2], D = s[3];
  const int64_t Hkv = o.kv_heads > 0 ? o.kv_heads : Hq, Nk = seq > 0 ? seq : (o.kv_len > 0 ? o.kv_len : Nq);
  const DType dtype = with_option("--dtype", [&] { return parse_dtype(o.dtype); });
  if (Hq % Hkv != 0) ATTNPROF_FAIL("--kv-heads {} must divide the query heads H={} (grouped-query attention)", Hkv, Hq);
  // The library's own checks, as for tensors read from files: a shape past what its sizes can count among them.
  AttnOptions opt;
  opt.is_causal = o.causal;
  return AttnProblem::from_shapes({B, Hq, Nq, D}, {B, Hkv, Nk, D}, {B, Hkv, Nk, D}, dtype, opt);
}

double input_bytes(const AttnProblem& p) {
  return double(dtype_size(p.dtype)) * double(p.B) * double(p.D) *
         (double(p.Hq) * double(p.Nq) + 2.0 * double(p.Hkv) * double(p.Nk));
}

void check_forward_fits(const Variant& v, const AttnProblem& p, bool with_reference) {
  const double inputs = input_bytes(p), reference = with_reference ? reference_bytes(p) : 0.0,
               forward = v.peak_bytes ? v.peak_bytes(p) : 0.0;
  // The N×N scores are the usual excess, and flash then the way out; else the inputs and the reference are.
  check_memory_budget(inputs + reference + forward,
                      fmt::format("{} at {} (its inputs, {} bytes{}{})", v.name, p.str(), byte_count(inputs),
                                  with_reference ? fmt::format(", their fp64 reference, {} bytes", byte_count(reference))
                                                 : std::string(),
                                  forward > 0 ? fmt::format(", and what one forward allocates beyond them, {} bytes",
                                                            byte_count(forward))
                                              : std::string()),
                      // flash suggested only to a variant that needs more than flash would
                      forward > inputs + reference && forward > flash_peak_bytes(p) ? kNoScoresHint
                                                                                    : kSmallerShapeHint);
  if (with_reference) check_reference_work(p, double(p.B) * double(p.Hq));  // before the inputs are drawn
}

Inputs make_inputs(const CommonOptions& o, int64_t seq, bool with_reference) {
  Inputs in;
  in.opt.is_causal = o.causal;
  if (use_files(o)) {
    if (o.q_path.empty() || o.k_path.empty() || o.v_path.empty())
      ATTNPROF_FAIL("--q, --k and --v must be given together");
    if (o.shape_opt && o.shape_opt->count() > 0)
      ATTNPROF_FAIL("--shape conflicts with --q/--k/--v: the shapes come from the files");
    if (o.kv_len > 0 || o.kv_heads > 0)
      ATTNPROF_FAIL("--kv-len/--kv-heads conflict with --q/--k/--v: the shapes come from the files");
    if (o.seed_opt && o.seed_opt->count() > 0)
      ATTNPROF_FAIL("--seed conflicts with --q/--k/--v: it seeds random inputs, and the inputs come from the files");
    // The files are read whole: their sizes against the budget first, as the random inputs' are.
    double file_bytes = 0.0;
    for (const std::string* path : {&o.q_path, &o.k_path, &o.v_path}) {
      std::error_code ec;
      const auto n = std::filesystem::file_size(*path, ec);
      if (!ec) file_bytes += double(n);
    }
    check_memory_budget(file_bytes, fmt::format("reading the input files {}, {}, {}", o.q_path, o.k_path, o.v_path),
                        "pass smaller files");
    in.q = with_option("--q", [&] { return npy::load(o.q_path); });
    in.k = with_option("--k", [&] { return npy::load(o.k_path); });
    in.v = with_option("--v", [&] { return npy::load(o.v_path); });
    // Non-finite values, in the file as it is, then where an explicit --dtype converts the files' data: a finite
    // value past the new type's range (1e5 as fp16) becomes Inf there, the conversion's doing and not the file's.
    const auto check_finite = [&](const char* after) {
      for (const auto& [t, flag, path] :
           {std::tuple<const Tensor&, const char*, const std::string&>{in.q, "--q", o.q_path},
            {in.k, "--k", o.k_path},
            {in.v, "--v", o.v_path}})
        if (const std::string bad = nonfinite_summary(t); !bad.empty())
          ATTNPROF_FAIL("{} {} holds {} ({}): attention of NaN or Inf inputs cannot be validated against the fp64 "
                        "reference",
                        flag, path,
                        after ? fmt::format("values {} cannot hold: converted to it (--dtype {}), they are not finite",
                                            dtype_name(t.dtype()), after)
                              : fmt::format("non-finite values as {}", dtype_name(t.dtype())),
                        bad);
    };
    check_finite(nullptr);
    std::string converted;  // "fp32 files converted to bf16": said beside the file names, which name no dtype
    if (o.dtype_opt && o.dtype_opt->count() > 0) {  // an explicit --dtype converts the files' data
      const DType t = with_option("--dtype", [&] { return parse_dtype(o.dtype); });
      std::vector<std::string> from;
      for (const Tensor* x : {&in.q, &in.k, &in.v})
        if (x->dtype() != t && std::find(from.begin(), from.end(), dtype_name(x->dtype())) == from.end())
          from.emplace_back(dtype_name(x->dtype()));
      if (!from.empty()) converted = fmt::format(" ({} converted to {} by --dtype)", fmt::join(from, " and "), dtype_name(t));
      if (in.q.dtype() != t) in.q = in.q.to(t);
      if (in.k.dtype() != t) in.k = in.k.to(t);
      if (in.v.dtype() != t) in.v = in.v.to(t);
      check_finite(o.dtype.c_str());
    }
    if (in.q.dtype() != in.k.dtype() || in.q.dtype() != in.v.dtype())
      ATTNPROF_FAIL("the input files have different dtypes (--q {} {}, --k {} {}, --v {} {}): pass --dtype to "
                    "convert them", o.q_path, dtype_name(in.q.dtype()), o.k_path, dtype_name(in.k.dtype()), o.v_path,
                    dtype_name(in.v.dtype()));
    in.source = fmt::format("files {}, {}, {}{}", o.q_path, o.k_path, o.v_path, converted);
  } else {
    const AttnProblem p = problem_of(o, seq);
    const double bytes = input_bytes(p);
    if (const double reference = reference_bytes(p); with_reference) {
      check_memory_budget(bytes + reference,
                          fmt::format("drawing the random inputs of {} ({} bytes) beside their fp64 reference ({} "
                                      "bytes)",
                                      p.str(), byte_count(bytes), byte_count(reference)),
                          kSmallerShapeHint);
      check_reference_work(p, double(p.B) * double(p.Hq));  // before the inputs are drawn
    }
    else
      check_memory_budget(bytes, fmt::format("the random inputs of {}", p.str()));
    if (bytes >= double(1 << 30))  // seconds of work, before anything else is printed
      progress(fmt::format("drawing {} of random inputs for {}", report::format_bytes_decimal(bytes), p.str()));
    in.q = Tensor::empty({p.B, p.Hq, p.Nq, p.D}, p.dtype);
    in.k = Tensor::empty({p.B, p.Hkv, p.Nk, p.D}, p.dtype);
    in.v = Tensor::empty({p.B, p.Hkv, p.Nk, p.D}, p.dtype);
    fill_randn(in.q, o.seed);
    fill_randn(in.k, o.seed + 1);
    fill_randn(in.v, o.seed + 2);
    in.source = fmt::format("random N(0,1), seed {}", o.seed);
  }
  try {
    in.p = AttnProblem::from(in.q, in.k, in.v, in.opt);
  } catch (const Error& e) {
    if (o.q_path.empty()) throw;
    // Files that disagree with each other: name them, not just the tensors.
    ATTNPROF_FAIL("the input files do not fit together (--q {}, --k {}, --v {}): {}", o.q_path, o.k_path, o.v_path,
                  e.what());
  }
  return in;
}

std::string variants_help() {
  std::string s;
  const auto list = [&s](const char* title, const std::vector<Variant>& r) {
    if (r.empty()) return;
    s += fmt::format("{}{}:\n", s.empty() ? "" : "\n", title);
    for (const Variant& v : r) s += fmt::format("  {:<12}{}\n", v.name, v.summary);
  };
  list("Variants", registry());
  list("Variants with --device cuda", cuda::cuda_registry());
  return s;
}

const Variant& resolve_variant(const std::string& name, const std::string& backend, const AttnProblem& p) {
  const Variant* v = nullptr;
  if (name == "sdpa") {
    const SdpaBackend b = with_option("--backend", [&] {
      if (backend == "cudnn") ATTNPROF_FAIL("'cudnn' is a backend of the CUDA variants: add --device cuda");
      return parse_sdpa_backend(backend.empty() ? "auto" : backend);
    });
    if (auto why = sdpa_backend_unsupported(b, p))
      ATTNPROF_FAIL("SDPA backend '{}' cannot serve {}: {}", sdpa_backend_name(b), p.str(), *why);
    const SdpaBackend chosen = b == SdpaBackend::Auto ? sdpa_select_backend(p) : b;
    v = &find_variant(chosen == SdpaBackend::Flash ? "sdpa-flash" : "sdpa-math");
  } else {
    if (!backend.empty())
      ATTNPROF_FAIL("--backend applies only to the sdpa variant, not to '{}'", name);
    std::vector<std::string> names = variant_name_list(registry());
    const bool known = std::find(names.begin(), names.end(), name) != names.end();
    names.push_back("sdpa");  // the near miss may be the alias
    if (const std::vector<std::string> gpu_names = variant_name_list(cuda::cuda_registry());
        !known && std::find(gpu_names.begin(), gpu_names.end(), name) != gpu_names.end())
      ATTNPROF_FAIL("'{}' is a variant of the CUDA backend: add --device cuda (the CPU's variants are {})", name,
                    variant_names());
    if (!known)
      ATTNPROF_FAIL("unknown variant '{}'{}: expected {}, or sdpa (its backend chosen by --backend)", name,
                    did_you_mean(name, names), variant_names());
    v = &find_variant(name);
  }
  if (auto why = v->unsupported(p)) ATTNPROF_FAIL("variant '{}' cannot run {}: {}", v->name, p.str(), *why);
  return *v;
}

const Variant& resolve_variant_on(bool gpu, const std::string& name, const std::string& backend, const AttnProblem& p) {
  return gpu ? resolve_cuda_variant(name, backend, p) : resolve_variant(name, backend, p);
}

analysis::MachinePeaks host_peaks(int threads, bool remeasure) {
  std::vector<std::string> notes;
  analysis::MachinePeaks m = analysis::machine_peaks(threads, remeasure, &notes);
  for (const std::string& n : notes) progress("attnprof: note: " + n);
  return m;
}

Target host_target(int threads, DType dtype) {
  Target t;
  t.m = host_peaks(threads);
  // Under a forced ISA the library figures are the best ISA's, measured beside the dispatched one's.
  const bool best = t.m.library_isa_differs();
  const double fp32 = best ? t.m.library_fp32_gflops : t.m.fp32_gflops;
  const double bf16 = best ? t.m.library_bf16_gflops : t.m.bf16_gflops;
  t.on_bf16 = dtype == DType::BF16 && bf16 > 0;
  t.peak = t.on_bf16 ? bf16 : fp32;
  t.peak_kind = t.on_bf16 ? "bf16 dot-product" : "fp32 FMA";
  t.peak_isa = best ? t.m.library_isa : t.m.isa;
  return t;
}

std::string dispatch_note(const Target& t) {
  if (!t.peak_above_dispatch()) return "";
  const bool bf16 = t.on_bf16 && t.m.bf16_gflops > 0;  // the dispatched ISA may have no bf16 units (avx2)
  return fmt::format(" Our kernels ran at {} (ATTNPROF_ISA), whose {} peak is {:.1f} GFLOP/s; OpenBLAS and oneDNN "
                     "at {}.",
                     t.m.isa, bf16 ? "bf16 dot-product" : "fp32 FMA", bf16 ? t.m.bf16_gflops : t.m.fp32_gflops,
                     t.peak_isa);
}

std::string over_peak_note(const Target& t, const std::vector<std::string>& over) {
  return report::over_peak_note(t.gpu, over);
}

Target device_target(const cuda::DeviceInfo& dev, DType dtype) {
  Target t;
  t.m = cuda::gpu_peaks(dev);
  t.gpu = true;
  t.peak_isa = t.m.isa;
  t.peak = is_half(dtype) ? t.m.bf16_gflops : t.m.fp32_gflops;
  t.peak_kind = is_half(dtype) ? std::string(dtype_name(dtype)) + " tensor-core datasheet"
                               : std::string("fp32 CUDA-core datasheet");
  return t;
}

bool use_cuda(const std::string& device) {
  ATTNPROF_CHECK(device == "cpu" || device == "cuda", "unknown --device '{}': expected cpu or cuda", device);
  if (device == "cpu") return false;
  ATTNPROF_CHECK(cuda::available(), "--device cuda: {}", cuda::unavailable_reason());
  return true;
}

const Variant& resolve_cuda_variant(const std::string& name, const std::string& backend, const AttnProblem& p) {
  std::string full = name;
  if (name == "sdpa") {
    ATTNPROF_CHECK(backend.empty() || backend == "math" || backend == "cudnn" || backend == "auto",
                   "--backend '{}' with --device cuda: expected math, cudnn or auto", backend);
    const bool cudnn = backend == "cudnn" || ((backend.empty() || backend == "auto") &&
                                              !cuda::find_cuda_variant("sdpa-cudnn").unsupported(p));
    full = cudnn ? "sdpa-cudnn" : "sdpa-math";
  } else {
    ATTNPROF_CHECK(backend.empty(), "--backend applies only to the sdpa variant, not to '{}'", name);
  }
  const Variant& v = cuda::find_cuda_variant(full);
  if (auto why = v.unsupported(p)) ATTNPROF_FAIL("CUDA variant '{}' cannot run {}: {}", v.name, p.str(), *why);
  return v;
}

void check_writable_dir(const std::string& dir, std::string_view what) {
  const std::string why = report::write_probe_error(dir);
  if (!why.empty()) ATTNPROF_FAIL("{} '{}' is not writable: {}", what, dir, why);
}

namespace {
// The directories prepare_out_dir creates, in the order it creates them (each level before the next), where
// a signal handler can read them: no allocation, and rmdir(2) is async-signal-safe and removes a directory
// only while it is empty. A path is entered before its directory is made, so a signal at any moment finds
// every directory the run made; removing them last-made first takes a nest apart from the inside.
constexpr int kMaxCreatedDirs = 16;
char g_created_dirs[kMaxCreatedDirs][PATH_MAX];
std::atomic<int> g_created_dirs_n{0};
}  // namespace

void remove_created_dirs_on_signal() noexcept {
  for (int i = g_created_dirs_n.load(std::memory_order_acquire) - 1; i >= 0; --i) ::rmdir(g_created_dirs[i]);
}

void prepare_out_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // The levels create_directories is about to make, in the order it makes them. The path is walked as written,
  // not normalised: '--out a/../b' makes 'a' on its way to 'b' (as mkdir -p does), and 'a' must be removed with
  // 'b' if the run fails. Behind a level still to be made, '..' can only be resolved by name.
  std::vector<fs::path> to_make;
  fs::path prefix;
  for (const fs::path& part : fs::absolute(dir, ec)) {
    prefix /= part;
    if (ec || part.empty() || part == "." || part == ".." || !prefix.has_relative_path()) continue;
    const bool exists = to_make.empty() ? fs::exists(prefix, ec) : fs::exists(prefix.lexically_normal(), ec);
    if (!exists) to_make.push_back(prefix);
  }
  // A dangling symbolic link is no directory to create: create_directories would say only "File exists".
  for (const fs::path& p : to_make)
    if (fs::is_symlink(fs::symlink_status(p, ec))) {
      std::error_code loop;
      (void)fs::status(p, loop);
      if (loop == std::errc::too_many_symbolic_link_levels)
        ATTNPROF_FAIL("output path '{}' is a symbolic link that never reaches a directory (a loop of links)",
                      p == to_make.back() ? dir : p.string());
      ATTNPROF_FAIL("output path '{}' is a symbolic link to '{}', which does not exist",
                    p == to_make.back() ? dir : p.string(), fs::read_symlink(p, ec).string());
    }
  for (const fs::path& d : to_make) {
    const int n = g_created_dirs_n.load(std::memory_order_relaxed);
    if (n == kMaxCreatedDirs || d.native().size() >= PATH_MAX) break;
    std::memcpy(g_created_dirs[n], d.c_str(), d.native().size() + 1);
    g_created_dirs_n.store(n + 1, std::memory_order_release);
  }
  fs::create_directories(dir, ec);
  if (ec) ATTNPROF_FAIL("cannot create output directory '{}': {}", dir, ec.message());
  if (!std::filesystem::is_directory(dir)) ATTNPROF_FAIL("output path '{}' is not a directory", dir);
  check_writable_dir(dir, "output directory");
  // Directories made above --out's own, as mkdir -p makes them: said, so that a typo in a parent shows now and
  // not as results missing from where they were looked for.
  // Named as --out was given: relative to the working directory when it was relative. --out's own directory
  // is not named (with 'a/b/..', that is 'a', made first; 'a/b' is named).
  std::vector<std::string> also;
  fs::path target = fs::absolute(dir, ec).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();  // 'a/b/' is 'a/b'
  const fs::path cwd = fs::current_path(ec);
  for (const fs::path& made : to_make)
    if (made.lexically_normal() != target)
      also.push_back("'" + (fs::path(dir).is_relative() ? made.lexically_relative(cwd) : made).string() + "'");
  if (!also.empty())
    progress(fmt::format("--out '{}': also made {}, which did not exist", dir, report::spoken_list(also)));
}

void remove_created_dirs_if_empty() noexcept {
  remove_created_dirs_on_signal();
  g_created_dirs_n.store(0, std::memory_order_release);
}

std::string out_path(const std::string& dir, const std::string& file) {
  return (std::filesystem::path(dir) / file).string();
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  const bool same = std::filesystem::equivalent(a, b, ec);
  return same && !ec;
}

void refuse_input_as_output(const CommonOptions& o, const std::string& output, const std::string& what) {
  for (const auto& [flag, input] : {std::pair<const char*, const std::string&>{"--q", o.q_path},
                                    {"--k", o.k_path},
                                    {"--v", o.v_path}})
    if (!input.empty() && same_file(output, input)) ATTNPROF_FAIL("{} is the {} input file", what, flag);
}

std::vector<std::string> run_out_files(const CommonOptions& o, const std::vector<std::string>& variants,
                                       const std::vector<std::string>& files, bool written_trace_only) {
  std::vector<std::string> names = files;
  for (const std::string& v : variants) {
    if (written_trace_only) names.push_back(trace_file(v, o));  // the one trace format this run writes
    for (std::string_view suffix : report::kVariantFileSuffixes)
      if (!written_trace_only || !suffix.starts_with(".trace.json")) names.push_back(v + std::string(suffix));
  }
  if (o.html) names.push_back("report.html");
  std::vector<std::string> paths;
  for (const std::string& name : names) paths.push_back(out_path(o.out, name));
  return paths;
}

void check_output_flag(std::string_view flag, const std::string& path) {
  with_option(flag, [&] { report::check_output_file(path); });
}

void check_out_files(const CommonOptions& o, const std::vector<std::string>& variants,
                     const std::vector<std::string>& files) {
  for (const std::string& path : run_out_files(o, variants, files, /*written_trace_only=*/true))
    report::check_output_file(path);
}

void refuse_inputs_in_out(const CommonOptions& o, const std::vector<std::string>& variants,
                          const std::vector<std::string>& files) {
  if (!use_files(o)) return;
  for (const std::string& path : run_out_files(o, variants, files))
    refuse_input_as_output(o, path, fmt::format("--out file '{}'", path));
}

std::string json_text(const nlohmann::json& j) { return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace); }

void write_json(const std::string& path, const nlohmann::json& j) { report::write_text_atomic(path, json_text(j) + "\n"); }

void commit_and_print(const CommonOptions& o, const std::string& name, const nlohmann::json& j, const Text& text,
                      const std::string& csv, report::FileBatch& outputs) {
  write_json(out_path(o.out, name + ".json"), j);
  report::write_text_atomic(out_path(o.out, name + ".txt"), text.full);
  report::write_text_atomic(out_path(o.out, name + ".csv"), csv);
  outputs.commit();
  write_html_if_asked(o);
  if (o.json) print_out("{}\n", json_text(j));
  else print_out("{}", text.shown(o));
}

nlohmann::json read_json_file(const std::string& path) {
  const std::string text = report::read_input_file(path);
  if (const std::string why = report::json_parse_error(text); !why.empty()) ATTNPROF_FAIL("{}: {}", path, why);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // where and why, as the report's notes and the peaks cache say
    ATTNPROF_FAIL("{}: not valid JSON ({})", path, e.what());
  }
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::vector<std::string> split_variant_list(const std::string& list) {
  std::vector<std::string> names = split_list(list);
  for (const std::string& n : names)
    ATTNPROF_CHECK(!n.empty(), "--variants '{}' holds an empty name (two commas in a row, or one at an end)", list);
  return names;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double elapsed_s(double since_s) { return now_s() - since_s; }

std::string flops_legend(const AttnProblem& p) {
  const double f = attention_flops(p);
  if (p.mask != MaskKind::Causal) return fmt::format("attention FLOPs 4·B·Hq·Nq·Nk·D = {:.3g} per forward", f);
  if (p.Nq == p.Nk)
    return fmt::format("attention FLOPs 4·B·Hq·Nq·Nk·D/2 = {:.3g} per forward, causal FLOPs halved (FlashAttention's "
                       "convention)", f);
  return p.Nq < p.Nk
             ? fmt::format("attention FLOPs 4·B·Hq·D·Nq²/2 = {:.3g} per forward (causal: no query sees a key past Nq)", f)
             : fmt::format("attention FLOPs 4·B·Hq·D·(Nq·Nk − Nk²/2) = {:.3g} per forward (causal: rows past Nk see "
                           "every key)", f);
}

std::string busy_peaks_line(const analysis::MachinePeaks& m) {
  if (m.measured_busy.empty()) return "";
  return fmt::format("Peaks: measured on a busy machine ({}), so they may be low and % peak high: `attnprof roofline "
                     "--peaks-only --remeasure` on an idle machine measures them again.\n",
                     m.measured_busy);
}

double visible_share(const AttnProblem& p) {
  // An explicit mask's pairs are its values' (the convention counts them all): not known here.
  if (p.mask != MaskKind::Causal && p.mask != MaskKind::None) return std::nan("");
  const double all = 4.0 * double(p.B) * double(p.Hq) * double(p.D) * double(p.Nq) * double(p.Nk);
  return all > 0 ? attention_flops(p) / all : std::nan("");
}

std::string terminal_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      out += c < 0x20 || c == 0x7f ? ' ' : char(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence, or one byte that is not text.
    uint32_t cp = 0;
    const size_t len = report::utf8_sequence(text, i, &cp);
    if (len == 0) {
      out += '?';
      ++i;
    } else if (report::is_terminal_control(cp)) {  // C1 controls; bidirectional controls, which reorder the line
      out += ' ';
      i += len;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// stdout first: with both streams sent to one file or pipe (2>&1, tee), a line of stdout's buffer would
// otherwise be cut by the stderr line written in the middle of it.
void progress(const std::string& line) {
  std::fflush(stdout);
  print_err("{}\n", terminal_line(line));
  std::fflush(stderr);
}

void print_error(std::string_view message) {
  std::fflush(stdout);
  print_err("attnprof: error: {}\n", terminal_line(message));
}

int stdout_status(int code) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    print_err("attnprof: error: cannot write to standard output: {}\n", std::strerror(errno ? errno : EIO));
    return 2;
  }
  return code;
}

namespace {
std::atomic<bool> g_exit_planned{false};
}  // namespace

void exit_as_planned(int code) {
  g_exit_planned.store(true);
  std::exit(code);
}

bool exit_was_planned() { return g_exit_planned.load(); }

namespace {
// Lock-free atomics (a signal may land on any thread: OpenMP's, CUDA's), so the handler may use them.
std::atomic<bool> g_graceful{false};
std::atomic<int> g_stop_requested{0};
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free);
}  // namespace

GracefulStop::GracefulStop() {
  g_stop_requested.store(0);
  g_graceful.store(true);
}
GracefulStop::~GracefulStop() { g_graceful.store(false); }

bool stop_requested() { return g_stop_requested.load() != 0; }

bool take_signal_gracefully(int sig) noexcept {
  // The first SIGINT only, however many threads receive one at once.
  if (sig != SIGINT || !g_graceful.load() || g_stop_requested.exchange(1) != 0) return false;
  static constexpr char kMsg[] =
      "\nattnprof: interrupted: stopping after the point in progress, then writing the points that finished "
      "(Ctrl-C again stops now and writes nothing)\n";
  [[maybe_unused]] const ssize_t n = ::write(2, kMsg, sizeof kMsg - 1);
  return true;
}

void exit_if_validation_failed(const std::vector<std::string>& failed, const std::vector<std::string>& device_failed) {
  if (failed.empty() && device_failed.empty()) return;
  // A run that wrote nothing (profile writes no file for a failed variant) leaves no new --out behind, as an
  // error does: the directories it created go while they are empty, never one that holds a file.
  remove_created_dirs_if_empty();
  if (stdout_status(0) != 0) exit_as_planned(2);
  std::vector<std::string> what;
  if (!failed.empty()) what.push_back(fmt::format("{} failed validation against the fp64 reference", fmt::join(failed, ", ")));
  if (!device_failed.empty()) what.push_back(fmt::format("{} failed on the GPU", fmt::join(device_failed, ", ")));
  print_err("attnprof: {} (reported, not timed)\n", terminal_line(fmt::format("{}", fmt::join(what, "; "))));
  exit_as_planned(1);
}

void exit_if_nothing_measured(size_t measured, size_t skipped, std::string_view what) {
  if (measured > 0 || skipped == 0) return;
  if (stdout_status(0) != 0) exit_as_planned(2);
  print_err("attnprof: nothing was measured: {} {}{} skipped (the reasons are in the results)\n",
            skipped == 1 ? "the only" : fmt::format("all {}", skipped), what, skipped == 1 ? " was" : "s were");
  exit_as_planned(1);
}

std::vector<const Variant*> resolve_variants_on(bool gpu, const std::vector<std::string>& names,
                                                const std::string& backend, const AttnProblem& p, bool defaults) {
  std::vector<const Variant*> out;
  std::vector<std::string> left_out;
  for (const std::string& n : names) {
    if (defaults && n != "sdpa") {  // the command's own list holds registry names only
      const Variant& listed = gpu ? cuda::find_cuda_variant(n) : find_variant(n);
      if (auto why = listed.unsupported(p)) {
        left_out.push_back(fmt::format("{}: {}", n, *why));
        std::fflush(stdout);
        print_err("attnprof: note: left out of the default variants: {} cannot run {}: {}\n", n, p.str(),
                  terminal_line(*why));
        continue;
      }
    }
    const Variant* v = &resolve_variant_on(gpu, n, n == "sdpa" ? backend : "", p);
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  if (out.empty())
    ATTNPROF_FAIL("none of the default variants can run {}: {}", p.str(), fmt::join(left_out, "; "));
  return out;
}

const char* status_name(RunOutcome::Status s) {
  switch (s) {
    case RunOutcome::Status::Ok: return "ok";
    case RunOutcome::Status::Skipped: return "skipped";
    case RunOutcome::Status::Failed: return "failed";
  }
  return "?";
}

std::string validation_failure(const ErrorStats& err, const Tolerance& tol, double max_abs_score, DType dtype) {
  if (err.non_finite > 0)
    return fmt::format("validation failed: {} of {} elements are NaN or infinite ({} outside atol {:g} + rtol {:g} "
                       "in all)",
                       err.non_finite, err.count, err.violations, tol.atol, tol.rtol);
  std::string s = fmt::format("validation failed: {} of {} elements outside atol {:g} + rtol {:g}; max abs error {:.3g}",
                              err.violations, err.count, tol.atol, tol.rtol, err.max_abs);
  // A score s rounded to a type of p significant bits is off by up to |s|·2^-p, and its softmax weight by a
  // factor of exp(|s|·2^-p): when that alone passes the tolerance, the inputs' scale may be what failed.
  const double unit = dtype == DType::BF16 ? std::ldexp(1.0, -8) : dtype == DType::F16 ? std::ldexp(1.0, -11) : 0.0;
  const double moved = std::expm1(max_abs_score * unit);
  if (unit > 0 && moved >= tol.rtol)
    s += fmt::format(". The scores reach |q·k·scale| = {:.3g}: {} keeps {} significant bits, so this variant's scores, "
                     "stored in it between ops, move their softmax weights by up to {:.1f} %, past the tolerance; the "
                     "fused kernels keep the scores in fp32. Inputs of a smaller scale, or --dtype fp32, tell the "
                     "inputs from the code",
                     max_abs_score, dtype_name(dtype), dtype == DType::BF16 ? 8 : 11, 100 * moved);
  return s;
}

namespace {

void set_run_metadata(prof::Profiler& profiler, const Variant& v, const Inputs& in) {
  profiler.set_metadata("variant", v.name);
  profiler.set_metadata("annotation", v.annotation);
  profiler.set_metadata("problem", in.p.str());
  profiler.set_metadata("dtype", std::string(dtype_name(in.p.dtype)));
  profiler.set_metadata("threads", std::to_string(ops::num_threads()));
  profiler.set_metadata("inputs", in.source);
  profiler.set_metadata("attnprof_version", ATTNPROF_VERSION);
}

// Checks one forward's output against the fp64 reference into r (Failed, with the reason, when it is off).
// The blog's unfused scripts, on either device: each op's N×N result is stored in the inputs' type, so the
// scores are rounded between ops (SDPA math upcasts to fp32; the fused kernels keep them in registers).
bool rounds_scores_between_ops(const Variant& v) { return v.name == "naive" || v.name == "inplace"; }

// `half_scores`: the variant stores its scores in the output's type between ops (rounds_scores_between_ops).
bool validate(const Tensor& out, const Reference& ref, const RunPlan& plan, RunOutcome& r, bool half_scores) {
  r.err = compare_to_reference(out, ref, r.tol);
  if (plan.keep_output) r.output = out;
  if (r.err.ok()) return true;
  r.status = RunOutcome::Status::Failed;
  r.note = validation_failure(r.err, r.tol, half_scores ? ref.max_abs_score : 0.0, out.dtype());
  return false;
}

// An outcome with nothing measured: skipped (with why), or failed on the device before anything was checked.
RunOutcome not_run(const Tolerance& tol, RunOutcome::Status status, std::string note, bool device_error = false) {
  RunOutcome r;
  r.tol = tol;
  r.status = status;
  r.note = std::move(note);
  r.device_error = device_error;
  return r;
}

// key_averages, the recorded forwards and their median, and ops per forward: on the CPU the zones that do
// work of their own (a recorded cost: FLOPs or bytes), the passes a GPU would launch one kernel for, so not
// views (transpose), wrappers whose work is their children's (masked_fill over copy_ and masked_fill_, SDPA's
// entry points), annotations or ProfilerStep#N; device activities (kernels, copies, fills) for a CUDA profile.
void summarise_recording(const Variant& v, const RunPlan& plan, RunOutcome& r) {
  r.ka = analysis::key_averages(r.result, {.group_by_input_shape = plan.group_by_input_shape});
  r.forward_ns = analysis::zone_durations_ns(r.result, v.annotation);
  r.median_ns = median(r.forward_ns);
  int64_t ops = 0;
  if (r.result.has_device) {
    ops = int64_t(r.result.device.size());
  } else {
    for (const prof::ThreadTrace& t : r.result.threads)
      for (const prof::ZoneEvent& e : t.zones)
        if (!analysis::is_annotation(e.name ? e.name : "", e.category ? e.category : "") && e.cost.does_work()) ++ops;
  }
  r.ops_per_forward = r.forward_ns.empty() ? 0.0 : double(ops) / double(r.forward_ns.size());
}

}  // namespace

double reference_flops(const AttnProblem& p, double heads) {
  // What the oracle multiplies: two multiply-adds per element of D for q·k and for p·v, over the pairs it
  // computes. Under the causal mask (top-left aligned) row i multiplies keys 0..i only (reference.cpp);
  // under any other mask every pair.
  const double nq = double(p.Nq), nk = double(p.Nk);
  const double pairs = p.mask != MaskKind::Causal ? nq * nk
                       : nq <= nk                 ? nq * (nq + 1) / 2
                                                  : nk * (nk + 1) / 2 + (nq - nk) * nk;
  return 4.0 * heads * pairs * double(p.D);
}

void check_reference_work(const AttnProblem& p, double heads) {
  // The reference parallelises over heads: its threads are the fewer of the team and the heads. At about
  // 10 GFLOP/s per thread in fp64 on Zen 4 the cap is some 80 minutes; the blog's shape is 17 GFLOP, about a
  // second on two threads.
  const double threads = std::max(1.0, std::min(double(ops::num_threads()), heads));
  const double cap = kMaxReferenceFlopsPerThread * threads, flops = reference_flops(p, heads);
  if (!(flops > cap)) return;
  AttnProblem blog = p;
  blog.B = 8, blog.Hq = blog.Hkv = 16, blog.Nq = blog.Nk = 1024, blog.D = 64, blog.mask = MaskKind::Causal;
  ATTNPROF_FAIL("at {} the fp64 reference every variant is validated against would take {:.3g} TFLOP ({:.3g}x the "
                "blog's shape, hours or more on a CPU; attnprof refuses past {:g} TFLOP on {:g} thread{}), and a "
                "variant is not timed before it is validated: run a smaller --shape",
                p.str(), flops * 1e-12, flops / reference_flops(blog, 8 * 16), cap * 1e-12, threads,
                threads == 1 ? "" : "s");
}

namespace {
// The budget check runs before the reservation is made (a member initialiser's argument). So does the check of
// its work: a shape that fits in memory can still ask for years of arithmetic (N = 10^8 at D = 1, causal, is
// 2·10^16 FLOPs), and a run that would only hang is refused up front (check_reference_work).
double checked_reference_bytes(const AttnProblem& p) {
  const double bytes = reference_bytes(p);
  check_memory_budget(bytes, fmt::format("the fp64 reference of {}", p.str()),
                      kSmallerShapeHint);
  check_reference_work(p, double(p.B) * double(p.Hq));
  return bytes;
}
}  // namespace

LazyReference::LazyReference(const Inputs& in) : in_(in), held_(checked_reference_bytes(in.p)) {}

const Reference& LazyReference::get() {
  if (!ref_) {
    progress("computing the fp64 reference");
    ref_ = reference_attention(in_.q, in_.k, in_.v, in_.opt);
  }
  return *ref_;
}

std::vector<std::string> names_of(const std::vector<const Variant*>& variants) {
  std::vector<std::string> names;
  for (const Variant* v : variants) names.push_back(v->name);
  return names;
}

void prepare_libraries(const std::vector<const Variant*>& variants, const Inputs& in) {
  for (const Variant* v : variants) {
    if (v->unsupported(in.p)) continue;
    try {
      (void)v->prepare(in.p, in.opt);
    } catch (const OutOfBudget&) {
    }
  }
}

RunOutcome run_variant(const Variant& v, const Inputs& in, LazyReference& ref, const RunPlan& plan,
                       const std::string& label) {
  RunOutcome r;
  r.tol = v.tolerance(in.p.dtype);
  if (auto why = v.unsupported(in.p)) return not_run(r.tol, RunOutcome::Status::Skipped, *why);
  std::unique_ptr<Runner> runner;
  try {
    runner = v.prepare(in.p, in.opt);
  } catch (const OutOfBudget& e) {
    return not_run(r.tol, RunOutcome::Status::Skipped, e.what());
  }
  // Reference first: one forward, checked against fp64, before anything is timed.
  if (!label.empty()) progress(fmt::format("{}: validating against the fp64 reference", label));
  {
    reset_peak_memory();
    const int64_t before = memory_stats().current_bytes;
    AttnOutput o;
    try {
      o = runner->run(in.q, in.k, in.v);
    } catch (const OutOfBudget& e) {
      return not_run(r.tol, RunOutcome::Status::Skipped, e.what());
    }
    const MemoryStats ms = memory_stats();
    r.peak_bytes = ms.peak_bytes;
    r.peak_extra_bytes = ms.peak_bytes - before;
    if (!validate(o.out, ref.get(), plan, r, rounds_scores_between_ops(v))) return r;
  }
  // The profiler makes its buffers, and every name it will record, before the warm-up forwards: what it
  // allocates then changes the heap the forwards allocate from (a freed buffer's hole taken, a fresh one made
  // on new pages), and the warm-ups, not the first recorded forwards, pay for the heap settling around it.
  // Between the last warm-up and the last recorded forward nothing here allocates (the progress line is made
  // ahead).
  const prof::Schedule& s = plan.schedule;
  const int64_t steps = s.steps(), recorded = s.active_steps();
  prof::Profiler profiler({.schedule = s,
                           .profile_memory = plan.profile_memory,
                           .record_shapes = plan.record_shapes,
                           .software_counters = plan.software_counters,
                           .step_annotations = true});
  set_run_metadata(profiler, v, in);
  profiler.prepare();
  prof::VariantScope scope(v.name);
  (void)prof::detail::intern(v.annotation);
  const std::string profiling_line =
      label.empty() ? ""
                    : terminal_line(fmt::format("{}: profiling {} step{} ({} recorded)", label, steps,
                                                steps == 1 ? "" : "s", recorded)) +
                          "\n";
  if (!label.empty() && (plan.warmup > 0 || plan.warmup_min_s > 0))
    progress(plan.warmup_min_s > 0
                 ? fmt::format("{}: warm-up forwards ({} at least, and {:g} s of them)", label, plan.warmup, plan.warmup_min_s)
                 : fmt::format("{}: {} warm-up forwards", label, plan.warmup));
  // The other work beside the forwards is measured from the first warm-up: a busy machine slows them all alike,
  // and the recorded forwards alone are often too short a stretch to tell (other_work_min_seconds()).
  const analysis::OtherWork beside;
  r.warmup_forwards = warm_up(plan.warmup, plan.warmup_min_s, [&] { (void)runner->run(in.q, in.k, in.v); });
  if (!profiling_line.empty()) {
    std::fflush(stdout);
    std::fputs(profiling_line.c_str(), stderr);
    std::fflush(stderr);
  }
  profiler.start();
  {
    for (int64_t i = 0; i < steps; ++i) {
      {
        ATTNPROF_ANNOTATE_DYN(zone, v.annotation);
        (void)runner->run(in.q, in.k, in.v);
      }
      profiler.step();
    }
  }
  profiler.stop();
  r.sharing = analysis::cpu_sharing(beside, ops::num_threads());
  r.sharing_window_s = beside.seconds();
  r.result = profiler.result();
  summarise_recording(v, plan, r);
  return r;
}

DevicePeak device_forward_peak(cuda::DeviceRunner& dev, const cuda::DeviceTensor& q, const cuda::DeviceTensor& k,
                               const cuda::DeviceTensor& v) {
  cuda::synchronize();
  const int64_t live = cuda::device_memory_stats().current_bytes;
  cuda::reset_device_peak();
  (void)dev.run_device(q, k, v);
  cuda::synchronize();
  const int64_t total = cuda::device_memory_stats().peak_bytes;
  return {total - live, total};
}

RunOutcome run_cuda_variant(const Variant& v, const Inputs& in, LazyReference& ref, const RunPlan& plan,
                            const std::string& label) {
  RunOutcome r;
  r.tol = v.tolerance(in.p.dtype);
  std::unique_ptr<Runner> runner;
  try {
    if (auto why = v.unsupported(in.p)) return not_run(r.tol, RunOutcome::Status::Skipped, *why);
    runner = v.prepare(in.p, in.opt);
  } catch (const Error& e) {  // a device that cannot hold the problem, a library that cannot plan it
    return not_run(r.tol, RunOutcome::Status::Skipped, e.what());
  }
  // From here on a failure (a kernel fault, a library call the device rejects) ends this variant's row, not the
  // run: the variants after it still run (a fault that poisons the CUDA context fails them too, each with its
  // reason), and compare writes its files before it exits non-zero.
  try {
    auto* dev = dynamic_cast<cuda::DeviceRunner*>(runner.get());
    ATTNPROF_CHECK(dev, "CUDA variant {} has no device runner", v.name);
    if (!label.empty()) progress(fmt::format("{}: validating against the fp64 reference", label));
    {
      const AttnOutput o = runner->run(in.q, in.k, in.v);
      if (!validate(o.out, ref.get(), plan, r, rounds_scores_between_ops(v))) return r;
    }
    const cuda::DeviceTensor dq = cuda::DeviceTensor::from_host(in.q), dk = cuda::DeviceTensor::from_host(in.k),
                             dv = cuda::DeviceTensor::from_host(in.v);
    // As on the CPU, the profiler makes its buffers and names before the warm-ups, so the host side of the
    // recorded forwards (the launches, Self CPU) runs on a heap the warm-ups have already settled.
    const prof::Schedule& s = plan.schedule;
    const int64_t steps = s.steps(), recorded = s.active_steps();
    prof::Profiler profiler({.schedule = s,
                             .profile_memory = plan.profile_memory,
                             .record_shapes = plan.record_shapes,
                             .software_counters = plan.software_counters,
                             .step_annotations = true});
    set_run_metadata(profiler, v, in);
    profiler.set_metadata("device", cuda::device_info().name);
    profiler.prepare();
    (void)prof::detail::intern(v.annotation);
    for (int i = 0; i < plan.warmup; ++i) (void)dev->run_device(dq, dk, dv);
    r.warmup_forwards = plan.warmup;
    const DevicePeak peak = device_forward_peak(*dev, dq, dk, dv);
    r.peak_bytes = peak.total;
    r.peak_extra_bytes = peak.extra;

    if (!label.empty())
      progress(fmt::format("{}: profiling {} step{} ({} recorded) through CUPTI", label, steps, steps == 1 ? "" : "s",
                           recorded));
    cuda::ActivityCollector cupti;
    try {
      cupti.start();
    } catch (const Error& e) {  // CUPTI admits one subscriber per process (Nsight Systems is one)
      r.cupti_note = e.what();
      progress(fmt::format("{}: CUPTI unavailable, recording the host side only: {}", label, r.cupti_note));
    }
    profiler.start();
    {
      prof::VariantScope scope(v.name);
      for (int64_t i = 0; i < steps; ++i) {
        {
          ATTNPROF_ANNOTATE_DYN(zone, v.annotation);
          (void)dev->run_device(dq, dk, dv);
          cuda::synchronize();
        }
        profiler.step();
      }
    }
    profiler.stop();
    r.result = profiler.result();
    if (cupti.running()) cuda::attach_device_capture(r.result, cupti.stop());
    if (!plan.profile_memory) r.result.device_mem.clear();  // device memory is memory profiling too
    summarise_recording(v, plan, r);
    if (plan.event_iters > 0) {
      const cuda::DeviceTiming t = cuda::time_device_forward(*dev, dq, dk, dv, 1, plan.event_iters);
      r.event_ms = t.ms;
      r.median_event_ms = t.median_ms;
    }
  } catch (const OutOfBudget& e) {  // device memory taken since prepare (another process): not a failure
    return not_run(r.tol, RunOutcome::Status::Skipped, e.what());
  } catch (const Error& e) {  // what was measured before the fault is dropped: none of it was checked whole
    return not_run(r.tol, RunOutcome::Status::Failed, fmt::format("failed on the GPU: {}", e.what()),
                   /*device_error=*/true);
  }
  return r;
}

}  // namespace attnprof::cli

namespace attnprof::cli {

void check_html_if_asked(const CommonOptions& o) {
  if (o.html) report::check_html_report_possible(o.out);
}

void write_html_if_asked(const CommonOptions& o) {
  if (!o.html) return;
  // As `attnprof report` does: a page with nothing to draw is no page (exit 2, each file's reason first).
  report::HtmlOptions opt;
  opt.require_input = true;
  try {
    progress("wrote " + report::write_html_report(o.out, opt));
  } catch (const report::NoReportInput& e) {
    for (const std::string& line : e.problems) print_error(line);
    throw Error(e.what());
  }
}

}  // namespace attnprof::cli
