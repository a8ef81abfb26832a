// Pure host side of the CUDA backend, compiled in every build: device clock -> host ticks, CUPTI records ->
// ProfileResult::device, per-zone device time and memory, device table rows, device trace events.
// No CUDA header is needed, so CI without a GPU (or without nvcc) unit-tests all of it.
#include <cxxabi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <unordered_map>

#include "attnprof/cuda.h"
#include "attnprof/error.h"
#include "attnprof/report.h"

namespace attnprof::cuda {

// ---- clock ----------------------------------------------------------------------------------------------
uint64_t ClockMap::to_ticks(uint64_t device_ns) const {
  const double t = host0_ticks + (double(device_ns) - device0_ns) * ticks_per_ns;
  return t <= 0.0 ? 0 : uint64_t(std::llround(t));
}

ClockMap fit_clock(const std::vector<ClockSample>& samples, double ns_per_tick) {
  ATTNPROF_CHECK(!samples.empty(), "fit_clock needs at least one clock sample");
  ATTNPROF_CHECK(ns_per_tick > 0.0, "ns_per_tick must be positive, got {}", ns_per_tick);
  const double nominal = 1.0 / ns_per_tick;
  auto mid = [](const ClockSample& s) { return 0.5 * (double(s.host_before) + double(s.host_after)); };
  // Anchor: the sample whose host bracket is tightest (least uncertainty about when the device was read).
  size_t best = 0;
  for (size_t i = 1; i < samples.size(); ++i)
    if (samples[i].host_after - samples[i].host_before < samples[best].host_after - samples[best].host_before)
      best = i;
  ClockMap m;
  m.device0_ns = double(samples[best].device_ns);
  m.host0_ticks = mid(samples[best]);
  m.ticks_per_ns = nominal;
  if (samples.size() >= 2) {
    const ClockSample& a = samples.front();
    const ClockSample& b = samples.back();
    const double dd = double(b.device_ns) - double(a.device_ns);
    if (dd >= 1e6) {
      const double rate = (mid(b) - mid(a)) / dd;
      if (std::fabs(rate / nominal - 1.0) <= 0.01) m.ticks_per_ns = rate;
    }
  }
  return m;
}

std::string demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !d) return name;
  std::string s(d);
  std::free(d);
  return s;
}

// ---- peaks ----------------------------------------------------------------------------------------------
double bf16_flop_per_clock_per_sm(int major, int minor) {
  if (major == 8) return minor == 0 ? 2048.0 : 1024.0;  // A100; A10/A40/RTX 30 (86), Orin (87), L4/L40 (89)
  if (major == 9) return 4096.0;                        // H100/H200
  if (major == 10) return 8192.0;                       // B200
  return 0.0;
}

double fp32_flop_per_clock_per_sm(int major, int minor) {
  if (major == 8) return minor == 0 ? 128.0 : 256.0;  // A100: 64 FP32 lanes/SM; GA10x/AD10x: 128
  if (major == 9 || major == 10 || major == 12) return 256.0;
  return 0.0;
}

analysis::MachinePeaks gpu_peaks(const DeviceInfo& d) {
  analysis::MachinePeaks p;
  p.cpu = d.name;
  p.isa = fmt::format("sm_{}{}", d.cc_major, d.cc_minor);
  p.threads = d.sms;
  p.bf16_gflops = bf16_flop_per_clock_per_sm(d.cc_major, d.cc_minor) * d.sms * d.sm_clock_ghz;
  p.fp32_gflops = fp32_flop_per_clock_per_sm(d.cc_major, d.cc_minor) * d.sms * d.sm_clock_ghz;
  p.sgemm_gflops = p.fp32_gflops;
  p.bandwidth_gbs = d.bandwidth_gbs;
  return p;
}

