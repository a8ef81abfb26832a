// CUPTI collection: activity buffers (kernels, memcpy, memset) plus runtime/driver API callbacks that tie
// each launch to the thread and innermost zone it came from; clock samples for the host mapping. NVTX ranges.
// Everything here only gathers raw records; activity.cpp turns them into profile events (and is unit-tested).
#include <cupti.h>
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "attnprof/profiler.h"
#include "cuda/backend.h"
#include "profiler/recorder.h"

#define ATTNPROF_CUPTI_CHECK(expr)                                                               \
  do {                                                                                           \
    const CUptiResult attnprof_r_ = (expr);                                                      \
    if (attnprof_r_ != CUPTI_SUCCESS) {                                                          \
      const char* attnprof_msg_ = nullptr;                                                       \
      cuptiGetResultString(attnprof_r_, &attnprof_msg_);                                         \
      ATTNPROF_FAIL("{} failed: {} ({})", #expr, attnprof_msg_ ? attnprof_msg_ : "?", int(attnprof_r_)); \
    }                                                                                            \
  } while (0)

namespace attnprof::cuda {
namespace {

constexpr size_t kBufferBytes = size_t(8) << 20;

struct State {
  std::mutex m;
  std::vector<RawActivity> activities;
  std::vector<LaunchRecord> launches;
  uint64_t dropped = 0;
  // Buffers whose reading stopped on an error other than their end: the records after it are lost.
  uint64_t unreadable = 0;
  CUptiResult unreadable_status = CUPTI_SUCCESS;
  uint64_t incomplete = 0;  // buffers that ended in an incomplete record
  CUpti_SubscriberHandle subscriber = nullptr;
};
State& state() {
  static State* s = new State;  // callbacks may arrive late; never destroyed
  return *s;
}
std::atomic<bool> g_active{false};

// Launch API calls open on this thread (entered, not yet exited), innermost last. A runtime call and the
// driver call it makes can share a correlation id; each has its own entry here, so neither overwrites the
// other's start.
struct Pending {
  CUpti_CallbackDomain domain;
  LaunchRecord rec;
};
thread_local std::vector<Pending> t_pending;

bool is_launch_api(const char* f) {
  return f && (std::strstr(f, "Launch") || std::strstr(f, "Memcpy") || std::strstr(f, "Memset"));
}

void CUPTIAPI on_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (!is_launch_api(cb->functionName)) return;
  if (cb->callbackSite == CUPTI_API_ENTER) {
    if (!g_active.load(std::memory_order_relaxed) || !prof::recording()) return;
    // A C callback: nothing may be thrown through CUPTI's frames.
    prof::detail::ThreadBuffer* b = prof::detail::recording_buffer();
    if (!b) return;
    LaunchRecord r;
    r.correlation = cb->correlationId;
    r.tid = b->tid;
    r.zone = b->stack.empty() ? -1 : b->stack.back();
    r.t0 = prof::now_ticks();
    r.api = cb->functionName;
    if (t_pending.size() > 64) t_pending.clear();  // calls left open by a collection that stopped mid-call
    t_pending.push_back({domain, std::move(r)});
    return;
  }
  // Exit: close the innermost open call of this domain and id (entries of a collection that stopped
  // in between are closed too, and dropped below).
  for (size_t i = t_pending.size(); i-- > 0;) {
    if (t_pending[i].domain != domain || t_pending[i].rec.correlation != cb->correlationId) continue;
    LaunchRecord r = std::move(t_pending[i].rec);
    t_pending.erase(t_pending.begin() + std::ptrdiff_t(i));
    r.t1 = prof::now_ticks();
    // The outermost call of an id is the launch (attach_device_capture keeps the first record per id):
    // a driver call inside a runtime call with the same id is dropped here.
    for (const Pending& outer : t_pending)
      if (outer.rec.correlation == r.correlation) return;
    if (!g_active.load(std::memory_order_relaxed)) return;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.m);
    s.launches.push_back(std::move(r));
    return;
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

const char* memcpy_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD (Host -> Device)";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH (Device -> Host)";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "Memcpy DtoD (Device -> Device)";
    default: return "Memcpy";
  }
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t, size_t valid) {
  std::vector<RawActivity> got;
  CUpti_Activity* rec = nullptr;
  // An empty buffer (a forced flush may hand one back) holds nothing to read: its end at once.
  CUptiResult next = CUPTI_ERROR_MAX_LIMIT_REACHED;
  while (buffer && valid > 0 && (next = cuptiActivityGetNextRecord(buffer, valid, &rec)) == CUPTI_SUCCESS) {
    RawActivity a;
    // The fields every kernel, memcpy and memset record has under the same names.
    auto timing = [&a](const auto* r) {
      a.start_ns = r->start;
      a.end_ns = r->end;
      a.device = r->deviceId;
      a.stream = r->streamId;
      a.correlation = r->correlationId;
    };
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        a.kind = DeviceActivity::Kind::Kernel;
        a.name = k->name ? k->name : "?";
        timing(k);
        a.grid = {k->gridX, k->gridY, k->gridZ};
        a.block = {k->blockX, k->blockY, k->blockZ};
        a.registers = k->registersPerThread;
        a.static_smem = k->staticSharedMemory;
        a.dynamic_smem = k->dynamicSharedMemory;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        a.kind = DeviceActivity::Kind::Memcpy;
        a.name = memcpy_name(m->copyKind);
        timing(m);
        a.bytes = int64_t(m->bytes);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        a.kind = DeviceActivity::Kind::Memset;
        a.name = "Memset (Device)";
        timing(m);
        a.bytes = int64_t(m->bytes);
        break;
      }
      default: continue;
    }
    got.push_back(std::move(a));
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped);
  std::free(buffer);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  s.dropped += dropped;
  // MAX_LIMIT_REACHED: the buffer's end. INVALID_KIND: a record left incomplete, which a forced flush may hand
  // back (cupti_activity.h; its sample stops there too): the buffer's end as well, counted for the profile's
  // metadata. Anything else left records unread.
  if (next == CUPTI_ERROR_INVALID_KIND) {
    ++s.incomplete;
  } else if (next != CUPTI_ERROR_MAX_LIMIT_REACHED) {
    ++s.unreadable;
    s.unreadable_status = next;
  }
  for (RawActivity& a : got) s.activities.push_back(std::move(a));
}

