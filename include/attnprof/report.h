// attnprof/report.h: reporters over one profile result (google/benchmark style: one record, many formats).
//
//   auto ka = analysis::key_averages(result);
//   std::cout << report::table(ka, {.sort_by = "cpu_time_total", .row_limit = 15});
//   report::write_chrome_trace(result, "out/naive.trace.json");     // or .json.gz: gzip by file name
//   report::write_text_atomic("out/naive.summary.json", report::summary_json(result, ka).dump(2));
//
// Every file is written whole or not at all: to a temporary file in the same directory, then renamed.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnprof/analysis.h"
#include "attnprof/dtype.h"
#include "attnprof/profiler.h"

namespace attnprof::report {

// The files profile and compare write per variant, as <variant><suffix>, and the run-level files of compare,
// roofline, sweep and report: what a run's --out holds, which diff --save may not replace and report leaves out
// with a variant it does not draw.
inline constexpr std::array<std::string_view, 6> kVariantFileSuffixes = {
    ".trace.json", ".trace.json.gz", ".summary.json", ".table.txt", ".table.csv", ".stacks.txt"};
inline constexpr std::array<std::string_view, 10> kRunFileNames = {
    "compare.json", "compare.txt", "compare.csv", "roofline.json", "roofline.txt", "roofline.csv",
    "sweep.json",   "sweep.txt",   "sweep.csv",   "report.html"};

struct TableOptions {
  // torch's cpu_time, cpu_time_total, self_cpu_time_total, cpu_memory_usage, self_cpu_memory_usage, count,
  // flops; with device times also cuda_time, cuda_time_total, self_cuda_time_total, cuda_memory_usage,
  // self_cuda_memory_usage. attnprof's columns: gflops, gbs, flop_per_byte, bytes (the cost model's bytes moved),
  // page_faults, self_page_faults (with software counters). Descending, as torch's.
  std::string sort_by = "cpu_time_total";
  int row_limit = -1;                 // as torch's row_limit: below 0 every row, 0 none (the header and footer)
  bool show_input_shapes = false;     // adds the Input Shapes column (use with group_by_input_shape)
  bool extra_columns = true;          // GFLOP/s, GB/s, FLOP/B (and Bound when peaks are given)
  std::optional<analysis::MachinePeaks> peaks;  // adds the roofline verdict column (each op's own ceiling)
  // The (query, key) pairs the problem's mask lets through over Nq·Nk, what attention's FLOPs convention counts
  // (attention_flops over 4·B·Hq·D·Nq·Nk): the FLOPs footer says by how much a matmul's count exceeds it. NaN:
  // not known, a footer for any problem.
  double visible_share = std::nan("");
  // The footer lines that define the columns (CPU Mem, FLOPs, Bound); false (--brief) leaves them out, keeping
  // the totals and what the run recorded.
  bool definitions = true;
};

// torch.profiler's key_averages().table() layout, plus attnprof's columns. With device times (ka.has_device)
// it gains Self CUDA, Self CUDA %, CUDA total, CUDA time avg, CUDA Mem, Self CUDA Mem and a "Self CUDA time
// total" footer; rates and the Bound verdict then use a row's device time when it has any.
// Throws Error on an unknown sort key.
std::string table(const analysis::KeyAverages& ka, const TableOptions& opt = {});

// The same rows as CSV (RFC 4180), for a spreadsheet or pandas: every row, whatever opt.row_limit, in the
// table's order (opt.sort_by), under one fixed header, so files of CPU and GPU runs, with and without memory,
// shapes or counters, line up column for column; what a run did not record is an empty cell:
//   name,category,input_shapes,input_types,calls,self_cpu_us,self_cpu_pct,cpu_total_us,cpu_total_pct,cpu_avg_us,
//   self_cuda_us,self_cuda_pct,cuda_total_us,cuda_avg_us,cpu_mem_bytes,self_cpu_mem_bytes,cuda_mem_bytes,
//   self_cuda_mem_bytes,flops,bytes,gflops_per_s,gb_per_s,flop_per_byte,bound,pct_roof,task_clock_us,
//   self_page_faults,page_faults
// Times in microseconds and percentages as numbers (12.5 for 12.5 %), at full precision; input shapes and types
// only with opt.show_input_shapes; bound ("memory" / "compute") and pct_roof only with opt.peaks, for the rows
// the table judges. Throws Error on an unknown sort key.
std::string table_csv(const analysis::KeyAverages& ka, const TableOptions& opt = {});

// The length of the UTF-8 sequence that starts at text[i] (1 for ASCII), with its code point in *code_point;
// 0 when the byte there starts no valid sequence: a stray continuation byte, a lead byte without its
// continuation bytes, an overlong form, a surrogate or a code point past U+10FFFF.
size_t utf8_sequence(std::string_view text, size_t i, uint32_t* code_point = nullptr);
// A code point a terminal acts on rather than shows: C0 controls and DEL, C1 controls (U+0080..U+009F), and the
// bidirectional controls (U+061C, U+200E/F, U+202A..U+202E, U+2066..U+2069), which reorder the line after them.
// diff refuses a name holding one; the command line blanks them out of the file text it prints.
bool is_terminal_control(uint32_t cp);
// `text` with each maximal ill-formed subsequence (Unicode's "maximal subpart": a lead byte and as many of its
// continuation bytes as are valid, else one byte) replaced by U+FFFD, as nlohmann's replace handler writes the
// summaries: a path from a filesystem that is not UTF-8 reaches every file attnprof writes the same way.
std::string utf8_replaced(std::string_view text);

// RFC 4180 fields: one quoted (its quotes doubled) when it holds a comma, a quote, CR or LF, else as it is.
std::string csv_field(std::string_view text);
// The fields joined by commas, each through csv_field, ending in "\n".
std::string csv_line(const std::vector<std::string>& fields);
// A number as the shortest text that reads back as the same double; "" for NaN and infinities.
std::string csv_number(double v);
// A JSON value as a cell's text: "" for null, a string as it is, a number as csv_number or JSON's integer text.
std::string csv_value(const nlohmann::json& v);

// CUDA profiles: the device activities alone (one row per kernel / copy / fill name), torch-style, with
// attnprof's Grid, Block, Regs (per thread), SMem (static + dynamic per block) and TFLOP/s (when the
// launching op's cost model applied); sorted by CUDA total; footer "Self CUDA time total". `row_limit` as
// in TableOptions.
std::string device_table(const prof::ProfileResult& r, int row_limit = -1);
// How each op's own OpenMP regions kept their threads busy (analysis::thread_balance), one row per op:
//   Threads: each op's own OpenMP regions (matmul's oneDNN/OpenBLAS threads belong to those libraries)
//   Op                    Regions  Threads    Busy  Slowest/mean  Late start  Items/region
//   flash_attention_fwd         3        2  62.3 %         1.95x     1.21 ms          16.0
// "" when no op recorded a region.
// `definitions`: false (--brief) leaves out the line under the rows that defines the columns.
std::string thread_balance_table(const std::vector<analysis::ThreadBalance>& rows, bool definitions = true);
// One "Threads:" line per op whose threads sat idle for more than a fifth of its parallel time (busy below
// 80 %), naming `subject` (the variant): what the table above would flag, for compare's text.
std::vector<std::string> thread_balance_notes(const std::string& subject,
                                              const std::vector<analysis::ThreadBalance>& rows);

// The steps inside the ops that time them (analysis::op_phases: the flash kernel's), one block per op:
//   Inside flash_attention_fwd: each thread's share split by the kernel's steps (3 calls, 2 threads) ...
//   Step            Thread time        %  GFLOP/s per thread  % of peak/thread
//   Q·Kᵀ                61.8 ms   38.9 %               145.2            63.1 %
// Each thread's time (its clock from step to step) is summed over the threads. A step that counts its FLOPs
// gets its rate per thread and, with `peaks`, that rate over the ceiling its FLOPs run at (compute_ceiling_gflops:
// bf16 FLOPs at the bf16 peak when `dtype` is bf16) divided by the threads the peaks were measured on. "" when no op timed its steps.
// `definitions` false (--brief): the table and its coverage, without what the columns mean.
std::string phase_table(const std::vector<analysis::OpPhases>& ops, const analysis::MachinePeaks* peaks,
                        DType dtype, bool definitions = true);
// The same in one line for compare's text: "Inside flash's flash_attention_fwd (its threads' time): load Q, K, V
// 10 %, Q·Kᵀ 31 % at 348 GFLOP/s a thread, ...". "" when the op timed no steps. `disturbed`: the row's forwards
// shared the CPUs or disagreed (Busy, Noisy): the steps are wall time on each thread, so a step a thread was
// preempted in counts the wait, and the line says its split is to re-measure.
std::string phase_line(const std::string& subject, const analysis::OpPhases& op, bool disturbed = false);

// The tasks inside the ops that mark them (analysis::op_items: the flash kernel's tiles), one block per op:
//   Tasks of flash_attention_fwd: 1536 Q blocks in 3 calls (512 a call), by the K/V blocks each visited
//   K/V blocks  Q blocks       Median         Mean          Max  GFLOP/s per thread
//            4       384     49.123us     51.080us    153.641us               186.7
// then the line through the medians ("Per Q block: 14.806us + its FLOPs at 280.0 GFLOP/s (...)", with three
// groups or more) and the slowest task with the step it spent most in. "" when no op marked tasks.
// `definitions` false (--brief): without the paragraph that says what a task's time is.
std::string item_table(const std::vector<analysis::OpItems>& ops, bool definitions = true);
// The fit and the slowest task in one line for compare's text: "flash's tasks (flash_attention_fwd's 1536 Q
// blocks): 15.098us + its FLOPs at 279.5 GFLOP/s (r² 1.000); the slowest, Q block 3 (batch 5, head 0) at ...".
// "" when the op marked no tasks.
std::string item_line(const std::string& subject, const analysis::OpItems& op);

// The profile as folded stacks, torch's export_stacks format and what flamegraph.pl, speedscope and inferno
// read: one line per distinct stack, "main;ProfilerStep*;attn_fwd;softmax 12064000", frames root first, the
// weight the stack's own time in integer nanoseconds (torch writes µs; sub-µs ops would vanish), summed over
// the recorded steps. Each thread is a root ("main", "worker 1"): a worker's shares of an op's parallel region
// are "worker 1;softmax" with the share's time, so the graph's total is every thread's time. Steps that
// an op times inside its shares (the flash kernel's) are frames under it: "main;...;flash_attention_fwd;Q·Kᵀ",
// their time taken off the op's own. ProfilerStep#N frames are "ProfilerStep*", as the table merges them; a ';'
// or line break in a name becomes ',' or ' '. A CUDA profile adds the GPU's time: each kernel, copy and fill
// under the zones that launched it, below "GPU 0" ("GPU 0;ProfilerStep*;attn_fwd;matmul;<kernel> 812000").
// Lines in byte order of their stacks; none of zero time.
std::string folded_stacks(const prof::ProfileResult& r);

// Chrome Trace Event JSON (opens in Perfetto and chrome://tracing): X events per thread, properly nested,
// sorted (ts asc, dur desc); M metadata; C counters for memory. ".gz" suffix -> gzip. With device events:
// a "GPU <n> (<name>)" process with one track per stream ("stream 7") holding kernel / gpu_memcpy /
// gpu_memset X events (args: grid, block, registers per thread, shared memory, bytes, correlation, FLOPs),
// a "cuda_runtime" slice for each launch on the launching CPU thread, "ac2g" flow events launch -> activity,
// and a "CUDA Mem" counter.
nlohmann::json chrome_trace_json(const prof::ProfileResult& r);
void write_chrome_trace(const prof::ProfileResult& r, const std::string& path);

// A thread's share of an op's parallel region is a `thread_work` slice named "<op> (share)", its args' "op" the
// op's name: the main thread's share nests in the op's own slice, and under the op's name it had doubled the op's
// count and time wherever slices are summed by name (Perfetto's aggregation, SQL over the trace).
inline constexpr std::string_view kShareSuffix = " (share)";

struct TraceOptions {
  bool memory_counters = true;  // "C" events named "Memory", args {"Allocated bytes": live total}
  bool memory_instants = true;  // Kineto-style instant events "[memory]", args Bytes / Total Allocated
};
// The same trace as text, written straight from the profile (no JSON DOM): what write_chrome_trace writes.
std::string chrome_trace_text(const prof::ProfileResult& r, const TraceOptions& opt = {});
nlohmann::json chrome_trace_json(const prof::ProfileResult& r, const TraceOptions& opt);
void write_chrome_trace(const prof::ProfileResult& r, const std::string& path, const TraceOptions& opt);

// Machine-readable summary: metadata, per-op rows, totals, overhead, memory.
nlohmann::json summary_json(const prof::ProfileResult& r, const analysis::KeyAverages& ka);
// What a summary records under `key` ("problem", "variant", "annotation"): the commands' "run" object, else the
// profiler's "metadata", else the top level (roofline.json); "" when none holds a non-empty string. The one
// rule report and diff read a file's problem and annotation by.
std::string recorded(const nlohmann::json& doc, std::string_view key);
// The string `o` holds under `key`, "" when it is absent or not a string (the file's checker has run).
std::string string_field(const nlohmann::json& o, std::string_view key);
// Whether two recorded "machine" objects (profile summaries') hold the same peaks: equal but for "from_cache",
// which says where a run found them (measured, or read back from the cache), not what they are. roofline
// --from and the report place profiles together only under the same peaks.
bool same_peaks(const nlohmann::json& a, const nlohmann::json& b);

// ---- two profiles side by side ----------------------------------------------------------------------
// The row of a profile diff (and the report's time bars) that holds the forward annotation's own time, what
// ran between its ops (freeing one op's buffers, allocating the next's): one name on every side, so naive's
// attn_fwd and SDPA's sdpa_fwd pair.
inline constexpr std::string_view kBetweenOps = "between ops";
// One op of a profile diff, per forward on each side (a side's figures are 0 when the op is absent there).
struct DiffRow {
  std::string base_name, new_name;  // equal, or "mul" / "mul_" for an op and its in-place form; "" = absent
  std::string change;               // "same", "changed" (other calls or bytes), "removed", "added", "in place"
                                    // (X -> X_), "out of place" (X_ -> X)
  double base_calls = 0, new_calls = 0;
  double base_ns = 0, new_ns = 0;        // self time (Self CUDA for device profiles)
  double base_mem = 0, new_mem = 0;      // self memory allocated (device memory for device profiles)
  double base_bytes = 0, new_bytes = 0;  // bytes moved by the op itself (cost model)
  double base_all_bytes = 0, new_all_bytes = 0;  // with its children's (a wrapper such as masked_fill has only those)
  double base_faults = -1, new_faults = -1;      // page faults when both sides recorded them (--counters), else -1
  // The median over recorded forwards of its self time per forward (self_ns_per_step), -1 when unknown; the
  // *_ns above are means (totals over forwards), which one disturbed forward can lift.
  double base_median_ns = -1, new_median_ns = -1;
  // On both sides, as often and moving the same bytes (within 1 %, its children's too): false for "changed",
  // "removed", "added", and for a pair turned in or out of place that also does other work.
  bool same_work = false;
  std::string label() const;             // "matmul", or "mul -> mul_" for an op and its other form
};
struct ProfileSide {
  std::string label;       // variant (or the file name when the summary has none)
  std::string problem;
  double forwards = 1;     // recorded forwards the summary covers (calls of its annotation)
  double ms_per_forward = 0, peak_bytes = 0;
  double ops_per_forward = -1, max_abs_err = -1;  // -1: not recorded (ops: null in the summary)
  std::vector<double> forward_ms;  // the timed forwards (run.forward_ms), when the summary has them
  std::optional<analysis::CpuSharing> sharing;  // run.cpu_sharing, when recorded
  std::vector<double> on_cpu;  // run.forward_on_cpu (-1 per forward not read; empty when not recorded)
  double threads = -1;         // run.threads, the team its ops ran on (-1: not recorded, or a device profile)
  std::string flash_block;     // run.flash_block as "256×64": the CPU flash kernel's blocks ("" where none ran)
};
// One step a kernel timed inside its shares (a summary's op_phases), on both sides: each thread's time in it per
// forward, summed over the threads, and the FLOPs it counted per forward; -1 for a side without the step.
struct StepDiff {
  std::string op, step;
  double base_ns = -1, new_ns = -1;
  double base_flops = 0, new_flops = 0;
};
// The tasks an op marked (a summary's op_items: the flash kernel's tiles) on both sides, paired by op: each
// side's entry as its summary holds it (counts over every forward that side recorded), none on a side without it.
struct ItemsDiff {
  std::string op;
  std::optional<analysis::OpItems> base, next;
  // The groups side by side, by inner count: one count's tasks on both sides where they did the same work (FLOPs
  // per task within 1 %), else a row each (tiles of other sizes: other flash blocks). Indices into base->groups
  // and next->groups; -1 for a side without the group.
  struct Row {
    int32_t inner = 0;
    int base = -1, next = -1;
  };
  std::vector<Row> rows;
};
struct ProfileDiff {
  ProfileSide base, next;
  std::vector<StepDiff> steps;  // the kernels' steps (the flash kernel's), base's order then new's own
  std::vector<ItemsDiff> items;  // the ops' tasks, base's order then new's own
  bool device = false;     // both are device (CUPTI) profiles: times are Self CUDA, memory is device memory
  bool faults = false;     // both recorded page faults per op (profile --counters): the table shows them
  bool memory = true;      // both recorded memory per op (profile_memory): else the memory cells are unknown
  std::vector<DiffRow> rows;  // by the size of the change in time, largest first
  double base_ns = 0, new_ns = 0;  // sums of the rows' self times per forward
};

// The checks diff applies to a summary or a compare.json, for readers that show them otherwise (report): an
// Error naming `what` and the first field attnprof would never write (a row without a name, a time that is not
// a number, a negative byte count, a status "ok" without a time...). With `run_figures`, a summary must also hold
// what diff prints above its table: "run" with ms_per_forward, peak_extra_bytes and ops_per_forward, the
// problem, and an annotation (or timed forwards) to count its forwards by; the report draws a summary without
// them, leaving out only what needs them.
void check_summary(const nlohmann::json& summary, const std::string& what, bool run_figures = false);
void check_compare_json(const nlohmann::json& compare, const std::string& what);
// One entry of a summary's op_items read back, held together as analysis::op_items writes it (the groups
// ascending and counting its items, medians and means within their group's longest, the slowest item the
// longest of its named group, times of 1 ns to a day), or an Error naming `what`, the op and the first field
// that is not. check_summary applies it to every entry, so diff and the report read the same figures.
analysis::OpItems op_items_from_summary(const nlohmann::json& entry, const std::string& what);
// A compare.json row's status as written ("ok", "failed", "skipped"; "" when it is not a string), or, in files
// from before "status" existed, the one their "skipped" and "ok" fields mean.
std::string compare_row_status(const nlohmann::json& row);
// A summary's rows read back as key averages (each op's calls, self and total time, own and inclusive cost,
// memory, device time): what `roofline --from` places and the report rebuilds a table from. Lenient (a field
// that is absent reads as 0), so call check_summary first.
analysis::KeyAverages key_averages_from_summary(const nlohmann::json& summary);
// Whether a summary's op rows carry memory: not where its "profiler" object says profile_memory was off, nor
// where any row's own memory figure (self_mem_bytes, or self_cuda_mem_bytes in a CUDA profile) is null, as a
// run without memory writes it (a summary with its "profiler" object removed still says so); else true, as
// summaries from before the switch recorded memory. Lenient: diff's check of the switch's type comes first.
bool summary_has_memory(const nlohmann::json& summary);

// The largest input diff and report read, before any of it is: 256 MiB (gzip-compressed traces: compressed and
// inflated). The largest file a run writes is a trace at --iters 10000, the most it records (sdpa-math's, the
// op-richest: 101 MB at a tiny shape with --counters, about 107 MB at the blog's; its summary 26 MB), so a
// larger file is none attnprof wrote, and reading it whole and parsing it (several times its size in memory)
// would only end in an error or exhaust memory.
inline constexpr uint64_t kMaxInputBytes = uint64_t(256) << 20;
// Why a file of `bytes` is not read ("it is 300000000 bytes (286.10 MiB), over the 256 MiB attnprof reads: no
// file it writes is that large"), or "" when it is within `limit`.
std::string input_size_error(uint64_t bytes, uint64_t limit = kMaxInputBytes);
// The limit as those messages name it: "256 MiB".
std::string input_size_limit_text(uint64_t limit = kMaxInputBytes);
// The whole of `path`, a file a run wrote (a summary, compare.json), refused by its size before it is read: an
// Error naming it when it is over `limit`, not a regular file, or cannot be read.
std::string read_input_file(const std::string& path, uint64_t limit = kMaxInputBytes);
// The deepest nesting of arrays and objects attnprof reads (its own files nest 6 deep at most): a document
// nested deeper is refused before it is parsed, which would take about 30 bytes of memory per byte of a
// file of nothing but brackets (3.5 GB for 120 MB).
inline constexpr int kMaxJsonDepth = 64;
// "" when `text` nests at most kMaxJsonDepth deep, else why not ("it nests arrays and objects over 64 deep, at
// byte 65: no file attnprof writes does"). A linear scan of brackets outside strings, no parse.
std::string json_depth_error(std::string_view text);
// What parsing `text` into a document takes in memory, estimated from a first pass that builds nothing (its
// values, members, elements and strings, each at what nlohmann::json gives it); and "" when that fits in the
// memory free (and under an address-space limit, in what the limit leaves), else why not. A parse that runs out
// of memory cannot be stopped cleanly: the library's clean-up of the half-built document allocates as well,
// inside a destructor, and the process aborts.
double json_parse_bytes(std::string_view text);
std::string json_memory_error(std::string_view text);
std::string json_memory_error(double need_bytes);  // the same for an estimate already made
// Why `text` is not parsed, the first of json_depth_error, a key given twice in one object (which the parser
// would settle by keeping the last, silently) and json_memory_error (the estimate only for a document within
// the depth), or "": what every reader of a file asks before nlohmann::json::parse.
std::string json_parse_error(std::string_view text);

// Two summary documents (`<variant>.summary.json` of profile or compare) op by op, per forward: what a change
// of implementation removed, added or turned in place, and where the time went. Annotations and
// ProfilerStep#N are left out (their time is the sum of the rows). Throws Error naming what is wrong when a
// document is not an attnprof summary or one is a device profile and the other is not.
ProfileDiff diff_summaries(const nlohmann::json& base, const nlohmann::json& next, const std::string& base_label = "",
                           const std::string& new_label = "");
// row_limit > 0: only the first rows (the largest changes); the totals still count every op.
// `definitions`: false (--brief) leaves out the lines that define the columns (Change, Per forward, Faults).
std::string diff_table(const ProfileDiff& d, int row_limit = 0, bool definitions = true);
nlohmann::json diff_json(const ProfileDiff& d, int row_limit = 0);

// Two comparisons (compare.json of two runs: before and after a change, two machines, CPU and GPU) variant by
// variant: status, ms per forward and the speed-up, peak memory, ops, max error on each side.
struct RunDiffRow {
  std::string variant;
  std::string base_status, new_status;  // ok | skipped | failed | "" (absent)
  double base_ms = -1, new_ms = -1;     // -1: not timed
  double base_peak = -1, new_peak = -1;
  double base_ops = -1, new_ops = -1;
  double base_err = -1, new_err = -1;
  std::vector<double> base_forward_ms, new_forward_ms;  // every timed forward (empty in older files)
  std::optional<analysis::CpuSharing> base_sharing, new_sharing;  // cpu_sharing, when recorded
  std::vector<double> base_on_cpu, new_on_cpu;                     // forward_on_cpu, when recorded
};
struct RunDiff {
  std::string base_label, new_label;  // problem and machine of each run
  bool same_problem = true;
  // Set when both runs are bf16 and name different GEMMs under naive/in-place's matmul (machine.bf16_matmul,
  // e.g. "onednn" against "fp32-widened-sgemm"): their speed-ups then mix a library change with the code's.
  std::string base_bf16_matmul, new_bf16_matmul;
  double base_threads = -1, new_threads = -1;  // each CPU run's "threads" (-1: a GPU run, or not recorded)
  std::string base_flash_block, new_flash_block;  // each CPU run's "flash_block" as "256×64" ("": not recorded)
  std::vector<RunDiffRow> rows;       // base's variants in its order, then those only the new run has
};
// Throws Error naming what is wrong when a document is not a compare.json.
RunDiff diff_compare_runs(const nlohmann::json& base, const nlohmann::json& next);
std::string diff_table(const RunDiff& d, bool definitions = true);  // false: without the speed-up/Ops/Peak line
nlohmann::json diff_json(const RunDiff& d);

// One command's output files, replaced together or not at all. While a FileBatch is open on a thread, every
// file that thread writes (write_text_atomic, the trace writer, npy::save) is completed in a temporary file
// beside its target and renamed by commit(); a batch destroyed uncommitted (an error half-way) removes them,
// so the directory keeps the previous run's files whole instead of a mix of two runs.
class FileBatch {
 public:
  FileBatch();
  ~FileBatch();  // uncommitted: removes every staged temporary file
  FileBatch(const FileBatch&) = delete;
  FileBatch& operator=(const FileBatch&) = delete;
  void commit();  // renames every staged file into place; throws Error naming a file that cannot be

