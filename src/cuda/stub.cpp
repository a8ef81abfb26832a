// The CUDA backend's answers in a build without CUDA: nothing available, an empty registry, and errors that
// say so from every function that would need a device. The pure host side (activity.cpp) is built anyway.
#include "attnprof/cuda.h"
#include "attnprof/error.h"

namespace attnprof::cuda {
namespace {
[[noreturn]] void no_cuda(const char* what) {
  ATTNPROF_FAIL("{}: attnprof was built without the CUDA backend (configure with -DATTNPROF_CUDA=ON on a machine "
                "with nvcc)",
                what);
}
}  // namespace

bool built_with_cuda() { return false; }
bool available() { return false; }
std::string unavailable_reason() { return "attnprof was built without the CUDA backend"; }
int device_count() { return 0; }
DeviceInfo device_info(int) { no_cuda("device_info"); }
void synchronize() { no_cuda("synchronize"); }
void* device_alloc(size_t) { no_cuda("device_alloc"); }
void device_free(void*, size_t) noexcept {}
MemoryStats device_memory_stats() { return {}; }
void reset_device_peak() {}
void empty_cache() {}
int64_t device_reserved_bytes() { return 0; }
DeviceStorage::DeviceStorage(size_t) : data_(nullptr), bytes_(0) { no_cuda("device tensors"); }
DeviceStorage::~DeviceStorage() = default;
DeviceTensor DeviceTensor::empty(const Shape4&, DType) { no_cuda("DeviceTensor::empty"); }
DeviceTensor DeviceTensor::from_host(const Tensor&) { no_cuda("DeviceTensor::from_host"); }
Tensor DeviceTensor::to_host() const { no_cuda("DeviceTensor::to_host"); }
AttnOutput DeviceRunner::run(const Tensor&, const Tensor&, const Tensor&) { no_cuda("DeviceRunner::run"); }
const std::vector<Variant>& cuda_registry() {
  static const std::vector<Variant> empty;
  return empty;
}
const Variant& find_cuda_variant(std::string_view name) {
  ATTNPROF_FAIL("unknown CUDA variant '{}': attnprof was built without the CUDA backend", name);
}
DeviceOutput flash_attention(const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, const AttnOptions&,
                             bool) {
  no_cuda("flash_attention");
}
DeviceTiming time_device_forward(DeviceRunner&, const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, int,
                                 int, bool) {
  no_cuda("time_device_forward");
}
ActivityCollector::ActivityCollector() = default;
ActivityCollector::~ActivityCollector() = default;
void ActivityCollector::start() { no_cuda("ActivityCollector::start"); }
DeviceCapture ActivityCollector::stop() { no_cuda("ActivityCollector::stop"); }
prof::ProfileResult profile_device_forward(DeviceRunner&, const DeviceTensor&, const DeviceTensor&,
                                           const DeviceTensor&, std::string_view) {
  no_cuda("profile_device_forward");
}
NvtxRange::NvtxRange(const char*) noexcept { pushed_ = false; }  // nothing to push without CUDA
NvtxRange::~NvtxRange() = default;

}  // namespace attnprof::cuda
