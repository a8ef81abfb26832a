// Device (CUDA) profiles through analysis and the reporters, on a synthetic capture (no GPU needed): device
// time counted once under nested annotations, kernel rows, the table's Self CUDA / CUDA total / CUDA Mem
// columns and sort keys, the trace's GPU stream tracks, launch slices and flows, the summary's device fields.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "attnprof/analysis.h"
#include "attnprof/cuda.h"
#include "attnprof/error.h"
#include "attnprof/report.h"
#include "device_profile_fixture.h"
#include "trace_checker.h"

using namespace attnprof;
using namespace attnprof::testing_device;

namespace {

prof::ProfileResult device_profile() {
  prof::ProfileResult r = synthetic_profile();
  cuda::attach_device_capture(r, synthetic_capture());
  return r;
}

// The line of `table` whose name cell is `name`, split into its cells (cells are separated by 2+ spaces).
std::vector<std::string> row_cells(const std::string& table, const std::string& name) {
  size_t pos = 0;
  while (pos < table.size()) {
    const size_t end = table.find('\n', pos);
    const std::string line = table.substr(pos, end - pos);
    pos = end == std::string::npos ? table.size() : end + 1;
    std::vector<std::string> cells;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && line[i] == ' ') ++i;
      size_t j = i;
      while (j < line.size() && !(line[j] == ' ' && j + 1 < line.size() && line[j + 1] == ' ')) ++j;
      if (j > i) cells.push_back(line.substr(i, j - i));
      i = j;
    }
    if (!cells.empty() && cells[0] == name) return cells;
  }
  return {};
}

}  // namespace

TEST(DeviceReport, DeviceTimeIsCountedOnceUnderNestedAnnotations) {
  const prof::ProfileResult r = device_profile();
  const auto zs = analysis::zone_device_stats(r);
  ASSERT_EQ(zs.size(), 2u);
  ASSERT_EQ(zs[0].size(), 6u);
  const double total = analysis::device_time_total_ns(r);
  EXPECT_DOUBLE_EQ(total, 100.0 + 30.0 + 50.0);
  // Inclusive CUDA totals: each ancestor sees each activity once.
  EXPECT_DOUBLE_EQ(zs[0][0].total_ns, total);  // ProfilerStep#2
  EXPECT_DOUBLE_EQ(zs[0][1].total_ns, total);  // attn_fwd
  EXPECT_DOUBLE_EQ(zs[0][2].total_ns, 100.0);  // matmul
  EXPECT_DOUBLE_EQ(zs[0][3].total_ns, 80.0);   // masked_fill = copy_ + masked_fill_
  EXPECT_DOUBLE_EQ(zs[0][3].launched_ns, 0.0);
  EXPECT_DOUBLE_EQ(zs[0][4].launched_ns, 30.0);
  EXPECT_EQ(zs[0][1].activities, 3);
  // Self CUDA lives on the activity rows only: their sum is the device total, not a multiple of it.
  double self_sum = 0.0;
  int64_t calls = 0;
  for (const auto& row : analysis::device_key_averages(r)) {
    self_sum += row.total_ns;
    calls += row.calls;
  }
  EXPECT_DOUBLE_EQ(self_sum, total);
  EXPECT_EQ(calls, 3);
  // Device memory per zone: allocations only, inclusive and self.
  EXPECT_EQ(zs[0][1].mem_bytes, 8192);
  EXPECT_EQ(zs[0][2].self_mem_bytes, 4096);
  EXPECT_EQ(zs[0][3].mem_bytes, 4096);
  EXPECT_EQ(zs[0][3].self_mem_bytes, 0);
}

