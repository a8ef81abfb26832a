// attnprof/profiler.h: zones, memory events and the profiling session.
//
//   attnprof::prof::Profiler prof({.schedule = {.wait = 1, .warmup = 1, .active = 3}});
//   prof.start();
//   for (int i = 0; i < 5; ++i) {
//     { ATTNPROF_ANNOTATE("attn_fwd"); run_forward(); }   // like torch.profiler.record_function
//     prof.step();                                        // like prof.step(): closes ProfilerStep#i
//   }
//   prof.stop();
//   ProfileResult r = prof.result();                      // feed to report/table, chrome trace, json
//
// Inside the library every op opens a zone:
//   ATTNPROF_OP_ZONE(z, "matmul");  z.set_cost(cost); z.add_shape(a.shape()); ...
// A zone is a static call-site record plus two timestamps (Tracy's design). The RAII object writes into a
// per-thread buffer, so OpenMP workers appear as their own threads. Nothing is aggregated or formatted
// while recording; that happens in analysis and the reporters. With ATTNPROF_PROFILER=OFF in CMake the
// macros expand to no-op objects and no profiling code runs.
// An op that runs an OpenMP region records each thread's share of it (the trace's worker tracks, and
// analysis::thread_balance):
//   ATTNPROF_PARALLEL_REGION(region);            // on the calling thread, inside the op's zone
//   #pragma omp parallel
//   { ATTNPROF_WORK_SHARE(share, region);  ...  share.add_items(n); }
// An op that times its steps (share.phases, share.lap) may also mark its tasks, each then a slice of its own
// under the share in the trace (the flash kernel's tiles):
//   share.begin_item(kNames, b, h, q_block);  ...laps...  share.end_item(kv_blocks);
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "attnprof/cost.h"

#ifndef ATTNPROF_PROFILER_ENABLED
#define ATTNPROF_PROFILER_ENABLED 1
#endif

