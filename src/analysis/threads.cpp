// How each op's OpenMP regions used their threads (analysis.h, ThreadBalance): the shares every thread
// recorded, grouped by region id.
#include <algorithm>
#include <array>
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

double OpPhases::steps_ns() const {
  double sum = 0;
  for (const Step& s : steps) sum += s.ns;
  return sum;
}

std::vector<OpPhases> op_phases(const prof::ProfileResult& r) {
  struct Acc {
    OpPhases out;
    std::array<double, prof::kMaxPhases> ns{}, flops{};
    const char* const* names = nullptr;
    int n = 0;
    std::map<uint32_t, int> team;  // shares per region
  };
  std::vector<Acc> acc;
  std::unordered_map<std::string, size_t> row_of;
  // Shares in order of their region id (ids grow with time), so ops come in order of their first region.
  std::vector<const prof::WorkSpan*> shares;
  for (const prof::ThreadTrace& t : r.threads)
    for (const prof::WorkSpan& w : t.work)
      if (w.name && w.region != 0 && w.n_phases > 0 && w.phase_names) shares.push_back(&w);
  std::stable_sort(shares.begin(), shares.end(), [](auto* a, auto* b) { return a->region < b->region; });
  for (const prof::WorkSpan* w : shares) {
    auto [it, fresh] = row_of.try_emplace(w->name, acc.size());
    if (fresh) {
      acc.emplace_back();
      acc.back().out.name = w->name;
      acc.back().names = w->phase_names;
      acc.back().n = std::min<int>(w->n_phases, prof::kMaxPhases);
    }
    Acc& a = acc[it->second];
    if (a.names != w->phase_names) continue;  // one op, one set of steps (a share of another set is not summed)
    a.team[w->region] += 1;
    a.out.share_ns += r.ns(std::max(w->t1, w->t0) - w->t0);
    for (int k = 0; k < a.n; ++k) {
      a.ns[size_t(k)] += r.ns(w->phase_ticks[size_t(k)]);
      a.flops[size_t(k)] += w->phase_flops[size_t(k)];
    }
  }
  std::vector<OpPhases> out;
  for (Acc& a : acc) {
    a.out.regions = int64_t(a.team.size());
    for (const auto& [id, n] : a.team) a.out.threads = std::max(a.out.threads, n);
    for (int k = 0; k < a.n; ++k)
      if (a.ns[size_t(k)] > 0 || a.flops[size_t(k)] > 0)
        a.out.steps.push_back({a.names[k], a.ns[size_t(k)], a.flops[size_t(k)]});
    out.push_back(std::move(a.out));
  }
  return out;
}

}  // namespace attnprof::analysis
