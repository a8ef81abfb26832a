// key_averages: per-op aggregates over one profile (torch.profiler's key_averages), done honestly.
//
// Per zone, on its own thread's tree (zones from different threads are independent trees):
//   self  = max(0, raw self - n_direct_children × calibrated zone overhead)   [raw self = (t1 - t0) - Σ children's]
//   total = self + Σ direct children's totals   [= (t1 - t0) - n_nested_zones × overhead, where nothing clamps]
// The overhead term is what one child zone adds to its parent beyond its own measured duration (its two
// timestamps, buffer writes): torch.profiler leaves it in the parent's self time (pytorch#82793). It is taken
// off totals as well as self times, so that self + children's totals = total still holds, Self CPU % sums to
// 100% and no CPU total % can exceed it. The trace keeps the measured timestamps. Task-clock (read inside the
// zone's [t0, t1]) has the same nested cost taken off.
// Memory: allocations are attributed to the innermost zone open on the allocating thread. self_mem counts
// bytes allocated directly in a zone, mem counts them including children; frees are reported separately, so
// neither can go negative (torch nets frees into Self CPU Mem and prints negatives, pytorch#70028).
// Costs: a zone's inclusive cost is its own cost model plus its children's, so composite ops (masked_fill =
// copy_ + masked_fill_) and annotations carry FLOPs and bytes instead of torch's `--`.
// A group's totals count a zone nested inside another zone of the same group once (recursion is not
// double counted); calls count every zone.
// Steps: each zone under a ProfilerStep#N adds its self time to its row's share of that step (step_self_ns),
// so the spread of an op over the forwards is kept beside its sum.
// Device (CUDA profiles): zone rows gain their inclusive device time and device memory (device.cpp: each
// activity once per ancestor), and one row per device activity name follows them, carrying Self CUDA.
#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include <fmt/format.h>

#include "attnprof/analysis.h"

