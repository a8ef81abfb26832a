// attnprof/cuda.h: the CUDA backend: device tensors, the four variants on the GPU, and CUPTI profiling.
//
//   if (!cuda::available()) { puts(cuda::unavailable_reason().c_str()); return; }
//   cuda::DeviceTensor dq = cuda::DeviceTensor::from_host(q), dk = ..., dv = ...;   // upload once
//   const Variant& var = cuda::find_cuda_variant("flash");                         // backend "cuda"
//   auto runner = var.prepare(p, opt);
//   auto* dev = dynamic_cast<cuda::DeviceRunner*>(runner.get());                  // every cuda runner is one
//
//   cuda::ActivityCollector cupti;                       // CUPTI: kernels, copies, fills, launches
//   cupti.start(); prof.start();
//   for (int i = 0; i < 5; ++i) {
//     { ATTNPROF_ANNOTATE("flash_kernel_fwd"); dev->run_device(dq, dk, dv); cuda::synchronize(); }
//     prof.step();
//   }
//   prof.stop();
//   prof::ProfileResult r = prof.result();
//   cuda::attach_device_capture(r, cupti.stop());        // device events on the host timeline
//
//   AttnOutput host = runner->run(q, k, v);              // uploads, runs, copies back: for validation
//
// This header needs no CUDA headers. Built without CUDA (ATTNPROF_CUDA=OFF or no nvcc), available() is false,
// cuda_registry() is empty and the device functions throw Error; the pure host-side functions below
// (clock mapping, record conversion, device aggregates, trace events) work in every build.
//
// Device memory comes from a tracked cudaMalloc allocator (never managed memory) with a per-size cache like
// PyTorch's: live and peak bytes count tensor bytes handed out (torch's "allocated"), not cached blocks.
// All device work runs on one stream owned by the backend; host copies synchronise that stream.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnprof/allocator.h"
#include "attnprof/analysis.h"
#include "attnprof/attention.h"
#include "attnprof/profiler.h"
#include "attnprof/tensor.h"

