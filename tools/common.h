// tools/common.h: what every attnprof subcommand shares: the common flags, building the inputs (random and
// seeded, or from .npy files), resolving a variant name, the output directory, and one "run a variant"
// routine (prepare -> validate against fp64 -> warm up -> profile) that profile, compare and roofline use.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnprof/analysis.h"
#include "attnprof/attention.h"
#include "attnprof/cuda.h"
#include "attnprof/error.h"
#include "attnprof/profiler.h"
#include "attnprof/report.h"

namespace attnprof::cli {

struct CommonOptions {
  std::string shape = "8,16,1024,64";  // the blog's [B, H, N, D]
  int64_t kv_len = 0;                  // 0: same as N
  int64_t kv_heads = 0;                // 0: same as H
  std::string dtype = "bf16";
  bool causal = true;
  bool causal_flag_seen = false;  // --causal or --no-causal was given (both at once is an error)
  int threads = 0;                     // 0: default_threads()
  int warmup = -1;                     // -1: the subcommand's default
  int iters = -1;
  uint64_t seed = 0;
  bool json = false;
  bool html = false;                   // also write report.html into --out
  std::string out = "attnprof-out";
  std::string memory_budget;
  std::string q_path, k_path, v_path, save_output;
  bool gzip = false;                   // traces as <variant>.trace.json.gz
  bool brief = false;                  // --brief: stdout without the lines that define the columns
  std::string flash_block;             // --flash-block ROWSxCOLS: the CPU flash kernel's blocks ("": its default)
  // Filled by add_common_options so that "was this flag given?" can be asked.
  CLI::Option* shape_opt = nullptr;
  CLI::Option* dtype_opt = nullptr;
  CLI::Option* seed_opt = nullptr;
  CLI::Option* warmup_opt = nullptr;
  CLI::Option* iters_opt = nullptr;
};

// A command's text: `full` goes into its .txt file, and to stdout; `brief` is the same without the lines that
// define the columns (what GFLOP/s counts, what Bound means), which --brief prints: the tables and what the run
// found (speed-ups, checks, warnings) stay.
struct Text {
  std::string full, brief;
  Text() = default;
  Text(std::string s) : full(s), brief(std::move(s)) {}  // NOLINT: a plain string is all findings
  Text& operator+=(const std::string& s) {
    full += s;
    brief += s;
    return *this;
  }
  Text& operator+=(const Text& t) {
    full += t.full;
    brief += t.brief;
    return *this;
  }
  void define(const std::string& s) { full += s; }  // a definition: the file, and stdout without --brief
  // What a definition carried that is a finding of this run (peaks measured on a busy machine), for --brief.
  void brief_only(const std::string& s) { brief += s; }
  const std::string& shown(const CommonOptions& o) const { return o.brief ? brief : full; }
};

struct Defaults {
  int warmup = 3;
  int iters = 3;
  bool file_inputs = true;  // --q/--k/--v
  bool save_output = false; // --save-output
  bool traces = false;      // --gzip (the subcommand writes traces)
};

void add_common_options(CLI::App* sub, CommonOptions& o, const Defaults& d);
// --warmup and --iters at most: every profiled forward's events stay in memory until the run ends, and go
// into its trace (naive at a tiny shape: about 33 KB of memory a forward; 10,000 forwards took 560 MB and
// wrote a 58 MB trace). Past that a profile says nothing more, and a typo (--iters 100000000) would fill
// memory, or overflow the step count (wait + warmup + active), instead of stopping.
inline constexpr int kMaxForwards = 10000;

// Without --warmup, a CPU run warms up for the subcommand's count of forwards and for at least this long. A
// forward's first few runs in a process are slower than the rest while glibc's malloc moves its mmap threshold
// to the forward's buffer sizes: flash at [1,2,256,64] on one thread took 0.75-1.0 ms for each of its first
// three forwards and 0.08 ms after, so one warm-up left the median at 0.8 ms. At the blog's shape one forward
// of the unfused variants outlasts this, and flash (37 ms) runs three. --warmup N means exactly N.
inline constexpr double kWarmupFloorS = 0.1;
// The floor's forwards are not recorded, so kMaxForwards does not bound them: a forward of a few µs (flash at
// [1,1,64,64]: 7 µs) needs some 14,000 to fill 0.1 s. This cap only stops a forward that takes no time at all.
inline constexpr int kMaxWarmupForwards = 1000000;
double warmup_floor_s(const CommonOptions& o);  // kWarmupFloorS, or 0 when --warmup was given

// Plain decimal: an optional leading '-', then decimal digits only (no spaces, '+' or hex), as every integer
// option, --shape field and --seq length takes them. nullopt when `s` is not that; a magnitude past 2^64 comes
// back as ±(2^64 + 1), outside every range the options use, so callers need only compare.
std::optional<__int128> plain_decimal(std::string_view s);

// The one check of every integer option: plain decimal digits, a leading '-' the only sign (no spaces, '+'
// or hex), within lo..hi. Anything else is an Error naming the flag and the value: "--threads '0x10' is not a
// decimal integer", "--seed '-1' is out of range: expected 0..18446744073709551615". `note` follows the range.
CLI::Validator decimal_check(std::string flag, __int128 lo, __int128 hi, std::string note = "");
inline constexpr const char* kDecimalCheck = "decimal";  // the check's name (CLI::Option::get_validator)
// add_option with decimal_check; the range defaults to T's.
template <class T>
CLI::Option* add_integer_option(CLI::App* sub, const std::string& flag, T& var, const std::string& desc,
                                T lo = std::numeric_limits<T>::min(), T hi = std::numeric_limits<T>::max(),
                                std::string note = "") {
  CLI::Option* opt = sub->add_option(flag, var, desc);
  opt->check(decimal_check(opt->get_name(), lo, hi, std::move(note)));
  return opt;
}

// Applies --threads and --memory-budget (validated) to the library. Call before building inputs.
// --threads, --warmup/--iters' ranges, --flash-block (refused with `gpu`: the CUDA kernel's blocks are its own).
// One --flash-block size is set here; several only where `block_list` (compare runs its flash rows per size).
void apply_runtime_options(const CommonOptions& o, bool gpu = false, bool block_list = false);
// --flash-block's sizes as given (none: the kernel's defaults), each checked against the body that runs.
std::vector<FlashBlock> flash_blocks(const CommonOptions& o);
// --flash-block given to a run none of whose variants runs the CPU flash kernel (flash, sdpa-flash): refused, as
// a flag that would do nothing is.
// `asked`: the variant as the user named it, when it is `sdpa` (its backend chosen for the problem), for the message.
void check_flash_block_applies(const CommonOptions& o, const std::vector<const Variant*>& variants,
                               const std::string& asked = "");
// ", flash blocks 128×64" when --flash-block set other sizes than the kernel's defaults, else "": for the header
// lines of the runs it changes; with `several` (compare's list), every size of it.
std::string flash_block_note(const std::vector<FlashBlock>& several = {});
// Whether any of `variants` runs the CPU flash kernel (flash, sdpa-flash).
bool runs_cpu_flash(const std::vector<const Variant*>& variants);
// The CPUs this process may run on (its affinity: taskset, a cgroup's cpuset), as OpenMP counts them
// (ops::available_cpus: OMP_PROC_BIND narrows the main thread's own affinity, not this).
int hardware_threads();
// "" unless a team of `threads` outnumbers hardware_threads(): then a line saying so, as profile, compare and
// sweep print it beside their Busy lines (their own threads took turns on the CPUs, which no other work did).
std::string oversubscribed_line(int threads);
// report::uneven_op_notes, a line each ("" for none): what profile and compare write under a variant's table in
// its table.txt, so that the file says which op's totals a few slow forwards lift.
std::string uneven_text(const analysis::KeyAverages& ka);
// The threads without --threads (or with 0): OMP_NUM_THREADS when set, as OpenMP and PyTorch read it (its first
// level), else hardware_threads(); at most OMP_THREAD_LIMIT, as OpenMP caps a team. A list OpenMP would ignore
// ("1,", "2,abc") or a first count outside 1..4 × hardware_threads() is an Error naming it.
int default_threads();

struct Inputs {
  Tensor q, k, v;
  AttnOptions opt;
  AttnProblem p;
  std::string source;  // "random (seed 0)" or the file names
};

// Random N(0,1) inputs of the --shape (with `seq` overriding N and the KV length when > 0), or the .npy
// files. Validates everything through AttnProblem::from. `with_reference`: the run will hold the fp64
// reference of the whole problem (LazyReference), so random inputs are drawn only if it fits beside them
// (sweep checks two heads, and says false).
Inputs make_inputs(const CommonOptions& o, int64_t seq = 0, bool with_reference = true);
// q, k and v's bytes at problem p.
double input_bytes(const AttnProblem& p);
// Before the inputs are drawn: the inputs, their fp64 reference (with_reference; sweep checks a few heads and
// holds none) and what one forward of v allocates beyond them (Variant::peak_bytes, where v has one) against the
// memory budget. OutOfBudget (exit 2) when they cannot fit.
void check_forward_fits(const Variant& v, const AttnProblem& p, bool with_reference = true);
// "1 thread", "2 threads".
inline std::string threads_text(int n) { return std::to_string(n) + (n == 1 ? " thread" : " threads"); }
inline std::string cpus_text(int n) { return std::to_string(n) + (n == 1 ? " CPU" : " CPUs"); }
// True when the inputs come from --q/--k/--v files (their shapes are known only once they are read).
bool use_files(const CommonOptions& o);
// Just the problem the flags describe (cheap: no tensors), for budget checks and cost models.
AttnProblem problem_of(const CommonOptions& o, int64_t seq = 0);

// naive | inplace | sdpa (with --backend) | sdpa-math | sdpa-flash | flash. Errors when the variant or the
// explicit backend cannot serve `p`.
const Variant& resolve_variant(const std::string& name, const std::string& backend, const AttnProblem& p);
// The --help footer of the commands that take variants: each registry's names with their one-line summaries.
std::string variants_help();
// The same names on the CUDA registry: naive, inplace, flash, sdpa (cuDNN when it can serve the problem, else
// math, or --backend math|cudnn|auto), or a registry name (sdpa-math, sdpa-cudnn).
const Variant& resolve_cuda_variant(const std::string& name, const std::string& backend, const AttnProblem& p);
// resolve_variant or resolve_cuda_variant.
const Variant& resolve_variant_on(bool gpu, const std::string& name, const std::string& backend, const AttnProblem& p);
// Every name through resolve_variant_on (`backend` goes to "sdpa" only), each variant once, in the order first
// named: "naive,naive" and "sdpa,sdpa-flash" would otherwise run one variant twice.
// With `defaults` (the command's own list, the user named none) a variant that cannot serve `p` is left out
// with a note on stderr instead of refused, as compare skips it; an Error when none is left.
std::vector<const Variant*> resolve_variants_on(bool gpu, const std::vector<std::string>& names,
                                                const std::string& backend, const AttnProblem& p,
                                                bool defaults = false);

// What a run's rates are measured against: the CPU's measured peaks (GFLOP/s), or a GPU's datasheet peaks,
// whose rates read better in TFLOP/s and whose "ops" are the activities CUPTI saw on the device.
struct Target {
  analysis::MachinePeaks m;
  double peak = 0;        // GFLOP/s of the problem's dtype
  std::string peak_kind;  // "bf16 dot-product", "fp32 FMA", "bf16 tensor-core datasheet", ...
  std::string peak_isa;   // the ISA `peak` was measured at: the CPU's best ("avx512"), or the GPU's "sm_90"
  bool on_bf16 = false;   // `peak` is of bf16 dot-product units (a bf16 problem on a CPU with AVX512-BF16)
  bool gpu = false;
  // The CPU's best ISA is above the one our kernels are dispatched at (ATTNPROF_ISA): what % peak is out of.
  bool peak_above_dispatch() const { return !gpu && peak_isa != m.isa; }
};
// The machine's peaks (analysis::machine_peaks), with what it has to say printed as "attnprof: note: ..." lines.
analysis::MachinePeaks host_peaks(int threads, bool remeasure = false);
// The CPU's peaks at `threads` (measured once, then cached): bf16 problems against the vdpbf16ps rate where
// the CPU has one, everything else against fp32 FMA; at the CPU's best ISA, whatever ATTNPROF_ISA dispatches
// our kernels at (the hardware's peak is what % peak is out of, and OpenBLAS and oneDNN run there anyway).
Target host_target(int threads, DType dtype);
// When our kernels ran below the ISA `t.peak` is of: " Our kernels ran at scalar (ATTNPROF_ISA), whose fp32 FMA
// peak is 9.1 GFLOP/s; OpenBLAS and oneDNN at avx512." for the % peak legends; "" otherwise.
std::string dispatch_note(const Target& t);
// For rows whose rate came out above t.peak ("flash at N=512"), which no code reaches: "Over 100 %: ..." saying the
// peak was measured low and how to measure it again; "" when `over` is empty.
std::string over_peak_note(const Target& t, const std::vector<std::string>& over);
// The rate of one forward taking `ms` (attention FLOPs, the tables' convention; 0 without a time) and its share of
// the target's peak (0 without a peak): compare's rows, the peer's and sweep's points use the same two.
inline double gflops_at(const AttnProblem& p, double ms) { return ms > 0 ? attention_flops(p) / (ms * 1e6) : 0.0; }
inline double pct_of_peak(const Target& t, double gflops) { return t.peak > 0 ? 100.0 * gflops / t.peak : 0.0; }
// A GPU's datasheet peaks: bf16 and fp16 at the dense tensor-core rate (the same on sm_80 and sm_90), fp32 on
// the CUDA cores.
Target device_target(const cuda::DeviceInfo& dev, DType dtype);

// --device: true for "cuda" (Error when no usable GPU is there), false for "cpu", Error for anything else.
bool use_cuda(const std::string& device);

// Creates --out (and checks it is writable) only after every input has been validated, so bad input
// leaves nothing behind.
void prepare_out_dir(const std::string& dir);
// A run stopped by an error (exit 2) or ending in a validation failure (exit 1) after prepare_out_dir: removes
// the directories it created, deepest first, while they are still empty, so "nothing is written" holds for the
// directory too. A directory that existed before the run, or holds a file, is never removed.
void remove_created_dirs_if_empty() noexcept;
// The same from a signal handler (async-signal-safe: rmdir(2) on a fixed copy of the paths).
void remove_created_dirs_on_signal() noexcept;
// From a signal handler: ends the running --peer torch interpreter's process group, if one runs (kill(2) only).
void kill_peer_on_signal() noexcept;
// Throws "<what> '<dir>' is not writable: ..." unless a file can be created in `dir`.
void check_writable_dir(const std::string& dir, std::string_view what);
std::string out_path(const std::string& dir, const std::string& file);
// True when `a` and `b` are the same existing file, however spelled (relative, "..", a symbolic or hard link):
// an output written there would replace that file.
bool same_file(const std::string& a, const std::string& b);
// Refuses, before anything runs, an output that is one of the --q/--k/--v files: "<what> is the --q input
// file". `what` names the output as the user would find it ("--save-output 'o.npy'").
void refuse_input_as_output(const CommonOptions& o, const std::string& output, const std::string& what);
// The same for every file a run writes into --out (or removes there: the trace in the other format): for
// each of `variants` its trace (both formats), summary and table, then `files` (compare.json, ...), and
// report.html with --html.
void refuse_inputs_in_out(const CommonOptions& o, const std::vector<std::string>& variants,
                          const std::vector<std::string>& files);
// After prepare_out_dir, before anything runs: every file the run will write into --out (for each of
// `variants` its trace, in the format the run writes, summary and table, then `files`, and report.html with
// --html) can be written there when the run ends (report::check_output_file: not a directory, a link to
// nothing or a loop, a device that cannot be written, a directory where no file can be created), so a bad
// target stops the run before its minutes of work, not after.
void check_out_files(const CommonOptions& o, const std::vector<std::string>& variants,
                     const std::vector<std::string>& files);
// The same for a file an option names (--save-output, diff --save): "<flag>: cannot write '<path>': <why>".
void check_output_flag(std::string_view flag, const std::string& path);
// The paths of those files: what a run writes into (or removes from) --out; with `written_trace_only`, each
// variant's trace only in the format the run writes (trace_file), as check_out_files checks them.
std::vector<std::string> run_out_files(const CommonOptions& o, const std::vector<std::string>& variants,
                                       const std::vector<std::string>& files, bool written_trace_only = false);
// "<variant>.trace.json", or ".trace.json.gz" with --gzip.
std::string trace_file(const std::string& variant, const CommonOptions& o);
// Once a run's files are committed: removes the variant's trace in the other format (an earlier run with or
// without --gzip), which would otherwise sit beside the new summary as if it were this run's.
void remove_other_format_trace(const std::string& out, const std::string& variant, const CommonOptions& o);
void write_json(const std::string& path, const nlohmann::json& j);
// The end of a command that writes `<name>.json`, `<name>.txt` and `<name>.csv` (its rows as CSV) into --out:
// all written into `outputs` and committed with whatever else it holds, report.html drawn with --html, then the
// JSON (--json) or the text on stdout (text.full in the file; text.brief on stdout with --brief).
void commit_and_print(const CommonOptions& o, const std::string& name, const nlohmann::json& j, const Text& text,
                      const std::string& csv, report::FileBatch& outputs);
// A JSON file attnprof wrote, read back whole (diff, roofline --from): Error "cannot read <path>: ..." for a
// path that is not a regular file (checked before opening: /dev/zero would be read forever, a FIFO blocks),
// one larger than any attnprof writes (report::kMaxInputBytes, refused by its size) or not readable, and
// "<path>: not valid JSON (<the parser's message: line, column, what it read>)".
nlohmann::json read_json_file(const std::string& path);

// "a,b,,c" -> {"a", "b", "", "c"}: every comma-separated part, empty ones kept (callers name what is wrong).
std::vector<std::string> split_list(const std::string& s);
// --variants' names, split at commas: an Error for an empty one ("naive,,flash"), which no variant is named.
std::vector<std::string> split_variant_list(const std::string& list);

using analysis::median;  // the one median (attnprof/analysis.h), host and CUDA-event timings alike
double elapsed_s(double since_s);
double now_s();

// Runs `forward` `count` times, then again until `min_s` seconds have passed since the first (kMaxWarmupForwards
// in all at most); returns how many ran. Allocates nothing itself.
template <class F>
int warm_up(int count, double min_s, F&& forward) {
  const double t0 = now_s();
  int n = 0;
  for (; n < count; ++n) forward();
  while (n < kMaxWarmupForwards && min_s > 0 && elapsed_s(t0) < min_s) {
    forward();
    ++n;
  }
  return n;
}

struct RunPlan {
  int warmup = 3;                // unprofiled forwards after validation
  double warmup_min_s = 0.0;     // ... and more until this long has passed (warmup_floor_s; host paths only)
  prof::Schedule schedule{.wait = 1, .warmup = 1, .active = 3};
  bool keep_output = false;      // keep the validated output (for --save-output)
  int event_iters = 0;           // CUDA: forwards timed with CUDA events after profiling (0: none)
  bool software_counters = false;   // page faults per zone, task-clock per annotation (--counters)
  bool profile_memory = true;       // ProfilerOptions' (profile --no-profile-memory)
  bool record_shapes = true;        // ProfilerOptions' (profile --no-record-shapes)
  bool group_by_input_shape = false;  // key_averages: one row per (name, input shapes)
};

struct RunOutcome {
  enum class Status { Ok, Skipped, Failed };
  Status status = Status::Ok;
  std::string note;              // why skipped / failed
  bool device_error = false;     // CUDA: failed on the GPU after prepare (not a validation failure)
  ErrorStats err;
  Tolerance tol;
  Tensor output;
  prof::ProfileResult result;
  analysis::KeyAverages ka;
  std::vector<double> forward_ns;  // per recorded forward (the variant's annotation zone)
  double median_ns = 0.0;
  int64_t peak_extra_bytes = 0;  // bytes one forward allocates at its peak above what was live before it
  int64_t peak_bytes = 0;        // absolute high-water mark of the tracked allocator during that forward
  std::string cupti_note;        // CUDA: why no device activity was collected ("" when it was)
  std::vector<double> event_ms;  // CUDA: per forward, CUDA-event timing (plan.event_iters of them)
  double median_event_ms = 0.0;
  double ops_per_forward = 0.0;  // per recorded forward: zones with a cost of their own (CPU), activities (GPU)
  std::optional<analysis::CpuSharing> sharing;  // CPU: the other work beside the profiled forwards, when measurable
  double sharing_window_s = -1.0;  // CPU: the stretch it was measured over (warm-ups and recorded forwards)
  int warmup_forwards = 0;       // the warm-up forwards that ran (plan.warmup, or more for plan.warmup_min_s)
};
const char* status_name(RunOutcome::Status s);

// The fp64 reference of one set of inputs, computed when a variant first needs it: a variant refused by its
// support check or the memory budget is known before minutes of fp64 work, and a run whose every variant is
// refused computes none.
// The FLOPs the fp64 reference computes over `heads` heads of `p` (the causal mask's skipped pairs left out).
double reference_flops(const AttnProblem& p, double heads);
// Refuses (Error) a problem whose fp64 reference over `heads` heads would compute more than
// kMaxReferenceFlopsPerThread on each thread it runs on (the fewer of the team and the heads): a run that would
// take hours to years before its first timing. Checked after the memory budget: a shape memory cannot hold is
// refused for that first.
inline constexpr double kMaxReferenceFlopsPerThread = 5e13;
void check_reference_work(const AttnProblem& p, double heads);

class LazyReference {
 public:
  // Reserves the reference's bytes against the memory budget from here on (OutOfBudget when they do not fit
  // beside the inputs), so that every variant's budget check counts them whether or not it is computed yet.
  explicit LazyReference(const Inputs& in);
  const Reference& get();