TEST(DeviceReport, KeyAveragesGroupByNameWithCategories) {
  prof::ProfileResult r = synthetic_profile();
  cuda::DeviceCapture cap = synthetic_capture();
  cap.activities.push_back(raw(DeviceActivity::Kind::Kernel, "ampere_bf16_gemm", kOffset + 700, kOffset + 900, 9));
  cap.launches.push_back(launch(9, 1, 650, "cudaLaunchKernel"));
  cuda::attach_device_capture(r, cap);
  const auto rows = analysis::device_key_averages(r);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "ampere_bf16_gemm");
  EXPECT_EQ(rows[0].category, "kernel");
  EXPECT_EQ(rows[0].calls, 2);
  EXPECT_DOUBLE_EQ(rows[0].total_ns, 300.0);
  EXPECT_DOUBLE_EQ(rows[0].min_ns, 100.0);
  EXPECT_DOUBLE_EQ(rows[0].max_ns, 200.0);
  EXPECT_EQ(rows[1].category, "gpu_memcpy");
}

TEST(DeviceReport, TraceHasStreamTracksLaunchSlicesAndFlows) {
  const prof::ProfileResult r = device_profile();
  const nlohmann::json j = report::chrome_trace_json(r);
  const TraceCheck c = check_trace(j);
  EXPECT_TRUE(c.ok()) << c.report();
  // Kineto's top-level keys: its schema version and the GPU the tracks are of.
  EXPECT_EQ(j["schemaVersion"], 1);
  ASSERT_EQ(j["deviceProperties"].size(), 1u) << j["deviceProperties"];
  EXPECT_EQ(j["deviceProperties"][0]["name"], r.gpu.name);
  EXPECT_EQ(j["deviceProperties"][0]["id"], r.device.front().device);
  // Kineto's keys, as HTA and torch's own trace readers look them up, with the figures the capture kept.
  const nlohmann::json want = {{"id", 0}, {"name", "Test GPU"}, {"totalGlobalMem", 85'899'345'920},
                               {"computeMajor", 8}, {"computeMinor", 0}, {"maxThreadsPerBlock", 1024},
                               {"maxThreadsPerMultiprocessor", 2048}, {"regsPerBlock", 65536},
                               {"regsPerMultiprocessor", 65536}, {"warpSize", 32}, {"sharedMemPerBlock", 49152},
                               {"sharedMemPerMultiprocessor", 167936}, {"sharedMemPerBlockOptin", 166912},
                               {"numSms", 108}};
  EXPECT_EQ(j["deviceProperties"][0], want);
  // A profile that kept no figures (an older capture) writes the id and name alone.
  prof::ProfileResult bare = r;
  bare.gpu = prof::DeviceProperties{.name = "Test GPU"};
  EXPECT_EQ(report::chrome_trace_json(bare)["deviceProperties"][0],
            (nlohmann::json{{"id", 0}, {"name", "Test GPU"}}));
  const nlohmann::json& ev = j["traceEvents"];
  long host_pid = -1;
  for (const auto& e : ev)
    if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "attnprof") host_pid = e["pid"];
  ASSERT_GT(host_pid, 0);
  int kernels = 0, memcpys = 0, runtime = 0, counters = 0;
  std::set<uint64_t> starts, finishes;
  bool named_process = false, named_stream = false;
  for (const auto& e : ev) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "process_name" && e["pid"] == host_pid + 1)
      named_process = e["args"]["name"] == "GPU 0 (Test GPU)";
    if (ph == "M" && e["name"] == "thread_name" && e["pid"] == host_pid + 1) named_stream = e["args"]["name"] == "stream 7";
    if (ph == "X" && e["cat"] == "kernel") {
      ++kernels;
      EXPECT_EQ(e["pid"], host_pid + 1);
      EXPECT_EQ(e["tid"], 7);
      EXPECT_EQ(e["args"]["registers per thread"], 32);
      EXPECT_EQ(e["args"]["grid"], nlohmann::json::array({128, 1, 1}));
      if (e["name"] == "ampere_bf16_gemm") {
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.32);
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 0.1);
        EXPECT_DOUBLE_EQ(e["args"]["FLOPs"].get<double>(), 1000.0) << "the launching matmul's cost model";
        EXPECT_EQ(e["args"]["variant"], "naive");
      }
    }
    if (ph == "X" && e["cat"] == "gpu_memcpy") {
      ++memcpys;
      EXPECT_EQ(e["args"]["bytes"], 4096);
    }
    if (ph == "X" && e["cat"] == "cuda_runtime") {
      ++runtime;
      EXPECT_EQ(e["pid"], host_pid);
      EXPECT_EQ(e["tid"], 1) << "on the launching thread's track (main, the first thread: tid 1)";
      if (e["args"]["correlation"] == 1) {
        EXPECT_EQ(e["name"], "cudaLaunchKernel");
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.31);
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 0.005);
      }
    }
    if (ph == "s") {
      starts.insert(e["id"].get<uint64_t>());
      EXPECT_EQ(e["pid"], host_pid);
    }
    if (ph == "f") {
      finishes.insert(e["id"].get<uint64_t>());
      EXPECT_EQ(e["bp"], "e");
      EXPECT_EQ(e["pid"], host_pid + 1);
    }
    if (ph == "C" && e["name"] == "CUDA Mem") ++counters;
  }
  EXPECT_TRUE(named_process);
  EXPECT_TRUE(named_stream);
  // Kineto's External id: one per CPU zone, unique; a launch and the GPU work it enqueued carry the id of the
  // zone they were launched from (the zone the cuda_runtime slice nests in), so HTA and TensorBoard can tie a
  // kernel to its op; `correlation` pairs the launch with its activity.
  std::map<int64_t, nlohmann::json> zone_by_id;
  for (const auto& e : ev)
    if (e["ph"] == "X" && (e["cat"] == "cpu_op" || e["cat"] == "user_annotation")) {
      ASSERT_TRUE(e["args"].contains("External id")) << e;
      EXPECT_TRUE(zone_by_id.emplace(e["args"]["External id"].get<int64_t>(), e).second) << "id taken twice: " << e;
    }
  std::map<int64_t, int64_t> launch_id;  // correlation -> External id of the launch
  for (const auto& e : ev)
    if (e["ph"] == "X" && e["cat"] == "cuda_runtime") {
      ASSERT_TRUE(e["args"].contains("External id")) << e;
      const auto z = zone_by_id.find(e["args"]["External id"].get<int64_t>());
      ASSERT_NE(z, zone_by_id.end()) << e;
      const double zs = z->second["ts"], zd = z->second["dur"], s = e["ts"], d = e["dur"];
      EXPECT_EQ(z->second["tid"], e["tid"]);
      EXPECT_TRUE(zs <= s && s + d <= zs + zd + 1e-9) << "launched inside the zone it names: " << z->second << e;
      launch_id[e["args"]["correlation"].get<int64_t>()] = e["args"]["External id"].get<int64_t>();
    }
  int tied = 0;
  for (const auto& e : ev)
    if (e["ph"] == "X" && (e["cat"] == "kernel" || e["cat"] == "gpu_memcpy" || e["cat"] == "gpu_memset")) {
      const auto l = launch_id.find(e["args"]["correlation"].get<int64_t>());
      if (l == launch_id.end()) continue;
      EXPECT_EQ(e["args"]["External id"], l->second) << e;
      ++tied;
    }
  EXPECT_EQ(tied, 3);
  EXPECT_EQ(kernels, 2);
  EXPECT_EQ(memcpys, 1);
  EXPECT_EQ(runtime, 3);
  EXPECT_EQ(starts, (std::set<uint64_t>{1, 2, 3}));
  EXPECT_EQ(starts, finishes);
  EXPECT_EQ(counters, 3);
}

