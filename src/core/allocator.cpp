// The tracked allocator: aligned allocation with exact live/peak accounting and a profiler hook.
#include "attnprof/allocator.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
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

int64_t mapped_bytes() {
  int64_t bytes = -1;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    long pages = 0;
    if (std::fscanf(f, "%ld", &pages) == 1 && pages > 0) bytes = int64_t(pages) * int64_t(sysconf(_SC_PAGESIZE));
    std::fclose(f);
  }
  return bytes;
}

int64_t address_space_limit_bytes() {
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return -1;
  return int64_t(as.rlim_cur);
}

namespace {
// What an address-space limit leaves the tensors: the limit less what the process had mapped outside them when
// first asked (its code, libraries, thread stacks and malloc arenas, which count against RLIMIT_AS as much as
// the tensors do). Read once, early in a run (the inputs' check comes first), so that no later check, inside an
// op's zone, reads /proc. Mappings made later (OpenBLAS's buffers, loaded by the first sgemm) are not in it: an
// allocation they leave no room for fails in tracked_alloc, which names the limit too.
struct AddressSpaceBudget {
  int64_t limit = -1;       // RLIMIT_AS, -1 when none
  int64_t other = 0;        // mapped outside the tensors when first asked
  bool other_read = false;  // /proc/self/statm could be read (else other is 0: the budget is the whole limit)
  int64_t bytes = -1;       // limit - other (0 at least), -1 when no limit
};
const AddressSpaceBudget& address_space_budget() {
  static const AddressSpaceBudget b = [] {
    AddressSpaceBudget a;
    a.limit = address_space_limit_bytes();
    if (a.limit < 0) return a;
    const int64_t mapped = mapped_bytes();
    a.other_read = mapped > 0;
    a.other = std::max<int64_t>(0, std::max<int64_t>(mapped, 0) - g_counters.current());
    a.bytes = std::max<int64_t>(0, a.limit - a.other);
    return a;
  }();
  return b;
}
}  // namespace

int64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * int64_t(page) : int64_t(1) << 34;
}

void set_memory_budget(int64_t bytes) {
  ATTNPROF_CHECK(bytes >= 0, "memory budget must be >= 0 bytes, got {}", bytes);
  g_budget.store(bytes);
}

CgroupMemoryLimit cgroup_memory_limit(std::string_view proc_self_cgroup, const std::string& cgroup_root) {
  CgroupMemoryLimit best;
  auto read_limit = [&](const std::filesystem::path& file) {
    std::ifstream in(file);
    std::string word;
    if (!(in >> word)) return;
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
    // "max" (v2), or v1's "no limit", 2^63 rounded down to a page: anything past 2^62 bytes limits nothing.
    if (ec != std::errc() || end != word.data() + word.size() || v <= 0 || v >= (int64_t(1) << 62)) return;
    if (best.bytes < 0 || v < best.bytes) best = {v, file.string()};
  };
  // Walks from the cgroup's directory up to the hierarchy's root: a parent's limit binds its children too.
  // Each directory once: "/" (a container's own cgroup) is the root alone. A path that climbs out of the mount
  // ("/../x", a cgroup of another namespace) has no directory here to read.
  auto walk = [&](const std::filesystem::path& base, std::string_view path, const char* file) {
    std::error_code ec;
    if (!std::filesystem::is_directory(base, ec)) return;
    const std::filesystem::path rel = std::filesystem::path(path).relative_path().lexically_normal();
    if (!rel.empty() && *rel.begin() == "..") return;
    for (std::filesystem::path r = rel;; r = r.parent_path()) {
      read_limit((r.empty() ? base : base / r) / file);
      if (r.empty()) break;
    }
  };
  size_t pos = 0;
  while (pos < proc_self_cgroup.size()) {
    size_t eol = proc_self_cgroup.find('\n', pos);
    if (eol == std::string_view::npos) eol = proc_self_cgroup.size();
    const std::string_view line = proc_self_cgroup.substr(pos, eol - pos);
    pos = eol + 1;
    // "hierarchy-id:controllers:path"; v2's line is "0::path".
    const size_t a = line.find(':'), b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    const std::filesystem::path root(cgroup_root);
    if (controllers.empty()) {
      walk(root, path, "memory.max");               // v2 alone
      walk(root / "unified", path, "memory.max");  // the v2 tree of a hybrid set-up
    } else {
      for (size_t c = 0; c <= controllers.size();) {
        size_t comma = controllers.find(',', c);
        if (comma == std::string_view::npos) comma = controllers.size();
        if (controllers.substr(c, comma - c) == "memory") walk(root / "memory", path, "memory.limit_in_bytes");
        c = comma + 1;
      }
    }
  }
  return best;
}

const CgroupMemoryLimit& process_cgroup_memory_limit() {
  static const CgroupMemoryLimit limit = [] {
    std::ifstream in("/proc/self/cgroup");
    std::stringstream text;
    text << in.rdbuf();
    return cgroup_memory_limit(text.str(), "/sys/fs/cgroup");
  }();
  return limit;
}

int64_t memory_budget() {
  int64_t b = g_budget.load();
  if (b > 0) return b;
  const int64_t physical = physical_memory_bytes(), cgroup = process_cgroup_memory_limit().bytes,
                address_space = address_space_budget().bytes;
  b = cgroup > 0 && cgroup < physical ? cgroup : physical;
  return address_space >= 0 && address_space < b ? address_space : b;
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
    // Where a default budget comes from: a cgroup's limit is news to most users (the container they are in).
    std::string source;
    const AddressSpaceBudget& as = address_space_budget();
    const bool default_budget = g_budget.load() <= 0;
    const bool from_address_space = default_budget && as.bytes >= 0 && as.bytes == budget;
    if (default_budget) {
      const CgroupMemoryLimit& cg = process_cgroup_memory_limit();
      source = from_address_space
                   ? (as.other_read ? fmt::format(", what the address-space limit (ulimit -v) of {} leaves beside the {} "
                                                "the process had mapped outside its tensors",
                                                binary_size(double(as.limit)), binary_size(double(as.other)))
                                  : fmt::format(", the address-space limit (ulimit -v) of {}", binary_size(double(as.limit))))
               : cg.bytes > 0 && cg.bytes == budget
                   ? fmt::format(", the memory limit of this process's cgroup, in {}", cg.file)
                   : std::string(", the machine's physical memory");
    }
    // What to raise, from where the budget came: under an address-space limit a larger --memory-budget only
    // moves the failure into the allocation, so the limit is what to raise. Then the caller's alternative.
    const std::string advice = fmt::format("{}{}{}", from_address_space ? "raise `ulimit -v`" : "raise --memory-budget",
                                           hint.empty() ? "" : ", or ", hint);
    throw OutOfBudget(fmt::format("{} needs {} bytes ({}){}, over the memory budget of {} bytes ({}{}); {}", what,
                                  byte_count(bytes), binary_size(bytes), with_live, budget, binary_size(double(budget)),
                                  source, advice));
  }
}

}  // namespace attnprof
