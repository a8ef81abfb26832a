// How each op's OpenMP regions used their threads (analysis.h, ThreadBalance): the shares every thread
// recorded, grouped by region id.
#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include "attnprof/analysis.h"

namespace attnprof::analysis {

std::vector<ThreadBalance> thread_balance(const prof::ProfileResult& r) {
  struct Region {
    const char* name = nullptr;
    uint64_t first = std::numeric_limits<uint64_t>::max(), last_start = 0, end = 0;
    int team = 0;
    double busy_ns = 0, slowest_ns = 0;
    int64_t items = 0;
  };
  std::map<uint32_t, Region> regions;  // by id: ids grow with time, so rows come in order of first use
  for (const prof::ThreadTrace& t : r.threads)
    for (const prof::WorkSpan& w : t.work) {
      if (!w.name || w.region == 0) continue;
      const uint64_t t1 = std::max(w.t1, w.t0);
      Region& g = regions[w.region];
      g.name = w.name;
      g.first = std::min(g.first, w.t0);
      g.last_start = std::max(g.last_start, w.t0);
      g.end = std::max(g.end, t1);
      g.team += 1;
      const double ns = r.ns(t1 - w.t0);
      g.busy_ns += ns;
      g.slowest_ns = std::max(g.slowest_ns, ns);
      g.items += w.items;
    }
  std::vector<ThreadBalance> out;
  std::unordered_map<std::string, size_t> row_of;
  for (const auto& [id, g] : regions) {
    auto [it, fresh] = row_of.try_emplace(g.name, out.size());
    if (fresh) out.push_back(ThreadBalance{.name = g.name});
    ThreadBalance& b = out[it->second];
    const double wall = r.ns(g.end - g.first);
    b.regions += 1;
    b.threads = std::max(b.threads, g.team);
    b.wall_ns += wall;
    b.capacity_ns += wall * g.team;
    b.busy_ns += g.busy_ns;
    b.slowest_ns += g.slowest_ns;
    b.mean_ns += g.busy_ns / g.team;
    b.lag_ns += r.ns(g.last_start - g.first);
    b.items += g.items;
  }
  return out;
}

}  // namespace attnprof::analysis
