// The profiler's clock: invariant TSC calibrated against steady_clock, else steady_clock.
#include <chrono>

#include "attnprof/profiler.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define ATTNPROF_HAVE_RDTSC 1
#else
#define ATTNPROF_HAVE_RDTSC 0
#endif

namespace attnprof::prof {
namespace {

bool cpu_has_invariant_tsc() {
#if ATTNPROF_HAVE_RDTSC
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return false;
  __get_cpuid(0x80000007u, &a, &b, &c, &d);
  return (d >> 8) & 1u;
#else
  return false;
#endif
}

uint64_t steady_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

struct Clock {
  bool tsc = false;
  double ns_per_tick = 1.0;
  Clock() {
    if (!cpu_has_invariant_tsc()) return;
#if ATTNPROF_HAVE_RDTSC
    // Two 10 ms windows; keep the second (the first warms up the code paths).
    double ratio = 0.0;
    for (int round = 0; round < 2; ++round) {
      uint64_t n0 = steady_ns(), t0 = __rdtsc();
      while (steady_ns() - n0 < 10'000'000) {
      }
      uint64_t n1 = steady_ns(), t1 = __rdtsc();
      if (t1 > t0) ratio = double(n1 - n0) / double(t1 - t0);
    }
    if (ratio > 0.0 && ratio < 10.0) {
      tsc = true;
      ns_per_tick = ratio;
    }
#endif
  }
};

const Clock& clock_instance() {
  static const Clock c;
  return c;
}

// Resolved once at load so now_ticks() is one branch on a plain bool.
const bool g_use_tsc = clock_instance().tsc;

}  // namespace

uint64_t now_ticks() noexcept {
#if ATTNPROF_HAVE_RDTSC
  if (g_use_tsc) return __rdtsc();
#endif
  return steady_ns();
}

double ns_per_tick() { return clock_instance().ns_per_tick; }
const char* clock_name() { return clock_instance().tsc ? "tsc" : "steady_clock"; }

}  // namespace attnprof::prof
