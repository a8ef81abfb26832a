// The profiling session: schedule (wait/warmup/active/repeat), ProfilerStep#N annotations, collection.
#include <algorithm>
#include <mutex>
#include <string>
#include <utility>

#include "attnprof/allocator.h"
#include "attnprof/error.h"
#include "profiler/counters.h"
#include "profiler/recorder.h"

namespace attnprof::prof {
namespace {

std::atomic<bool> g_session_open{false};

// Drops a thread's recorded events and its open-zone stack (its capacity, mapped in, is kept for the next session).
void clear_events(detail::ThreadBuffer* b) {
  b->zones.clear();
  b->mem.clear();
  b->work.clear();
  b->items.clear();
  b->stack.clear();
  b->room_zones = b->room_mem = b->room_work = b->room_items = 0;
}

void truncate_all_to_marks() {
  for (detail::ThreadBuffer* b : detail::all_buffers()) {
    if (b->zones.size() > b->mark_zones) b->zones.resize(b->mark_zones);
    if (b->mem.size() > b->mark_mem) b->mem.resize(b->mark_mem);
    if (b->work.size() > b->mark_work) b->work.resize(b->mark_work);
    if (b->items.size() > b->mark_items) b->items.resize(b->mark_items);
    // What make_room last saw is measured from here: a marker past the truncated size would count the next
    // steps' events short (none at all until they pass it) and take a busy worker for an idle one.
    b->room_zones = std::min(b->room_zones, b->zones.size());
    b->room_mem = std::min(b->room_mem, b->mem.size());
    b->room_work = std::min(b->room_work, b->work.size());
    b->room_items = std::min(b->room_items, b->items.size());
    // Zones opened before the mark and still open (an annotation around the whole loop) stay open.
    while (!b->stack.empty() && size_t(b->stack.back()) >= b->mark_zones) b->stack.pop_back();
  }
}

void set_marks() {
  for (detail::ThreadBuffer* b : detail::all_buffers()) {
    b->mark_zones = b->zones.size();
    b->mark_mem = b->mem.size();
    b->mark_work = b->work.size();
    b->mark_items = b->items.size();
  }
}

}  // namespace

double calibrated_zone_overhead_ns(bool with_counters) {
  // What one empty child zone adds to its parent's time beyond its own measured duration: exactly
  // what must be subtracted from a parent's self time per direct child, over rounds of `children` (after one
  // to warm up). Plain zones: the least of 15 rounds of 500. Interruptions only add to a round, never take
  // away: on a loaded machine the median of five long rounds had read 237 ns for a 13 ns cost, and subtracted
  // per child that clamped ops' self times to 0; short rounds leave most of them uninterrupted. With counters:
  // the median of short rounds, since getrusage's own cost varies with what the process's threads do, and
  // the least would under-subtract it; 21 short rounds of 100, since on a loaded machine most of 5 rounds of
  // 500 had been interrupted and their median read 16 us for a 2.6 us cost.
  // With counters on, a zone reads the page faults just outside its [t0, t1] (counters.h), so that cost is
  // part of what it adds to its parent, and is calibrated with them on.
  auto measure = [](bool counting, int children, int rounds, bool least) {
    detail::ThreadBuffer* b = detail::thread_buffer();
    const size_t zones0 = b->zones.size(), mem0 = b->mem.size();
    // Recording on, counters as asked, and the zone listener (NVTX mirroring) held off: calibration zones must
    // not reach Nsight's timeline. All three, and the buffer, are put back however this ends (a reserve below
    // can throw bad_alloc under an address-space limit), so no zone records outside a session afterwards.
    struct Restore {
      detail::ThreadBuffer* b;
      size_t zones0, mem0;
      const ZoneListener* listener;
      bool was, counters_were;
      ~Restore() {
        b->zones.resize(zones0);
        b->mem.resize(mem0);
        detail::g_counters.store(counters_were);
        detail::g_recording.store(was);
        set_zone_listener(listener);
      }
    } restore{b,           zones0, mem0, zone_listener(), detail::g_recording.exchange(true),
              detail::g_counters.exchange(counting)};
    set_zone_listener(nullptr);
    static constexpr ZoneSite parent_site{"calibration", "cpu_op"};
    static constexpr ZoneSite child_site{"calibration_child", "cpu_op"};
    std::vector<double> samples;
    for (int round = 0; round <= rounds; ++round) {
      b->zones.reserve(zones0 + children + 8);
      uint64_t parent_t0 = 0, parent_t1 = 0, child_sum = 0;
      {
        Zone parent(parent_site);
        for (int i = 0; i < children; ++i) {
          Zone child(child_site);
        }
      }
      const ZoneEvent& p = b->zones[zones0];
      parent_t0 = p.t0;
      parent_t1 = p.t1;
      for (size_t i = zones0 + 1; i < b->zones.size(); ++i) child_sum += b->zones[i].t1 - b->zones[i].t0;
      b->zones.resize(zones0);
      if (round > 0) samples.push_back(double(parent_t1 - parent_t0 - child_sum) * ns_per_tick() / children);
    }
    std::sort(samples.begin(), samples.end());
    return least ? samples.front() : samples[samples.size() / 2];
  };
  // With counters, measured anew each time: getrusage(RUSAGE_SELF) walks every thread of the process, so
  // its cost grows with the threads there are now (a session calibrates after its OpenMP team exists).
  if (with_counters) return measure(true, 100, 21, /*least=*/false);
  static const double plain = measure(false, 500, 15, /*least=*/true);
  return plain;
}

Profiler::Profiler(ProfilerOptions opts) : opts_(opts) {
  const Schedule& s = opts_.schedule;
  ATTNPROF_CHECK(s.wait >= 0 && s.warmup >= 0 && s.active >= 1 && s.repeat >= 0,
                 "invalid profiler schedule: wait={} warmup={} active={} repeat={} (need wait, warmup >= 0, "
                 "active >= 1, repeat >= 0)",
                 s.wait, s.warmup, s.active, s.repeat);
}

Profiler::~Profiler() {
  if (running_) {
    try {
      stop();
    } catch (...) {
    }
  } else if (prepared_) {
    g_session_open.store(false);  // prepared, never started
  }
}

Profiler::Phase Profiler::phase_of(int step) const {
  const Schedule& s = opts_.schedule;
  const int64_t cycle = s.cycle();
  if (s.repeat > 0 && int64_t(step) >= s.steps()) return Phase::None;
  const int64_t k = int64_t(step) % cycle;
  if (k < s.wait) return Phase::Wait;
  if (k < s.wait + s.warmup) return Phase::Warmup;
  return Phase::Active;
}

bool Profiler::schedule_given() const {
  const Schedule& s = opts_.schedule;
  const Schedule d{};
  return s.wait != d.wait || s.warmup != d.warmup || s.active != d.active || s.repeat != d.repeat;
}

void Profiler::prepare() {
  ATTNPROF_CHECK(!running_, "profiler already started");
  if (prepared_) return;
  ATTNPROF_CHECK(!g_session_open.exchange(true), "another profiler session is already running");
  prepared_ = true;
  for (detail::ThreadBuffer* b : detail::all_buffers()) {
    clear_events(b);
    b->mark_zones = b->mark_mem = b->mark_work = b->mark_items = 0;
    b->dropped = 0;
  }
  detail::g_bufferless_dropped.store(0);
  // Room for a long session on the driving thread up front (65,536 zones and 16,384 memory events, about
  // 18 MB), so a buffer reallocation (a copy of every event so far) rarely lands inside a measured op. Other
  // threads grow theirs from 4096 events.
  detail::ThreadBuffer* self = detail::thread_buffer();
  self->zones.reserve(size_t(1) << 16);
  self->mem.reserve(size_t(1) << 14);
  // Every OpenMP worker of the team the ops will run on gets its buffer here, so that it is mapped in below: made
  // on the worker's first share instead, inside a measured op, its first pages would fault there and be billed
  // to that op. (Threads of a larger team made later still make theirs on first use; the next start() maps it.)
#pragma omp parallel
  (void)detail::thread_buffer();
  // Before any events, so calibration never lands in a trace; after the team exists, whose threads a
  // counter read walks.
  calibrated_zone_overhead_ns();
  if (opts_.software_counters) counting_overhead_ns_ = calibrated_zone_overhead_ns(true);
  for (detail::ThreadBuffer* b : detail::all_buffers()) {
    detail::populate_capacity(b->zones);
    detail::populate_capacity(b->mem);
    detail::populate_capacity(b->work);
    detail::populate_capacity(b->items);
  }
  // The step annotations' names, interned now rather than between two recorded forwards, where each new
  // name's few heap bytes could be carved from a buffer the last forward freed, and the next forward's
  // buffer of that size would land on fresh pages.
  if (opts_.step_annotations && schedule_given()) {
    const int64_t steps = std::min<int64_t>(opts_.schedule.steps(), 4096);
    for (int64_t k = 0; k < steps; ++k)
      if (phase_of(int(k)) == Phase::Active) (void)detail::intern("ProfilerStep#" + std::to_string(k));
  }
}

void Profiler::start() {
  ATTNPROF_CHECK(!running_, "profiler already started");
  prepare();
  detail::g_memory.store(opts_.profile_memory);
  collected_ = ProfileResult{};
  collected_.origin_ticks = now_ticks();
  collected_.memory_recorded = opts_.profile_memory;
  collected_.shapes_recorded = opts_.record_shapes;
  collected_.counters_recorded = counters::session_begin(opts_.software_counters);
  collected_.task_clock_recorded = counters::task_clock_recorded();
  detail::g_counters.store(collected_.counters_recorded);
  running_ = true;
  step_ = 0;
  steps_until_room_ = steps_since_room_ = 0;  // the first step's end looks at every worker's buffer
  enter_step();
}

void Profiler::enter_step() {
  const Phase ph = phase_of(step_);
  const Schedule& s = opts_.schedule;
  const int64_t cycle = s.cycle();
  const int64_t k = int64_t(step_) % cycle;
  if (ph == Phase::Warmup && k == s.wait) set_marks();                      // warm-up begins
  if (ph == Phase::Active && k == s.wait + s.warmup && s.warmup > 0) truncate_all_to_marks();  // drop it
  // The kept window of the first cycle begins here: live bytes now are the memory timeline's baseline.
  if (ph == Phase::Active && k == s.wait + s.warmup && int64_t(step_) < cycle)
    collected_.start_bytes = memory_stats().current_bytes;
  detail::g_recording.store(ph == Phase::Warmup || ph == Phase::Active);
  if (ph == Phase::Active && opts_.step_annotations && schedule_given()) {
    step_buf_ = detail::thread_buffer();
    // Kineto writes ProfilerStep#N as a user_annotation (torch records it through record_function).
    step_zone_ =
        detail::open_zone(step_buf_, detail::intern("ProfilerStep#" + std::to_string(step_)), "user_annotation");
  }
}

void Profiler::leave_step() {
  if (step_zone_.idx >= 0) detail::close_zone(step_buf_, step_zone_);
  step_zone_ = {};
  const Phase ph = phase_of(step_);
  const int64_t cycle = opts_.schedule.cycle();
  // End of a cycle's active window: keep its events by moving the marks past them.
  if (ph == Phase::Active && int64_t(step_) % cycle == cycle - 1) set_marks();
}

// A buffer that fills inside a step grows there, inside whichever op records the event that fills it: a copy of
// every event so far onto fresh pages (about 65,000 zones, 18 MB, took 60 ms on a ballooned VM), billed to that
// op. So between steps, outside every zone, buffers are grown and mapped in ahead of need. The calling thread's
// (where the ops' zones are) first; then each thread of the OpenMP team grows its own (its work shares: about 5
// per forward at the blog's shape, so its 4096 would fill inside an op after some 800 forwards; the flash
// kernel's tiles: about 256 per forward, so their 4096 after some 16). A buffer is only
// ever touched by its own thread here: the workers are idle between steps, but a thread outside the team may not
// be. That takes an OpenMP region, about 4 µs of wall time on 2 threads (BM_Profiler_Step; docs/performance.md),
// outside every step's ops: it runs only when a worker's buffer may next need room, after half the steps the
// least of them has room for at its rate so far (at most kMaxStepsBetweenRooms), and around every change of phase
// (a step that starts or stops recording: its rate is not the last one's).
void Profiler::make_room() {
  detail::ThreadBuffer* self = detail::thread_buffer();
  detail::grow_ahead(self);
  ++steps_since_room_;
  const bool phase_change = phase_of(step_ + 1) != phase_of(step_) || (step_ > 0 && phase_of(step_ - 1) != phase_of(step_));
  if (--steps_until_room_ > 0 && !phase_change) return;
  const int64_t steps = steps_since_room_;
  int64_t spare = 2 * kMaxStepsBetweenRooms;
#pragma omp parallel reduction(min : spare)
  {
    detail::ThreadBuffer* b = detail::thread_buffer();
    if (b != self) spare = std::min(spare, detail::grow_ahead(b, steps));
  }
  steps_since_room_ = 0;
  steps_until_room_ = std::clamp<int64_t>(spare / 2, 1, kMaxStepsBetweenRooms);
}

void Profiler::step() {
  ATTNPROF_CHECK(running_, "profiler step() called before start()");
  leave_step();
  make_room();
  ++step_;
  enter_step();
}

void Profiler::stop() {
  ATTNPROF_CHECK(running_, "profiler stop() called before start()");
  leave_step();
  // A warm-up that never reached its active steps records nothing.
  if (phase_of(step_) == Phase::Warmup) truncate_all_to_marks();
  detail::g_recording.store(false);
  detail::g_counters.store(false);
  running_ = false;
  collected_.ns_per_tick = ns_per_tick();
  collected_.clock = clock_name();
  collected_.zone_overhead_ns = collected_.counters_recorded ? counting_overhead_ns_ : calibrated_zone_overhead_ns();
  collected_.counters_note = counters::session_end();
  collected_.metadata = metadata_;
  // A profile missing events would print times and memory that add up to less than what ran: refused, before
  // its events are copied (which needs the memory that was just refused).
  int64_t dropped = 0;
  for (detail::ThreadBuffer* b : detail::all_buffers()) dropped += std::exchange(b->dropped, 0);
  dropped += detail::g_bufferless_dropped.exchange(0);  // events of a thread whose buffer could not be made
  if (dropped > 0) {
    for (detail::ThreadBuffer* b : detail::all_buffers()) clear_events(b);
    prepared_ = false;
    g_session_open.store(false);
    ATTNPROF_FAIL("the profiler could not store {} of its events: the memory its event buffers grow into was "
                  "refused (an address-space limit, ulimit -v, or no free memory); record fewer steps, or allow "
                  "more memory",
                  dropped);
  }
  for (detail::ThreadBuffer* b : detail::all_buffers()) {
    if (b->zones.empty() && b->mem.empty() && b->work.empty() && b->items.empty()) continue;
    ThreadTrace t;
    t.tid = b->tid;
    t.name = b->name;
    t.zones.assign(b->zones.begin(), b->zones.end());
    t.mem.assign(b->mem.begin(), b->mem.end());
    t.work.assign(b->work.begin(), b->work.end());
    t.items.assign(b->items.begin(), b->items.end());
    // A zone still open at stop() (misuse) is closed at the stop time, so totals stay finite.
    const uint64_t now = now_ticks();
    for (ZoneEvent& e : t.zones) {
      if (!opts_.record_shapes) e.n_shapes = 0;  // written while recording (a few ns), dropped here
      if (e.t1 == 0) {
        e.t1 = now;
        e.task_clock_ns = e.page_faults = -1;  // start values only: not a measurement
      }
    }
    collected_.threads.push_back(std::move(t));
    clear_events(b);
  }
  prepared_ = false;
  g_session_open.store(false);
}

ProfileResult Profiler::result() const {
  ATTNPROF_CHECK(!running_, "profiler result() needs stop() first");
  ProfileResult r = collected_;
  for (auto& [k, v] : metadata_) r.metadata[k] = v;  // metadata set after stop() counts too
  return r;
}

}  // namespace attnprof::prof
