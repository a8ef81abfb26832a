// Software counters: the process's page faults through getrusage, the annotation thread's task-clock through
// perf_event_open. Hardware counters are probed only to report whether they exist: virtual machines without a
// PMU return ENOENT, and we say so instead of failing.
#include "profiler/counters.h"

#include <linux/perf_event.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "profiler/recorder.h"

namespace attnprof::prof::counters {
namespace {

int open_counter(uint32_t type, uint64_t config) {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = type;
  attr.config = config;
  attr.disabled = 0;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  return int(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
}

int64_t read_counter(int fd) noexcept {
  uint64_t v = 0;
  if (fd < 0 || ::read(fd, &v, sizeof v) != ssize_t(sizeof v)) return -1;
  return int64_t(v);
}

// Every thread's minor and major faults so far, dead threads' included: -1 if getrusage fails.
int64_t process_page_faults() noexcept {
  rusage u{};
  if (::getrusage(RUSAGE_SELF, &u) != 0) return -1;
  return int64_t(u.ru_minflt) + int64_t(u.ru_majflt);
}

bool is_annotation(const ZoneEvent& e) noexcept {
  return e.category && std::strcmp(e.category, "user_annotation") == 0;
}

std::string g_note;
// perf_event_open gives this process a task-clock counter; read by every thread's zones, so atomic.
std::atomic<bool> g_task_clock{false};

}  // namespace

bool session_begin(bool enable) {
  g_note.clear();
  g_task_clock = false;
  if (!enable) {
    g_note = "counters off (turn them on with `attnprof profile --counters`, ProfilerOptions::software_counters)";
    return false;
  }
  int hw = open_counter(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES);
  std::string hw_note;
  if (hw >= 0) {
    hw_note = "hardware counters available but not recorded";
    close(hw);
  } else {
    const int err = errno;
    hw_note = err == ENOENT || err == EOPNOTSUPP
                  ? fmt::format("hardware counters unavailable ({}: no PMU visible, e.g. a VM)", std::strerror(err))
                  : fmt::format("hardware counters unavailable ({})", std::strerror(err));
  }
  const int sw = open_counter(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK);
  const int sw_errno = errno;
  if (sw >= 0) close(sw);
  const bool faults = process_page_faults() >= 0;
  const int faults_errno = errno;
  g_task_clock = sw >= 0;
  const bool enabled = sw >= 0 || faults;
  const std::string tc = sw >= 0 ? "task-clock (the annotation's thread) on user_annotation zones"
                                      : fmt::format("no task-clock ({})", std::strerror(sw_errno));
  const std::string sw_note =
      faults ? fmt::format("software counters: page faults (every thread's, getrusage) on every zone; {}", tc)
             : fmt::format("software counters unavailable (getrusage: {}; {})", std::strerror(faults_errno), tc);
  g_note = hw_note + "; " + sw_note;
  return enabled;
}

bool task_clock_recorded() noexcept { return g_task_clock.load(); }

std::string session_end() {
  for (detail::ThreadBuffer* b : detail::all_buffers()) {
    ThreadCounters& c = b->counters;
    if (c.task_clock_fd >= 0) close(c.task_clock_fd);
    c = ThreadCounters{};
  }
  g_task_clock = false;
  return g_note;
}

// Start values; the closing calls turn them into deltas. -1 stays "not measured".
void faults_open(ZoneEvent& e) noexcept { e.page_faults = process_page_faults(); }

void clock_open(detail::ThreadBuffer* b, ZoneEvent& e) noexcept {
  if (!g_task_clock.load(std::memory_order_relaxed) || !is_annotation(e)) return;
  ThreadCounters& c = b->counters;
  if (!c.tried) {
    c.tried = true;
    c.task_clock_fd = open_counter(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK);
  }
  e.task_clock_ns = read_counter(c.task_clock_fd);
}

void clock_close(detail::ThreadBuffer* b, ZoneEvent& e) noexcept {
  if (e.task_clock_ns >= 0) {
    const int64_t v = read_counter(b->counters.task_clock_fd);
    e.task_clock_ns = v >= 0 ? v - e.task_clock_ns : -1;
  }
}

void faults_close(ZoneEvent& e) noexcept {
  if (e.page_faults >= 0) {
    const int64_t v = process_page_faults();
    e.page_faults = v >= 0 ? v - e.page_faults : -1;
  }
}

}  // namespace attnprof::prof::counters