namespace attnprof::prof {

// The static record a call site owns.
struct ZoneSite {
  const char* name;
  const char* category;  // "cpu_op", "user_annotation", "kernel"...
};

inline constexpr int kMaxShapes = 4;

struct ZoneEvent {
  const char* name = nullptr;       // site name or an interned dynamic name
  const char* category = nullptr;
  uint64_t t0 = 0, t1 = 0;          // ticks (see ProfileResult::ns_per_tick)
  int32_t parent = -1;              // index of the enclosing zone in the same thread, -1 for a root
  uint16_t depth = 0;
  uint8_t n_shapes = 0;
  uint32_t serial = 0;              // the thread's count of zones opened when this one opened (from 1)
  const char* variant = nullptr;    // the attention variant that was running, if any (interned)
  OpCost cost;                      // from the op's cost model
  std::array<std::array<int64_t, 4>, kMaxShapes> shapes{};
  std::array<const char*, kMaxShapes> types{};  // each shape's element type ("bf16", "fp32"...), static strings
  // Software counters when enabled, -1 when not measured: page faults (every thread's) on every zone,
  // task-clock (this thread's CPU time) on annotation zones.
  int64_t task_clock_ns = -1;
  int64_t page_faults = -1;
};

struct MemEvent {
  uint64_t t = 0;        // ticks
  int64_t delta = 0;     // +bytes allocated, -bytes freed
  int64_t total = 0;     // live bytes in the tracked allocator after this event
  int32_t zone = -1;     // innermost open zone of the thread that allocated/freed, -1 if none
  uint64_t addr = 0;     // the block's address: a free carries its allocation's (the trace's "Addr")
};

// One thread's share of a parallel region: from entering its part of the op's OpenMP region to leaving it
// (the region's closing barrier excluded), named after the op whose zone ran the region. Not a zone: it adds
// nothing to the table's times (torch.profiler, too, counts an op once, on the thread that called it).
// An op may split each share's time into its own steps (the flash kernel: load, Q·Kᵀ, softmax, P·V, store):
// at most kMaxPhases of them, named by a static array, each with the ticks and the FLOPs the share spent in it.
inline constexpr int kMaxPhases = 6;
struct WorkSpan {
  const char* name = nullptr;  // the op's zone name ("flash_attention_fwd", "softmax", ...)
  uint32_t region = 0;         // the region's id, unique within the session: every thread's share of one call
  uint64_t t0 = 0, t1 = 0;     // ticks
  int64_t items = 0;           // tasks (or rows) this thread took, when the op counts them; 0 otherwise
  int32_t zone = -1;           // innermost zone open on this thread when the share began (the op's own zone on
                               // the thread that called it; -1 on a worker), index into its ThreadTrace::zones
  uint8_t n_phases = 0;        // steps the op split this share into (WorkShare::phases), 0 when it did not
  const char* const* phase_names = nullptr;  // n_phases static names
  std::array<uint64_t, kMaxPhases> phase_ticks{};  // ticks in each step, summed over the share's laps
  std::array<double, kMaxPhases> phase_flops{};    // FLOPs each step computed, as the op counted them
};

// How an op names its work items (static storage): the trace names each item's slice `noun` and its last used
// key's value ("Q block 15"), and its args carry every key and the inner count under their names.
struct ItemNames {
  const char* noun;                 // "Q block"
  std::array<const char*, 3> keys;  // what begin_item's three numbers are ("batch", "head", "Q block"); nullptr: unused
  const char* inner;                // what end_item's count counts ("K/V blocks"); nullptr: nothing
};

// One task of a share that timed its steps (WorkShare::begin_item .. end_item): from the lap before it began to
// its last lap, so a share's items follow each other without gaps and each one's step ticks add up to its
// length. Recorded when it ends, before its share (which is recorded when the share ends).
struct WorkItem {
  uint64_t t0 = 0, t1 = 0;       // ticks
  uint32_t region = 0;           // its share's region (WorkSpan::region): the share on the same thread holds it
  int32_t inner = 0;             // the op's inner count (the flash kernel: the K/V blocks the tile visited)
  std::array<int32_t, 3> keys{};
  const ItemNames* names = nullptr;
  std::array<uint64_t, kMaxPhases> phase_ticks{};  // ticks in each step of the share's, within this item
  double flops = 0.0;            // what the op counted in its steps within this item
};

struct ThreadTrace {
  uint32_t tid = 0;         // small sequential id: 0 is the first thread that recorded (usually main)
  std::string name;         // "main", "worker 1", ...
  std::vector<ZoneEvent> zones;  // in order of opening
  std::vector<MemEvent> mem;
  std::vector<WorkSpan> work;    // this thread's shares of parallel regions, in time order
  std::vector<WorkItem> items;   // the tasks those shares marked (WorkShare::begin_item), in time order
};

// One device-side activity (a CUDA kernel, copy or fill) collected through CUPTI, with its timestamps mapped
// onto the host tick timeline (see attnprof/cuda.h). Filled by cuda::attach_device_capture(); empty on the CPU.
struct DeviceActivity {
  enum class Kind : uint8_t { Kernel, Memcpy, Memset };
  Kind kind = Kind::Kernel;
  const char* name = nullptr;       // demangled kernel name, "Memcpy DtoD (Device -> Device)", "Memset (Device)"
  uint64_t t0 = 0, t1 = 0;          // host ticks, mapped from device timestamps
  uint32_t device = 0, stream = 0, correlation = 0;
  int32_t thread = -1;              // index into ProfileResult::threads of the launching thread, -1 unknown
  int32_t zone = -1;                // innermost zone open at launch on that thread (its zones index)
  uint64_t launch_t0 = 0, launch_t1 = 0;  // host ticks of the launching API call (cudaLaunchKernel...)
  const char* launch_api = nullptr;       // "cudaLaunchKernel", "cuLaunchKernel", "cudaMemcpyAsync", ...
  std::array<int32_t, 3> grid{}, block{};
  int32_t registers = 0;            // per thread
  int32_t static_smem = 0, dynamic_smem = 0;  // bytes per block
  float occupancy = -1.0f;          // kernels: estimated achieved occupancy (Kineto's), 0..1; -1 unknown
  int64_t bytes = 0;                // memcpy/memset size
  const char* variant = nullptr;    // the launching zone's variant
  OpCost cost;                      // the launching op's cost model when it launched this activity alone
  double ns(double ns_per_tick) const { return double(t1 - t0) * ns_per_tick; }
};

// A device (cudaMalloc-backed) allocation or free by the tracked device allocator, attributed like MemEvent.
struct DeviceMemEvent {
  uint64_t t = 0;        // ticks
  int64_t delta = 0;     // +bytes allocated, -bytes freed
  int64_t total = 0;     // live device bytes after this event
  int32_t thread = -1;   // index into ProfileResult::threads, -1 if none
  int32_t zone = -1;     // innermost open zone of that thread, -1 if none
};

// The GPU a device profile ran on, as cudaDeviceProp gives it: what Kineto writes into a trace's top-level
// "deviceProperties" (totalGlobalMem, computeMajor, numSms, ...), which trace analysis tools written for
// torch's traces read. 0 where unknown.
struct DeviceProperties {
  int id = 0;
  std::string name;                       // "NVIDIA A100-SXM4-80GB"
  int64_t total_global_mem = 0;           // bytes
  int compute_major = 0, compute_minor = 0;
  int max_threads_per_block = 0, max_threads_per_sm = 0;
  int regs_per_block = 0, regs_per_sm = 0;
  int warp_size = 0;
  int64_t shared_mem_per_block = 0, shared_mem_per_sm = 0, shared_mem_per_block_optin = 0;
  int sms = 0;
};

struct ProfileResult {
  std::vector<ThreadTrace> threads;
  double ns_per_tick = 1.0;
  uint64_t origin_ticks = 0;      // tick value that maps to t = 0 in reports
  double zone_overhead_ns = 0.0;  // calibrated cost of one zone enter+exit, subtracted from self and total times
  int64_t start_bytes = 0;        // live tracked-allocator bytes when the kept recording window began
  bool memory_recorded = true;    // ProfilerOptions::profile_memory: allocations and frees are in ThreadTrace::mem
  bool shapes_recorded = true;    // ProfilerOptions::record_shapes: zones keep their input shapes and types
  bool counters_recorded = false; // software counters were read: page faults on every zone
  bool task_clock_recorded = false; // and task-clock on annotation zones (perf_event_open allowed it)
  std::string clock;              // "tsc" or "steady_clock"
  std::string counters_note;      // what software/hardware counters were available
  std::map<std::string, std::string> metadata;  // variant, shape, dtype, ... for reporters

