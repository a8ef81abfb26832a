// Device (CUDA) time and memory per zone and per activity name, from ProfileResult::device / device_mem.
//
// One rule, torch's: Self CUDA belongs to device activities only. A zone's device total is the time of the
// activities launched inside it or its children; each activity is added once to each ancestor of the zone
// that launched it, so nested annotations never count a kernel twice (pytorch#130730).
#include <algorithm>
#include <limits>
#include <unordered_map>

#include "attnprof/analysis.h"

namespace attnprof::analysis {

std::vector<std::vector<ZoneDeviceStats>> zone_device_stats(const prof::ProfileResult& r) {
  std::vector<std::vector<ZoneDeviceStats>> s(r.threads.size());
  for (size_t t = 0; t < r.threads.size(); ++t) s[t].resize(r.threads[t].zones.size());
  auto valid = [&](int32_t th, int32_t z) {
    return th >= 0 && size_t(th) < s.size() && z >= 0 && size_t(z) < s[size_t(th)].size();
  };
  for (const prof::DeviceActivity& d : r.device) {
    if (!valid(d.thread, d.zone)) continue;
    const double ns = d.ns(r.ns_per_tick);
    auto& zs = s[size_t(d.thread)];
    const auto& zones = r.threads[size_t(d.thread)].zones;
    zs[size_t(d.zone)].launched_ns += ns;
    for (int32_t z = d.zone; z >= 0; z = zones[size_t(z)].parent) {
      zs[size_t(z)].total_ns += ns;
      zs[size_t(z)].activities += 1;
    }
  }
  for (const prof::DeviceMemEvent& m : r.device_mem) {
    if (m.delta <= 0 || !valid(m.thread, m.zone)) continue;
    auto& zs = s[size_t(m.thread)];
    const auto& zones = r.threads[size_t(m.thread)].zones;
    zs[size_t(m.zone)].self_mem_bytes += m.delta;
    for (int32_t z = m.zone; z >= 0; z = zones[size_t(z)].parent) zs[size_t(z)].mem_bytes += m.delta;
  }
  return s;
}

const char* device_category(prof::DeviceActivity::Kind k) {
  switch (k) {
    case prof::DeviceActivity::Kind::Kernel: return "kernel";
    case prof::DeviceActivity::Kind::Memcpy: return "gpu_memcpy";
    case prof::DeviceActivity::Kind::Memset: return "gpu_memset";
  }
  return "kernel";
}

bool is_device_category(std::string_view category) {
  return category == "kernel" || category == "gpu_memcpy" || category == "gpu_memset";
}

bool OpStats::is_device_activity() const { return is_device_category(category); }

std::vector<DeviceOpStats> device_key_averages(const prof::ProfileResult& r) {
  std::vector<DeviceOpStats> rows;
  std::unordered_map<std::string, size_t> at;
  for (const prof::DeviceActivity& d : r.device) {
    const std::string name = d.name ? d.name : "?";
    auto [it, fresh] = at.emplace(name, rows.size());
    if (fresh) {
      rows.push_back({});
      rows.back().name = name;
      rows.back().category = device_category(d.kind);
      rows.back().min_ns = std::numeric_limits<double>::infinity();
    }
    DeviceOpStats& row = rows[it->second];
    const double ns = d.ns(r.ns_per_tick);
    row.calls += 1;
    row.total_ns += ns;
    row.min_ns = std::min(row.min_ns, ns);
    row.max_ns = std::max(row.max_ns, ns);
    row.cost += d.cost;
    row.grid = d.grid;
    row.block = d.block;
    row.registers = d.registers;
    row.static_smem = d.static_smem;
    row.dynamic_smem = d.dynamic_smem;
    row.occupancy = d.occupancy;
  }
  return rows;
}

double device_time_total_ns(const prof::ProfileResult& r) {
  double ns = 0.0;
  for (const prof::DeviceActivity& d : r.device) ns += d.ns(r.ns_per_tick);
  return ns;
}

int64_t device_peak_bytes(const prof::ProfileResult& r) {
  int64_t peak = 0;
  for (const prof::DeviceMemEvent& m : r.device_mem) peak = std::max(peak, m.total);
  return peak;
}

}  // namespace attnprof::analysis