// A flow id pairs one start with one end: an API call that made two activities (a graph launch) gets one launch
// slice and one arrow, to its first activity; an activity the clock fit put before its own launch gets no arrow
// (Perfetto drops one that ends before it starts), while its slices stay.
TEST(DeviceReport, OneArrowPerLaunchAndNoneBackInTime) {
  prof::ProfileResult r = device_profile();
  const auto by_corr = [&](uint32_t c) {
    for (size_t i = 0; i < r.device.size(); ++i)
      if (r.device[i].correlation == c) return i;
    ADD_FAILURE() << "no activity of correlation " << c;
    return size_t(0);
  };
  prof::DeviceActivity second = r.device[by_corr(1)];
  second.name = "second_kernel";
  second.t0 += 1000, second.t1 += 1000;  // later on the same stream, clear of the others
  r.device.push_back(second);
  prof::DeviceActivity& early = r.device[by_corr(2)];
  const uint64_t len = early.t1 - early.t0;
  early.t0 = early.launch_t0 - 50, early.t1 = early.t0 + len;
  const nlohmann::json j = report::chrome_trace_json(r);
  EXPECT_TRUE(check_trace(j).ok()) << check_trace(j).report();
  std::multiset<uint64_t> starts, finishes, launches;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "s") starts.insert(e["id"].get<uint64_t>());
    if (e["ph"] == "f") finishes.insert(e["id"].get<uint64_t>());
    if (e["ph"] == "X" && e["cat"] == "cuda_runtime") launches.insert(e["args"]["correlation"].get<uint64_t>());
  }
  EXPECT_EQ(launches, (std::multiset<uint64_t>{1, 2, 3})) << "one launch slice per API call";
  EXPECT_EQ(starts, (std::multiset<uint64_t>{1, 3})) << "no arrow back in time, none twice";
  EXPECT_EQ(starts, finishes);
}