  // Device side (CUDA backend): empty and false on the CPU.
  bool has_device = false;
  DeviceProperties gpu;                     // the GPU's name and properties
  std::vector<DeviceActivity> device;       // sorted by t0
  std::vector<DeviceMemEvent> device_mem;   // in time order

  double ns(uint64_t ticks_delta) const { return double(ticks_delta) * ns_per_tick; }
  double us_since_origin(uint64_t t) const {
    return (double(int64_t(t - origin_ticks))) * ns_per_tick * 1e-3;
  }
};

struct Schedule {
  int wait = 0;
  int warmup = 0;
  int active = 1 << 30;  // default: record every step
  int repeat = 1;        // number of wait/warmup/active cycles; 0 = repeat forever
  int64_t cycle() const { return int64_t(wait) + warmup + active; }  // steps per cycle
  // Steps through every cycle, and the active (recorded) ones among them; repeat 0, forever, counts one cycle.
  int64_t steps() const { return cycle() * (repeat > 0 ? repeat : 1); }
  int64_t active_steps() const { return int64_t(active) * (repeat > 0 ? repeat : 1); }
};

struct ProfilerOptions {
  Schedule schedule{};
  // On by default, unlike torch.profiler's: the tables' memory columns and the trace's Input Dims come from
  // them. Off, the allocator's hook returns at once and the shapes are dropped at stop().
  bool profile_memory = true;
  bool record_shapes = true;
  bool software_counters = false;  // page faults per zone (getrusage), task-clock per annotation (perf_event_open)
  // Wrap each recorded step in a ProfilerStep#N zone. As in torch.profiler (record_steps), this happens only
  // when a schedule is given (any Schedule field differs from its default); a plain start()/stop() run, or one
  // that calls step() without a schedule, records no ProfilerStep zones. false: never.
  bool step_annotations = true;
};

// --- clock ------------------------------------------------------------------------------------------
// Invariant TSC calibrated against steady_clock where the CPU has one, steady_clock otherwise.
uint64_t now_ticks() noexcept;
double ns_per_tick();
const char* clock_name();

// --- zone listener ----------------------------------------------------------------------------------
// Called on the zone's own thread each time a recording zone opens and closes (nested, in order): how the
// CUDA backend mirrors every zone as an NVTX range, so Nsight Systems shows attnprof's names. One listener
// at a time; set or clear it while nothing is recording, so opens and closes pair. Without a listener a
// zone pays one relaxed load more.
struct ZoneListener {
  void (*on_open)(const char* name, const char* category) noexcept;
  void (*on_close)() noexcept;
};
void set_zone_listener(const ZoneListener* listener) noexcept;  // nullptr removes; the object must outlive its use
const ZoneListener* zone_listener() noexcept;

// --- recording state --------------------------------------------------------------------------------
namespace detail {
extern std::atomic<bool> g_recording;
extern std::atomic<bool> g_memory;
struct ThreadBuffer;
ThreadBuffer* thread_buffer();  // this thread's buffer, registered on first use
// The same for the recording paths, which cannot throw (a zone's constructor, a share inside an OpenMP region):
// nullptr when the buffer could not be made (no memory), counted as a dropped event, so that the session
// refuses the profile as it does when a buffer cannot grow.
// `lost_event`: whether a failure loses an event of the caller's (false for a caller that records none itself).
ThreadBuffer* recording_buffer(bool lost_event = true) noexcept;
// An open zone as its opener holds it: its index in the thread's buffer and its serial number. A step boundary
// drops the zones recorded since the warm-up began, and the next zone opened takes a dropped zone's index; the
// serial tells that zone from the dropped one, whose close and writes then go nowhere.
struct ZoneRef {
  int32_t idx = -1;  // -1: not recording
  uint32_t serial = 0;
};
ZoneRef open_zone(ThreadBuffer* b, const char* name, const char* category) noexcept;
void close_zone(ThreadBuffer* b, ZoneRef z) noexcept;
ZoneEvent* zone_at(ThreadBuffer* b, ZoneRef z) noexcept;  // the scratch event for a dropped zone
const char* intern(std::string_view s);  // stable pointer for a dynamic name
int32_t innermost_zone(ThreadBuffer* b) noexcept;  // -1 when no zone is open
const char* innermost_zone_name(ThreadBuffer* b) noexcept;  // nullptr when no zone is open
uint32_t next_region_id() noexcept;
void record_work(ThreadBuffer* b, const WorkSpan& w) noexcept;
void record_item(ThreadBuffer* b, const WorkItem& w) noexcept;
}  // namespace detail

inline bool recording() noexcept { return detail::g_recording.load(std::memory_order_relaxed); }

// RAII zone. When the profiler is not recording, construction is one relaxed load and a branch.
class Zone {
 public:
  explicit Zone(const ZoneSite& site) noexcept {
    if (recording()) [[unlikely]] begin(site.name, site.category);
  }
  // Dynamic name (interned: meant for annotations, not hot loops).
  Zone(std::string_view name, const char* category) {
    if (recording()) begin(detail::intern(name), category);
  }
  ~Zone() {
    if (ref_.idx >= 0) detail::close_zone(buf_, ref_);
  }
  Zone(const Zone&) = delete;
  Zone& operator=(const Zone&) = delete;

