// The tracked allocator: aligned allocation with exact live/peak accounting and a profiler hook.
#include "attnprof/allocator.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <new>
#include <string>

#include <fmt/format.h>

#include "attnprof/error.h"
#include "core/memory_counters.h"
#include "attnprof/profiler.h"  // prof::detail::on_memory

namespace attnprof {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;
detail::MemoryCounters g_counters;
std::atomic<int64_t> g_budget{0};

}  // namespace

void* tracked_alloc(size_t bytes) {
  // Large blocks are 2 MiB aligned and marked for transparent huge pages: first touch of a fresh
  // N×N scores tensor then costs hundreds of page faults instead of hundreds of thousands.
  const size_t align = bytes >= kHugePage ? kHugePage : kTensorAlignment;
  size_t rounded = (bytes + align - 1) / align * align;
  if (rounded == 0) rounded = align;
  void* p = std::aligned_alloc(align, rounded);
  if (p && align == kHugePage) madvise(p, rounded, MADV_HUGEPAGE);
  if (!p) {
    // Name what refused it: an address-space limit (ulimit -v) when one is set, else the system's free memory.
    const double mib = 1024.0 * 1024.0;
    const int64_t limit = address_space_limit_bytes();
    const std::string why = limit < 0 ? "less memory free than that"
                                      : fmt::format("the address-space limit (ulimit -v) of {:.0f} MiB", double(limit) / mib);
    throw OutOfBudget(fmt::format("out of memory: could not allocate {} bytes ({:.1f} MiB) beside the {:.1f} MiB of "
                                  "tensors live: {}",
                                  bytes, double(bytes) / mib, double(g_counters.stats().current_bytes) / mib, why));
  }
  const int64_t now = g_counters.on_alloc(int64_t(bytes));
  prof::detail::on_memory(p, int64_t(bytes), now);
  return p;
}

void tracked_free(void* p, size_t bytes) noexcept {
  if (!p) return;
  const int64_t now = g_counters.on_free(int64_t(bytes));
  prof::detail::on_memory(p, -int64_t(bytes), now);
  std::free(p);
}

MemoryStats memory_stats() { return g_counters.stats(); }

void reset_peak_memory() { g_counters.reset_peak(); }

int64_t address_space_limit_bytes() {
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return -1;
  return int64_t(as.rlim_cur);
}

int64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * int64_t(page) : int64_t(1) << 34;
}

void set_memory_budget(int64_t bytes) {
  ATTNPROF_CHECK(bytes >= 0, "memory budget must be >= 0 bytes, got {}", bytes);
  g_budget.store(bytes);
}

int64_t memory_budget() {
  int64_t b = g_budget.load();
  return b > 0 ? b : physical_memory_bytes();
}

std::string binary_size(double bytes) {
  static const char* const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (!(std::fabs(bytes) >= 1024.0)) return fmt::format("{:.0f} B", bytes);  // NaN too
  double v = bytes / 1024.0;
  size_t u = 0;
  while (std::fabs(v) >= 1024.0 && u + 1 < std::size(units)) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.2f} {}", v, units[u]);
}

std::string byte_count(double bytes) {
  return std::fabs(bytes) < 9007199254740992.0 ? fmt::format("{:.0f}", bytes) : fmt::format("{:.3e}", bytes);
}

namespace {
std::atomic<int64_t> g_reserved{0};
}  // namespace

MemoryReservation::MemoryReservation(double bytes) : bytes_(bytes > 0 ? int64_t(bytes) : 0) { g_reserved += bytes_; }
MemoryReservation::~MemoryReservation() { g_reserved -= bytes_; }

void check_memory_budget(double bytes, std::string_view what, std::string_view hint) {
  const int64_t budget = memory_budget();
  const int64_t live = g_counters.current() + g_reserved.load();
  if (!(bytes >= 0) || double(live) + bytes > double(budget)) {
    const std::string with_live =
        live > 0 ? fmt::format(" with {} bytes ({}) already live", live, binary_size(double(live))) : "";
    throw OutOfBudget(fmt::format("{} needs {} bytes ({}){}, over the memory budget of {} bytes ({}){}{}", what,
                                  byte_count(bytes), binary_size(bytes), with_live, budget, binary_size(double(budget)),
                                  hint.empty() ? "" : "; ", hint));
  }
}

}  // namespace attnprof