// ---- conversion -----------------------------------------------------------------------------------------
void attach_device_capture(prof::ProfileResult& r, const DeviceCapture& cap, const AttachOptions& opt) {
  const double npt = r.ns_per_tick > 0 ? r.ns_per_tick : prof::ns_per_tick();
  const ClockMap clock = cap.clock_samples.empty() ? ClockMap{} : fit_clock(cap.clock_samples, npt);
  std::unordered_map<uint32_t, int32_t> thread_of_tid;
  for (size_t i = 0; i < r.threads.size(); ++i) thread_of_tid[r.threads[i].tid] = int32_t(i);
  // The first (outermost) API call per correlation id: a runtime call and the driver call under it share it.
  std::unordered_map<uint32_t, const LaunchRecord*> launch_of;
  for (const LaunchRecord& l : cap.launches) launch_of.emplace(l.correlation, &l);

  // A launch is live when its zone is in the result and its time lies inside that zone's recorded span
  // (a zone index of a discarded warm-up step may have been reused by a later zone).
  auto live_zone = [&](uint32_t tid, int32_t zone, uint64_t t, int32_t* thread_out) {
    auto it = thread_of_tid.find(tid);
    if (it == thread_of_tid.end() || zone < 0) return false;
    const auto& zones = r.threads[size_t(it->second)].zones;
    if (size_t(zone) >= zones.size()) return false;
    const prof::ZoneEvent& z = zones[size_t(zone)];
    if (t < z.t0 || t > z.t1) return false;
    *thread_out = it->second;
    return true;
  };

  std::vector<prof::DeviceActivity> out;
  out.reserve(cap.activities.size());
  std::map<std::pair<int32_t, int32_t>, int> per_zone;  // activities launched per (thread, zone)
  for (const RawActivity& a : cap.activities) {
    prof::DeviceActivity d;
    d.kind = a.kind;
    d.name = prof::detail::intern(a.kind == DeviceActivity::Kind::Kernel ? demangle(a.name) : a.name);
    d.t0 = clock.to_ticks(a.start_ns);
    d.t1 = std::max(d.t0, clock.to_ticks(a.end_ns));
    d.device = a.device;
    d.stream = a.stream;
    d.correlation = a.correlation;
    d.grid = a.grid;
    d.block = a.block;
    d.registers = a.registers;
    d.static_smem = a.static_smem;
    d.dynamic_smem = a.dynamic_smem;
    d.bytes = a.bytes;
    auto it = launch_of.find(a.correlation);
    bool attributed = false;
    if (it != launch_of.end()) {
      const LaunchRecord& l = *it->second;
      d.launch_t0 = l.t0;
      d.launch_t1 = l.t1;
      d.launch_api = prof::detail::intern(l.api);
      int32_t th = -1;
      if (live_zone(l.tid, l.zone, l.t0, &th)) {
        d.thread = th;
        d.zone = l.zone;
        d.variant = r.threads[size_t(th)].zones[size_t(l.zone)].variant;
        attributed = true;
      }
    }
    if (!attributed && !opt.keep_unattributed) continue;
    if (attributed) ++per_zone[{d.thread, d.zone}];
    out.push_back(d);
  }
  // A zone that launched exactly one activity hands it its cost model (matmul -> the GEMM kernel).
  for (prof::DeviceActivity& d : out)
    if (d.zone >= 0 && per_zone[{d.thread, d.zone}] == 1)
      d.cost = r.threads[size_t(d.thread)].zones[size_t(d.zone)].cost;
  std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.t0 < y.t0; });

  std::vector<prof::DeviceMemEvent> mem;
  for (const DeviceMemRecord& m : cap.mem) {
    prof::DeviceMemEvent e;
    e.t = m.t;
    e.delta = m.delta;
    e.total = m.total;
    int32_t th = -1;
    if (live_zone(m.tid, m.zone, m.t, &th)) {
      e.thread = th;
      e.zone = m.zone;
    } else if (!opt.keep_unattributed) {
      continue;
    }
    mem.push_back(e);
  }
  std::stable_sort(mem.begin(), mem.end(), [](const auto& x, const auto& y) { return x.t < y.t; });

  r.device = std::move(out);
  r.device_mem = std::move(mem);
  r.device_name = cap.device_name;
  r.has_device = true;
  if (cap.dropped_records > 0) r.metadata["cupti_dropped_records"] = std::to_string(cap.dropped_records);
}