  bool active() const { return ref_.idx >= 0; }
  void set_cost(const OpCost& c) noexcept {
    if (ref_.idx >= 0) detail::zone_at(buf_, ref_)->cost = c;
  }
  // An input's shape and, when given, its element type (a string with static storage: dtype_name's).
  void add_shape(const std::array<int64_t, 4>& s, const char* type = nullptr) noexcept {
    if (ref_.idx < 0) return;
    ZoneEvent* e = detail::zone_at(buf_, ref_);
    if (e->n_shapes < kMaxShapes) {
      e->types[e->n_shapes] = type;
      e->shapes[e->n_shapes++] = s;
    }
  }

 private:
  void begin(const char* name, const char* category) noexcept {
    buf_ = detail::recording_buffer();
    if (buf_) ref_ = detail::open_zone(buf_, name, category);
  }
  detail::ThreadBuffer* buf_ = nullptr;
  detail::ZoneRef ref_;
};

// Compiled-out stand-in with the same interface.
class NullZone {
 public:
  constexpr bool active() const { return false; }
  constexpr void set_cost(const OpCost&) const noexcept {}
  constexpr void add_shape(const std::array<int64_t, 4>&, const char* = nullptr) const noexcept {}
};

// The calling thread's side of an OpenMP region, made just before it: names the region after the innermost
// open zone (the op running it) and gives it an id. Nothing when the profiler is not recording.
class ParallelRegion {
 public:
  ParallelRegion() noexcept {
    if (recording()) [[unlikely]] {
      detail::ThreadBuffer* b = detail::recording_buffer(/*lost_event=*/false);  // a region is no event
      if (const char* op = b ? detail::innermost_zone_name(b) : nullptr) {
        name_ = op;
        id_ = detail::next_region_id();
      }
    }
  }
  bool active() const { return id_ != 0; }
  const char* name() const { return name_; }
  uint32_t id() const { return id_; }

