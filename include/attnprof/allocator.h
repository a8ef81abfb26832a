// attnprof/allocator.h: the one tracked allocator every tensor goes through.
//
//   void* p = attnprof::tracked_alloc(1 << 20);     // 64-byte aligned, counted, reported to the profiler
//   attnprof::tracked_free(p, 1 << 20);
//   MemoryStats s = attnprof::memory_stats();       // current, peak, totals
//   attnprof::check_memory_budget(bytes, "naive attention scores"); // throws OutOfBudget over the budget
//
// Because all tensor storage comes from here, the profiler can attribute allocations to the op that was
// open when they happened, and peaks are exact rather than sampled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace attnprof {

inline constexpr size_t kTensorAlignment = 64;

struct MemoryStats {
  int64_t current_bytes = 0;   // live right now
  int64_t peak_bytes = 0;      // high-water mark since the last reset_peak_memory()
  int64_t total_allocated = 0; // bytes handed out since process start
  int64_t allocations = 0;
  int64_t frees = 0;
};

void* tracked_alloc(size_t bytes);
void tracked_free(void* p, size_t bytes) noexcept;

MemoryStats memory_stats();
// Resets the peak to the current live bytes (what a benchmark does before measuring a forward).
void reset_peak_memory();

// The budget that memory-hungry paths (the naive N×N scores) check before they allocate.
// Default: the machine's physical memory, or the memory limit of the cgroup this process runs in where that is
// smaller (a container's -m, systemd's MemoryMax, a batch job's limit: past it the kernel kills the process
// without a word), or what an address-space limit (RLIMIT_AS, ulimit -v) leaves beside what the process had
// mapped outside its tensors when first asked, where that is smaller still. Set to 0 to restore the default.
void set_memory_budget(int64_t bytes);
int64_t memory_budget();
int64_t physical_memory_bytes();

// A cgroup memory limit: its bytes and the file that set it.
struct CgroupMemoryLimit {
  int64_t bytes = -1;
  std::string file;
};
// The smallest memory limit on the way from the cgroup in `proc_self_cgroup` (the text of /proc/self/cgroup) up
// to its hierarchy's root under `cgroup_root` (/sys/fs/cgroup): cgroup v2's memory.max, v1's
// memory.limit_in_bytes of the memory controller. bytes is -1 where none is set ("max", v1's page-rounded
// 2^63, or no such files). Taking the texts makes it testable; the process's own is read once.
CgroupMemoryLimit cgroup_memory_limit(std::string_view proc_self_cgroup, const std::string& cgroup_root);
const CgroupMemoryLimit& process_cgroup_memory_limit();
// The soft address-space limit (RLIMIT_AS, what `ulimit -v` sets) in bytes; -1 when there is none.
int64_t address_space_limit_bytes();
// The bytes this process has mapped now (/proc/self/statm's size, what that limit counts); -1 when unreadable.
int64_t mapped_bytes();
// Throws OutOfBudget when current live bytes + `bytes` exceed the budget; `what` names the request. The message
// ends with what to raise, chosen from where the budget came ("raise --memory-budget", or "raise `ulimit -v`"
// where the default budget is what an address-space limit leaves), then ", or " and `hint`, the caller's
// alternative (optional: "run a smaller --shape"). `bytes` is a double so that callers estimate
// sizes in floating point (exact to 2^53 bytes) and an absurd shape is refused with its true size, never
// wrapped round to a negative or small integer.
void check_memory_budget(double bytes, std::string_view what, std::string_view hint = {});
// Memory held outside the tracked allocator (the fp64 reference's std::vectors) that budget checks must still
// count: while a reservation lives, check_memory_budget counts its bytes as live. It does not change
// memory_stats(), which stays the tensors' own figure.
class MemoryReservation {
 public:
  explicit MemoryReservation(double bytes);
  ~MemoryReservation();
  MemoryReservation(const MemoryReservation&) = delete;
  MemoryReservation& operator=(const MemoryReservation&) = delete;

 private:
  int64_t bytes_;
};
// A byte count for messages in the binary unit that reads best: "512 B", "1.50 KiB", "8.25 MiB", "2.00 GiB",
// "3.00 TiB" (a budget refusal of megabytes no longer reads "0.00 GiB").
std::string binary_size(double bytes);
// A byte count as the exact integer while a double holds it exactly (below 2^53), else to four significant
// digits ("2.400e+21"): "{:.0f}" of a larger double prints digits the figure does not have.
std::string byte_count(double bytes);

}  // namespace attnprof
