// A synthetic device profile for host-side tests of the CUDA path (no GPU needed): the zones a naive forward
// records on the host, and a CUPTI capture of the kernels, copy and device memory it launched.
#pragma once

#include "attnprof/cuda.h"
#include "attnprof/profiler.h"

namespace attnprof::testing_device {

using prof::DeviceActivity;

// ---- a synthetic profile: what a naive forward looks like from the host --------------------------------
prof::ZoneEvent zone(const char* name, const char* cat, uint64_t t0, uint64_t t1, int32_t parent, uint16_t depth) {
  prof::ZoneEvent z;
  z.name = name;
  z.category = cat;
  z.t0 = t0;
  z.t1 = t1;
  z.parent = parent;
  z.depth = depth;
  return z;
}

prof::ProfileResult synthetic_profile() {
  prof::ProfileResult r;
  r.ns_per_tick = 1.0;
  r.origin_ticks = 0;
  prof::ThreadTrace t;
  t.tid = 0;
  t.name = "main";
  t.zones.push_back(zone("ProfilerStep#2", "user_annotation", 100, 10000, -1, 0));       // 0
  t.zones.push_back(zone("attn_fwd", "user_annotation", 200, 9000, 0, 1));       // 1
  t.zones.push_back(zone("matmul", "cpu_op", 300, 400, 1, 2));                   // 2
  t.zones[2].cost = OpCost{1000.0, 64.0, 32.0, /*bf16_flops=*/1000.0};  // a bf16 GEMM
  t.zones[2].variant = "naive";
  t.zones.push_back(zone("masked_fill", "cpu_op", 500, 700, 1, 2));              // 3
  t.zones.push_back(zone("copy_", "cpu_op", 510, 550, 3, 3));                    // 4
  t.zones[4].cost = OpCost{0.0, 8.0, 8.0};
  t.zones.push_back(zone("masked_fill_", "cpu_op", 560, 600, 3, 3));             // 5
  t.zones[5].cost = OpCost{4.0, 8.0, 8.0};
  r.threads.push_back(t);
  prof::ThreadTrace w;
  w.tid = 3;
  w.name = "worker 3";
  w.zones.push_back(zone("other", "cpu_op", 0, 50, -1, 0));
  r.threads.push_back(w);
  return r;
}

cuda::RawActivity raw(DeviceActivity::Kind kind, const char* name, uint64_t s, uint64_t e, uint32_t corr) {
  cuda::RawActivity a;
  a.kind = kind;
  a.name = name;
  a.start_ns = s;
  a.end_ns = e;
  a.correlation = corr;
  a.stream = 7;
  a.grid = {128, 1, 1};
  a.block = {256, 1, 1};
  a.registers = 32;
  a.static_smem = 1024;
  return a;
}

cuda::LaunchRecord launch(uint32_t corr, int32_t zone_idx, uint64_t t0, const char* api, uint32_t tid = 0) {
  cuda::LaunchRecord l;
  l.correlation = corr;
  l.tid = tid;
  l.zone = zone_idx;
  l.t0 = t0;
  l.t1 = t0 + 5;
  l.api = api;
  return l;
}

// Device clock = host ticks + 1,000,000 (ns_per_tick = 1).
constexpr uint64_t kOffset = 1'000'000;

cuda::DeviceCapture synthetic_capture() {
  cuda::DeviceCapture cap;
  // An A100 as cudaGetDeviceProperties describes it, under a test name, kept as a profile keeps it.
  cuda::DeviceInfo a100;
  a100.name = "Test GPU";
  a100.cc_major = 8;
  a100.sms = 108;
  a100.memory_bytes = 85'899'345'920;
  a100.sm_limits = cuda::SmLimits{108, 2048, 32, 65536, 167936, 1024};
  a100.max_threads_per_block = 1024;
  a100.regs_per_block = 65536;
  a100.warp_size = 32;
  a100.shared_mem_per_block = 49152;
  a100.shared_mem_per_block_optin = 166912;
  cap.gpu = cuda::device_properties(a100);
  for (uint64_t h : {uint64_t(50), uint64_t(20000)}) cap.clock_samples.push_back({h, h, h + kOffset});
  cap.activities.push_back(raw(DeviceActivity::Kind::Kernel, "_Z15masked_fill_kerPfPKhf", kOffset + 600,
                               kOffset + 650, 3));  // fill kernel, launched under masked_fill_ (mangled name)
  cap.activities.push_back(raw(DeviceActivity::Kind::Kernel, "ampere_bf16_gemm", kOffset + 320, kOffset + 420, 1));
  cap.activities.push_back(
      raw(DeviceActivity::Kind::Memcpy, "Memcpy DtoD (Device -> Device)", kOffset + 530, kOffset + 560, 2));
  cap.activities.back().bytes = 4096;
  cap.activities.push_back(raw(DeviceActivity::Kind::Kernel, "warmup_kernel", kOffset + 60, kOffset + 90, 4));
  cap.activities.push_back(raw(DeviceActivity::Kind::Kernel, "orphan_kernel", kOffset + 9500, kOffset + 9600, 5));
  cap.launches.push_back(launch(1, 2, 310, "cudaLaunchKernel"));
  cap.launches.push_back(launch(1, 2, 311, "cuLaunchKernel"));  // the driver call under it: same id, ignored
  cap.launches.push_back(launch(2, 4, 520, "cudaMemcpyAsync"));
  cap.launches.push_back(launch(3, 5, 570, "cudaLaunchKernel"));
  cap.launches.push_back(launch(4, 2, 50, "cudaLaunchKernel"));  // zone 2's index, but from a dropped warm-up
  cap.mem.push_back({320, 4096, 4096, 0, 2});
  cap.mem.push_back({525, 4096, 8192, 0, 4});
  cap.mem.push_back({580, -4096, 4096, 0, 5});
  cap.mem.push_back({40, 1 << 20, 1 << 20, 0, 2});  // outside zone 2's span: dropped
  return cap;
}

// An H200 as cudaGetDeviceProperties describes it: 132 SMs, the 1.98 GHz maximum clock, 4.8 TB/s of HBM3e.
cuda::DeviceInfo h200_info() {
  cuda::DeviceInfo d;
  d.name = "NVIDIA H200";
  d.cc_major = 9;
  d.sms = 132;
  d.sm_clock_ghz = 1.98;
  d.bandwidth_gbs = 4800.0;
  return d;
}

}  // namespace attnprof::testing_device
