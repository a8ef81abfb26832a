// Software counters via perf_event_open. Hardware counters are probed only to report whether they exist:
// virtual machines without a PMU return ENOENT, and we say so instead of failing.
#include "profiler/counters.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

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

std::string g_note;

}  // namespace

void session_begin(bool enable) {
  g_note.clear();
  if (!enable) {
    g_note = "counters off";
    return;
  }
  int hw = open_counter(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES);
  std::string hw_note;
  if (hw >= 0) {
    hw_note = "hardware counters available";
    close(hw);
  } else {
    hw_note = fmt::format("hardware counters unavailable ({}: no PMU visible, e.g. a VM)", std::strerror(errno));
  }
  int sw = open_counter(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK);
  std::string sw_note;
  if (sw >= 0) {
    sw_note = "software counters available";
    close(sw);
  } else {
    sw_note = fmt::format("software counters unavailable ({})", std::strerror(errno));
  }
  g_note = hw_note + "; " + sw_note;
}

std::string session_end() { return g_note; }

}  // namespace attnprof::prof::counters
