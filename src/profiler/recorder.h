// Internal: the per-thread buffer behind attnprof/profiler.h's zones.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attnprof/profiler.h"
#include "profiler/counters.h"

namespace attnprof::prof::detail {

// Event storage mapped straight from the kernel, never from the malloc heap. Buffers reserved in the heap
// when a session starts (half a megabyte of memory events, a worker's spans) would take the holes the
// program's freed buffers left there during its warm-up, so the first recorded forwards would get fresh pages
// for their own buffers and pay first-touch faults the unprofiled program does not (flash's scratch at a small
// shape: 5-10x its time in the first two recorded steps). Like Tracy's own allocator, the profiler keeps out
// of the heap it observes.
void* map_pages(size_t bytes);  // throws std::bad_alloc when the kernel refuses
void unmap_pages(void* p, size_t bytes) noexcept;
template <typename T>
struct MappedAllocator {
  using value_type = T;
  MappedAllocator() = default;
  template <typename U>
  MappedAllocator(const MappedAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(map_pages(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { unmap_pages(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const MappedAllocator<U>&) const noexcept { return true; }
};
template <typename T>
using EventVector = std::vector<T, MappedAllocator<T>>;

struct ThreadBuffer {
  uint32_t tid = 0;
  std::string name;
  EventVector<ZoneEvent> zones;
  EventVector<MemEvent> mem;
  EventVector<WorkSpan> work;     // shares of parallel regions
  EventVector<WorkItem> items;    // the tasks shares marked
  std::vector<int32_t> stack;     // indices of open zones
  uint32_t zones_opened = 0;      // every zone this thread opened while recording: the next one's serial - 1
  const char* variant = nullptr;  // set by VariantScope
  ZoneEvent scratch;              // target for writes to a zone dropped at a step boundary
  // Where the buffer stood when a schedule's warm-up began (events after it are discarded).
  size_t mark_zones = 0, mark_mem = 0, mark_work = 0, mark_items = 0;
  // Its sizes when the session last made room between steps (grow_ahead): what the step since then recorded.
  size_t room_zones = 0, room_mem = 0, room_work = 0, room_items = 0;
  // Events that could not be stored (the kernel refused the pages a buffer grows into: ulimit -v, or no memory
  // left). Recording goes on without them, and Profiler::stop refuses the session, whose figures would miss them.
  int64_t dropped = 0;
  counters::ThreadCounters counters;  // this thread's perf_event fds while a session records counters
};

// Whether zones read software counters: page faults around every zone, task-clock inside annotations (set by
// the session; one relaxed load per zone).
extern std::atomic<bool> g_counters;

std::vector<ThreadBuffer*> all_buffers();
extern std::atomic<int64_t> g_bufferless_dropped;  // events lost because their thread's buffer could not be made

// Between steps, on the thread that owns `b`: grows each of its vectors, and maps the growth in, to hold at least
// twice what was recorded since the last call, `steps` steps ago (none after a truncation). Returns how many more
// steps each vector now holds at the rate of those steps, the least of them, counting a vector that recorded
// fewer than kIdleEventsPerStep events a step at that rate (a worker idle so far may not stay so).
inline constexpr int64_t kIdleEventsPerStep = 16;
int64_t grow_ahead(ThreadBuffer* b, int64_t steps = 1) noexcept;

// Maps in, as if written, the whole pages of [p, p + bytes). An event buffer's pages are otherwise first touched
// when an event lands on them, inside whichever zone is open: each such fault (about 10 us on a ballooned VM,
// once per ~17 zones) would be billed to that op's self time and page-fault count. One madvise maps 16 MB in
// ~3 ms, against ~50 ms for touching it page by page. Where the kernel has no MADV_POPULATE_WRITE (before
// Linux 5.14) the pages are left to fault on first use.
void populate(const void* p, size_t bytes) noexcept;
template <typename T>
void populate_capacity(const EventVector<T>& v) noexcept {
  populate(v.data(), v.capacity() * sizeof(T));
}

}  // namespace attnprof::prof::detail