 private:
  std::unique_ptr<struct FileBatchState> state_;
};

// Removes the temporary file of every output not yet in place (those a FileBatch holds included), so an
// interrupted run leaves no "<file>.tmp.PID.PLACE.XXXXXX" behind. Async-signal-safe: for a SIGINT/SIGTERM handler.
void remove_temporary_files() noexcept;
// For the same handler, first: true while a FileBatch renames its files into place; the signal is then
// raised again once they are all in place, and the handler should return at once. Async-signal-safe.
bool defer_signal_while_committing(int sig) noexcept;
// Creates and removes a file in `dir`: empty when that works, else why not ("a file cannot be created there
// (<strerror>)"; a directory flagged append-only or immutable, where a commit's rename over the last run's file
// would fail, is refused from its flags before any probe is made). Interrupted by a signal, the handler's
// remove_temporary_files() removes the probe too.
std::string write_probe_error(const std::string& dir);
// Before a run, for each file it will write at its end (write_text_atomic, the trace writer, npy::save): throws
// Error naming `path` when that write would be refused, by the rules it applies then. A regular file (or
// none) is replaced through a temporary file beside it, so its directory must exist and take a new file (a
// probe file is created and removed once per directory; one write_probe_error found writable counts), and
// its name must leave room for the temporary's suffix; a directory, a link to nothing or a loop of links is
// refused; a device must be writable; a FIFO is written through and not opened here (that would end a
// waiting reader's input). Nothing is left behind.
void check_output_file(const std::string& path);

// A count or byte figure held as a double, as JSON: an integer when it is whole (8, not 8.0), else the double.
nlohmann::json count_json(double v);

// Writes `contents` to `path` through a temporary file + rename; gzip when `path` ends in ".gz".
// Throws Error naming the path when the directory cannot be written.
void write_text_atomic(const std::string& path, const std::string& contents);

// Words for compare.json's machine.bf16_matmul (ops::bf16_matmul_key()): the GEMM under naive's and in-place's
// bf16 matmul. "" for a key it does not know.
std::string describe_bf16_matmul(std::string_view key);
// The note under a CPU run's table that names the GEMM naive and in-place ran on, for the run's dtype ("bf16":
// the one `bf16_key` names; "fp16": always widened to fp32 for sgemm): "bf16 matmul (naive, inplace): ...".
// "" for fp32 or a bf16 key it does not know. `who`: the unfused variants of the run it speaks of ("naive",
// "naive, inplace"). compare and sweep print it and the HTML report shows it.
std::string unfused_matmul_note(std::string_view dtype, std::string_view bf16_key,
                                std::string_view who = "naive, inplace");
// For rows whose rate came out above the peak ("flash", "flash at N=512"), which no code reaches: "Over 100 %: ..."
// (with its newline) saying why the peak is low and how to measure it again; "" when `over` is empty. `gpu`: the
// peak is a GPU's datasheet figure, not a measurement. compare and sweep print it, the HTML report shows it.
std::string over_peak_note(bool gpu, const std::vector<std::string>& over);

// One row of a comparison that ran: its name, median ms per forward and roofline floor (NaN when unknown).
struct RowTime {
  std::string name;
  double ms = 0, floor_ms = 0;
  // The share of the floor that is memory time (compare.json's floor_memory_share), < 0 when not known. A row
  // whose floor is compute (at most 1/4 memory) is far from it for other reasons than one held by its bytes.
  double floor_memory_share = -1;
  // Its forwards shared the CPUs with other work or disagreed (is_disturbed): a ratio standing on it is marked.
  bool disturbed = false;
  // The share of its self time spent in memory-bound ops (analysis::BoundTime::memory_share, compare.json's
  // memory_time_share), < 0 when not known.
  double memory_time_share = -1;
};
// The blog's ratios, read off one run: "Speed-up over naive (its ms per forward over each row's): inplace
// 1.46x, sdpa-math 0.46x, flash 3.87x." against naive where it ran, else the first row; "" with fewer than two
// rows. compare prints it under its table and the HTML report under the Comparison's.
std::string speedup_line(const std::vector<RowTime>& rows);
// The blog's headline ratio, which the speed-ups over naive leave to the reader: SDPA's math backend against
// in-place ("Blog's ratio: sdpa-math 3.73x slower than inplace (on its A100: 3.7x slower)."), with the same `*`
// for a disturbed side, which speedup_line (printed before it) explains; "" unless both rows ran.
std::string blog_ratio_line(const std::vector<RowTime>& rows);
// What the `*` on such a ratio means, with a leading space: " *: either side's forwards shared the CPUs ...".
std::string_view disturbed_ratio_note();
// The row those ratios divide by: naive when it ran, else the first row that ran (a time above 0); null with
// fewer than two rows that ran.
const RowTime* speedup_base(const std::vector<RowTime>& rows);
// Where the measured time went, beside the floor's Bound: "Time in memory-bound ops (...): naive 63 % (floor
// 50 %), inplace 34 % (floor 41 %), flash 0 % (floor 0 %). naive spent more ..." over the rows that know it,
// naming those ten points or more over their floor's share; "" when none does. compare prints it under the
// speed-up line, the HTML report under the Comparison's.
std::string memory_time_line(const std::vector<RowTime>& rows, bool gpu = false);
// One profile's split, op by op, as shares of the table's Self CPU (device: Self CUDA) time total: "Time by
// bound, of the Self CPU time total: memory-bound ops 48.4 % (softmax 20.8 %, ...); compute-bound ops 48.9 %
// (matmul 48.9 %); annotations', steps' and wrappers' own time 2.7 %. ..."; "" when no op with a verdict took
// time. `device`: activities in device time.
std::string bound_time_line(const analysis::BoundTime& t, bool device);
// JSON objects as CSV rows under `keys` (each cell csv_value of that key; empty where a row has none): roofline.csv
// from roofline.json's "ops".
std::string json_rows_csv(const nlohmann::json& rows, const std::vector<std::string>& keys);
// compare.json's rows as compare.csv: attnprof's variants (source "attnprof"), then the peer's ("torch"), each
// with compare.json's figures and, for a row that ran, its speed-up over speedup_base of attnprof's rows (the
// text's speed-up line); docs/output-format.md, "CSV files".
std::string compare_csv(const nlohmann::json& compare);
// A row that took more than kFarFromFloor times its roofline floor spent its time where the cost model does not
// look: "Far from the floor: naive took 2.574ms per forward, 8.9x its roofline floor of 287.590us: ..." (naive at
// a small shape, faulting in fresh pages for every N×N buffer, where the blog's shape has it at 1.8x); a row
// whose floor is compute (floor_memory_share at most 1/4: the fused kernels) computed below the peak instead.
// compare prints these lines; the HTML report, whose table has each row's ms over its floor, the summary.
inline constexpr double kFarFromFloor = 4.0;
std::vector<std::string> far_from_floor_notes(const std::vector<RowTime>& rows, bool gpu);
// The same rows in one line, for a table that shows each row's ms over its floor: "Far from the floor (past 4x
// its roofline floor, ...): naive 8.9x, sdpa-math 12.1x. Their time went ..."; "" when none is. Rows of both
// kinds get a sentence each, naming them.
std::string far_from_floor_summary(const std::vector<RowTime>& rows, bool gpu);
// The line that says matmul's FLOPs (OpenBLAS, oneDNN) are billed at the library ISA's peaks, not at the
// dispatched ISA's (ATTNPROF_ISA below the CPU's best): "matmul (OpenBLAS/oneDNN) billed at the avx512 peaks
// (fp32 93.0 / bf16 186.0 GFLOP/s): the libraries choose their own ISA". "" when the ISAs are the same.
std::string library_peaks_note(const analysis::MachinePeaks& m);

// Human-readable units as torch prints them: "1.234ms", "12.000us"; bytes as "1.25 Mb", "0 b".
std::string format_time_ns(double ns);
// A fitted scaling exponent with `decimals` decimals ("1.987"), or in full where those would round it to ±0
// ("-1.2e-04"): a -0.000 flagged implausible (below 0) would read as 0, which is inside the plausible 0..3.
std::string format_exponent(double x, int decimals = 3);
// FLOPs per ns of one thread's time as GFLOP/s per thread to one decimal ("348.2"), "--" where a step or a tile
// counted no FLOPs or took no time (a number format would print NaN).
std::string format_thread_gflops(double flops, double thread_ns);
std::string format_bytes(int64_t bytes);
// Decimal units, as compare's table prints peak memory and bytes moved: "536.9 MB", "2.75 GB" (1 MB = 10^6 B).
std::string format_bytes_decimal(double bytes);

// Slowest over fastest of a variant's timed forwards (0 when there are none): 1 on a quiet machine.
double forward_spread(const std::vector<double>& forward_ms);
// The spread as the JSON outputs carry it: null with fewer than two forwards.
nlohmann::json spread_json(const std::vector<double>& forward_ms);
// Forwards that disagree by more than this are reported: their median may stand on disturbed forwards (on a
// shared VM two rows running the same kernel once differed 2x).
inline constexpr double kNoisySpread = 1.15;
inline bool is_noisy(const std::vector<double>& forward_ms) { return forward_spread(forward_ms) > kNoisySpread; }
// The CPU sharing of a timed stretch as the JSON outputs carry it ("cpu_sharing": {"other_cpus", "cpus",
// "threads"}, null when it was not measured), and read back from the record that holds it (a summary's run,
// a compare.json variant, a sweep point): nothing for null, absent or malformed.
nlohmann::json cpu_sharing_json(const std::optional<analysis::CpuSharing>& s);
std::optional<analysis::CpuSharing> cpu_sharing_of(const nlohmann::json& record);
// Each forward's share of its wall time on a CPU as the JSON outputs carry it ("forward_on_cpu", beside
// forward_ms; null where task-clock was not read) and read back (-1 for null; empty when absent or malformed).
nlohmann::json on_cpu_json(const std::vector<double>& on_cpu);
std::vector<double> on_cpu_of(const nlohmann::json& record);
// Some forward's thread ran on a CPU for under kOnCpuMark of its wall (off_cpu_line names them).
bool any_off_cpu(const std::vector<double>& on_cpu);
// A timing that cannot be taken at face value: its forwards Noisy, Busy (other work shared the CPUs), or off the
// CPU (task-clock, where --counters read it).
inline bool is_disturbed(const std::vector<double>& forward_ms, const std::optional<analysis::CpuSharing>& sharing,
                         const std::vector<double>& on_cpu = {}) {
  return is_noisy(forward_ms) || (sharing && sharing->shared()) || any_off_cpu(on_cpu);
}
// A scaling fit whose exponent describes the machine's load as much as the variant: half its points or more
// were disturbed. sweep marks it so, and the HTML report reads it back from sweep.json's disturbed_points.
inline bool fit_disturbed(double disturbed_points, double points) {
  return points > 0 && disturbed_points > 0 && 2 * disturbed_points >= points;
}
// What compare, profile, sweep, diff and the HTML report say under their tables when timings cannot be taken
// at face value, one line each:
//   "Busy: other work used 1.3 of 2 CPUs while naive ran on 2 threads: ..." for every subject (a variant, or a
//   sweep point "naive at N=4096") whose timed forwards shared the CPUs (analysis::CpuSharing::shared), then
//   what to do about it once;
//   "Noisy: flash took 82.651ms / 44.868ms per forward (slowest 1.84x the fastest)." for every subject whose
//   spread is above kNoisySpread, then what to do about it once, then `machine_note`
//   (analysis::memory_reclaim_note) when it is not empty.
//   "Not judged: flash's warm-up and timed forwards took 0.031 s, ..." for subjects whose sharing was not
//   measured because their stretch (`window_s`, when known) was shorter than analysis::other_work_min_seconds().
// Nothing when every subject ran alone and steadily.
struct Timings {
  std::string subject;
  std::vector<double> forward_ms;
  std::optional<analysis::CpuSharing> sharing = std::nullopt;
  double window_s = -1.0;  // the stretch `sharing` was measured over, when known (-1: not known, e.g. read back)
  std::vector<double> on_cpu = {};  // each forward's share on a CPU (forward_on_cpu), when --counters read it
};
// `more_forwards`: how the run that wrote `timings` takes more forwards ("raise --iters"; a profile run under
// --schedule takes them from the schedule's ACTIVE or REPEAT instead, and refuses --iters beside it). The
// subjects' Off the CPU lines (off_cpu_line) come last.
std::vector<std::string> timing_notes(const std::vector<Timings>& timings, std::string_view machine_note,
                                      std::string_view more_forwards = "raise --iters");
// The forwards whose thread ran on a CPU for under kOnCpuMark of their wall time (`on_cpu`:
// analysis::zone_on_cpu_shares, the task-clock --counters reads; `forward_ms` in the same order): "Off the CPU:
// naive's thread ran on a CPU 18 % of forward 2's 18.551 ms (task-clock), ...", the worst three named; "" when
// none is, or task-clock was not read. A descheduled forward shows no spread when all of them were.
inline constexpr double kOnCpuMark = 0.8;
std::string off_cpu_line(const std::string& subject, const std::vector<double>& on_cpu,
                         const std::vector<double>& forward_ms);
// Ops whose self time per forward is uneven: for each row that does work, takes at least kUnevenShare of the
// self total and whose mean per step (recorded forward) is more than kNoisySpread times its median over at
// least three steps (OpStats::step_self_ns), one line, the largest excess first, at most four:
//   "Uneven: softmax's self CPU per forward: median 32.10ms, mean 44.80ms, slowest 155.0ms (1 of 10 forwards
//   over 1.15x the median); the table's totals and averages include them."
// The whole forward can stay under the Noisy threshold while one op's time is lifted by one forward.
inline constexpr double kUnevenShare = 0.05;
// The rule both apply (and diff's Uneven lines, per side): an op whose mean self time per forward, over at least
// three forwards, is at least kUnevenShare of the forward's self total and more than kNoisySpread times its median.
inline bool is_uneven(double mean_ns, double median_ns, double total_ns, double forwards) {
  return forwards >= 3 && mean_ns > 0 && mean_ns >= kUnevenShare * total_ns && mean_ns > kNoisySpread * median_ns;
}
std::vector<std::string> uneven_op_notes(const analysis::KeyAverages& ka);
// The ops behind those lines, the largest excess over the median first, at most four, and one line for one of
// them: `owner` ("flash", or "" in a variant's own table) before its label, `consequence` after it (what in
// the output the slow forwards lift).
struct UnevenOp {
  std::string name, label;  // label: the name, with its input shapes and types where rows are grouped by them
  double median_ns = 0, mean_ns = 0, slowest_ns = 0;
  size_t over = 0, forwards = 0;  // forwards over kNoisySpread × the median, of all recorded
};
std::vector<UnevenOp> uneven_ops(const analysis::KeyAverages& ka);
// Items as a sentence lists them: "a", "a and b", "a, b and c".
std::string spoken_list(const std::vector<std::string>& items);
std::string uneven_line(const UnevenOp& u, std::string_view owner, std::string_view consequence);

// The same for a run read back (diff, the report), which may have been a profile under --schedule.
inline constexpr std::string_view kMoreForwardsOfAStoredRun = "raise --iters (a profile under --schedule: its ACTIVE)";

}  // namespace attnprof::report