TEST(DeviceReport, DeviceTableHasTorchColumnsAndFooter) {
  const prof::ProfileResult r = device_profile();
  const std::string t = report::device_table(r);
  for (const char* col : {"Name", "Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg", "# of Calls", "Grid",
                          "Regs", "TFLOP/s"})
    EXPECT_NE(t.find(col), std::string::npos) << col << "\n" << t;
  EXPECT_NE(t.find("Self CUDA time total: 0.180us"), std::string::npos) << t;
  // Sorted by CUDA total: the GEMM (100 ns) first, with its zone's FLOPs: 1000 / 100 ns = 0.01 TFLOP/s.
  const size_t gemm = t.find("ampere_bf16_gemm"), fill = t.find("masked_fill_ker");
  ASSERT_NE(gemm, std::string::npos);
  ASSERT_NE(fill, std::string::npos);
  EXPECT_LT(gemm, fill);
  EXPECT_NE(t.find("55.56%"), std::string::npos) << t;
  EXPECT_EQ(report::device_table(r, 1).find("masked_fill_ker"), std::string::npos);
}

TEST(DeviceReport, KeyAveragesAddDeviceTotalsAndKernelRows) {
  const analysis::KeyAverages ka = analysis::key_averages(device_profile());
  ASSERT_TRUE(ka.has_device);
  EXPECT_EQ(ka.device_name, "Test GPU");
  EXPECT_DOUBLE_EQ(ka.device_self_total_ns, 180.0);
  EXPECT_EQ(ka.device_peak_bytes, 8192);
  auto row = [&](const std::string& name) -> const analysis::OpStats& {
    for (const auto& s : ka.rows)
      if (s.name == name) return s;
    ADD_FAILURE() << "no row " << name;
    static const analysis::OpStats none;
    return none;
  };
  // Zone rows: inclusive device time, no self device time.
  EXPECT_DOUBLE_EQ(row("attn_fwd").device_total_ns, 180.0);
  EXPECT_DOUBLE_EQ(row("matmul").device_total_ns, 100.0);
  EXPECT_DOUBLE_EQ(row("masked_fill").device_total_ns, 80.0);
  EXPECT_DOUBLE_EQ(row("matmul").self_device_ns, 0.0);
  EXPECT_DOUBLE_EQ(row("other").device_total_ns, 0.0);
  EXPECT_EQ(row("attn_fwd").device_mem_bytes, 8192);
  EXPECT_EQ(row("matmul").self_device_mem_bytes, 4096);
  EXPECT_EQ(row("masked_fill").self_device_mem_bytes, 0);
  // Activity rows follow the zone rows, with CPU times 0 and Self CUDA = CUDA total.
  const analysis::OpStats& gemm = row("ampere_bf16_gemm");
  EXPECT_EQ(gemm.category, "kernel");
  EXPECT_TRUE(gemm.is_device_activity());
  EXPECT_EQ(gemm.calls, 1);
  EXPECT_DOUBLE_EQ(gemm.total_ns, 0.0);
  EXPECT_DOUBLE_EQ(gemm.self_device_ns, 100.0);
  EXPECT_DOUBLE_EQ(gemm.device_total_ns, 100.0);
  EXPECT_DOUBLE_EQ(gemm.cost.flops, 1000.0);
  EXPECT_DOUBLE_EQ(gemm.rate_ns(), 100.0) << "rates use device time";
  EXPECT_FALSE(row("matmul").is_device_activity());
  double self_sum = 0.0;
  for (const auto& s : ka.rows) self_sum += s.self_device_ns;
  EXPECT_DOUBLE_EQ(self_sum, ka.device_self_total_ns) << "Self CUDA sums to the device time exactly once";
}

