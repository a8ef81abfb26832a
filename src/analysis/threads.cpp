// How each op's OpenMP regions used their threads (analysis.h, ThreadBalance): the shares every thread
// recorded, grouped by region id.
#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

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

std::string OpItems::item_label(const std::array<int32_t, 3>& k) const {
  int last = -1;
  for (int i = 0; i < 3; ++i)
    if (!keys[size_t(i)].empty()) last = i;
  if (last < 0) return noun;
  std::string s = fmt::format("{} {}", noun, k[size_t(last)]);
  std::string rest;
  for (int i = 0; i < last; ++i)
    if (!keys[size_t(i)].empty())
      rest += fmt::format("{}{} {}", rest.empty() ? "" : ", ", keys[size_t(i)], k[size_t(i)]);
  return rest.empty() ? s : fmt::format("{} ({})", s, rest);
}

std::vector<int32_t> item_shares(const prof::ThreadTrace& t) {
  std::unordered_map<uint32_t, int32_t> share_of;  // region -> its share on this thread
  for (size_t i = 0; i < t.work.size(); ++i) share_of[t.work[i].region] = int32_t(i);
  std::vector<int32_t> out;
  out.reserve(t.items.size());
  for (const prof::WorkItem& it : t.items) {
    const auto sh = share_of.find(it.region);
    out.push_back(sh != share_of.end() ? sh->second : -1);
  }
  return out;
}

std::vector<OpItems> op_items(const prof::ProfileResult& r) {
  struct Entry {
    const prof::WorkItem* item;
    const prof::WorkSpan* share;
  };
  // Each item with its share (the same region on the same thread), in order of the region ids, so ops come in
  // order of their first region as op_phases' do. An item whose share was not kept is left out, as the trace
  // leaves it out.
  std::vector<Entry> all;
  for (const prof::ThreadTrace& t : r.threads) {
    const std::vector<int32_t> shares = item_shares(t);
    for (size_t i = 0; i < t.items.size(); ++i)
      if (shares[i] >= 0 && t.items[i].names && t.work[size_t(shares[i])].name)
        all.push_back({&t.items[i], &t.work[size_t(shares[i])]});
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Entry& a, const Entry& b) { return a.item->region < b.item->region; });
  struct Acc {
    OpItems out;
    const prof::ItemNames* names = nullptr;
    std::map<int32_t, std::vector<double>> ns;  // by inner count
    std::map<int32_t, double> flops;
    std::set<uint32_t> regions;
  };
  std::vector<Acc> acc;
  std::unordered_map<std::string, size_t> row_of;
  for (const Entry& e : all) {
    auto [it, fresh] = row_of.try_emplace(e.share->name, acc.size());
    if (fresh) {
      acc.emplace_back();
      Acc& a = acc.back();
      a.names = e.item->names;
      a.out.name = e.share->name;
      a.out.noun = a.names->noun ? a.names->noun : "item";
      a.out.inner = a.names->inner ? a.names->inner : "";
      for (size_t k = 0; k < 3; ++k) a.out.keys[k] = a.names->keys[k] ? a.names->keys[k] : "";
    }
    Acc& a = acc[it->second];
    if (a.names != e.item->names) continue;  // one op, one kind of item
    const prof::WorkItem& w = *e.item;
    const double ns = r.ns(std::max(w.t1, w.t0) - w.t0);
    a.ns[w.inner].push_back(ns);
    a.flops[w.inner] += w.flops;
    a.regions.insert(w.region);
    a.out.items += 1;
    if (ns > a.out.slowest.ns || a.out.items == 1) {
      OpItems::Slowest& s = a.out.slowest;
      s.keys = w.keys;
      s.inner = w.inner;
      s.ns = ns;
      s.step.clear();
      s.step_ns = 0;
      const prof::WorkSpan& sh = *e.share;
      for (int k = 0; k < std::min<int>(sh.n_phases, prof::kMaxPhases); ++k)
        if (sh.phase_names && sh.phase_names[k] && r.ns(w.phase_ticks[size_t(k)]) > s.step_ns) {
          s.step = sh.phase_names[k];
          s.step_ns = r.ns(w.phase_ticks[size_t(k)]);
        }
      // A step is part of its tile: laps a clock that stepped back added nothing to can sum past the tile's
      // length (which counts from its first lap to its last).
      s.step_ns = std::min(s.step_ns, s.ns);
    }
  }
  std::vector<OpItems> out;
  for (Acc& a : acc) {
    a.out.regions = int64_t(a.regions.size());
    for (auto& [inner, v] : a.ns) {
      OpItems::Group g;
      g.inner = inner;
      g.count = int64_t(v.size());
      double sum = 0;
      for (double x : v) sum += x;
      g.mean_ns = sum / double(v.size());
      g.max_ns = *std::max_element(v.begin(), v.end());
      g.flops = a.flops[inner];
      g.median_ns = median(std::move(v));
      if (inner == a.out.slowest.inner) a.out.slowest.group_median_ns = g.median_ns;
      a.out.groups.push_back(g);
    }
    // The line through the groups' medians against their FLOPs per item, each group one point.
    const bool all_counted = std::all_of(a.out.groups.begin(), a.out.groups.end(),
                                         [](const OpItems::Group& g) { return g.flops > 0; });
    if (a.out.groups.size() >= 3 && all_counted) {  // two points make any line, r² 1
      double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
      const double n = double(a.out.groups.size());
      for (const OpItems::Group& g : a.out.groups) {
        const double x = g.flops_each(), y = g.median_ns;
        sx += x, sy += y, sxx += x * x, sxy += x * y, syy += y * y;
      }
      const double vx = sxx - sx * sx / n, vy = syy - sy * sy / n, cxy = sxy - sx * sy / n;
      const double ns_per_flop = vx > 0 ? cxy / vx : 0.0;
      if (ns_per_flop > 0) {  // a line that falls with the work is no cost model
        a.out.fitted = true;
        a.out.marginal_gflops = 1.0 / ns_per_flop;
        a.out.fixed_ns = (sy - ns_per_flop * sx) / n;
        a.out.r2 = vy > 0 ? std::min(1.0, cxy * cxy / (vx * vy)) : 1.0;
      }
    }
    out.push_back(std::move(a.out));
  }
  return out;
}

}  // namespace attnprof::analysis
