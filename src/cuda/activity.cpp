// Pure host side of the CUDA backend, compiled in every build: device clock -> host ticks, CUPTI records ->
// ProfileResult::device / device_mem, the GPU's datasheet peaks. (What a profile with device events turns
// into is analysis/device.cpp, report/table.cpp and report/trace.cpp.)
// No CUDA header is needed, so CI without a GPU (or without nvcc) unit-tests all of it.
#include <cxxabi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "attnprof/cuda.h"
#include "attnprof/error.h"

namespace attnprof::cuda {

// ---- clock ----------------------------------------------------------------------------------------------
uint64_t ClockMap::to_ticks(uint64_t device_ns) const {
  const int64_t offset = std::llround(double(int64_t(device_ns - device0_ns)) * ticks_per_ns);
  if (offset < 0 && uint64_t(-offset) > host0_ticks) return 0;
  return host0_ticks + uint64_t(offset);
}

ClockMap fit_clock(const std::vector<ClockSample>& samples, double ns_per_tick) {
  ATTNPROF_CHECK(!samples.empty(), "fit_clock needs at least one clock sample");
  ATTNPROF_CHECK(ns_per_tick > 0.0, "ns_per_tick must be positive, got {}", ns_per_tick);
  const double nominal = 1.0 / ns_per_tick;
  auto mid = [](const ClockSample& s) { return s.host_before + (s.host_after - s.host_before) / 2; };
  // Anchor: the sample whose host bracket is tightest (least uncertainty about when the device was read).
  size_t best = 0;
  for (size_t i = 1; i < samples.size(); ++i)
    if (samples[i].host_after - samples[i].host_before < samples[best].host_after - samples[best].host_before)
      best = i;
  ClockMap m;
  m.device0_ns = samples[best].device_ns;
  m.host0_ticks = mid(samples[best]);
  m.ticks_per_ns = nominal;
  if (samples.size() >= 2) {
    const ClockSample& a = samples.front();
    const ClockSample& b = samples.back();
    const double dd = double(int64_t(b.device_ns - a.device_ns));
    if (dd >= 1e6) {
      const double rate = double(int64_t(mid(b) - mid(a))) / dd;
      if (std::fabs(rate / nominal - 1.0) <= 0.01) m.ticks_per_ns = rate;
    }
  }
  return m;
}

double theoretical_occupancy(const SmLimits& sm, int block_threads, int registers_per_thread, int64_t smem_per_block) {
  if (!sm.known() || block_threads <= 0 || registers_per_thread < 0 || smem_per_block < 0) return -1.0;
  const int max_warps = sm.max_threads / 32;
  const int warps = (block_threads + 31) / 32;
  int blocks = std::min(sm.max_blocks, sm.max_threads / (warps * 32));
  if (registers_per_thread > 0) {
    const int per_warp = (registers_per_thread * 32 + 255) / 256 * 256;
    blocks = std::min(blocks, (sm.registers / per_warp) / warps);
  }
  const int64_t smem = (smem_per_block + sm.reserved_shared_memory + 127) / 128 * 128;
  if (smem > 0) blocks = std::min<int64_t>(blocks, sm.shared_memory / smem);
  return double(std::max(blocks, 0) * warps) / double(max_warps);
}

double estimated_occupancy(const SmLimits& sm, int64_t grid_blocks, int block_threads, int registers_per_thread,
                           int64_t smem_per_block) {
  const double theoretical = theoretical_occupancy(sm, block_threads, registers_per_thread, smem_per_block);
  if (theoretical < 0 || grid_blocks <= 0) return -1.0;
  const double warps_per_sm = double(grid_blocks) / double(sm.sms) * double((block_threads + 31) / 32);
  return std::min(theoretical, warps_per_sm / double(sm.max_threads / 32));
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

double datasheet_bf16_tflops(std::string_view name, int sms) {
  auto has = [&](std::string_view s) { return name.find(s) != std::string_view::npos; };
  if (has("NVL") || has("PCIe")) return 0.0;  // lower-power variants: their own figures, not listed here
  if (has("A100") && sms == 108) return 312.0;
  if ((has("H100") || has("H200") || has("GH200")) && sms == 132) return 989.4;
  return 0.0;
}

double bf16_peak_tflops(const DeviceInfo& d, std::string* source) {
  const double sheet = datasheet_bf16_tflops(d.name, d.sms);
  if (source) *source = sheet > 0 ? "datasheet" : "per-SM rate × SMs × reported clock";
  return sheet > 0 ? sheet : bf16_flop_per_clock_per_sm(d.cc_major, d.cc_minor) * d.sms * d.sm_clock_ghz * 1e-3;
}

prof::DeviceProperties device_properties(const DeviceInfo& d) {
  prof::DeviceProperties g;
  g.id = d.id;
  g.name = d.name;
  g.total_global_mem = d.memory_bytes;
  g.compute_major = d.cc_major;
  g.compute_minor = d.cc_minor;
  g.max_threads_per_block = d.max_threads_per_block;
  g.max_threads_per_sm = d.sm_limits.max_threads;
  g.regs_per_block = d.regs_per_block;
  g.regs_per_sm = d.sm_limits.registers;
  g.warp_size = d.warp_size;
  g.shared_mem_per_block = d.shared_mem_per_block;
  g.shared_mem_per_sm = d.sm_limits.shared_memory;
  g.shared_mem_per_block_optin = d.shared_mem_per_block_optin;
  g.sms = d.sms;
  return g;
}

analysis::MachinePeaks gpu_peaks(const DeviceInfo& d) {
  analysis::MachinePeaks p;
  p.cpu = d.name;
  p.isa = fmt::format("sm_{}{}", d.cc_major, d.cc_minor);
  p.threads = d.sms;
  p.bf16_gflops = bf16_peak_tflops(d) * 1e3;
  p.fp32_gflops = fp32_flop_per_clock_per_sm(d.cc_major, d.cc_minor) * d.sms * d.sm_clock_ghz;
  p.sgemm_gflops = p.fp32_gflops;
  p.bandwidth_gbs = d.bandwidth_gbs;
  // cuBLAS runs on the same units as our kernels: nothing dispatches the GPU below itself.
  p.library_isa = p.isa;
  p.library_fp32_gflops = p.fp32_gflops;
  p.library_bf16_gflops = p.bf16_gflops;
  return p;
}

// ---- conversion -----------------------------------------------------------------------------------------
void attach_device_capture(prof::ProfileResult& r, const DeviceCapture& cap, const AttachOptions& opt) {
  const double npt = r.ns_per_tick > 0 ? r.ns_per_tick : prof::ns_per_tick();
  // Without a clock reading, device timestamps cannot be placed on the host timeline at all.
  ATTNPROF_CHECK(!cap.clock_samples.empty() || cap.activities.empty(),
                 "CUPTI gave no clock reading, so its {} device activities cannot be placed on the host timeline",
                 cap.activities.size());
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
    if (a.kind == DeviceActivity::Kind::Kernel)
      d.occupancy = float(estimated_occupancy(cap.sm_limits, int64_t(a.grid[0]) * a.grid[1] * a.grid[2],
                                              a.block[0] * a.block[1] * a.block[2], a.registers,
                                              int64_t(a.static_smem) + a.dynamic_smem));
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
  r.gpu = cap.gpu;
  r.has_device = true;
  if (cap.dropped_records > 0) r.metadata["cupti_dropped_records"] = std::to_string(cap.dropped_records);
  if (cap.incomplete_buffers > 0)
    r.metadata["cupti_incomplete_buffers"] = std::to_string(cap.incomplete_buffers);
}

}  // namespace attnprof::cuda