// Several readings; fit_clock keeps the tightest as its anchor. A reading CUPTI could not take is left out
// rather than kept as device time 0, which would map every activity decades away.
void sample_clock_into(std::vector<ClockSample>& out) {
  for (int i = 0; i < 5; ++i) {
    ClockSample c;
    c.host_before = prof::now_ticks();
    const CUptiResult got = cuptiGetTimestamp(&c.device_ns);
    c.host_after = prof::now_ticks();
    if (got == CUPTI_SUCCESS && c.device_ns != 0) out.push_back(c);
  }
}

std::vector<ClockSample> g_samples;
prof::DeviceProperties g_gpu;
SmLimits g_sm_limits;

// Undoes whatever start() had switched on (every call is harmless when its part was never done).
void cupti_teardown() {
  State& s = state();
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET);
  if (s.subscriber) {
    cuptiUnsubscribe(s.subscriber);
    s.subscriber = nullptr;
  }
}

}  // namespace

ActivityCollector::ActivityCollector() = default;
ActivityCollector::~ActivityCollector() {
  if (running_) {
    try {
      stop();
    } catch (...) {
    }
  }
}

void ActivityCollector::start() {
  ATTNPROF_CHECK(!running_, "ActivityCollector already started");
  ATTNPROF_CHECK(!g_active.load(), "another ActivityCollector is running");
  detail::ensure_available();
  (void)detail::stream();  // create the context before CUPTI starts
  const DeviceInfo info = device_info(0);
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.m);
    s.activities.clear();
    s.launches.clear();
    s.dropped = 0;
    s.unreadable = 0;
    s.incomplete = 0;
  }
  try {
    // CUPTI allows one subscriber per process: subscribing first means a second profiler in the process
    // (Nsight Systems, another CUPTI client) is reported before any activity kind is switched on.
    const CUptiResult sub = cuptiSubscribe(&s.subscriber, on_api, nullptr);
    if (sub == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      s.subscriber = nullptr;
      ATTNPROF_FAIL("CUPTI already has a subscriber in this process (another profiler such as Nsight Systems "
                    "is attached); attnprof's device profiling cannot run alongside it");
    }
    if (sub != CUPTI_SUCCESS) s.subscriber = nullptr;
    ATTNPROF_CUPTI_CHECK(sub);
    ATTNPROF_CUPTI_CHECK(cuptiEnableDomain(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API));
    ATTNPROF_CUPTI_CHECK(cuptiEnableDomain(1, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API));
    ATTNPROF_CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    ATTNPROF_CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    ATTNPROF_CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    ATTNPROF_CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
  } catch (...) {
    cupti_teardown();
    throw;
  }
  g_samples.clear();
  sample_clock_into(g_samples);
  g_gpu = device_properties(info);
  g_sm_limits = info.sm_limits;
  (void)detail::take_mem_records();
  detail::set_mem_capture(true);
  g_active.store(true);
  running_ = true;
}