 private:
  const Inputs& in_;
  MemoryReservation held_;
  std::optional<Reference> ref_;
};

// compare --peer torch (peer_torch.cpp): PyTorch on the same inputs in a python interpreter, its outputs checked
// against the same fp64 reference. probe_torch_peer: torch's version, or an Error saying why the interpreter
// cannot run the peer (not found, no torch), before anything runs.
struct PeerRow {
  std::string name;  // torch-naive, torch-sdpa
  std::string call;  // what ran
  RunOutcome::Status status = RunOutcome::Status::Ok;  // Failed: ran, and its output is outside the tolerance
  std::string note;                                    // why it was skipped
  std::vector<double> forward_ms;                      // torch's time.perf_counter around each forward
  std::optional<analysis::CpuSharing> sharing;         // the other work beside them, when measurable
  double sharing_window_s = -1.0;                      // the stretch it was measured over (its warm-ups included)
  double ms = 0;                                       // their median (analysis::median)
  ErrorStats err;
  Tolerance tol;
};
struct PeerRun {
  std::string python, torch_version;
  int threads = 0;  // torch.get_num_threads() in the peer
  std::vector<PeerRow> rows;
};
// `timeout_s` > 0: the interpreter is stopped (SIGKILL) past that many seconds and an Error says so.
std::string probe_torch_peer(const std::string& python, int timeout_s = 0);
// Checks one row's fp32 output [B, Hq, Nq, D] against the fp64 reference: the whole of it (compare), or the heads
// sweep checks of its variants' outputs.
using PeerCheck = std::function<ErrorStats(const Tensor& out, const Tolerance& tol)>;
// The peer's two rows, in the order it runs and prints them.
inline constexpr std::array<const char*, 2> kPeerRows = {"torch-naive", "torch-sdpa"};
// Why each peer row would not fit the memory budget at `p` ("" for one that fits): the blog's script holds three
// N×N tensors, and so does torch's SDPA before 2.1 (`torch_version`, probe_torch_peer's), which composes it on the
// CPU from the math path.
std::array<std::string, 2> peer_budget_skips(const AttnProblem& p, const std::string& torch_version);
// Both rows over the budget (peer_budget_skips) are skipped without starting the interpreter.
PeerRun run_torch_peer(const Inputs& in, const std::string& python, const std::string& torch_version, int threads,
                       int warmup, double warmup_min_s, int iters, const Tolerance& tol, const PeerCheck& check,
                       int timeout_s = 0);
// The peer's flags, as compare and sweep take them: --peer torch, --python, --peer-timeout.
struct PeerOptions {
  std::string peer;  // "torch", or empty: no peer
  std::string python = "python3";
  int timeout = 0;  // seconds the peer's process may take, each of its runs; 0: no limit
  CLI::Option* python_opt = nullptr;
  CLI::Option* timeout_opt = nullptr;
  bool on() const { return !peer.empty(); }
};
// `what` ends --peer's help: what the peer's rows are set beside in this command; `on_timeout`, what a run past
// --peer-timeout does to it.
void add_peer_options(CLI::App* sub, PeerOptions& po, const std::string& what, const std::string& on_timeout);
// The refusals: --python or --peer-timeout without --peer, a peer other than torch, --device cuda.
void check_peer_options(const PeerOptions& po, bool gpu);
// torch's version (probe_torch_peer), or "" without --peer: an interpreter that cannot run the peer is refused
// before anything runs or is written.
std::string probe_peer(const PeerOptions& po);

// The variants' names, in their order.
std::vector<std::string> names_of(const std::vector<const Variant*>& variants);
// Before the first of several variants runs: prepares each supported one and drops it, so what a prepare loads
// (OpenBLAS, after its check of the address-space limit) is loaded, or refused with an Error, before any variant
// is validated or timed. A memory-budget refusal (OutOfBudget) is left for run_variant to report as a skip.
// Each runner is dropped rather than kept for run_variant: held together, every variant's prepared buffers
// (naive's N² mask, at N = 16384 256 MiB) would sit in the tracked allocator beside the one running and count in
// its peak memory; building one again costs a mask fill, nothing a forward would notice.
void prepare_libraries(const std::vector<const Variant*>& variants, const Inputs& in);
// What a validation that failed found, for the row's note: how many elements were outside the tolerance, or NaN or
// infinite (those make max abs error inf: the note says which it was).
// `max_abs_score` (Reference::max_abs_score, for a variant that stores its scores in `dtype` between ops; 0
// otherwise) and `dtype`: a half-precision output whose scores reach a size that rounding them alone moves the
// softmax weights past the tolerance (exp(|s|·2^-p) − 1 ≥ rtol, p the type's significant bits) says so.
std::string validation_failure(const ErrorStats& err, const Tolerance& tol, double max_abs_score = 0.0,
                               DType dtype = DType::F32);
// prepare (OutOfBudget -> Skipped), one forward validated against `ref` (failure -> Failed, not timed),
// warm-up, then the profiled forwards, each inside the variant's annotation.
RunOutcome run_variant(const Variant& v, const Inputs& in, LazyReference& ref, const RunPlan& plan,
                       const std::string& progress_label);

// The same for a CUDA variant (cuda::cuda_registry()): validated through Runner::run (upload, forward, copy
// back), then on device tensors uploaded once: plan.warmup forwards, one forward for the device memory peak
// (peak_extra_bytes: device bytes above what was live), the schedule's steps each inside the annotation and
// followed by a synchronise, recorded by the profiler and by CUPTI (result.has_device; when CUPTI is taken,
// e.g. by Nsight Systems, cupti_note says so and only the host side is recorded), then plan.event_iters
// forwards timed with CUDA events (event_ms, median_event_ms). forward_ns are the recorded annotations:
// launches plus device time up to the synchronise.
RunOutcome run_cuda_variant(const Variant& v, const Inputs& in, LazyReference& ref, const RunPlan& plan,
                            const std::string& progress_label);

// Device memory of one forward of `dev` on inputs already on the device, synchronised before and after:
// `extra` above what was live before it, `total` the allocator's absolute peak during it.
struct DevicePeak {
  int64_t extra = 0, total = 0;
};
DevicePeak device_forward_peak(cuda::DeviceRunner& dev, const cuda::DeviceTensor& q, const cuda::DeviceTensor& k,
                               const cuda::DeviceTensor& v);

// With --html: writes report.html into --out from every result file there (attnprof report), and says so.
void write_html_if_asked(const CommonOptions& o);
// Before any work: what would stop --html from writing the page at the end (the chart library missing, a
// report.html that is or links to a file the run writes), so a long run does not end in that refusal.
void check_html_if_asked(const CommonOptions& o);

// The legend of a GFLOP/s figure: how attention_flops counted this problem, and the count.
std::string flops_legend(const AttnProblem& p);
// Under --brief, in place of the definitions that name the peaks: "Peaks: measured on a busy machine (...), so
// they may be low ..." when they were, else "".
std::string busy_peaks_line(const analysis::MachinePeaks& m);
// The (query, key) pairs p's mask lets through over Nq·Nk: what attention's FLOPs convention counts of the
// scores a matmul computes (TableOptions::visible_share).
double visible_share(const AttnProblem& p);

// One line as a terminal should get it: messages may quote what a file or an argument holds (a .npy header, a
// JSON parser's view of a corrupt file, a path), so every control character (C0 with tab and newline, DEL,
// and the C1 range, U+0080–U+009F, which some terminals take as escape sequences) becomes a space and every
// byte that is not part of valid UTF-8 a '?'; trailing spaces go. Valid UTF-8 text (·, →, ²) is kept.
std::string terminal_line(std::string_view text);

// Progress lines on stderr (the --json stdout stays machine-readable), through terminal_line.
void progress(const std::string& line);
// "attnprof: error: <message>" on stderr, through terminal_line: the one way a command reports bad input.
void print_error(std::string_view message);

// Called once a command has written and printed its results: when any variant failed validation against the
// fp64 reference (`failed` names them) or failed on the GPU (`device_failed`: a kernel fault, a library call
// the device rejected), says so on stderr and exits 1, so that a script sees the failure.
// Exit codes: 0 all validated, 1 a validation or device failure or nothing measured (results still written),
// 2 bad input.
void exit_if_validation_failed(const std::vector<std::string>& failed,
                               const std::vector<std::string>& device_failed = {});

// std::exit(code) from attnprof's own code. Any other exit() during a run is a library's (libgomp ends a
// program whose OMP_* settings it cannot follow with exit(1)): main's atexit handler then cleans up as for a
// signal and ends with exit code 2, so that 1 keeps meaning a validation failure.
[[noreturn]] void exit_as_planned(int code);
bool exit_was_planned();

// Ctrl-C in the middle of a long run of independent measurements (sweep's points): while a GracefulStop lives,
// the first SIGINT asks the run to stop after the measurement in progress and write those that finished (say
// so on stderr at once); a second SIGINT, or any other signal, ends the run as always, writing nothing.
class GracefulStop {
 public:
  GracefulStop();
  ~GracefulStop();
  GracefulStop(const GracefulStop&) = delete;
  GracefulStop& operator=(const GracefulStop&) = delete;
};
bool stop_requested();
// Called first by main's signal handler (async-signal-safe): true when it took `sig` as that request.
bool take_signal_gracefully(int sig) noexcept;
// The exit code of a run stopped that way, once its files are written: 128 + SIGINT, as a shell reports a
// command that Ctrl-C ended.
inline constexpr int kInterruptedExit = 130;

// Called after exit_if_validation_failed, once the results are written and printed: when nothing was measured
// (every variant or point skipped: over the memory budget, a shape it cannot run), says so on stderr and exits 1,
// so that a script does not take a run of skips for a measurement. A skip beside any measured row is a result.
// `what` names the run's units ("variant", "point").
void exit_if_nothing_measured(size_t measured, size_t skipped, std::string_view what);

// A JSON document as the tools print and write it (indented by 2). A string that is not valid UTF-8 (a path
// given as raw bytes: --out $'\xff') cannot be JSON: each such byte becomes U+FFFD, where nlohmann's dump would
// throw after the run's files are written.
std::string json_text(const nlohmann::json& j);

// Writes to standard output through stdio's buffer, formatted by {fmt}. fmt::print would throw at a failed write,
// mid-report; here stdout_status finds the failure (ferror) when the command ends and says so, exit 2.
// print_err is the same for standard error, where a failed write has no one left to tell.
template <typename... T>
void print_out(fmt::format_string<T...> format, T&&... args) {
  const std::string s = fmt::format(format, std::forward<T>(args)...);
  std::fwrite(s.data(), 1, s.size(), stdout);
}
template <typename... T>
void print_err(fmt::format_string<T...> format, T&&... args) {
  const std::string s = fmt::format(format, std::forward<T>(args)...);
  std::fwrite(s.data(), 1, s.size(), stderr);
}

// Flushes stdout and returns `code`, or 2 after an error line when stdout could not be written (a full disk,
// /dev/full, a file size limit): a --json consumer must not take a cut-off document for a result.
int stdout_status(int code);

}  // namespace attnprof::cli