// ---- aggregates -----------------------------------------------------------------------------------------
std::vector<std::vector<ZoneDeviceStats>> zone_device_stats(const prof::ProfileResult& r) {
  std::vector<std::vector<ZoneDeviceStats>> s(r.threads.size());
  for (size_t t = 0; t < r.threads.size(); ++t) s[t].resize(r.threads[t].zones.size());
  auto valid = [&](int32_t th, int32_t z) {
    return th >= 0 && size_t(th) < s.size() && z >= 0 && size_t(z) < s[size_t(th)].size();
  };
  for (const prof::DeviceActivity& d : r.device) {
    if (!valid(d.thread, d.zone)) continue;
    const double ns = double(d.t1 - d.t0) * r.ns_per_tick;
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

namespace {
const char* category_of(DeviceActivity::Kind k) {
  switch (k) {
    case DeviceActivity::Kind::Kernel: return "kernel";
    case DeviceActivity::Kind::Memcpy: return "gpu_memcpy";
    case DeviceActivity::Kind::Memset: return "gpu_memset";
  }
  return "kernel";
}
}  // namespace

std::vector<DeviceOpStats> device_key_averages(const prof::ProfileResult& r) {
  std::vector<DeviceOpStats> rows;
  std::unordered_map<std::string, size_t> at;
  for (const prof::DeviceActivity& d : r.device) {
    const std::string name = d.name ? d.name : "?";
    auto [it, fresh] = at.emplace(name, rows.size());
    if (fresh) {
      rows.push_back({});
      rows.back().name = name;
      rows.back().category = category_of(d.kind);
      rows.back().min_ns = std::numeric_limits<double>::infinity();
    }
    DeviceOpStats& row = rows[it->second];
    const double ns = double(d.t1 - d.t0) * r.ns_per_tick;
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
  }
  return rows;
}

double device_time_total_ns(const prof::ProfileResult& r) {
  double ns = 0.0;
  for (const prof::DeviceActivity& d : r.device) ns += double(d.t1 - d.t0) * r.ns_per_tick;
  return ns;
}

int64_t device_peak_bytes(const prof::ProfileResult& r) {
  int64_t peak = 0;
  for (const prof::DeviceMemEvent& m : r.device_mem) peak = std::max(peak, m.total);
  return peak;
}

// ---- table ----------------------------------------------------------------------------------------------
std::string device_table(const prof::ProfileResult& r, int row_limit) {
  std::vector<DeviceOpStats> rows = device_key_averages(r);
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.total_ns > b.total_ns; });
  if (row_limit >= 0 && rows.size() > size_t(row_limit)) rows.resize(size_t(row_limit));
  const double total = device_time_total_ns(r);
  size_t name_w = 4;
  for (const auto& row : rows) name_w = std::max(name_w, row.name.size() + 4);
  name_w = std::min<size_t>(name_w, 55);
  auto name_cell = [&](const std::string& n) {
    return n.size() <= name_w - 2 ? n : n.substr(0, name_w - 5) + "...";
  };
  const std::vector<std::string> head = {"Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg", "# of Calls",
                                         "Grid",      "Block",       "Regs",       "SMem",          "TFLOP/s"};
  std::string rule(name_w, '-');
  for (size_t i = 0; i < head.size(); ++i) rule += "  " + std::string(12, '-');
  std::string out = rule + "\n" + fmt::format("{:<{}}", "Name", name_w);
  for (const auto& h : head) out += fmt::format("  {:>12}", h);
  out += "\n" + rule + "\n";
  auto dims = [](const std::array<int32_t, 3>& d) {
    return d[1] == 1 && d[2] == 1 ? fmt::format("{}", d[0]) : fmt::format("{}x{}x{}", d[0], d[1], d[2]);
  };
  for (const auto& row : rows) {
    const bool k = row.category == "kernel";
    out += fmt::format("{:<{}}", name_cell(row.name), name_w);
    out += fmt::format("  {:>12}  {:>12}  {:>12}  {:>12}  {:>12}", report::format_time_ns(row.total_ns),
                       fmt::format("{:.2f}%", total > 0 ? 100.0 * row.total_ns / total : 0.0),
                       report::format_time_ns(row.total_ns), report::format_time_ns(row.total_ns / double(row.calls)),
                       row.calls);
    out += fmt::format("  {:>12}  {:>12}  {:>12}  {:>12}  {:>12}\n", k ? dims(row.grid) : "--",
                       k ? dims(row.block) : "--", k ? std::to_string(row.registers) : "--",
                       k ? report::format_bytes(row.static_smem + row.dynamic_smem) : "--",
                       row.cost.flops > 0 && row.total_ns > 0 ? fmt::format("{:.1f}", row.cost.flops / row.total_ns * 1e-3)
                                                               : "--");
  }
  out += rule + "\n" + fmt::format("Self CUDA time total: {}\n", report::format_time_ns(total));
  return out;
}