DeviceCapture ActivityCollector::stop() {
  ATTNPROF_CHECK(running_, "ActivityCollector::stop() before start()");
  running_ = false;
  // Every activity has ended before the buffers are flushed. A kernel that faulted is reported here, once
  // CUPTI is torn down, rather than later against an unrelated call.
  const cudaError_t sync = cudaDeviceSynchronize();
  g_active.store(false);
  detail::set_mem_capture(false);
  sample_clock_into(g_samples);
  State& s = state();
  // Delivers every buffer through buffer_completed.
  const CUptiResult flushed = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  cupti_teardown();
  DeviceCapture cap;
  uint64_t unreadable = 0;
  CUptiResult unreadable_status = CUPTI_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(s.m);
    cap.activities.swap(s.activities);
    cap.launches.swap(s.launches);
    cap.dropped_records = s.dropped;
    cap.incomplete_buffers = s.incomplete;
    unreadable = s.unreadable;
    unreadable_status = s.unreadable_status;
  }
  cap.mem = detail::take_mem_records();
  cap.clock_samples = g_samples;
  cap.gpu = g_gpu;
  cap.sm_limits = g_sm_limits;
  if (sync != cudaSuccess)
    ATTNPROF_FAIL("a kernel failed in the profiled forward: {} ({})", cudaGetErrorString(sync), cudaGetErrorName(sync));
  // Without the flush the capture would be silently short of activities: say why instead.
  if (flushed != CUPTI_SUCCESS) {
    const char* msg = nullptr;
    cuptiGetResultString(flushed, &msg);
    ATTNPROF_FAIL("CUPTI could not flush its activity buffers, so the kernels' records are missing: {} ({})",
                  msg ? msg : "?", int(flushed));
  }
  // A capture short of records would put too little device time in the table: refuse it, as the host
  // profiler refuses one that lost events.
  if (unreadable > 0) {
    const char* msg = nullptr;
    cuptiGetResultString(unreadable_status, &msg);
    ATTNPROF_FAIL("CUPTI could not read {} activity buffer{} to the end ({} ({})): the kernels' records after it are "
                  "missing", unreadable, unreadable == 1 ? "" : "s", msg ? msg : "?", int(unreadable_status));
  }
  if (cap.dropped_records > 0)
    ATTNPROF_FAIL("CUPTI dropped {} activity record{} (its buffers were full): the device table would be short of "
                  "kernels; profile fewer forwards", cap.dropped_records, cap.dropped_records == 1 ? "" : "s");
  return cap;
}

prof::ProfileResult profile_device_forward(DeviceRunner& runner, const DeviceTensor& q, const DeviceTensor& k,
                                           const DeviceTensor& v, std::string_view annotation) {
  ActivityCollector cupti;
  cupti.start();
  prof::Profiler profiler;
  profiler.start();
  {
    prof::Zone ann(annotation, "user_annotation");
    (void)runner.run_device(q, k, v);
    synchronize();
  }
  profiler.stop();
  prof::ProfileResult r = profiler.result();
  attach_device_capture(r, cupti.stop());
  return r;
}

// ---- NVTX ------------------------------------------------------------------------------------------------
// While the profiler records, every zone is mirrored as an NVTX range (a zone listener installed when the
// backend's stream is created), so Nsight Systems shows attnprof's names; the explicit ranges of the CUDA
// ops and forwards then stand aside, and name the work when the profiler is off.
namespace {
void nvtx_open(const char* name, const char*) noexcept { nvtxRangePushA(name); }
void nvtx_close() noexcept { nvtxRangePop(); }
constexpr prof::ZoneListener kNvtxMirror{nvtx_open, nvtx_close};
bool mirrored() noexcept { return prof::recording() && prof::zone_listener() == &kNvtxMirror; }
}  // namespace

void detail::install_nvtx_mirror() noexcept {
  if (!prof::zone_listener()) prof::set_zone_listener(&kNvtxMirror);
}

NvtxRange::NvtxRange(const char* name) noexcept {
  if (mirrored()) return;
  nvtxRangePushA(name);
  pushed_ = true;
}
NvtxRange::~NvtxRange() {
  if (pushed_) nvtxRangePop();
}

}  // namespace attnprof::cuda