TEST(DeviceReport, TableGainsTorchsCudaColumns) {
  const analysis::KeyAverages ka = analysis::key_averages(device_profile());
  const std::string t = report::table(ka, {.sort_by = "cuda_time_total"});
  const std::vector<std::string> header = row_cells(t, "Name");
  const std::vector<std::string> expect = {"Name",       "Self CPU %",   "Self CPU",   "CPU total %", "CPU total",
                                           "CPU time avg", "Self CUDA", "Self CUDA %", "CUDA total",  "CUDA time avg",
                                           "CPU Mem",    "Self CPU Mem", "CUDA Mem",   "Self CUDA Mem", "# of Calls"};
  ASSERT_GE(header.size(), expect.size()) << t;
  EXPECT_EQ(std::vector<std::string>(header.begin(), header.begin() + long(expect.size())), expect) << t;
  // The GEMM: no CPU time, 100 ns of the 180 ns device total, 1000 FLOP in 100 ns = 10 GFLOP/s.
  const std::vector<std::string> gemm = row_cells(t, "ampere_bf16_gemm");
  ASSERT_GE(gemm.size(), 16u) << t;
  EXPECT_EQ(gemm[2], "0.000us");
  EXPECT_EQ(gemm[6], "0.100us");
  EXPECT_EQ(gemm[7], "55.56%");
  EXPECT_EQ(gemm[8], "0.100us");
  EXPECT_EQ(gemm[14], "1");
  // matmul (the op that launched it): Self CUDA 0, CUDA total 100 ns, its device allocation.
  const std::vector<std::string> mm = row_cells(t, "matmul");
  ASSERT_GE(mm.size(), 18u) << t;
  EXPECT_EQ(mm[6], "0.000us");
  EXPECT_EQ(mm[7], "0.00%");
  EXPECT_EQ(mm[8], "0.100us");
  EXPECT_EQ(mm[12], "4.00 Kb");
  EXPECT_EQ(mm[13], "4.00 Kb");
  EXPECT_EQ(mm[16], "10.000") << "GFLOP/s over the device time, not the launch time\n" << t;
  EXPECT_NE(t.find("Self CUDA time total: 0.180us"), std::string::npos) << t;
  // Sorted by CUDA total: the step (180 ns) leads; by Self CUDA: the GEMM leads.
  EXPECT_LT(t.find("ProfilerStep*"), t.find("ampere_bf16_gemm"));
  {  // Without profile_memory, as torch's table: no memory columns, CPU's or CUDA's, and a footer saying so.
    prof::ProfileResult unrecorded = device_profile();
    unrecorded.memory_recorded = false;
    const std::string nt = report::table(analysis::key_averages(unrecorded), {.sort_by = "cuda_time_total"});
    const std::vector<std::string> nh = row_cells(nt, "Name");
    EXPECT_EQ(std::count(nh.begin(), nh.end(), "CPU Mem") + std::count(nh.begin(), nh.end(), "CUDA Mem"), 0) << nt;
    ASSERT_GE(nh.size(), 11u) << nt;
    EXPECT_EQ(nh[10], "# of Calls") << nt;
    EXPECT_NE(nt.find("Not recorded: memory (profile_memory off)."), std::string::npos) << nt;
    EXPECT_EQ(row_cells(nt, "ampere_bf16_gemm").size(), nh.size()) << nt;
  }
  const std::string by_self = report::table(ka, {.sort_by = "self_cuda_time_total", .row_limit = 1});
  EXPECT_NE(by_self.find("ampere_bf16_gemm"), std::string::npos) << by_self;
  EXPECT_EQ(by_self.find("ProfilerStep*"), std::string::npos) << by_self;
  const std::string by_mem = report::table(ka, {.sort_by = "self_cuda_memory_usage", .row_limit = 1});
  EXPECT_TRUE(by_mem.find(" matmul ") != std::string::npos || by_mem.find(" copy_ ") != std::string::npos) << by_mem;
}