// ---- trace ----------------------------------------------------------------------------------------------
nlohmann::json device_trace_events(const prof::ProfileResult& r, const DeviceTraceIds& ids) {
  using nlohmann::json;
  json ev = json::array();
  auto us = [&](uint64_t t) { return std::round(r.us_since_origin(t) * 1000.0) / 1000.0; };
  auto dur_us = [&](uint64_t a, uint64_t b) { return std::round(double(b - a) * r.ns_per_tick) / 1000.0; };
  auto host_tid = [&](int32_t th) { return th >= 0 ? int(r.threads[size_t(th)].tid) : 0; };
  std::map<uint32_t, std::map<uint32_t, bool>> streams;  // device -> streams seen
  for (const prof::DeviceActivity& d : r.device) streams[d.device][d.stream] = true;
  for (const auto& [dev, ss] : streams) {
    const int pid = ids.device_pid_base + int(dev);
    const std::string pname = r.device_name.empty() ? fmt::format("GPU {}", dev)
                                                    : fmt::format("GPU {} ({})", dev, r.device_name);
    ev.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", pname}}}});
    for (const auto& [st, _] : ss)
      ev.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", int(st)},
                    {"args", {{"name", fmt::format("stream {}", st)}}}});
  }
  for (const prof::DeviceActivity& d : r.device) {
    const int pid = ids.device_pid_base + int(d.device);
    json args = {{"device", d.device}, {"stream", d.stream}, {"correlation", d.correlation},
                 {"External id", d.correlation}};
    if (d.kind == DeviceActivity::Kind::Kernel) {
      args["grid"] = {d.grid[0], d.grid[1], d.grid[2]};
      args["block"] = {d.block[0], d.block[1], d.block[2]};
      args["registers per thread"] = d.registers;
      args["shared memory"] = d.static_smem + d.dynamic_smem;
    } else {
      args["bytes"] = d.bytes;
    }
    if (d.variant) args["variant"] = d.variant;
    if (d.cost.flops > 0) args["flops"] = d.cost.flops;
    if (d.cost.bytes() > 0) args["bytes moved"] = d.cost.bytes();
    ev.push_back({{"ph", "X"}, {"cat", category_of(d.kind)}, {"name", d.name ? d.name : "?"}, {"pid", pid},
                  {"tid", int(d.stream)}, {"ts", us(d.t0)}, {"dur", dur_us(d.t0, d.t1)}, {"args", args}});
    if (d.launch_api && d.thread >= 0 && d.launch_t1 >= d.launch_t0) {
      const int tid = host_tid(d.thread);
      ev.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", d.launch_api ? d.launch_api : "launch"},
                    {"pid", ids.host_pid}, {"tid", tid}, {"ts", us(d.launch_t0)},
                    {"dur", dur_us(d.launch_t0, d.launch_t1)},
                    {"args", {{"correlation", d.correlation}, {"External id", d.correlation}}}});
      ev.push_back({{"ph", "s"}, {"cat", "ac2g"}, {"name", "ac2g"}, {"id", d.correlation}, {"pid", ids.host_pid},
                    {"tid", tid}, {"ts", us(d.launch_t0)}});
      ev.push_back({{"ph", "f"}, {"bp", "e"}, {"cat", "ac2g"}, {"name", "ac2g"}, {"id", d.correlation},
                    {"pid", pid}, {"tid", int(d.stream)}, {"ts", us(d.t0)}});
    }
  }
  for (const prof::DeviceMemEvent& m : r.device_mem)
    ev.push_back({{"ph", "C"}, {"name", "CUDA Mem"}, {"pid", ids.device_pid_base}, {"ts", us(m.t)},
                  {"args", {{"Total Allocated", m.total}}}});
  return ev;
}

}  // namespace attnprof::cuda
