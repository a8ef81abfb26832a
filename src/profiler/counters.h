// Internal: software counters for the profiling session.
//
// Page faults are the whole process's (getrusage: every thread's minor and major faults), read at the open and
// close of every zone, ops included: the faults of an op that first touches a fresh buffer land on its OpenMP
// workers as much as on the calling thread, and a per-thread count would miss theirs. One getrusage costs
// about a microsecond (more with more threads), so it is read outside the zone's [t0, t1]: the two reads land
// in the parent's time, where the profiler's calibration, made with counters on, takes them off again.
// Task-clock is the opening thread's CPU time (perf_event_open, pid = 0, cpu = -1), read on user_annotation
// zones only, inside [t0, t1] so that it never exceeds the zone's duration; each thread opens its counter on
// first use and the session closes them all at stop().
#pragma once

#include <cstdint>
#include <string>

namespace attnprof::prof {
struct ZoneEvent;
namespace detail {
struct ThreadBuffer;
}
}  // namespace attnprof::prof

namespace attnprof::prof::counters {

struct ThreadCounters {
  int task_clock_fd = -1;
  bool tried = false;  // opening was attempted on this thread in this session
};

// Probes hardware and software counters when `enable`; returns whether software counters will be recorded
// (page faults always can be; task-clock only where perf_event_open allows it, which the note says).
bool session_begin(bool enable);
// Closes every thread's counters; returns a one-line note on what was available
// ("hardware counters unavailable (No such file or directory: ...); software counters: ...").
std::string session_end();
// Whether this session reads task-clock on annotations (perf_event_open allowed it); valid until session_end.
bool task_clock_recorded() noexcept;

// Called from open_zone/close_zone for every zone while counters are on: the page faults before t0 and after
// t1, the task-clock (annotations only) just inside them.
void faults_open(ZoneEvent& e) noexcept;
void clock_open(detail::ThreadBuffer* b, ZoneEvent& e) noexcept;
void clock_close(detail::ThreadBuffer* b, ZoneEvent& e) noexcept;
void faults_close(ZoneEvent& e) noexcept;

}  // namespace attnprof::prof::counters
