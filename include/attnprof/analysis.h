// attnprof/analysis.h: turning a profile into numbers: per-op aggregates (torch's key_averages), memory,
// the roofline against measured machine peaks, and scaling fits.
//
//   prof::ProfileResult r = profiler.result();
//   analysis::KeyAverages ka = analysis::key_averages(r, {.group_by_input_shape = false});
//   for (const analysis::OpStats& op : ka.rows) ... op.self_ns, op.total_ns, op.cost.flops ...
//
//   analysis::MachinePeaks peaks = analysis::machine_peaks(/*threads=*/2);   // measured once, cached
//   analysis::RooflinePoint pt = analysis::place(op.cost, op.total_ns, peaks);
//
//   analysis::PowerFit fit = analysis::fit_power_law(seq_lens, times);      // exponent ≈ 2 for attention
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attnprof/cost.h"
#include "attnprof/dtype.h"
#include "attnprof/profiler.h"

namespace attnprof::analysis {

// ---- per-op aggregation ------------------------------------------------------------------------------
// A step, as the trace names it (ProfilerStep#N) or as key averages fold it (ProfilerStep*).
inline bool is_step(std::string_view name) { return name.rfind("ProfilerStep", 0) == 0; }
// A zone that marks a region rather than doing work: a user annotation (attn_fwd, ...) or a step (ProfilerStep#N
// in a trace, ProfilerStep* in key averages). Op counts, the roofline and profile diffs leave these out.
inline bool is_annotation(std::string_view name, std::string_view category) {
  return category == "user_annotation" || is_step(name);
}
// The key-averages row of a step zone: torch's key_averages() reads every ProfilerStep#N as one "ProfilerStep*"
// (_rewrite_name with its wildcard), a row whose # of Calls is the steps recorded; the trace keeps each step's
// own name. One row per step would crowd the ops out of a 15-row table.
inline constexpr std::string_view kStepRow = "ProfilerStep*";
inline bool is_step_zone(std::string_view name) { return name.rfind("ProfilerStep#", 0) == 0; }

struct OpStats {
  std::string name;
  std::string category;        // cpu_op, user_annotation
  std::string input_shapes;    // "[[8, 16, 1024, 64], [8, 16, 64, 1024]]" when grouped by shape, else ""
  std::string input_types;     // "[bf16, bf16]": each input's element type when grouped by shape, else ""
  int64_t calls = 0;
  double self_ns = 0.0;        // total minus direct children's totals
  double total_ns = 0.0;       // wall time inside the zone less the calibrated overhead of the zones nested in
                               // it, summed over calls (nested calls of the same name counted once)
  int64_t mem_bytes = 0;       // bytes allocated inside the zone including children (never negative)
  int64_t self_mem_bytes = 0;  // bytes allocated directly in the zone, not in children
  int64_t freed_bytes = 0;     // bytes freed inside the zone including children
  OpCost cost;                 // inclusive cost model: the zone's own cost plus its children's
  OpCost self_cost;            // the cost model recorded on the zone itself
  int64_t task_clock_ns = -1;  // software counters when recorded, else -1
  int64_t page_faults = -1;    // inclusive: every thread's faults while the zone was open (recursion once)
  int64_t self_page_faults = -1;  // less those of the zones nested in it: an op's own first touches
  // Self time in each recorded step (ProfilerStep#N), in step order, 0 in a step where it did not run: how the
  // op's self time spread over the forwards, which its mean (self_ns / steps) hides. A zone belongs to the step
  // its thread's parent chain reaches. Empty when the profile has no steps, when some of the op's zones ran
  // outside every step (on a thread of their own, or before the first), and for every row when rows × steps
  // passes 2^21 (rows that multiply with the steps).
  std::vector<double> step_self_ns;
  // Device side (CUDA profiles; zero on the CPU). Self CUDA belongs to device activity rows only (category
  // kernel / gpu_memcpy / gpu_memset): a CPU zone's device_total_ns is the time of the activities launched
  // inside it or its children, its self_device_ns is 0, so Self CUDA sums to the device time exactly once.
  double self_device_ns = 0.0;
  double device_total_ns = 0.0;
  int64_t device_mem_bytes = 0;       // device bytes allocated inside the zone including children
  int64_t self_device_mem_bytes = 0;  // device bytes allocated directly in the zone
  bool is_device_activity() const;  // a row of device activities (is_device_category), not a CPU op
  // The time that rates (GFLOP/s, GB/s) and the roofline use: device time when the row has any (a kernel,
  // or a CPU op whose work ran on the GPU), else CPU time.
  double rate_ns() const { return device_total_ns > 0 ? device_total_ns : total_ns; }
};

struct KeyAveragesOptions {
  bool group_by_input_shape = false;
};

struct KeyAverages {
  std::vector<OpStats> rows;      // one per (name[, shapes]), in first-seen order
  double self_total_ns = 0.0;     // sum of self times of every zone (torch's "Self CPU time total")
  double zone_overhead_ns = 0.0;  // calibrated per-zone overhead that was subtracted
  int64_t zones = 0;              // number of zone events aggregated
  bool has_memory = true;         // the profile recorded memory (profile_memory): else no row's memory is known
  bool has_shapes = true;         // the profile recorded input shapes (record_shapes)
  int64_t peak_bytes = 0;         // peak live bytes of the tracked allocator during the profile
  int64_t start_bytes = 0;        // live bytes when recording began
  int64_t outside_zones_bytes = 0;  // bytes allocated while no zone was open on the allocating thread (no row
                                    // holds them; the table footer names them when there are any)
  double overhead_subtracted_ns = 0.0;  // zone overhead taken off self (and so total) times, after clamping at 0
  std::string counters_note;      // what software/hardware counters were available (from the profile)
  // Device side: set when the profile has device activity (CUDA backend). Device activity rows (one per
  // kernel / copy / fill name) follow the zone rows.
  bool has_device = false;
  std::string device_name;
  double device_self_total_ns = 0.0;  // "Self CUDA time total": every activity once
  int64_t device_peak_bytes = 0;      // peak live device bytes seen during the profile
};

KeyAverages key_averages(const prof::ProfileResult& r, const KeyAveragesOptions& opt = {});
// The inclusive cost model of each of `t`'s zones: its own cost plus its descendants'. OpStats::cost sums
// these, and the trace's zone args carry them.
std::vector<OpCost> inclusive_costs(const prof::ThreadTrace& t);
// The self time of each of `t`'s zones, as key_averages sums it into OpStats::self_ns (the calibrated cost of
// the zones nested in it taken off): what a flame graph's frames weigh.
std::vector<double> zone_self_ns(const prof::ProfileResult& r, const prof::ThreadTrace& t);

// ---- device (CUDA) time per zone and per activity ----------------------------------------------------
// Pure host code over ProfileResult::device / device_mem, so it is tested without a GPU.
struct ZoneDeviceStats {
  double total_ns = 0.0;         // inclusive: activities launched in this zone or any descendant
  double launched_ns = 0.0;      // activities launched with this zone innermost
  int64_t activities = 0;        // inclusive count
  int64_t mem_bytes = 0;         // device bytes allocated in this zone or descendants
  int64_t self_mem_bytes = 0;    // device bytes allocated with this zone innermost
};
// [thread index][zone index], same shape as r.threads[t].zones.
std::vector<std::vector<ZoneDeviceStats>> zone_device_stats(const prof::ProfileResult& r);

// One row per device activity name (kernel, "Memcpy DtoD ...", "Memset ..."), in first-seen order.
struct DeviceOpStats {
  std::string name;
  std::string category;          // "kernel", "gpu_memcpy", "gpu_memset"
  int64_t calls = 0;
  double total_ns = 0.0, min_ns = 0.0, max_ns = 0.0;
  OpCost cost;                   // summed over calls (zero when the launching op's model did not apply)
  std::array<int32_t, 3> grid{}, block{};  // of the last call
  int32_t registers = 0, static_smem = 0, dynamic_smem = 0;
  float occupancy = -1.0f;       // estimated achieved occupancy of the last call (kernels; -1 unknown)
};
std::vector<DeviceOpStats> device_key_averages(const prof::ProfileResult& r);
double device_time_total_ns(const prof::ProfileResult& r);  // sum of activity durations ("Self CUDA time total")
int64_t device_peak_bytes(const prof::ProfileResult& r);    // highest live device bytes seen in device_mem
const char* device_category(prof::DeviceActivity::Kind k);   // "kernel", "gpu_memcpy", "gpu_memset"
bool is_device_category(std::string_view category);          // one of device_category's three

// Wall time of each outermost zone named `name` (not nested in another of that name; e.g. the per-forward
// annotation, inside its ProfilerStep#N), in time order, in ns.
std::vector<double> zone_durations_ns(const prof::ProfileResult& r, std::string_view name);
// The same zones' share of their wall time that their thread ran on a CPU (its task-clock over the wall, up to
// 1), in the same order; -1 for a zone whose task-clock was not read (profile --counters reads it on
// annotations where perf_event_open allows). Well under 1: the thread was descheduled, or slept waiting.
std::vector<double> zone_on_cpu_shares(const prof::ProfileResult& r, std::string_view name);

// How each op's own OpenMP regions used their threads, from every thread's WorkSpans (ops that record them:
// flash, softmax, mul, masked_fill, copy; oneDNN's and OpenBLAS's threads inside matmul are their libraries'
// and not seen). Per region: its wall is the first share's start to the last share's end, its capacity the
// wall times its team; summed over the op's regions. Rows in order of the op's first region.
struct ThreadBalance {
  std::string name;        // the op whose zone ran the regions
  int64_t regions = 0;     // parallel calls recorded
  int threads = 0;         // the largest team seen
  double wall_ns = 0;      // Σ region walls
  double capacity_ns = 0;  // Σ region wall × team size
  double busy_ns = 0;      // Σ every thread's share
  double slowest_ns = 0;   // Σ each region's longest share
  double mean_ns = 0;      // Σ each region's mean share
  double lag_ns = 0;       // Σ each region's latest start after its first (a worker that woke late)
  int64_t items = 0;       // tasks or rows the shares counted (0 when the op does not count them)
  // 1 when every thread worked from the region's start to its end; less is time a thread sat idle in it.
  double busy_share() const { return capacity_ns > 0 ? busy_ns / capacity_ns : 0.0; }
  // The longest share over the mean share: 1 is perfect balance, 2 on two threads is one thread doing all.
  double imbalance() const { return mean_ns > 0 ? slowest_ns / mean_ns : 0.0; }
};
std::vector<ThreadBalance> thread_balance(const prof::ProfileResult& r);

// What an op's one zone does not show: how its threads' shares split their time among the op's own steps
// (WorkShare::phases; the flash kernel's load, Q·Kᵀ, online softmax, P·V and store), summed over every
// thread's shares of every region the op ran. Time is each thread's own clock (time it waited for a CPU
// included), summed over the threads, so on 2 busy threads it is
// twice the wall. One entry per op that timed its steps, in order of its first region.
struct OpPhases {
  struct Step {
    std::string name;
    double ns = 0;     // Σ over the shares
    double flops = 0;  // Σ of what the op counted (0 for steps it does not count: loads, softmax, stores)
  };
  std::string name;          // the op
  int64_t regions = 0;       // parallel calls whose shares timed their steps
  int threads = 0;           // the largest team seen
  double share_ns = 0;       // Σ the shares' time, from start to end
  std::vector<Step> steps;   // in the op's order; steps that took no time in any share are left out
  double steps_ns() const;   // Σ steps: share_ns less what ran after a share's last lap
};
std::vector<OpPhases> op_phases(const prof::ProfileResult& r);

// The tasks an op marked inside its shares (WorkShare::begin_item: the flash kernel's tiles, one per batch, head
// and Q block), grouped by their inner count (the K/V blocks a tile visited): what a task costs per inner block,
// fitted, and the slowest task with the step that took most of it. Under a causal mask a tile visits only the
// blocks left of the diagonal and the diagonal's, so its cost grows with its Q block: its blocks are the triangle
// the fused kernel computes, and those above the diagonal, which it skips, cost nothing. One entry per op that
// marked items, in order of its first region.
struct OpItems {
  struct Group {
    int32_t inner = 0;
    int64_t count = 0;
    double median_ns = 0, mean_ns = 0, max_ns = 0;
    double flops = 0;  // Σ over the group's items
    double flops_each() const { return flops / double(count); }    // what one item counted, on average
    double thread_ns() const { return mean_ns * double(count); }   // Σ over the group's items of their time
  };
  std::string name;                  // the op
  std::string noun, inner;           // "Q block", "K/V blocks" (ItemNames)
  std::array<std::string, 3> keys;   // "batch", "head", "Q block"; empty: unused
  int64_t items = 0, regions = 0;
  std::vector<Group> groups;         // by ascending inner count
  // Time per item ≈ fixed_ns + its FLOPs / marginal_gflops: the least-squares line through the groups' medians
  // (a slow first item, a page fault, moves a median little) against their FLOPs per item; only with three inner
  // counts or more (two points make any line), whose items all counted FLOPs, and a cost that grows with them.
  // FLOPs rather than inner blocks: a last Q block that is not whole (or Nq ≠ Nk) visits as many blocks with
  // fewer rows, off a line through the inner counts. fixed_ns is what an item costs whatever its size (taking
  // the task, loading its rows, storing its output); below 0 where the medians' scatter outweighs it.
  bool fitted = false;
  double fixed_ns = 0, marginal_gflops = 0, r2 = 0;
  struct Slowest {
    std::array<int32_t, 3> keys{};
    int32_t inner = 0;
    double ns = 0;
    double group_median_ns = 0;  // the median of the items with its inner count
    std::string step;            // the step it spent most in, and how long
    double step_ns = 0;
  } slowest;
  std::string item_label(const std::array<int32_t, 3>& k) const;  // "Q block 3 (batch 0, head 1)"
};
std::vector<OpItems> op_items(const prof::ProfileResult& r);
// Each of `t`'s work items' share: its index in t.work (the share of the item's region on the same thread), -1
// where that share was not kept. op_items and the trace both pair items with their shares by it.
std::vector<int32_t> item_shares(const prof::ThreadTrace& t);

// ---- the machine and the roofline --------------------------------------------------------------------
// What each memory loop moved over arrays no cache holds (three of 128 MB), in GB/s of the bytes the loop asks
// for (STREAM's count: no write-allocate read). The roofline's memory roof is the best of them: which pattern
// moves the most bytes a second differs by machine, and a roof one of our ops beats is no roof. On a Zen 5 VM
// the in-place update ran at 1.5x triad's figure, so in-place ops judged by triad alone read 130-140 %.
// All 0 where not measured: a GPU's datasheet bandwidth, or a file from before attnprof measured them.
struct BandwidthLoops {
  double update = 0.0;  // a = s·a, in place: reads and writes the same lines (our in-place ops; ERT's kernel)
  double copy = 0.0;    // a = b (STREAM's copy)
  double triad = 0.0;   // a = b + s·c (STREAM's triad)
  bool measured() const { return update > 0 || copy > 0 || triad > 0; }
  double best() const { return std::max({update, copy, triad}); }
};

struct MachinePeaks {
  std::string cpu;             // model name from /proc/cpuinfo
  std::string cpu_signature;   // "AuthenticAMD family 26 model 2 stepping 1"; "" for a GPU's datasheet figures
  std::string isa;             // the SIMD target the peaks were measured with
  int threads = 1;
  double fp32_gflops = 0.0;    // FMA throughput
  double bf16_gflops = 0.0;    // vdpbf16ps throughput, 0 when the CPU has none
  double bandwidth_gbs = 0.0;  // the memory roof: the best of bandwidth_loops (a GPU's: its datasheet figure)
  BandwidthLoops bandwidth_loops;
  double sgemm_gflops = 0.0;   // OpenBLAS sgemm 2048³, the practical fp32 ceiling
  // The same FMA and bf16-dot peaks at the ISA OpenBLAS and oneDNN run at: the CPU's best, since they read
  // CPUID and not ATTNPROF_ISA. The figures above when `isa` is that one; the roofline bills an op's
  // OpCost::library_flops at these. A GPU's are its own ceilings again; 0 (peaks from before these fields)
  // bills library FLOPs at the figures above.
  std::string library_isa;
  double library_fp32_gflops = 0.0;
  double library_bf16_gflops = 0.0;  // 0 when the CPU has no AVX512-BF16
  // A GPU's datasheet ceilings (isa "sm_90"), not a CPU's measured ones.
  bool gpu() const { return isa.rfind("sm_", 0) == 0; }
  // The libraries run at another ISA's peaks than our kernels (ATTNPROF_ISA below the CPU's best).
  bool library_isa_differs() const { return !library_isa.empty() && library_isa != isa; }
  // When the figures were measured ("2026-12-04 10:31 UTC"; "" for an entry from before this was recorded, and
  // for a GPU's datasheet figures), and whether this run took them from the cache rather than measuring them:
  // every Bound, floor and % of peak rests on them, so the outputs say which.
  std::string measured_at;
  bool from_cache = false;
  // What else ran while they were measured, when that was enough to make them low ("other work used 1.0 of 2
  // CPUs"); "" for a measurement on an idle machine. An op can then pass 100 % of its compute roof.
  std::string measured_busy;
};

// What the memory roof is, for the lines that print it: "the best of three loops over 128 MB arrays: in-place
// update 102.6, copy 77.5, STREAM triad 65.0 GB/s" ("STREAM triad" for a file from before the loops were
// measured, "the datasheet's" for a GPU's peaks).
std::string bandwidth_source(const MachinePeaks& m);
// The loops' figures as those lines name them: "in-place update 102.6, copy 77.5, STREAM triad 65.0 GB/s".
std::string bandwidth_loops_text(const BandwidthLoops& l);
// A JSON "bandwidth_loops" object ({"update", "copy", "triad"}) read into `out`: "" when each is a bandwidth a
// machine gives and `bandwidth_gbs` is their best, else why not ("bandwidth_loops has no number 'copy'"). The
// peaks' reader and the report hold the loops to it.
std::string bandwidth_loops_from_json(const nlohmann::json& loops, double bandwidth_gbs, BandwidthLoops& out);

// "measured 2026-12-04 10:31 UTC, from the peaks cache; `attnprof roofline --peaks-only --remeasure` measures
// them again", "measured now (2026-12-04 10:31 UTC)", or for an entry from before the time was recorded "from
// the peaks cache, measured before attnprof recorded the time; ...": where a run's CPU ceilings came from.
std::string peaks_provenance(const MachinePeaks& m);
// ", on a busy machine (other work used 1.0 of 2 CPUs), so they may be low" for MachinePeaks::measured_busy, ""
// for an idle measurement: the clause every line naming where the peaks came from carries.
std::string busy_peaks_clause(std::string_view measured_busy);

// {"cpu", "cpu_signature" (when known), "isa", "threads", "fp32_gflops", "bf16_gflops", "bandwidth_gbs",
// "bandwidth_loops" ({"update", "copy", "triad"}, when measured), "sgemm_gflops", "library_isa",
// "library_fp32_gflops", "library_bf16_gflops", "measured_at" (when known), "from_cache" (when true)}: the form
// every JSON output (peaks cache, compare.json, roofline.json) uses, via nlohmann's `json j = peaks;`.
void to_json(nlohmann::json& j, const MachinePeaks& m);
// The figures no machine gives, far outside any real one's: a rate outside 0.1 GFLOP/s .. 10 PFLOP/s, a
// bandwidth outside 0.1 GB/s .. 100 TB/s (1e-300 GB/s would put every op under a ceiling of nothing).
inline constexpr double kMinPeakRate = 0.1, kMaxPeakGflops = 1e7, kMaxPeakGbs = 1e5;
// "" when `value` of the peak `key` is one a machine can give, else why not ("bandwidth_gbs 1e-30 is outside
// 0.1..100000 GB/s"): a bandwidth against kMaxPeakGbs, a rate against kMaxPeakGflops; `zero_ok` for a peak a
// machine may lack (bf16), which then reads 0. The peaks cache's reader and the report hold figures to it.
std::string implausible_peak(const char* key, double value, bool bandwidth, bool zero_ok);
// The same object read back (a compare.json's "machine"): Error saying what is wrong when a field is missing,
// of the wrong type, or a figure no machine gives (kMinPeakRate .. kMaxPeakGflops or kMaxPeakGbs).
MachinePeaks machine_peaks_from_json(const nlohmann::json& j);

// Measures the peaks (a few hundred ms) or returns the cached figures for this machine and thread count.
// The cache is a JSON file keyed by CPU model and signature, ISA and thread count
// ($XDG_CACHE_HOME/attnprof/ + kPeaksCacheFile). What the caller should tell the user (a corrupt or older cache
// ignored, peaks measured on a busy machine, a cache that could not be written) goes to `notes`, one sentence
// each, when given: the library prints nothing.
MachinePeaks machine_peaks(int threads, bool force_measure = false, std::vector<std::string>* notes = nullptr);
// The cache's file name. A sanitizer build measures its own instrumented loops (a STREAM triad a tenth as fast):
// a file of its own, so its figures never stand for the machine's in a release build's rooflines, nor the reverse.
#ifdef ATTNPROF_SANITIZED
inline constexpr const char* kPeaksCacheFile = "peaks-sanitized.json";
#else
inline constexpr const char* kPeaksCacheFile = "peaks.json";
#endif

// Whether this machine gives freed memory back to a hypervisor (a virtio-balloon device with free page
// reporting, as on Firecracker and cloud VMs): memory freed and not reused within about 2 s is taken back,
// and the next first touch of it waits for the host to back it again (on the development VM ≈ 1 GB/s
// against ≈ 15–17 GB/s for pages the guest still holds; docs/performance.md). Ops that allocate fresh buffers
// then vary from run to run. Returns a one-line explanation, or nothing when the machine does not do this.
// `sysfs` is where sysfs is mounted (tests point it at a fake tree).
std::optional<std::string> memory_reclaim_note(const std::string& sysfs = "/sys");

// Other work beside this process: other processes, and time the hypervisor gave this VM's CPUs to someone
// else (steal), from /proc/stat, in CPUs averaged from construction to the call: what a load average, which
// lags a minute behind, cannot say. Timings taken while the other work left this process's threads too few
// CPUs include time spent waiting for one.
class OtherWork {
 public:
  OtherWork();
  double cpus() const;     // NaN when /proc/stat cannot be read
  double seconds() const;  // wall time since construction
 private:
  double busy0_, own0_, t0_;
};
int online_cpus();
// The busy mark: other work above the CPUs `threads` leave free on `cpus`, plus half a CPU of slack, left the
// threads too few CPUs.
double busy_mark(int threads, int cpus);
// The shortest window the figure is judged over: /proc/stat counts each CPU's busy time in whole ticks (10 ms),
// so a window's busy seconds can be off by up to a tick per CPU; over 2·cpus ticks that moves the figure by at
// most half a CPU, the busy mark's slack. At least 0.1 s (2 CPUs: 0.1 s; 16 CPUs: 0.32 s).
double other_work_min_seconds();

// What ran beside a timed stretch of forwards, when it was long enough to say.
struct CpuSharing {
  double other_cpus = 0.0;
  int cpus = 0, threads = 0;
  bool shared() const { return other_cpus > busy_mark(threads, cpus); }
};
// The figure for a stretch `w` measured by, run on `threads` threads: nothing when /proc/stat could not be
// read or the stretch was shorter than other_work_min_seconds().
std::optional<CpuSharing> cpu_sharing(const OtherWork& w, int threads);
// The same figure from another process's readings over its own timed stretch (compare --peer torch reads
// /proc/stat and its CPU time around its forwards): the machine's busy seconds and the process's own CPU
// seconds over `wall_seconds`. Nothing when a reading is negative or not finite, or the stretch is too short.
std::optional<CpuSharing> cpu_sharing(double machine_busy_seconds, double own_cpu_seconds, double wall_seconds,
                                      int threads);

struct RooflinePoint {
  double intensity = 0.0;       // FLOP per byte from the cost model
  double achieved_gflops = 0.0;
  double attainable_gflops = 0.0;  // min(compute peak, intensity × bandwidth)
  double ridge_intensity = 0.0;    // compute peak / bandwidth
  bool memory_bound = false;       // intensity below the ridge
  double fraction_of_attainable = 0.0;
  double achieved_gbs = 0.0;           // bytes per ns
  double fraction_of_bandwidth = 0.0;  // achieved GB/s over the bandwidth (0 without one): an op without FLOPs'
};
// The compute ceiling of one op: its bf16 FLOPs (cost.bf16_flops) at the bf16 peak, the rest at the fp32 peak
// (the FLOP-weighted harmonic mean, i.e. the time all its FLOPs take at those rates), the FLOPs it ran inside
// a library (cost.library_flops, library_bf16_flops) at the library's peaks. A machine without a bf16 peak
// runs everything at the fp32 one. An op without FLOPs gets the fp32 peak (it only sets the ridge).
double compute_ceiling_gflops(const OpCost& cost, const MachinePeaks& peaks);
RooflinePoint place(const OpCost& cost, double ns, const MachinePeaks& peaks);

// One op of a profile on the roofline, with the cost and time it was placed in.
struct PlacedOp {
  const OpStats* op = nullptr;  // the key_averages row
  OpCost cost;                  // the row's own cost (self_cost): its children are placed on their own
  double ns = 0.0;              // the row's own time the rates are over (summed over calls)
  RooflinePoint pt;
};
// Every op of a profile that does work of its own, placed once. A CPU profile places each op by its own cost
// and self time; annotations, ProfilerStep#N and wrappers whose cost is all their children's (masked_fill's
// copy_ and masked_fill_, scaled_dot_product_attention) are left out, since their children are placed and
// their summed FLOP/B would sit between ops on both sides of the ridge. A device profile places its kernels,
// copies and fills in device time, each activity once, and leaves out the host zones that launched them,
// whose cost is the activities' cost again. The rows point into `ka`, which must outlive the result.
std::vector<PlacedOp> roofline_ops(const KeyAverages& ka, const MachinePeaks& peaks);

// Where a profile's measured time went, by each placed op's roofline verdict (roofline_ops): the time of the
// ops whose FLOP/B puts them below their ridge (memory-bound by the cost model) and of those above it
// (compute-bound), each kind's ops longest first, out of the profile's whole self time (the table's Self CPU
// time total; Self CUDA on a device profile), whose rest is the annotations', steps' and wrappers' own time.
// The floor below says where the time had to go; this says where it went.
struct BoundTime {
  struct Op {
    std::string name;
    double ns = 0.0;
  };
  double memory_ns = 0.0, compute_ns = 0.0;
  double total_ns = 0.0;  // every zone's self time (every activity's on a device profile)
  std::vector<Op> memory_ops, compute_ops;
  double other_ns() const { return std::max(0.0, total_ns - memory_ns - compute_ns); }
  // The memory-bound ops' share of the whole self time; < 0 when no op with a verdict took any.
  double memory_share() const { return memory_ns + compute_ns > 0 && total_ns > 0 ? memory_ns / total_ns : -1.0; }
};
BoundTime bound_time(const KeyAverages& ka, const MachinePeaks& peaks);

// The roofline floor of a profile: every op at its own ceiling, max(bytes / bandwidth, FLOPs / its compute
// ceiling), summed over the ops with a cost. The ops' own (self) costs, so a composite op (masked_fill =
// copy_ + masked_fill_) and its children count once; a device profile sums its activities, whose launching
// zones carry the same cost again. It is the time those ops take at the given ceilings; an op whose data stays
// in cache can beat the measured bandwidth, and so the floor.
// memory_ns is the part of the floor spent in ops whose bytes, not their FLOPs, set it.
struct RooflineFloor {
  double ns = 0.0;
  double memory_ns = 0.0;
  double memory_share() const { return ns > 0 ? memory_ns / ns : 0.0; }
};
RooflineFloor roofline_floor(const KeyAverages& ka, const MachinePeaks& peaks);
// "memory" when ops held by their bytes make at least 3/4 of the floor, "compute" when at most 1/4, else
// "mixed": compare's Bound column and the report's.
const char* floor_bound_kind(double memory_share);

// ---- scaling -----------------------------------------------------------------------------------------
struct PowerFit {
  double exponent = 0.0;     // b in y = a·x^b, least squares on log-log
  double coefficient = 0.0;  // a
  double r2 = 0.0;           // of the log-log fit
  double rms_log_error = 0.0;
  double exponent_stderr = 0.0;
  size_t points = 0;
  // The points stray from a power law: a standard error above 0.15 on the exponent, or points off the line by
  // a root-mean-square above 0.25 in natural log, about 28 % (rms_log_error; not R², which means nothing for a
  // flat series such as flash's memory at small N). Three points or more: two fix a line exactly and say nothing either way. Its exponent is no
  // scaling law: fixed costs dominate at small N, or the timings were disturbed.
  bool weak() const { return points > 2 && (exponent_stderr > 0.15 || rms_log_error > 0.25); }
};
PowerFit fit_power_law(const std::vector<double>& x, const std::vector<double>& y);

// The median of `v`: the middle value, or the mean of the two middle values when `v` has an even count;
// 0 when empty. Every "median of the timed forwards" (host wall time, CUDA events) is this one.
double median(std::vector<double> v);

}  // namespace attnprof::analysis
