// Internal: the live/peak/total accounting shared by the host allocator (core/allocator.cpp) and the
// device allocator (cuda/device.cpp), so both report MemoryStats by the same rules.
#pragma once

#include <atomic>
#include <cstdint>

#include "attnprof/allocator.h"

namespace attnprof::detail {

class MemoryCounters {
 public:
  // Returns the live bytes after the event.
  int64_t on_alloc(int64_t bytes) {
    const int64_t now = current_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    int64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    total_.fetch_add(bytes, std::memory_order_relaxed);
    allocs_.fetch_add(1, std::memory_order_relaxed);
    return now;
  }
  int64_t on_free(int64_t bytes) {
    frees_.fetch_add(1, std::memory_order_relaxed);
    return current_.fetch_sub(bytes, std::memory_order_relaxed) - bytes;
  }
  int64_t current() const { return current_.load(); }
  MemoryStats stats() const {
    MemoryStats s;
    s.current_bytes = current_.load();
    s.peak_bytes = peak_.load();
    s.total_allocated = total_.load();
    s.allocations = allocs_.load();
    s.frees = frees_.load();
    return s;
  }
  void reset_peak() { peak_.store(current_.load()); }

 private:
  std::atomic<int64_t> current_{0}, peak_{0}, total_{0}, allocs_{0}, frees_{0};
};

}  // namespace attnprof::detail