namespace attnprof::cuda {

using prof::DeviceActivity;

// ---- the device ---------------------------------------------------------------------------------------
bool built_with_cuda();          // compiled with the CUDA backend
bool available();                // built with CUDA and at least one usable device
std::string unavailable_reason();  // why available() is false ("" when it is true)
int device_count();              // 0 without CUDA or without a device

// What bounds how many blocks of a kernel one SM holds at once (cudaDeviceProp's per-SM limits).
struct SmLimits {
  int sms = 0;
  int max_threads = 0;                 // maxThreadsPerMultiProcessor: 2048 on sm_80 and sm_90 (64 warps)
  int max_blocks = 0;                  // maxBlocksPerMultiProcessor: 32
  int registers = 0;                   // regsPerMultiprocessor: 65536
  int64_t shared_memory = 0;           // sharedMemPerMultiprocessor: A100 167936, H100 233472
  int64_t reserved_shared_memory = 0;  // reservedSharedMemPerBlock: 1024, taken by every block
  bool known() const { return sms > 0 && max_threads >= 32 && max_blocks > 0 && registers > 0 && shared_memory > 0; }
};
// Theoretical occupancy of a kernel: the share (0..1) of an SM's warp slots its resident blocks fill, from its
// block size, registers per thread and shared memory per block, as CUDA's occupancy calculator counts them
// (registers allocated per warp in units of 256, shared memory per block in units of 128 bytes after the
// reserved share). 0 when one block cannot fit; -1 when the limits are unknown or the block is empty.
double theoretical_occupancy(const SmLimits& sm, int block_threads, int registers_per_thread, int64_t smem_per_block);
// Kineto's "est. achieved occupancy %", as a share: the theoretical occupancy, capped by the warps a grid of
// `grid_blocks` gives each SM on average (fewer blocks than SMs leave SMs idle). -1 when unknown.
double estimated_occupancy(const SmLimits& sm, int64_t grid_blocks, int block_threads, int registers_per_thread,
                           int64_t smem_per_block);

struct DeviceInfo {
  int id = 0;
  std::string name;              // "NVIDIA A100-SXM4-80GB"
  int cc_major = 0, cc_minor = 0;
  int sms = 0;
  double sm_clock_ghz = 0.0;     // boost clock
  int64_t memory_bytes = 0;
  double bandwidth_gbs = 0.0;    // theoretical DRAM bandwidth from the memory clock and bus width
  double bf16_tflops = 0.0;      // dense tensor-core bf16 peak: the datasheet's where the name identifies the
                                 // product (datasheet_bf16_tflops), else per-SM rate × SMs × clock
  std::string bf16_peak_source;  // "datasheet" or "per-SM rate × SMs × reported clock"
  SmLimits sm_limits;            // for each kernel's occupancy
  // cudaDeviceProp's per-block limits, which only the trace's deviceProperties reports
  int max_threads_per_block = 0, regs_per_block = 0, warp_size = 0;
  int64_t shared_mem_per_block = 0, shared_mem_per_block_optin = 0;
  int driver_version = 0, runtime_version = 0;  // cudaDriverGetVersion / cudaRuntimeGetVersion: 13000 is 13.0
};
DeviceInfo device_info(int id = 0);
// The figures a profile keeps of the GPU it ran on (ProfileResult::gpu, the trace's deviceProperties), from
// `d`'s own: its name, memory, compute capability, SMs, per-SM limits (sm_limits) and per-block limits. Pure.
prof::DeviceProperties device_properties(const DeviceInfo& d);
// Dense bf16 tensor-core FLOP per clock per SM for compute capability major.minor (0 when unknown):
// sm_80 2048, sm_86/87/89 1024, sm_90 4096, sm_100 8192 (A100: 108 SMs × 1.41 GHz × 2048 = 312 TFLOP/s;
// H100 SXM: 132 × 1.83 GHz × 4096 = 989 TFLOP/s).
double bf16_flop_per_clock_per_sm(int cc_major, int cc_minor);

// NVIDIA's dense bf16 tensor-core figure for the products whose name and SM count identify them (A100, H100
// SXM, H200, GH200), else 0. Hopper reports its 1.98 GHz maximum clock, while its datasheet's 989 TFLOP/s
// are 132 SMs × 4096 × 1.83 GHz: rate × clock would overstate the peak by 8%.
double datasheet_bf16_tflops(std::string_view name, int sms);
// The dense bf16 peak of `d` in TFLOP/s: the datasheet's figure where datasheet_bf16_tflops knows the product,
// else per-SM rate × SMs × clock; `source`, when given, says which.
double bf16_peak_tflops(const DeviceInfo& d, std::string* source = nullptr);

// Dense non-tensor fp32 FLOP per clock per SM (2 × FP32 lanes): sm_80 128, sm_86/89 256, sm_90 256, sm_100 256.
double fp32_flop_per_clock_per_sm(int cc_major, int cc_minor);
// The GPU's datasheet ceilings as the roofline's MachinePeaks (analysis::place), so device rows and kernels
// are placed against the GPU: cpu = device name, isa = "sm_XY", bf16 = tensor-core peak, fp32 = CUDA-core
// peak, sgemm = fp32 peak, bandwidth = theoretical DRAM bandwidth. Pure: no device needed.
analysis::MachinePeaks gpu_peaks(const DeviceInfo& d);

void synchronize();  // waits for the backend's stream; recorded as a "cudaDeviceSynchronize" zone

// ---- tracked device memory ----------------------------------------------------------------------------
void* device_alloc(size_t bytes);            // throws OutOfBudget when cudaMalloc fails even after emptying the cache
void device_free(void* p, size_t bytes) noexcept;  // back to the cache
MemoryStats device_memory_stats();           // live/peak/total of bytes handed out
void reset_device_peak();
void empty_cache();                          // cudaFree every cached block (synchronises)
int64_t device_reserved_bytes();             // bytes held from cudaMalloc (live + cached)

class DeviceStorage {
 public:
  explicit DeviceStorage(size_t bytes);
  ~DeviceStorage();
  DeviceStorage(const DeviceStorage&) = delete;
  DeviceStorage& operator=(const DeviceStorage&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_;
  size_t bytes_;
};

// A contiguous 4-D tensor in device memory. Copies share storage, like Tensor.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  static DeviceTensor empty(const Shape4& shape, DType dtype);
  static DeviceTensor from_host(const Tensor& t);  // contiguous copy; recorded as "to" (Memcpy HtoD)
  Tensor to_host() const;                          // synchronous copy back (Memcpy DtoH)

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape4& shape() const { return shape_; }
  int64_t shape(int i) const { return shape_[size_t(i < 0 ? i + 4 : i)]; }
  int64_t numel() const { return attnprof::numel(shape_); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  void* raw() const { return storage_ ? storage_->data() : nullptr; }
  template <class T>
  T* data() const {
    return static_cast<T*>(raw());
  }

 private:
  std::shared_ptr<DeviceStorage> storage_;
  Shape4 shape_{0, 0, 0, 0};
  DType dtype_ = DType::F32;
};

// ---- the variants -------------------------------------------------------------------------------------
struct DeviceOutput {
  DeviceTensor out;  // [B, Hq, Nq, D]
  DeviceTensor lse;  // [B, Hq, Nq, 1] fp32, when the variant produces it
};

// Every runner cuda_registry() prepares is a DeviceRunner. run() (the Runner interface) uploads q, k, v,
// runs, synchronises and copies the output back: for validation. run_device() is the forward alone, on
// device tensors and asynchronous: what profiling and benchmarks time (then call synchronize()).
class DeviceRunner : public Runner {
 public:
  virtual DeviceOutput run_device(const DeviceTensor& q, const DeviceTensor& k, const DeviceTensor& v) = 0;
  AttnOutput run(const Tensor& q, const Tensor& k, const Tensor& v) override;
};

// Variants with backend "cuda": naive, inplace, sdpa-math, flash, sdpa-cudnn (last: cuDNN's kernels are the only
// device code not ours, and a fault in them is sticky). Empty without CUDA.
const std::vector<Variant>& cuda_registry();
const Variant& find_cuda_variant(std::string_view name);  // Error listing the names when not found

// Times run_device() with CUDA events on the backend's stream: `warmup` untimed forwards and more until
// kDeviceWarmupS has passed (an idle GPU runs at a fraction of its clock until work has kept it busy: an H200
// idles at 345 MHz), then `iters` forwards each between two events. Device time per forward, launch gaps
// included; no profiler needed.
inline constexpr double kDeviceWarmupS = 0.25;
struct DeviceTiming {
  std::vector<double> ms;  // per forward
  double median_ms = 0.0, min_ms = 0.0;  // median_ms is analysis::median(ms), as on the host
  // With `burst`: one forward's share of `iters` forwards enqueued back to back between one pair of events,
  // the device's time without the gaps where it waits for the host to launch the next forward (each timed
  // forward above starts on an idle device, so it includes its own launch). 0 when not asked.
  double burst_ms = 0.0;
};
DeviceTiming time_device_forward(DeviceRunner& runner, const DeviceTensor& q, const DeviceTensor& k,
                                 const DeviceTensor& v, int warmup = 3, int iters = 20, bool burst = false);

// The hand-written FlashAttention-2 forward on device tensors (bf16, D 64 or 128, no mask or causal).
DeviceOutput flash_attention(const DeviceTensor& q, const DeviceTensor& k, const DeviceTensor& v,
                             const AttnOptions& o, bool with_lse = false);

// ---- pure host side: clock mapping and CUPTI record conversion (every build, no GPU needed) -----------
// One reading of both clocks: host ticks before and after reading the device (CUPTI) clock in ns.
struct ClockSample {
  uint64_t host_before = 0, host_after = 0;
  uint64_t device_ns = 0;
};

// host_ticks = host0 + (device_ns - device0) * ticks_per_ns. The anchors stay integers: CUPTI's timestamps
// are ns since the epoch (about 1.8e18), where a double's step is 256 ns; only differences become doubles.
struct ClockMap {
  uint64_t device0_ns = 0;
  uint64_t host0_ticks = 0;
  double ticks_per_ns = 1.0;
  uint64_t to_ticks(uint64_t device_ns) const;
};
// Uses the tightest-bracketed sample (midpoint of before/after) as the anchor; with two or more samples at
// least 1 ms apart, fits the rate (drift) between the first and last anchors, else uses 1/ns_per_tick.
// A fitted rate more than 1% off 1/ns_per_tick is rejected for the nominal one. Throws on no samples.
ClockMap fit_clock(const std::vector<ClockSample>& samples, double ns_per_tick);

// A CUPTI activity record reduced to the fields attnprof keeps (filled from CUpti_ActivityKernel*,
// CUpti_ActivityMemcpy*, CUpti_ActivityMemset*).
struct RawActivity {
  DeviceActivity::Kind kind = DeviceActivity::Kind::Kernel;
  std::string name;             // kernel name as CUPTI gives it (mangled is fine: it is demangled)
  uint64_t start_ns = 0, end_ns = 0;  // device (CUPTI) clock
  uint32_t device = 0, stream = 0, correlation = 0;
  std::array<int32_t, 3> grid{}, block{};
  int32_t registers = 0, static_smem = 0, dynamic_smem = 0;
  int64_t bytes = 0;
};

// A launching API call seen by the CUPTI callback on the launching thread.
struct LaunchRecord {
  uint32_t correlation = 0;
  uint32_t tid = 0;             // ThreadTrace::tid of the launching thread
  int32_t zone = -1;            // innermost open zone index on that thread, -1 if none
  uint64_t t0 = 0, t1 = 0;      // host ticks at API enter and exit
  std::string api;              // "cudaLaunchKernel", "cuLaunchKernelEx", ...
};

struct DeviceMemRecord {
  uint64_t t = 0;
  int64_t delta = 0, total = 0;
  uint32_t tid = 0;
  int32_t zone = -1;
};

// Everything one collection captured.
struct DeviceCapture {
  std::vector<RawActivity> activities;
  std::vector<LaunchRecord> launches;
  std::vector<DeviceMemRecord> mem;
  std::vector<ClockSample> clock_samples;
  prof::DeviceProperties gpu;    // the device's name and properties, for the trace's deviceProperties
  SmLimits sm_limits;            // the device's, for each kernel's estimated occupancy (unknown: none given)
  uint64_t dropped_records = 0;  // CUPTI records dropped (ActivityCollector::stop refuses such a capture)
  uint64_t incomplete_buffers = 0;  // buffers that ended in an incomplete record (in the profile's metadata)
};

struct AttachOptions {
  // Keep activities whose launch was in no recorded zone. Off: a profiler schedule drops the events of
  // wait/warm-up steps, and activity launched there must go with them.
  bool keep_unattributed = false;
};

// Converts a capture into ProfileResult::device / device_mem: maps device timestamps onto host ticks,
// ties each activity to its launch (thread, innermost zone) through the correlation id, keeps only those
// whose launch lies inside that zone's recorded span (so events of discarded warm-up steps go), gives a
// lone activity its zone's cost model, demangles names and sorts by start. Sets has_device.
void attach_device_capture(prof::ProfileResult& r, const DeviceCapture& cap, const AttachOptions& opt = {});

// "_Z15masked_fill_kerPfPKhf" -> "masked_fill_ker(float*, unsigned char const*, float)"; other names unchanged.
std::string demangle(const std::string& name);

// ---- what a device profile turns into ---------------------------------------------------------------
// analysis::key_averages() gives zone rows their CUDA totals and adds one row per kernel / copy / fill
// (analysis::zone_device_stats, analysis::device_key_averages); report::table() prints the Self CUDA /
// CUDA total / CUDA Mem columns; report::write_chrome_trace() adds GPU stream tracks, launch slices and
// launch -> kernel flows; report::device_table() lists the kernels with grid, block, registers and
// shared memory.

// ---- CUPTI + NVTX (CUDA builds; throw Error otherwise) ------------------------------------------------
// Collects kernel, memcpy and memset activity plus launch callbacks from start() to stop(). One at a time.
class ActivityCollector {
 public:
  ActivityCollector();
  ~ActivityCollector();
  ActivityCollector(const ActivityCollector&) = delete;
  ActivityCollector& operator=(const ActivityCollector&) = delete;
  void start();
  DeviceCapture stop();  // flushes CUPTI, returns everything captured, including device memory events
  bool running() const { return running_; }

 private:
  bool running_ = false;
};

// One forward of `runner` on device tensors under the profiler and CUPTI: inside an `annotation` zone,
// followed by a synchronise; the capture is attached (result.has_device). Throws Error when CUPTI cannot
// start (one subscriber per process) or without a device.
prof::ProfileResult profile_device_forward(DeviceRunner& runner, const DeviceTensor& q, const DeviceTensor& k,
                                           const DeviceTensor& v, std::string_view annotation);

// An NVTX range (nvtxRangePush/Pop) so Nsight Systems shows attnprof's annotations; no-op without CUDA.
// The CUDA variants open one per op zone and per forward.
class NvtxRange {
 public:
  explicit NvtxRange(const char* name) noexcept;
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace attnprof::cuda