 private:
  const char* name_ = nullptr;
  uint32_t id_ = 0;
};

// One thread's share of a region, from construction (inside the parallel region) to destruction.
class WorkShare {
 public:
  explicit WorkShare(const ParallelRegion& r) noexcept {
    if (r.active() && recording()) [[unlikely]] {
      buf_ = detail::recording_buffer();
      if (!buf_) return;
      span_.name = r.name();
      span_.region = r.id();
      span_.zone = detail::innermost_zone(buf_);
      span_.t0 = now_ticks();
    }
  }
  ~WorkShare() {
    if (buf_) {
      span_.t1 = now_ticks();
      detail::record_work(buf_, span_);
    }
  }
  WorkShare(const WorkShare&) = delete;
  WorkShare& operator=(const WorkShare&) = delete;
  void add_items(int64_t n) noexcept { span_.items += n; }
  // Splits this share's time into the op's steps, named by `names` (static storage, at most kMaxPhases):
  // each lap(k) then adds the ticks since the previous lap (or since the share began) to step k, and `flops`
  // to its FLOPs. A clock read per lap, and nothing when the profiler is not recording.
  template <size_t N>
  void phases(const std::array<const char*, N>& names) noexcept {
    static_assert(N <= size_t(kMaxPhases), "at most kMaxPhases steps");
    if (!buf_) return;
    span_.n_phases = uint8_t(N);
    span_.phase_names = names.data();
    last_ = span_.t0;
  }
  bool timing_phases() const noexcept { return buf_ != nullptr && span_.n_phases > 0; }
  void lap(int k, double flops = 0.0) noexcept {
    if (!timing_phases()) [[likely]] return;
    const uint64_t t = now_ticks();
    span_.phase_ticks[size_t(k)] += t > last_ ? t - last_ : 0;  // a clock that stepped back adds nothing
    span_.phase_flops[size_t(k)] += flops;
    last_ = t;
  }
  // One task of this share, from the last lap (no clock read of its own) to the last lap before end_item: its
  // steps' ticks and FLOPs are what the laps between added. Only while timing steps; `names` is static.
  void begin_item(const ItemNames& names, int32_t k0, int32_t k1 = 0, int32_t k2 = 0) noexcept {
    if (!timing_phases()) [[likely]] return;
    item_.names = &names;
    item_.keys = {k0, k1, k2};
    item_.t0 = last_;
    item_ticks_ = span_.phase_ticks;
    item_flops_ = 0.0;
    for (double f : span_.phase_flops) item_flops_ += f;
  }
  void end_item(int32_t inner = 0) noexcept {
    if (!timing_phases() || !item_.names) [[likely]] return;
    item_.region = span_.region;
    item_.t1 = last_;
    item_.inner = inner;
    for (size_t k = 0; k < size_t(kMaxPhases); ++k) item_.phase_ticks[k] = span_.phase_ticks[k] - item_ticks_[k];
    double flops = 0.0;
    for (double f : span_.phase_flops) flops += f;
    item_.flops = flops - item_flops_;
    detail::record_item(buf_, item_);
    item_.names = nullptr;
  }

 private:
  detail::ThreadBuffer* buf_ = nullptr;
  WorkSpan span_;
  uint64_t last_ = 0;
  WorkItem item_;                                  // the open item (names set between begin_item and end_item)
  std::array<uint64_t, kMaxPhases> item_ticks_{};  // the share's step ticks when it began
  double item_flops_ = 0.0;                        // and its FLOPs
};

// Compiled-out stand-ins.
struct NullParallelRegion {};
struct NullWorkShare {
  constexpr void add_items(int64_t) const noexcept {}
  template <size_t N>
  constexpr void phases(const std::array<const char*, N>&) const noexcept {}
  constexpr bool timing_phases() const noexcept { return false; }
  constexpr void lap(int, double = 0.0) const noexcept {}
  constexpr void begin_item(const ItemNames&, int32_t, int32_t = 0, int32_t = 0) const noexcept {}
  constexpr void end_item(int32_t = 0) const noexcept {}
};

// Marks the attention variant running on this thread, so each event can carry it (trace args, JSON).
class VariantScope {
 public:
  explicit VariantScope(std::string_view variant);
  ~VariantScope();
  VariantScope(const VariantScope&) = delete;
  VariantScope& operator=(const VariantScope&) = delete;

