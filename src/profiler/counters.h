// Internal: software performance counters (perf_event_open) for the profiling session.
//
// Only user_annotation zones read counters (two read() syscalls at open and at close, ~1 µs), so ordinary op
// zones keep their cost. Each thread opens its own task-clock and page-fault counters on first use
// (pid = 0, cpu = -1 counts the calling thread only); the session closes them all at stop().
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
  int page_faults_fd = -1;
  bool tried = false;  // opening was attempted on this thread in this session
};

// Probes hardware and software counters when `enable`; returns whether software counters will be recorded.
bool session_begin(bool enable);
// Closes every thread's counters; returns a one-line note on what was available
// ("hardware counters unavailable (No such file or directory: ...); software counters: task-clock, page-faults").
std::string session_end();

// Called from open_zone/close_zone for annotation zones while counters are on.
void zone_open(detail::ThreadBuffer* b, ZoneEvent& e) noexcept;
void zone_close(detail::ThreadBuffer* b, ZoneEvent& e) noexcept;

}  // namespace attnprof::prof::counters
