// Internal: the per-thread buffer behind attnprof/profiler.h's zones.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attnprof/profiler.h"
#include "profiler/counters.h"

namespace attnprof::prof::detail {

struct ThreadBuffer {
  uint32_t tid = 0;
  std::string name;
  std::vector<ZoneEvent> zones;
  std::vector<MemEvent> mem;
  std::vector<WorkSpan> work;     // shares of parallel regions
  std::vector<int32_t> stack;     // indices of open zones
  const char* variant = nullptr;  // set by VariantScope
  ZoneEvent scratch;              // target for writes to a zone dropped at a step boundary
  // Where the buffer stood when a schedule's warm-up began (events after it are discarded).
  size_t mark_zones = 0, mark_mem = 0, mark_work = 0;
  counters::ThreadCounters counters;  // this thread's perf_event fds while a session records counters
};

// Whether annotation zones read software counters (set by the session; one relaxed load per zone).
extern std::atomic<bool> g_counters;

std::vector<ThreadBuffer*> all_buffers();

// Maps in, as if written, the whole pages of [p, p + bytes). An event buffer's pages are otherwise first touched
// when an event lands on them, inside whichever zone is open: each such fault (about 10 us on a ballooned VM,
// once per ~17 zones) would be billed to that op's self time and page-fault count. One madvise maps 16 MB in
// ~3 ms, against ~50 ms for touching it page by page. Where the kernel has no MADV_POPULATE_WRITE (before
// Linux 5.14) the pages are left to fault on first use.
void populate(const void* p, size_t bytes) noexcept;
template <typename T>
void populate_capacity(const std::vector<T>& v) noexcept {
  populate(v.data(), v.capacity() * sizeof(T));
}

}  // namespace attnprof::prof::detail