 private:
  const char* prev_;
};

// --- the session ------------------------------------------------------------------------------------
class Profiler {
 public:
  explicit Profiler(ProfilerOptions opts = {});
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Everything start() allocates, done ahead: the event buffers (mapped, not from the heap), the OpenMP
  // workers' buffers, the zone-overhead calibration and the schedule's ProfilerStep#N names. A caller that
  // runs warm-up forwards calls it before them, so the heap the forwards allocate from has settled around
  // the profiler by the first recorded step. Claims the session (one at a time); start() calls it if needed.
  void prepare();
  void start();  // clears buffers, enters step 0 of the schedule
  void step();   // ends the current step, like torch.profiler's prof.step()
  void stop();   // ends the session; result() is valid after this

  ProfileResult result() const;
  const ProfilerOptions& options() const { return opts_; }
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

 private:
  enum class Phase { None, Wait, Warmup, Active };
  Phase phase_of(int step) const;
  bool schedule_given() const;  // any Schedule field differs from its default (torch's record_steps)
  void enter_step();
  void leave_step();
  void make_room();  // between steps: buffers grow there, each on its own thread, not inside the next step's ops
  static constexpr int64_t kMaxStepsBetweenRooms = 64;
  int64_t steps_until_room_ = 0;  // steps until the workers' buffers are next looked at (make_room)
  int64_t steps_since_room_ = 0;

  ProfilerOptions opts_;
  int step_ = 0;
  bool prepared_ = false;  // holds the session: prepare() ran and stop() has not
  double counting_overhead_ns_ = 0.0;  // calibrated_zone_overhead_ns(true), measured by prepare()
  bool running_ = false;
  detail::ZoneRef step_zone_;
  detail::ThreadBuffer* step_buf_ = nullptr;
  ProfileResult collected_;
  std::map<std::string, std::string> metadata_;
};

// Measures the cost of one enter+exit of a recording zone (ns), once per process; cached. With
// `with_counters`, of a zone that reads the software counters too (two getrusage calls, about 2 us), measured
// anew on each call: getrusage's cost grows with the process's threads.
double calibrated_zone_overhead_ns(bool with_counters = false);

namespace detail {
// Called by the tracked allocator (src/core/allocator.cpp) on every allocation and free.
void on_memory(void* p, int64_t delta, int64_t total) noexcept;
}  // namespace detail

}  // namespace attnprof::prof

#define ATTNPROF_CONCAT_(a, b) a##b
#define ATTNPROF_CONCAT(a, b) ATTNPROF_CONCAT_(a, b)

#if ATTNPROF_PROFILER_ENABLED
// A zone named `name` (a string literal) held in variable `var`, category `cat`.
#define ATTNPROF_ZONE_AS(var, name, cat)                                                            \
  static constexpr ::attnprof::prof::ZoneSite ATTNPROF_CONCAT(attnprof_site_, __LINE__){name, cat}; \
  ::attnprof::prof::Zone var(ATTNPROF_CONCAT(attnprof_site_, __LINE__))
#define ATTNPROF_ANNOTATE_DYN(var, name_sv) ::attnprof::prof::Zone var((name_sv), "user_annotation")
#define ATTNPROF_PARALLEL_REGION(var) const ::attnprof::prof::ParallelRegion var
#define ATTNPROF_WORK_SHARE(var, region) ::attnprof::prof::WorkShare var(region)
#else
#define ATTNPROF_ZONE_AS(var, name, cat) [[maybe_unused]] constexpr ::attnprof::prof::NullZone var{}
#define ATTNPROF_ANNOTATE_DYN(var, name_sv) [[maybe_unused]] constexpr ::attnprof::prof::NullZone var{}
#define ATTNPROF_PARALLEL_REGION(var) [[maybe_unused]] constexpr ::attnprof::prof::NullParallelRegion var{}
#define ATTNPROF_WORK_SHARE(var, region) [[maybe_unused]] constexpr ::attnprof::prof::NullWorkShare var{}
#endif

// An op zone (torch's cpu_op): `ATTNPROF_OP_ZONE(z, "matmul"); z.set_cost(...);`
#define ATTNPROF_OP_ZONE(var, name) ATTNPROF_ZONE_AS(var, name, "cpu_op")
// A user annotation (torch's record_function): `ATTNPROF_ANNOTATE("attn_fwd");`
#define ATTNPROF_ANNOTATE(name) ATTNPROF_ZONE_AS(ATTNPROF_CONCAT(attnprof_zone_, __LINE__), name, "user_annotation")
