// The device: availability, properties and peaks, the stream and cuBLAS handle, the tracked caching
// cudaMalloc allocator, device tensors and host <-> device copies.
#include <cuda_runtime_api.h>

#include <atomic>
#include <map>
#include <mutex>

#include "attnprof/profiler.h"
#include "core/memory_counters.h"
#include "cuda/backend.h"
#include "profiler/recorder.h"

namespace attnprof::cuda {

// ---- the device -----------------------------------------------------------------------------------------
bool built_with_cuda() { return true; }

namespace {
struct Probe {
  int count = 0;
  std::string reason;
  Probe() {
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      // The runtime says "driver version is insufficient" also when there is no driver at all: told apart
      // by the driver's version, which is 0 without one.
      int driver = 0, runtime = 0;
      (void)cudaDriverGetVersion(&driver);
      (void)cudaRuntimeGetVersion(&runtime);
      const auto version = [](int v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); };
      if (driver == 0)
        reason = fmt::format("no usable CUDA device: no NVIDIA driver is installed (libcuda could not be loaded; "
                             "cudaGetDeviceCount says {} ({}))",
                             cudaGetErrorString(e), int(e));
      else if (e == cudaErrorInsufficientDriver)
        reason = fmt::format("no usable CUDA device: the NVIDIA driver supports CUDA up to {}, and this build's "
                             "runtime is CUDA {}: update the driver",
                             version(driver), version(runtime));
      else
        reason = fmt::format("no usable CUDA device: cudaGetDeviceCount says {} ({})", cudaGetErrorString(e), int(e));
      count = 0;
      (void)cudaGetLastError();
    } else if (count == 0) {
      reason = "no CUDA device present (cudaGetDeviceCount = 0)";
    }
  }
};
const Probe& probe() {
  static const Probe p;
  return p;
}
}  // namespace

int device_count() { return probe().count; }
bool available() { return probe().count > 0; }
std::string unavailable_reason() { return probe().reason; }

DeviceInfo device_info(int id) {
  detail::ensure_available();
  cudaDeviceProp prop{};
  ATTNPROF_CUDA_CHECK(cudaGetDeviceProperties(&prop, id));
  int clock_khz = 0, mem_khz = 0, bus_bits = 0;
  ATTNPROF_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, id));
  ATTNPROF_CUDA_CHECK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, id));
  ATTNPROF_CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, id));
  DeviceInfo d;
  d.id = id;
  d.name = prop.name;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.sms = prop.multiProcessorCount;
  d.sm_clock_ghz = clock_khz * 1e-6;
  d.memory_bytes = int64_t(prop.totalGlobalMem);
  d.bandwidth_gbs = 2.0 * mem_khz * 1e3 * (bus_bits / 8.0) * 1e-9;  // double data rate
  d.bf16_tflops = bf16_peak_tflops(d, &d.bf16_peak_source);
  d.sm_limits = SmLimits{prop.multiProcessorCount,   prop.maxThreadsPerMultiProcessor,
                         prop.maxBlocksPerMultiProcessor, prop.regsPerMultiprocessor,
                         int64_t(prop.sharedMemPerMultiprocessor), int64_t(prop.reservedSharedMemPerBlock)};
  d.max_threads_per_block = prop.maxThreadsPerBlock;
  d.regs_per_block = prop.regsPerBlock;
  d.warp_size = prop.warpSize;
  d.shared_mem_per_block = int64_t(prop.sharedMemPerBlock);
  d.shared_mem_per_block_optin = int64_t(prop.sharedMemPerBlockOptin);
  if (cudaDriverGetVersion(&d.driver_version) != cudaSuccess) d.driver_version = 0;  // figures to print only
  if (cudaRuntimeGetVersion(&d.runtime_version) != cudaSuccess) d.runtime_version = 0;
  return d;
}

namespace detail {

void ensure_available() {
  if (!available()) ATTNPROF_FAIL("CUDA backend unavailable: {}", unavailable_reason());
}

cudaStream_t stream() {
  static cudaStream_t s = [] {
    ensure_available();
    cudaStream_t st = nullptr;
    ATTNPROF_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    install_nvtx_mirror();
    return st;
  }();
  return s;
}

cublasHandle_t cublas() {
  static cublasHandle_t h = [] {
    cublasHandle_t hh = nullptr;
    const CublasApi& api = cublas_api();
    ATTNPROF_CUBLAS_CHECK(api.cublasCreate_v2(&hh));
    ATTNPROF_CUBLAS_CHECK(api.cublasSetStream_v2(hh, stream()));
    return hh;
  }();
  return h;
}

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) ATTNPROF_FAIL("launching {} failed: {} ({})", what, cudaGetErrorString(e), int(e));
}

}  // namespace detail

void synchronize() {
  ATTNPROF_ZONE_AS(z, "cudaDeviceSynchronize", "cuda_runtime");
  ATTNPROF_CUDA_CHECK(cudaStreamSynchronize(detail::stream()));
}

// ---- tracked caching allocator --------------------------------------------------------------------------
namespace {

constexpr size_t kRound = 512;

struct Pool {
  std::mutex m;
  std::multimap<size_t, void*> cached;  // rounded size -> block
  int64_t reserved = 0;
};
Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: tensors may be freed during static destruction
  return *p;
}

attnprof::detail::MemoryCounters g_counters;
std::atomic<bool> g_capture{false};
std::mutex g_rec_mutex;
std::vector<DeviceMemRecord> g_records;