namespace attnprof::analysis {
namespace {

std::string shapes_string(const prof::ZoneEvent& e) {
  // torch's Input Shapes text: "[[8, 16, 1024, 64], [8, 16, 64, 1024]]"; "[]" for a zone without shapes.
  std::string s = "[";
  for (int i = 0; i < e.n_shapes; ++i) {
    if (i) s += ", ";
    const auto& d = e.shapes[size_t(i)];
    s += fmt::format("[{}, {}, {}, {}]", d[0], d[1], d[2], d[3]);
  }
  return s + "]";
}

std::string types_string(const prof::ZoneEvent& e) {
  // Each input's element type, in the order of the shapes: "[bf16, bf16, bf16]"; "?" for an input recorded
  // without one, "[]" for a zone without inputs.
  std::string s = "[";
  for (int i = 0; i < e.n_shapes; ++i) {
    if (i) s += ", ";
    const char* t = e.types[size_t(i)];
    s += t ? t : "?";
  }
  return s + "]";
}

// Per-zone derived numbers for one thread.
struct ZoneDerived {
  double total_ns = 0.0;
  double self_ns = 0.0;
  double subtracted_ns = 0.0;  // the calibrated cost of the zones nested in it, taken off its measured time
  int64_t self_alloc = 0, alloc = 0, freed = 0;
};

// N of "ProfilerStep#N" (0 if the digits are missing or out of range).
int64_t step_number(std::string_view name) {
  int64_t n = 0;
  for (const char c : name.substr(name.find('#') + 1)) {
    if (c < '0' || c > '9' || n > (std::numeric_limits<int64_t>::max() - 9) / 10) return 0;
    n = n * 10 + (c - '0');
  }
  return n;
}

std::vector<ZoneDerived> derive(const prof::ProfileResult& r, const prof::ThreadTrace& t, double overhead_ns,
                                double& subtracted_ns) {
  const size_t n = t.zones.size();
  std::vector<ZoneDerived> d(n);
  std::vector<double> measured_ns(n, 0.0), child_measured_ns(n, 0.0), child_ns(n, 0.0);
  std::vector<int32_t> direct(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const prof::ZoneEvent& e = t.zones[i];
    measured_ns[i] = e.t1 > e.t0 ? r.ns(e.t1 - e.t0) : 0.0;
  }
  for (const prof::MemEvent& m : t.mem) {
    if (m.zone < 0 || size_t(m.zone) >= n) continue;
    if (m.delta > 0) d[size_t(m.zone)].self_alloc += m.delta;
    else d[size_t(m.zone)].freed -= m.delta;
  }
  for (size_t i = 0; i < n; ++i) d[i].alloc = d[i].self_alloc;
  // Children always come after their parent (zones are stored in order of opening), so one backward pass
  // sees every zone's descendants before the zone itself. Each zone's self time gives up the overhead of its
  // direct children, at most all of it (an overhead calibrated high, on a loaded machine, would otherwise
  // exceed it), and its total is built from the bottom up as self + its children's totals: so the identity
  // holds even where a self time was clamped, and no parent's total falls below a child's.
  for (size_t i = n; i-- > 0;) {
    const double raw_self = std::max(0.0, measured_ns[i] - child_measured_ns[i]);
    d[i].self_ns = std::max(0.0, raw_self - double(direct[i]) * overhead_ns);
    d[i].total_ns = d[i].self_ns + child_ns[i];
    d[i].subtracted_ns = std::max(0.0, measured_ns[i] - d[i].total_ns);
    subtracted_ns += raw_self - d[i].self_ns;
    const int32_t p = t.zones[i].parent;
    if (p < 0 || size_t(p) >= i) continue;
    child_ns[size_t(p)] += d[i].total_ns;
    child_measured_ns[size_t(p)] += measured_ns[i];
    direct[size_t(p)] += 1;
    d[size_t(p)].alloc += d[i].alloc;
    d[size_t(p)].freed += d[i].freed;
  }
  return d;
}

}  // namespace

std::vector<double> zone_self_ns(const prof::ProfileResult& r, const prof::ThreadTrace& t) {
  double subtracted = 0.0;
  const std::vector<ZoneDerived> d = derive(r, t, r.zone_overhead_ns, subtracted);
  std::vector<double> out(d.size());
  for (size_t i = 0; i < d.size(); ++i) out[i] = d[i].self_ns;
  return out;
}

std::vector<OpCost> inclusive_costs(const prof::ThreadTrace& t) {
  const size_t n = t.zones.size();
  std::vector<OpCost> inc(n);
  for (size_t i = 0; i < n; ++i) inc[i] = t.zones[i].cost;
  // Children always come after their parent (zones are stored in order of opening), so one backward pass
  // adds every zone's descendants to it before the zone is added to its own parent.
  for (size_t i = n; i-- > 0;) {
    const int32_t p = t.zones[i].parent;
    if (p >= 0 && size_t(p) < i) inc[size_t(p)] += inc[i];
  }
  return inc;
}

KeyAverages key_averages(const prof::ProfileResult& r, const KeyAveragesOptions& opt) {
  KeyAverages ka;
  ka.zone_overhead_ns = r.zone_overhead_ns;
  ka.has_memory = r.memory_recorded;
  ka.has_shapes = r.shapes_recorded;
  ka.start_bytes = r.start_bytes;
  ka.peak_bytes = r.start_bytes;
  ka.counters_note = r.counters_note;
  std::unordered_map<std::string, size_t> row_of;
  // The recorded steps, in order: ProfilerStep#N's N, from every thread.
  std::vector<int64_t> steps;
  for (const prof::ThreadTrace& t : r.threads)
    for (const prof::ZoneEvent& e : t.zones)
      if (e.name && is_step_zone(e.name)) steps.push_back(step_number(e.name));
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  std::vector<bool> outside_steps;  // per row: some zone of it ran outside every step
  // One double per row and step: bounded, since rows may grow with the steps (a shape that changes every step
  // under group_by_input_shape). Past the bound no row keeps them (16 MiB: 10,000 steps of 200 rows).
  constexpr size_t kMaxStepCells = size_t(1) << 21;
  bool per_step = !steps.empty();
  const std::vector<std::vector<ZoneDeviceStats>> dev = r.has_device ? zone_device_stats(r)
                                                                     : std::vector<std::vector<ZoneDeviceStats>>{};
  for (size_t ti = 0; ti < r.threads.size(); ++ti) {
    const prof::ThreadTrace& t = r.threads[ti];
    const ZoneDeviceStats* zdev = ti < dev.size() ? dev[ti].data() : nullptr;
    const std::vector<ZoneDerived> d = derive(r, t, r.zone_overhead_ns, ka.overhead_subtracted_ns);
    const std::vector<OpCost> inclusive = inclusive_costs(t);
    // Each zone's direct children's page faults, to take off its own (a wrapper's are its children's).
    std::vector<int64_t> child_faults(t.zones.size(), 0);
    for (size_t i = 0; i < t.zones.size(); ++i)
      if (const int32_t p = t.zones[i].parent; p >= 0 && size_t(p) < i && t.zones[i].page_faults > 0)
        child_faults[size_t(p)] += t.zones[i].page_faults;
    std::vector<size_t> group(t.zones.size());
    std::vector<int64_t> step_of(t.zones.size(), -1);  // index into `steps` of the step the zone ran in, or -1
    for (size_t i = 0; i < t.zones.size(); ++i) {
      const prof::ZoneEvent& e = t.zones[i];
      if (e.name && is_step_zone(e.name))
        step_of[i] = std::lower_bound(steps.begin(), steps.end(), step_number(e.name)) - steps.begin();
      else if (e.parent >= 0 && size_t(e.parent) < i)
        step_of[i] = step_of[size_t(e.parent)];
      std::string shapes = opt.group_by_input_shape ? shapes_string(e) : std::string();
      std::string types = opt.group_by_input_shape ? types_string(e) : std::string();
      const std::string name = e.name && is_step_zone(e.name) ? std::string(kStepRow) : e.name ? e.name : "?";
      std::string key = name;
      // By shape and by type: torch's key is the shapes alone, which merges SDPA math's bf16 -> fp32 casts
      // of q, k, v with its fp32 -> bf16 cast of the output (the same shapes).
      if (opt.group_by_input_shape) key += '\0' + shapes + '\0' + types;
      auto [it, fresh] = row_of.try_emplace(key, ka.rows.size());
      if (fresh) {
        OpStats s;
        s.name = name;
        s.category = e.category ? e.category : "";
        s.input_shapes = std::move(shapes);
        s.input_types = std::move(types);
        if (per_step && (ka.rows.size() + 1) * steps.size() > kMaxStepCells) {
          per_step = false;
          for (OpStats& o : ka.rows) std::vector<double>().swap(o.step_self_ns);
        }
        if (per_step) s.step_self_ns.assign(steps.size(), 0.0);
        ka.rows.push_back(std::move(s));
        outside_steps.push_back(false);
      }
      group[i] = it->second;
      OpStats& s = ka.rows[it->second];
      s.calls += 1;
      s.self_ns += d[i].self_ns;
      if (step_of[i] >= 0 && per_step) s.step_self_ns[size_t(step_of[i])] += d[i].self_ns;
      else outside_steps[it->second] = true;
      s.self_mem_bytes += d[i].self_alloc;
      s.self_cost += e.cost;
      if (zdev) s.self_device_mem_bytes += zdev[i].self_mem_bytes;
      ka.self_total_ns += d[i].self_ns;
      ka.zones += 1;
      // Task-clock runs inside [t0, t1]; the profiler's own cost of the nested zones comes off it as it comes
      // off the zone's time, so on one thread a row's task-clock is at most its CPU total.
      if (e.task_clock_ns >= 0)
        s.task_clock_ns = std::max<int64_t>(s.task_clock_ns, 0) +
                          std::max<int64_t>(0, e.task_clock_ns - std::llround(d[i].subtracted_ns));
      if (e.page_faults >= 0)
        s.self_page_faults = std::max<int64_t>(s.self_page_faults, 0) + std::max<int64_t>(0, e.page_faults - child_faults[i]);
      // Inclusive quantities once per outermost zone of the group (recursion counted once).
      bool nested_in_same = false;
      for (int32_t p = e.parent; p >= 0 && size_t(p) < i; p = t.zones[size_t(p)].parent)
        if (group[size_t(p)] == group[i]) {
          nested_in_same = true;
          break;
        }
      if (!nested_in_same) {
        s.total_ns += d[i].total_ns;
        s.mem_bytes += d[i].alloc;
        s.freed_bytes += d[i].freed;
        s.cost += inclusive[i];
        if (e.page_faults >= 0) s.page_faults = std::max<int64_t>(s.page_faults, 0) + e.page_faults;
        if (zdev) {
          s.device_total_ns += zdev[i].total_ns;
          s.device_mem_bytes += zdev[i].mem_bytes;
        }
      }
    }
    for (const prof::MemEvent& m : t.mem) {
      ka.peak_bytes = std::max(ka.peak_bytes, m.total);
      if (m.delta > 0 && (m.zone < 0 || size_t(m.zone) >= t.zones.size())) ka.outside_zones_bytes += m.delta;
    }
  }
  for (size_t k = 0; k < ka.rows.size(); ++k)
    if (outside_steps[k] || !per_step) std::vector<double>().swap(ka.rows[k].step_self_ns);
  if (r.has_device) {
    ka.has_device = true;
    ka.device_name = r.gpu.name;
    ka.device_peak_bytes = device_peak_bytes(r);
    for (const DeviceOpStats& a : device_key_averages(r)) {
      OpStats s;
      s.name = a.name;
      s.category = a.category;
      s.calls = a.calls;
      s.self_device_ns = s.device_total_ns = a.total_ns;
      s.cost = s.self_cost = a.cost;
      ka.device_self_total_ns += a.total_ns;
      ka.rows.push_back(std::move(s));
    }
  }
  return ka;
}

namespace {
struct ZoneSpan {
  uint64_t t0 = 0;
  double ns = 0;
  int64_t task_clock_ns = -1;
};
// Outermost zones named `name` (not nested in another zone of that name), in time order across threads.
std::vector<ZoneSpan> outermost_zones(const prof::ProfileResult& r, std::string_view name) {
  std::vector<ZoneSpan> found;
  for (const prof::ThreadTrace& t : r.threads) {
    for (size_t i = 0; i < t.zones.size(); ++i) {
      const prof::ZoneEvent& e = t.zones[i];
      if (!e.name || name != e.name) continue;
      bool nested = false;
      for (int32_t p = e.parent; p >= 0 && size_t(p) < i; p = t.zones[size_t(p)].parent)
        if (t.zones[size_t(p)].name && name == t.zones[size_t(p)].name) {
          nested = true;
          break;
        }
      if (!nested) found.push_back({e.t0, e.t1 > e.t0 ? r.ns(e.t1 - e.t0) : 0.0, e.task_clock_ns});
    }
  }
  std::stable_sort(found.begin(), found.end(), [](const ZoneSpan& a, const ZoneSpan& b) { return a.t0 < b.t0; });
  return found;
}
}  // namespace

std::vector<double> zone_durations_ns(const prof::ProfileResult& r, std::string_view name) {
  std::vector<double> out;
  for (const ZoneSpan& z : outermost_zones(r, name)) out.push_back(z.ns);
  return out;
}

std::vector<double> zone_on_cpu_shares(const prof::ProfileResult& r, std::string_view name) {
  std::vector<double> out;
  for (const ZoneSpan& z : outermost_zones(r, name))
    out.push_back(z.task_clock_ns >= 0 && z.ns > 0 ? std::min(1.0, double(z.task_clock_ns) / z.ns) : -1.0);
  return out;
}

}  // namespace attnprof::analysis