TEST(DeviceReport, CpuProfilesKeepTheCpuLayoutAndRefuseCudaSortKeys) {
  const analysis::KeyAverages ka = analysis::key_averages(synthetic_profile());
  EXPECT_FALSE(ka.has_device);
  const std::string t = report::table(ka);
  EXPECT_EQ(t.find("CUDA"), std::string::npos) << t;
  try {
    (void)report::table(ka, {.sort_by = "cuda_time_total"});
    FAIL() << "a CUDA sort key on a CPU profile must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA times"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)report::table(analysis::key_averages(device_profile()), {.sort_by = "gpu_time"}), Error);
}

TEST(DeviceReport, SummaryCarriesDeviceTotals) {
  const prof::ProfileResult r = device_profile();
  const analysis::KeyAverages ka = analysis::key_averages(r);
  const nlohmann::json j = report::summary_json(r, ka);
  ASSERT_TRUE(j.contains("device")) << j.dump(2);
  EXPECT_EQ(j["device"]["name"], "Test GPU");
  EXPECT_DOUBLE_EQ(j["device"]["self_cuda_time_total_ns"].get<double>(), 180.0);
  EXPECT_EQ(j["device"]["activities"], 3);
  EXPECT_EQ(j["device"]["peak_bytes"], 8192);
  ASSERT_EQ(j["device"]["timeline"].size(), 3u);
  EXPECT_EQ(j["device"]["timeline"][1]["bytes"], 8192);
  EXPECT_DOUBLE_EQ(j["device"]["timeline"][1]["t_us"].get<double>(), 0.525);
  bool saw_matmul = false;
  for (const auto& row : j["rows"]) {
    if (row["name"] != "matmul") continue;
    saw_matmul = true;
    EXPECT_DOUBLE_EQ(row["cuda_total_ns"].get<double>(), 100.0);
    EXPECT_DOUBLE_EQ(row["self_cuda_ns"].get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(row["gflops_per_s"].get<double>(), 10.0);
  }
  EXPECT_TRUE(saw_matmul);
  EXPECT_FALSE(report::summary_json(synthetic_profile(), analysis::key_averages(synthetic_profile())).contains("device"));
}

TEST(DeviceReport, RooflinePlacesEveryActivityOnceInDeviceTime) {
  const analysis::KeyAverages ka = analysis::key_averages(device_profile());
  analysis::MachinePeaks gpu;
  gpu.fp32_gflops = 1000.0;
  gpu.bf16_gflops = 8000.0;
  gpu.bandwidth_gbs = 100.0;
  const std::vector<analysis::PlacedOp> placed = analysis::roofline_ops(ka, gpu);
  std::map<std::string, const analysis::PlacedOp*> by_name;
  for (const analysis::PlacedOp& p : placed) by_name[p.op->name] = &p;
  // The kernels, the copy and the fill kernel; not the host zones that launched them (matmul's cost is the
  // GEMM kernel's cost again), not the annotation.
  for (const char* host : {"matmul", "masked_fill", "masked_fill_", "copy_", "attn_fwd", "ProfilerStep*"})
    EXPECT_EQ(by_name.count(host), 0u) << host;
  ASSERT_EQ(by_name.count("ampere_bf16_gemm"), 1u);
  const analysis::PlacedOp& gemm = *by_name["ampere_bf16_gemm"];
  EXPECT_DOUBLE_EQ(gemm.op->total_ns, 0.0);             // an activity row has no CPU time:
  EXPECT_DOUBLE_EQ(gemm.ns, 100.0);                     // it is placed in its device time
  EXPECT_DOUBLE_EQ(gemm.pt.achieved_gflops, 10.0);      // 1000 FLOP / 100 ns
  EXPECT_DOUBLE_EQ(gemm.pt.intensity, 1000.0 / 96.0);   // cost model of the launching matmul
  EXPECT_DOUBLE_EQ(gemm.pt.ridge_intensity, 80.0);      // bf16 tensor-core peak / bandwidth
  EXPECT_TRUE(gemm.pt.memory_bound);
  ASSERT_EQ(by_name.count("Memcpy DtoD (Device -> Device)"), 1u);
  EXPECT_DOUBLE_EQ(by_name["Memcpy DtoD (Device -> Device)"]->ns, 30.0);
  for (const analysis::PlacedOp& p : placed) EXPECT_TRUE(p.op->is_device_activity()) << p.op->name;

  // The same profile without its capture is a CPU profile: its ops are placed in their own host time instead,
  // masked_fill (a wrapper) through its copy_ and masked_fill_.
  const analysis::KeyAverages host = analysis::key_averages(testing_device::synthetic_profile());
  ASSERT_FALSE(host.has_device);
  std::set<std::string> names;
  for (const analysis::PlacedOp& p : analysis::roofline_ops(host, gpu)) {
    names.insert(p.op->name);
    EXPECT_DOUBLE_EQ(p.ns, p.op->self_ns);
  }
  EXPECT_EQ(names, (std::set<std::string>{"matmul", "copy_", "masked_fill_"}));
}

// roofline --from reads a run back from its files: a summary's rows and compare.json's peaks must place every
// op as the live profile did, a device profile's activities in device time included (so a GPU run's roofline
// can be drawn where there is no GPU).
TEST(DeviceReport, ASummaryReadBackPlacesTheSameOpsAsTheProfile) {
  const cuda::DeviceInfo h200 = testing_device::h200_info();
  const analysis::MachinePeaks peaks = cuda::gpu_peaks(h200);
  const analysis::MachinePeaks back = analysis::machine_peaks_from_json(nlohmann::json(peaks));
  EXPECT_EQ(back.isa, "sm_90");
  EXPECT_EQ(back.threads, 132);
  for (auto field : {&analysis::MachinePeaks::fp32_gflops, &analysis::MachinePeaks::bf16_gflops,
                     &analysis::MachinePeaks::bandwidth_gbs, &analysis::MachinePeaks::library_fp32_gflops,
                     &analysis::MachinePeaks::library_bf16_gflops})
    EXPECT_EQ(back.*field, peaks.*field);
  for (const prof::ProfileResult& r : {device_profile(), testing_device::synthetic_profile()}) {
    SCOPED_TRACE(r.has_device ? "device profile" : "host profile");
    const analysis::KeyAverages ka = analysis::key_averages(r);
    const nlohmann::json summary = nlohmann::json::parse(report::summary_json(r, ka).dump());
    report::check_summary(summary, "summary");
    const analysis::KeyAverages read = report::key_averages_from_summary(summary);
    EXPECT_EQ(read.has_device, r.has_device);
    const auto live = analysis::roofline_ops(ka, peaks), again = analysis::roofline_ops(read, back);
    ASSERT_EQ(live.size(), again.size());
    ASSERT_FALSE(live.empty());
    for (size_t i = 0; i < live.size(); ++i) {
      SCOPED_TRACE(live[i].op->name);
      EXPECT_EQ(again[i].op->name, live[i].op->name);
      EXPECT_DOUBLE_EQ(again[i].ns, live[i].ns);
      EXPECT_DOUBLE_EQ(again[i].cost.flops, live[i].cost.flops);
      EXPECT_DOUBLE_EQ(again[i].cost.bytes(), live[i].cost.bytes());
      EXPECT_DOUBLE_EQ(again[i].pt.attainable_gflops, live[i].pt.attainable_gflops);
      EXPECT_DOUBLE_EQ(again[i].pt.achieved_gflops, live[i].pt.achieved_gflops);
      EXPECT_EQ(again[i].pt.memory_bound, live[i].pt.memory_bound);
    }
  }
  // Peaks that are not what attnprof writes: an Error naming the field.
  nlohmann::json bad = nlohmann::json(peaks);
  bad.erase("bandwidth_gbs");
  try {
    (void)analysis::machine_peaks_from_json(bad);
    ADD_FAILURE() << "a machine without bandwidth was read";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "field 'bandwidth_gbs' is missing");
  }
  bad = nlohmann::json(peaks);
  bad["threads"] = "132";
  EXPECT_THROW((void)analysis::machine_peaks_from_json(bad), Error);
  EXPECT_THROW((void)analysis::machine_peaks_from_json(nlohmann::json::array()), Error);
}