void record(int64_t delta, int64_t total) {
  if (!g_capture.load(std::memory_order_relaxed) || !prof::recording() ||
      !prof::detail::g_memory.load(std::memory_order_relaxed))
    return;
  prof::detail::ThreadBuffer* b = prof::detail::recording_buffer();  // reached from noexcept frees: never throws
  if (!b) return;
  DeviceMemRecord r;
  r.t = prof::now_ticks();
  r.delta = delta;
  r.total = total;
  r.tid = b->tid;
  r.zone = b->stack.empty() ? -1 : b->stack.back();
  std::lock_guard<std::mutex> lock(g_rec_mutex);
  g_records.push_back(r);
}

size_t rounded(size_t bytes) { return bytes == 0 ? kRound : (bytes + kRound - 1) / kRound * kRound; }

}  // namespace

namespace detail {
void set_mem_capture(bool on) { g_capture.store(on); }
std::vector<DeviceMemRecord> take_mem_records() {
  std::lock_guard<std::mutex> lock(g_rec_mutex);
  std::vector<DeviceMemRecord> out;
  out.swap(g_records);
  return out;
}
}  // namespace detail

void* device_alloc(size_t bytes) {
  detail::ensure_available();
  const size_t size = rounded(bytes);
  void* p = nullptr;
  {
    Pool& pl = pool();
    std::lock_guard<std::mutex> lock(pl.m);
    auto it = pl.cached.find(size);
    if (it != pl.cached.end()) {
      p = it->second;
      pl.cached.erase(it);
    }
  }
  if (!p) {
    cudaError_t e = cudaMalloc(&p, size);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      empty_cache();
      e = cudaMalloc(&p, size);
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw OutOfBudget(fmt::format("CUDA out of memory: cudaMalloc of {} bytes ({}) failed: {}; {} bytes live in "
                                    "attnprof tensors",
                                    size, binary_size(double(size)), cudaGetErrorString(e), g_counters.current()));
    }
    std::lock_guard<std::mutex> lock(pool().m);
    pool().reserved += int64_t(size);
  }
  const int64_t now = g_counters.on_alloc(int64_t(bytes));
  record(int64_t(bytes), now);
  return p;
}

void device_free(void* p, size_t bytes) noexcept {
  if (!p) return;
  const int64_t now = g_counters.on_free(int64_t(bytes));
  try {
    record(-int64_t(bytes), now);
    std::lock_guard<std::mutex> lock(pool().m);
    pool().cached.emplace(rounded(bytes), p);  // stream-ordered reuse: all work is on one stream
  } catch (...) {
  }
}

MemoryStats device_memory_stats() { return g_counters.stats(); }

void reset_device_peak() { g_counters.reset_peak(); }

void empty_cache() {
  if (!available()) return;
  (void)cudaStreamSynchronize(detail::stream());
  Pool& pl = pool();
  std::lock_guard<std::mutex> lock(pl.m);
  for (auto& [size, p] : pl.cached) {
    (void)cudaFree(p);
    pl.reserved -= int64_t(size);
  }
  pl.cached.clear();
}

int64_t device_reserved_bytes() {
  std::lock_guard<std::mutex> lock(pool().m);
  return pool().reserved;
}

// ---- tensors --------------------------------------------------------------------------------------------
DeviceStorage::DeviceStorage(size_t bytes) : data_(device_alloc(bytes)), bytes_(bytes) {}
DeviceStorage::~DeviceStorage() { device_free(data_, bytes_); }

DeviceTensor DeviceTensor::empty(const Shape4& shape, DType dtype) {
  for (int64_t d : shape) ATTNPROF_CHECK(d > 0, "device tensor dims must be positive, got {}", shape_str(shape));
  DeviceTensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<DeviceStorage>(t.nbytes());
  return t;
}

DeviceTensor DeviceTensor::from_host(const Tensor& host) {
  ATTNPROF_CHECK(host.defined(), "from_host needs a defined tensor");
  ATTNPROF_ZONE_AS(z, "to", "cpu_op");
  z.add_shape(host.shape(), dtype_name(host.dtype()).data());
  const Tensor c = host.contiguous();
  DeviceTensor t = empty(c.shape(), c.dtype());
  z.set_cost(OpCost{0.0, double(t.nbytes()), double(t.nbytes())});
  ATTNPROF_CUDA_CHECK(cudaMemcpyAsync(t.raw(), c.raw(), t.nbytes(), cudaMemcpyHostToDevice, detail::stream()));
  ATTNPROF_CUDA_CHECK(cudaStreamSynchronize(detail::stream()));  // `c` may be a temporary
  return t;
}

Tensor DeviceTensor::to_host() const {
  ATTNPROF_CHECK(defined(), "to_host on an empty device tensor");
  ATTNPROF_ZONE_AS(z, "to", "cpu_op");
  z.add_shape(shape_, dtype_name(dtype_).data());
  z.set_cost(OpCost{0.0, double(nbytes()), double(nbytes())});
  Tensor h = Tensor::empty(shape_, dtype_);
  ATTNPROF_CUDA_CHECK(cudaMemcpyAsync(h.raw(), raw(), nbytes(), cudaMemcpyDeviceToHost, detail::stream()));
  ATTNPROF_CUDA_CHECK(cudaStreamSynchronize(detail::stream()));
  return h;
}

}  // namespace attnprof::cuda
