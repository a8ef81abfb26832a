// Internal: software performance counters (perf_event_open) for the profiling session.
#pragma once

#include <string>

namespace attnprof::prof::counters {

// Opens task-clock/page-fault counters when `enable`, probing hardware counters to report their absence.
void session_begin(bool enable);
// Closes the counters; returns a one-line note on what was available ("hardware counters unavailable: ...").
std::string session_end();

}  // namespace attnprof::prof::counters