// A GPU run's trace on the report's timeline: the kernels and the copy of the first forward on their stream
// track, beside the host ops that launched them.
#include <filesystem>
#include <fstream>

#include "attnprof/html.h"

TEST(DeviceReport, TimelineDrawsKernelsOnTheirStream) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(ATTNPROF_BINARY_DIR) / "test-device-timeline";
  fs::remove_all(dir);
  fs::create_directories(dir);
  report::write_chrome_trace(device_profile(), (dir / "naive.trace.json").string(), {});
  // The summary the same run writes (the report reads the annotation's name from it, and leaves out a summary
  // attnprof could not have written).
  std::ofstream(dir / "naive.summary.json")
      << report::summary_json(device_profile(), analysis::key_averages(device_profile())).dump();
  report::ChartLibrary lib;
  const std::string page = report::render_html_report(dir.string(), lib);
  const std::string open = "<script type=\"application/json\" id=\"attnprof-data\">";
  const size_t b = page.find(open), e = page.find("</script>", b);
  ASSERT_NE(b, std::string::npos);
  const nlohmann::json data = nlohmann::json::parse(page.substr(b + open.size(), e - b - open.size()));
  std::map<std::string, std::string> lane;  // span name -> lane
  for (const auto& c : data["charts"])
    if (c["kind"] == "timeline")
      for (const auto& r : c["spec"]["data"]["values"]) lane[r["name"].get<std::string>()] = r["lane"];
  EXPECT_EQ(lane["attn_fwd"], "main · 0");
  EXPECT_EQ(lane["matmul"], "main · 1");
  // Device activities of the forward (launched inside attn_fwd), on the stream track.
  EXPECT_EQ(lane["ampere_bf16_gemm"], "stream 7 · 0");
  EXPECT_EQ(lane["Memcpy DtoD (Device -> Device)"], "stream 7 · 0");
  // Before the forward (the warm-up kernel) is not part of it.
  EXPECT_EQ(lane.count("warmup_kernel"), 0u);
  fs::remove_all(dir);
}

