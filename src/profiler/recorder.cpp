// Per-thread event buffers: where zones and memory events land while the profiler records.
#include "profiler/recorder.h"

#if defined(__SANITIZE_ADDRESS__)
#define ATTNPROF_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTNPROF_ASAN 1
#endif
#endif
#if ATTNPROF_ASAN
#include <sanitizer/asan_interface.h>
#endif
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <new>
#include <set>

namespace attnprof::prof {
namespace detail {

std::atomic<bool> g_recording{false};
std::atomic<bool> g_memory{true};
std::atomic<bool> g_counters{false};
std::atomic<const ZoneListener*> g_zone_listener{nullptr};

namespace {
std::mutex g_registry_mutex;
std::vector<std::unique_ptr<ThreadBuffer>>& registry_storage() {
  static std::vector<std::unique_ptr<ThreadBuffer>> r;
  return r;
}
thread_local ThreadBuffer* tl_buffer = nullptr;
}  // namespace

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL
#endif

void* map_pages(size_t bytes) {
  void* p = ::mmap(nullptr, bytes == 0 ? 1 : bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

void unmap_pages(void* p, size_t bytes) noexcept {
  if (p) (void)::munmap(p, bytes == 0 ? 1 : bytes);
}

void populate(const void* p, size_t bytes) noexcept {
  static const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p), end = begin + bytes;
  const uintptr_t first = (begin + page - 1) & ~(page - 1), last = end & ~(page - 1);
  if (p == nullptr || last <= first) return;
  (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);
#if ATTNPROF_ASAN
  // Under AddressSanitizer every write of an event first reads the shadow of its bytes: pages mapped here,
  // not from its allocator, have shadow nothing has read yet, which would fault in inside the first op to
  // write there. Reading it now maps it with the buffer.
  (void)__asan_region_is_poisoned(reinterpret_cast<void*>(first), last - first);
#endif
}

ThreadBuffer* thread_buffer() {
  if (tl_buffer) [[likely]] return tl_buffer;
  auto b = std::make_unique<ThreadBuffer>();
  b->zones.reserve(4096);
  b->mem.reserve(1024);
  b->work.reserve(4096);
  b->items.reserve(4096);
  b->stack.reserve(64);
  // Not mapped in here: a worker's buffer is made on its first share, inside a measured op, where mapping ~1 MB
  // would cost more than the few pages its shares fault on; the next Profiler::start() maps it in.
  const bool is_main = long(syscall(SYS_gettid)) == long(getpid());
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  auto& reg = registry_storage();
  b->tid = uint32_t(reg.size());
  b->name = is_main ? "main" : "worker " + std::to_string(b->tid);
  reg.push_back(std::move(b));
  tl_buffer = reg.back().get();
  return tl_buffer;
}

std::atomic<int64_t> g_bufferless_dropped{0};

ThreadBuffer* recording_buffer(bool lost_event) noexcept {
  if (tl_buffer) [[likely]] return tl_buffer;
  try {
    return thread_buffer();
  } catch (...) {
    if (lost_event) g_bufferless_dropped.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
}

std::vector<ThreadBuffer*> all_buffers() {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  std::vector<ThreadBuffer*> out;
  for (auto& b : registry_storage()) out.push_back(b.get());
  return out;
}

ZoneRef open_zone(ThreadBuffer* b, const char* name, const char* category) noexcept {
  const int32_t idx = int32_t(b->zones.size());
  const int32_t parent = b->stack.empty() ? -1 : b->stack.back();
  const uint16_t depth = uint16_t(b->stack.size());
  // Both vectors grow together or neither does: a zone not stored is not on the stack, so close_zone drops it
  // and zone_at(idx) writes to the scratch event.
  try {
    b->stack.push_back(idx);
    try {
      b->zones.emplace_back();
    } catch (...) {
      b->stack.pop_back();
      throw;
    }
  } catch (...) {
    ++b->dropped;
    return ZoneRef{};  // not recording: its close (and the listener's) never runs, as its open never did
  }
  ZoneEvent& e = b->zones.back();
  e.serial = ++b->zones_opened;
  e.name = name;
  e.category = category;
  e.parent = parent;
  e.depth = depth;
  e.variant = b->variant;
  if (const ZoneListener* l = g_zone_listener.load(std::memory_order_relaxed)) [[unlikely]] l->on_open(name, category);
  // Page faults are read outside [t0, t1] (a microsecond each, which the calibration takes off the parent),
  // task-clock inside, so that it never exceeds the zone's own duration.
  const bool counting = g_counters.load(std::memory_order_relaxed);
  if (counting) [[unlikely]] counters::faults_open(e);
  e.t0 = now_ticks();
  if (counting) [[unlikely]] counters::clock_open(b, e);
  return ZoneRef{idx, e.serial};
}

// Whether `z` is still in the buffer: a zone whose events a step boundary dropped is not, even where a later
// zone took its index.
bool stored(const ThreadBuffer* b, ZoneRef z) noexcept {
  return size_t(z.idx) < b->zones.size() && b->zones[size_t(z.idx)].serial == z.serial;
}

void close_zone(ThreadBuffer* b, ZoneRef z) noexcept {
  // A zone opened before its events were dropped (a step boundary) is simply dropped.
  const int32_t idx = z.idx;
  const bool kept = stored(b, z) && !b->stack.empty() && b->stack.back() == idx;
  const bool counting = kept && g_counters.load(std::memory_order_relaxed);
  if (counting) [[unlikely]] counters::clock_close(b, b->zones[size_t(idx)]);
  const uint64_t t = now_ticks();
  // Every opened zone closes its listener range, kept or dropped, so the listener's pushes and pops pair.
  if (const ZoneListener* l = g_zone_listener.load(std::memory_order_relaxed)) [[unlikely]] l->on_close();
  if (!kept) return;
  b->zones[size_t(idx)].t1 = t;
  if (counting) [[unlikely]] counters::faults_close(b->zones[size_t(idx)]);
  b->stack.pop_back();
}

int32_t innermost_zone(ThreadBuffer* b) noexcept { return b->stack.empty() ? -1 : b->stack.back(); }

const char* innermost_zone_name(ThreadBuffer* b) noexcept {
  return b->stack.empty() ? nullptr : b->zones[size_t(b->stack.back())].name;
}

uint32_t next_region_id() noexcept {
  static std::atomic<uint32_t> next{0};
  uint32_t id = next.fetch_add(1, std::memory_order_relaxed) + 1;
  return id != 0 ? id : next.fetch_add(1, std::memory_order_relaxed) + 1;  // 0 means "none"
}

void record_work(ThreadBuffer* b, const WorkSpan& w) noexcept {
  // A share that ends after the session stopped, or in a step dropped meanwhile, is not kept; the vector's
  // growth may throw only where zones' would (4096 reserved per thread).
  if (!g_recording.load(std::memory_order_relaxed)) return;
  try {
    b->work.push_back(w);
  } catch (...) {
    ++b->dropped;
  }
}

void record_item(ThreadBuffer* b, const WorkItem& w) noexcept {
  if (!g_recording.load(std::memory_order_relaxed)) return;  // as record_work
  try {
    b->items.push_back(w);
  } catch (...) {
    ++b->dropped;
  }
}

int64_t grow_ahead(ThreadBuffer* b, int64_t steps) noexcept {
  steps = std::max<int64_t>(steps, 1);
  auto room = [steps](auto& v, size_t& last) {
    const size_t used = v.size() > last ? v.size() - last : 0;
    last = v.size();
    if (v.capacity() - v.size() < 2 * used) {
      // Refused pages are left to the next event that needs them, which counts itself dropped if it cannot grow.
      try {
        v.reserve(std::max(2 * v.capacity(), v.size() + 4 * used));
        populate_capacity(v);
      } catch (const std::bad_alloc&) {
      }
    }
    const int64_t per_step = std::max<int64_t>(int64_t((used + size_t(steps) - 1) / size_t(steps)), kIdleEventsPerStep);
    return int64_t(v.capacity() - v.size()) / per_step;
  };
  const int64_t zones = room(b->zones, b->room_zones), mem = room(b->mem, b->room_mem),
                work = room(b->work, b->room_work), items = room(b->items, b->room_items);
  return std::min({zones, mem, work, items});
}

ZoneEvent* zone_at(ThreadBuffer* b, ZoneRef z) noexcept {
  return stored(b, z) ? &b->zones[size_t(z.idx)] : &b->scratch;
}

const char* intern(std::string_view s) {
  static std::mutex m;
  static std::set<std::string, std::less<>> pool;
  std::lock_guard<std::mutex> lock(m);
  auto it = pool.find(s);
  if (it == pool.end()) it = pool.emplace(s).first;
  return it->c_str();
}

void on_memory(void* p, int64_t delta, int64_t total) noexcept {
  if (!g_recording.load(std::memory_order_relaxed) || !g_memory.load(std::memory_order_relaxed)) return;
  ThreadBuffer* b = recording_buffer();
  if (!b) return;
  try {
    b->mem.push_back(MemEvent{now_ticks(), delta, total, b->stack.empty() ? -1 : b->stack.back(),
                              reinterpret_cast<uint64_t>(p)});
  } catch (...) {
    ++b->dropped;
  }
}

}  // namespace detail

void set_zone_listener(const ZoneListener* listener) noexcept {
  detail::g_zone_listener.store(listener, std::memory_order_relaxed);
}
const ZoneListener* zone_listener() noexcept { return detail::g_zone_listener.load(std::memory_order_relaxed); }

VariantScope::VariantScope(std::string_view variant) {
  detail::ThreadBuffer* b = detail::thread_buffer();
  prev_ = b->variant;
  b->variant = detail::intern(variant);
}

VariantScope::~VariantScope() { detail::thread_buffer()->variant = prev_; }

}  // namespace attnprof::prof