// A CUDA profile's folded stacks add the GPU's time: each kernel, copy and fill under the zones that launched
// it, below its GPU, weighed by its device time; the host's zones keep their own lines.
TEST(DeviceReport, FoldedStacksPutEachActivityUnderItsLaunchingZones) {
  const prof::ProfileResult r = device_profile();
  ASSERT_FALSE(r.device.empty());
  const std::string stacks = report::folded_stacks(r);
  std::map<std::string, long long> want;  // an activity's stack -> its ns, summed as the function sums them
  std::map<std::string, double> sums;
  for (const prof::DeviceActivity& d : r.device) {
    std::string path;
    if (d.thread >= 0 && d.zone >= 0) {
      const prof::ThreadTrace& t = r.threads[size_t(d.thread)];
      for (int32_t z = d.zone; z >= 0; z = t.zones[size_t(z)].parent) {
        const std::string name = t.zones[size_t(z)].name;
        path = (name.rfind("ProfilerStep#", 0) == 0 ? "ProfilerStep*" : name) + (path.empty() ? "" : ";" + path);
      }
    }
    sums[fmt::format("GPU {};", d.device) + (path.empty() ? "" : path + ";") + d.name] += d.ns(r.ns_per_tick);
  }
  for (const auto& [stack, ns] : sums) want[stack] = std::llround(ns);
  for (const auto& [stack, ns] : want)
    EXPECT_NE(stacks.find(stack + " " + std::to_string(ns) + "\n"), std::string::npos) << stack << " in:\n" << stacks;
  EXPECT_NE(stacks.find("main;ProfilerStep*;attn_fwd;masked_fill;copy_ "), std::string::npos) << stacks;
  EXPECT_GE(want.size(), 2u);
}
