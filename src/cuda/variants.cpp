// The CUDA variants, one registry in the CPU registry's style (backend "cuda"):
//   naive       the blog's five ops out of place: GEMM, mul, Memcpy DtoD + masked_fill_, softmax, GEMM (6 activities)
//   inplace     mul_, masked_fill_, softmax_ on the scores: no copy (5 activities)
//   sdpa-math   SDPA's math backend composed: fp32 upcast, q and k pre-scaled, causal mask rebuilt every call
//   sdpa-cudnn  cuDNN 9's fused flash attention, the SDPA graph composed through the backend API (cudnn_sdpa.h)
//   flash       the hand-written FlashAttention-2 kernel of flash_kernel.cuh (launched by flash.cu)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "attention/variants.h"
#include "attnprof/analysis.h"
#include "attnprof/ops.h"
#include "cuda/backend.h"
#if defined(ATTNPROF_HAVE_CUDNN)
#include "cuda/cudnn_sdpa.h"
#endif
#include "cuda/device_ops.h"
#include "cuda/fragment.h"
#include "cuda/kernels.h"
#include "cuda/unfused_layout.h"

namespace attnprof::cuda {

int64_t detail::flash_block_rows(int64_t D) {
  return frag::kFlashConfigs[kernels::flash_config_for(int(D))].block_m();
}

namespace {
// The flash kernel's sizes are ints (FlashParams): a row index plus a tile (at most 256 rows or keys) and the
// count of heads B·Hq must stay below 2^31, or its tile arithmetic would wrap.
std::optional<std::string> flash_sizes_unsupported(const AttnProblem& p) {
  constexpr int64_t kMaxLen = std::numeric_limits<int>::max() - 256;
  if (p.Nq > kMaxLen || p.Nk > kMaxLen)
    return fmt::format("the CUDA flash kernel takes Nq and Nk up to {} (got Nq={}, Nk={})", kMaxLen, p.Nq, p.Nk);
  if (p.B > std::numeric_limits<int>::max() / p.Hq)
    return fmt::format("the CUDA flash kernel takes B·Hq up to 2^31-1 (got B={}, Hq={})", p.B, p.Hq);
  return std::nullopt;
}
}  // namespace

AttnOutput DeviceRunner::run(const Tensor& q, const Tensor& k, const Tensor& v) {
  const DeviceTensor dq = DeviceTensor::from_host(q), dk = DeviceTensor::from_host(k), dv = DeviceTensor::from_host(v);
  DeviceOutput o = run_device(dq, dk, dv);
  synchronize();
  detail::check_launch("the forward");
  AttnOutput out;
  out.out = o.out.to_host();
  if (o.lse.defined()) out.lse = o.lse.to_host();
  return out;
}

DeviceOutput flash_attention(const DeviceTensor& q, const DeviceTensor& k, const DeviceTensor& v,
                             const AttnOptions& o, bool with_lse) {
  ATTNPROF_ZONE_AS(z, "flash_attention_fwd", "cpu_op");
  NvtxRange nv("flash_attention_fwd");
  ATTNPROF_CHECK(is_half(q.dtype()) && k.dtype() == q.dtype() && v.dtype() == q.dtype(),
                 "the CUDA flash kernel takes bf16 or fp16 q, k, v of one type (got {}, {}, {})", dtype_name(q.dtype()),
                 dtype_name(k.dtype()), dtype_name(v.dtype()));
  ATTNPROF_CHECK(!o.attn_mask.defined(), "the CUDA flash kernel supports is_causal, not an explicit attn_mask");
  ATTNPROF_CHECK(q.shape(3) == 64 || q.shape(3) == 128, "the CUDA flash kernel needs head dim 64 or 128, got {}",
                 q.shape(3));
  const AttnProblem p = AttnProblem::from_shapes(q.shape(), k.shape(), v.shape(), q.dtype(), o);
  if (auto why = flash_sizes_unsupported(p)) ATTNPROF_FAIL("{}", *why);
  z.add_shape(q.shape(), dtype_name(q.dtype()).data());
  z.add_shape(k.shape(), dtype_name(k.dtype()).data());
  z.add_shape(v.shape(), dtype_name(v.dtype()).data());
  z.set_cost(detail::fused_cost(p, detail::flash_block_rows(p.D)));
  DeviceOutput out;
  out.out = DeviceTensor::empty(q.shape(), q.dtype());
  if (with_lse) out.lse = DeviceTensor::empty({p.B, p.Hq, p.Nq, 1}, DType::F32);
  kernels::FlashParams fp{};
  fp.q = q.raw();
  fp.k = k.raw();
  fp.v = v.raw();
  fp.o = out.out.raw();
  fp.lse = with_lse ? out.lse.data<float>() : nullptr;
  fp.B = int(p.B);
  fp.Hq = int(p.Hq);
  fp.Hkv = int(p.Hkv);
  fp.Nq = int(p.Nq);
  fp.Nk = int(p.Nk);
  fp.D = int(p.D);
  fp.scale = float(p.effective_scale());
  fp.causal = o.is_causal;
  fp.fp16 = q.dtype() == DType::F16;
  ATTNPROF_CHECK(kernels::flash_forward(fp, detail::stream()),
                 "the CUDA flash kernel has no tile configuration for head dim {}: nothing was launched", fp.D);
  detail::check_launch("flash_fwd_kernel");
  return out;
}

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void check_device_budget(double bytes, const std::string& what) {
  size_t free_b = 0, total_b = 0;
  ATTNPROF_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const int64_t avail = int64_t(free_b) + (device_reserved_bytes() - device_memory_stats().current_bytes);
  if (!(bytes <= double(avail)))
    throw OutOfBudget(fmt::format("{} needs {:.0f} bytes ({}) of device memory, {} free; try flash or sdpa-cudnn, "
                                  "which need no N×N buffer",
                                  what, bytes, binary_size(bytes), binary_size(double(avail))));
}

// The mask the unfused paths fill with -inf (true = fill), built once on the device.
DeviceTensor fill_mask_for(const AttnProblem& p, const AttnOptions& o) {
  if (p.mask == MaskKind::Causal) return dops::triu_mask(p.Nq, p.Nk, 1);
  if (p.mask == MaskKind::Bool) return dops::mask_from_host(ops::logical_not(o.attn_mask));
  return {};
}

class NaiveRunner final : public DeviceRunner {
 public:
  NaiveRunner(const AttnProblem& p, const AttnOptions& o, bool inplace) : p_(p), inplace_(inplace) {
    check_device_budget(naive_peak_bytes(p, inplace, 0.0),
                        fmt::format("{} attention at {}", inplace ? "in-place" : "naive", p.str()));
    fill_mask_ = fill_mask_for(p, o);
  }

  DeviceOutput run_device(const DeviceTensor& q, const DeviceTensor& k, const DeviceTensor& v) override {
    NvtxRange nv("attn_fwd");
    const double scale = p_.effective_scale();
    DeviceTensor s = dops::matmul_qk(q, k);
    if (inplace_) {
      dops::mul_(s, scale);
      if (fill_mask_.defined()) dops::masked_fill_(s, fill_mask_, kNegInf);
      dops::softmax_(s);
      return {dops::matmul_pv(s, v), {}};
    }
    s = dops::mul(s, scale);
    if (fill_mask_.defined()) s = dops::masked_fill(s, fill_mask_, kNegInf);
    DeviceTensor attn = dops::softmax(s);
    s = DeviceTensor();
    return {dops::matmul_pv(attn, v), {}};
  }

 private:
  AttnProblem p_;
  bool inplace_;
  DeviceTensor fill_mask_;
};

// PyTorch's _scaled_dot_product_attention_math on CUDA: upcast to fp32, q and k each scaled by √scale,
// the causal mask built again on every call and added to the scores in place, then softmax and the second
// matmul, and back to the input dtype.
class SdpaMathRunner final : public DeviceRunner {
 public:
  SdpaMathRunner(const AttnProblem& p, const AttnOptions& o) : p_(p) {
    // The same moments as the CPU math path (the inputs are already on the device, outside `free`), beside the
    // inverted bool mask this runner keeps on the device for its life.
    check_device_budget(sdpa_math_peak_bytes(p) + (p.mask == MaskKind::Bool ? variants::fill_mask_bytes(p) : 0.0),
                        fmt::format("sdpa-math at {}", p.str()));
    if (p.mask == MaskKind::Bool) bool_fill_ = dops::mask_from_host(ops::logical_not(o.attn_mask));
  }

  DeviceOutput run_device(const DeviceTensor& q0, const DeviceTensor& k0, const DeviceTensor& v0) override {
    NvtxRange nv("sdpa_fwd");
    ATTNPROF_ZONE_AS(z, "scaled_dot_product_attention", "cpu_op");
    ATTNPROF_ZONE_AS(zm, "_scaled_dot_product_attention_math", "cpu_op");
    const bool upcast = is_half(p_.dtype);
    DeviceTensor q = upcast ? dops::to(q0, DType::F32) : q0;
    DeviceTensor k = upcast ? dops::to(k0, DType::F32) : k0;
    DeviceTensor v = upcast ? dops::to(v0, DType::F32) : v0;
    const double scale = p_.effective_scale(), sq = std::sqrt(std::fabs(scale));  // sign on q's side, as on the CPU
    q = dops::mul(q, std::copysign(sq, scale));
    // The mask as the CPU math path and PyTorch make it: additive fp32 (where), added to the scores in place.
    DeviceTensor mask;
    const bool masked = p_.mask == MaskKind::Causal || p_.mask == MaskKind::Bool;
    if (masked)
      mask = dops::where(p_.mask == MaskKind::Causal ? dops::triu_mask(p_.Nq, p_.Nk, 1) : bool_fill_, kNegInf, 0.0f,
                         DType::F32);
    k = dops::mul(k, sq);
    DeviceTensor s = dops::matmul_qk(q, k);
    if (masked) dops::add_(s, mask);
    mask = DeviceTensor();
    DeviceTensor attn = dops::softmax(s);
    s = DeviceTensor();
    DeviceTensor out = dops::matmul_pv(attn, v);
    return {upcast ? dops::to(out, p_.dtype) : out, {}};
  }

 private:
  AttnProblem p_;
  DeviceTensor bool_fill_;
};

class FlashRunner final : public DeviceRunner {
 public:
  FlashRunner(const AttnProblem& p, const AttnOptions& o) : o_(o) { (void)p; }
  DeviceOutput run_device(const DeviceTensor& q, const DeviceTensor& k, const DeviceTensor& v) override {
    NvtxRange nv("flash_kernel_fwd");
    return flash_attention(q, k, v, o_, /*with_lse=*/true);
  }

 private:
  AttnOptions o_;
};

std::optional<std::string> no_device() {
  if (!available()) return "CUDA device unavailable: " + unavailable_reason();
  return std::nullopt;
}

std::optional<std::string> unfused_unsupported(const AttnProblem& p) {
  if (auto why = no_device()) return why;
  if (p.mask == MaskKind::Additive) return std::string("additive attn_mask is not implemented on CUDA yet");
  // cuBLAS takes each GEMM's m, n, k, leading dimensions and batch count as int; the strides and every small
  // kernel's indices are 64-bit, so the scores tensor itself may pass 2^31 elements (B=8, H=16, N=4096 has
  // exactly 2^31). The softmax launches one block per 8 rows, under gridDim.x's 2^31-1.
  if (!layout::fits_cublas_int(layout::qk_gemm(p.B, p.Hq, p.Hkv, p.Nq, p.Nk, p.D)) ||
      !layout::fits_cublas_int(layout::pv_gemm(p.B, p.Hq, p.Hkv, p.Nq, p.Nk, p.D)))
    return fmt::format("B={} Hq={} Hkv={} Nq={} Nk={} D={} exceed cuBLAS's int GEMM dimensions", p.B, p.Hq, p.Hkv,
                       p.Nq, p.Nk, p.D);
  if (double(p.B) * double(p.Hq) * double(p.Nq) / 8.0 > 2147483647.0)
    return fmt::format("B·Hq·Nq = {:.0f} rows exceed the softmax kernel's grid (2^31-1 blocks of 8 rows)",
                       double(p.B) * double(p.Hq) * double(p.Nq));
  return std::nullopt;
}

std::optional<std::string> flash_unsupported(const AttnProblem& p) {
  if (auto why = no_device()) return why;
  if (!is_half(p.dtype))
    return fmt::format("the CUDA flash kernel takes bf16 or fp16 (got {})", dtype_name(p.dtype));
  if (p.D != 64 && p.D != 128) return fmt::format("the CUDA flash kernel supports head dims 64 and 128 (got {})", p.D);
  if (p.mask != MaskKind::None && p.mask != MaskKind::Causal)
    return std::string("the CUDA flash kernel supports no mask or is_causal, not an explicit attn_mask");
  if (p.effective_scale() <= 0.0) return std::string("the CUDA flash kernel needs a positive softmax scale");
  return flash_sizes_unsupported(p);
}

// cuDNN's fused attention for bf16, no mask or is_causal: the graph, its support checks and the plan cache
// are in cudnn_sdpa.cpp. "No engine" is a reason here (the plan is built on first ask), never a crash.
std::optional<std::string> sdpa_cudnn_unsupported(const AttnProblem& p) {
  if (auto why = no_device()) return why;
#if defined(ATTNPROF_HAVE_CUDNN)
  return cudnn::sdpa_unsupported(p);
#else
  (void)p;
  return std::string("built without cuDNN (cmake/AttnprofCuda.cmake found no cuDNN 9 headers and libcudnn.so.9)");
#endif
}

std::unique_ptr<Runner> sdpa_cudnn_prepare(const AttnProblem& p, const AttnOptions& o) {
#if defined(ATTNPROF_HAVE_CUDNN)
  if (auto why = no_device()) ATTNPROF_FAIL("sdpa-cudnn cannot run: {}", *why);
  return cudnn::make_sdpa_runner(p, o);
#else
  (void)o;
  ATTNPROF_FAIL("sdpa-cudnn cannot run: {}", sdpa_cudnn_unsupported(p).value_or("unsupported"));
#endif
}

using variants::fused_tolerance;
using variants::unfused_tolerance;

// A variant's cost on the GPU: the CPU cost model's for detail::tensor_core_problem(p).
template <class F>
auto tensor_core_cost(F f) {
  return [f](const AttnProblem& p) { return f(detail::tensor_core_problem(p)); };
}

std::vector<Variant> build() {
  std::vector<Variant> r;
  r.push_back(Variant{
      "naive", "cuda", "attn_fwd",
      "the blog's five ops on the GPU, out of place: cuBLAS GEMM, mul, Memcpy DtoD + masked_fill_, softmax, GEMM",
      unfused_unsupported,
      tensor_core_cost([](const AttnProblem& p) { return variants::naive_cost(p, false, ops::gemm_cost); }),
      unfused_tolerance,
      [](const AttnProblem& p, const AttnOptions& o) -> std::unique_ptr<Runner> {
        return std::make_unique<NaiveRunner>(p, o, false);
      }});
  r.push_back(Variant{
      "inplace", "cuda", "attn_fwd", "the same five ops in place on the GPU: mul_, masked_fill_, softmax_ (no copy)",
      unfused_unsupported,
      tensor_core_cost([](const AttnProblem& p) { return variants::naive_cost(p, true, ops::gemm_cost); }),
      unfused_tolerance,
      [](const AttnProblem& p, const AttnOptions& o) -> std::unique_ptr<Runner> {
        return std::make_unique<NaiveRunner>(p, o, true);
      }});
  r.push_back(Variant{
      "sdpa-math", "cuda", "sdpa_fwd",
      "scaled_dot_product_attention, math backend on the GPU: fp32 upcast, mask rebuilt per call, composed ops",
      unfused_unsupported, [](const AttnProblem& p) { return variants::sdpa_math_cost(p, false); }, unfused_tolerance,
      [](const AttnProblem& p, const AttnOptions& o) -> std::unique_ptr<Runner> {
        return std::make_unique<SdpaMathRunner>(p, o);
      }});
  r.push_back(Variant{
      "flash", "cuda", "flash_kernel_fwd",
      "hand-written FlashAttention-2 kernel: bf16/fp16 mma.sync tensor cores, online softmax, causal block skipping",
      flash_unsupported, [](const AttnProblem& p) { return detail::fused_cost(p, detail::flash_block_rows(p.D)); },
      fused_tolerance, [](const AttnProblem& p, const AttnOptions& o) -> std::unique_ptr<Runner> {
        return std::make_unique<FlashRunner>(p, o);
      }});
  // Last: the one variant whose device code is not ours. Should cuDNN's kernel fault, the error is sticky and
  // fails every later launch in the process; every other variant has then run already.
  r.push_back(Variant{
      "sdpa-cudnn", "cuda", "sdpa_fwd",
      "scaled_dot_product_attention, cuDNN backend: cuDNN 9's fused flash attention (bf16 or fp16; unmasked or causal)",
      sdpa_cudnn_unsupported, [](const AttnProblem& p) { return detail::fused_cost(p, detail::kCudnnBlockRows); },
      fused_tolerance, sdpa_cudnn_prepare});
  return r;
}

}  // namespace

const std::vector<Variant>& cuda_registry() {
  static const std::vector<Variant> r = build();
  return r;
}

const Variant& find_cuda_variant(std::string_view name) {
  std::string names;
  for (const Variant& v : cuda_registry()) {
    if (v.name == name) return v;
    names += (names.empty() ? "" : ", ") + v.name;
  }
  ATTNPROF_FAIL("unknown CUDA variant '{}': expected one of {}", name, names.empty() ? "(none: built without CUDA)" : names);
}

}  // namespace attnprof::cuda

namespace attnprof::cuda {

DeviceTiming time_device_forward(DeviceRunner& runner, const DeviceTensor& q, const DeviceTensor& k,
                                 const DeviceTensor& v, int warmup, int iters, bool burst) {
  ATTNPROF_CHECK(warmup >= 0 && iters >= 1, "time_device_forward needs warmup >= 0 and iters >= 1");
  for (int i = 0; i < warmup; ++i) runner.run_device(q, k, v);
  ATTNPROF_CUDA_CHECK(cudaStreamSynchronize(detail::stream()));
  // ... and until the device has been kept busy kDeviceWarmupS: its clock up from idle (checked every 8
  // forwards, each batch waited for, so the time is the device's, not the host's enqueueing).
  for (const auto t0 = std::chrono::steady_clock::now();
       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < kDeviceWarmupS;) {
    for (int i = 0; i < 8; ++i) runner.run_device(q, k, v);
    ATTNPROF_CUDA_CHECK(cudaStreamSynchronize(detail::stream()));
  }
  DeviceTiming t;
  {
    // Owns the two events: destroyed on every way out, a failed create of the second or a throwing forward or check.
    struct EventPair {
      cudaEvent_t a = nullptr, b = nullptr;
      EventPair() = default;
      EventPair(const EventPair&) = delete;
      EventPair& operator=(const EventPair&) = delete;
      ~EventPair() {
        if (a) (void)cudaEventDestroy(a);
        if (b) (void)cudaEventDestroy(b);
      }
    } ev;
    ATTNPROF_CUDA_CHECK(cudaEventCreate(&ev.a));
    ATTNPROF_CUDA_CHECK(cudaEventCreate(&ev.b));
    // Milliseconds between one pair of events around `forwards` forwards enqueued back to back.
    auto timed = [&](int forwards) {
      ATTNPROF_CUDA_CHECK(cudaEventRecord(ev.a, detail::stream()));
      for (int i = 0; i < forwards; ++i) runner.run_device(q, k, v);
      ATTNPROF_CUDA_CHECK(cudaEventRecord(ev.b, detail::stream()));
      ATTNPROF_CUDA_CHECK(cudaEventSynchronize(ev.b));
      float ms = 0.0f;
      ATTNPROF_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.a, ev.b));
      return double(ms);
    };
    for (int i = 0; i < iters; ++i) t.ms.push_back(timed(1));
    if (burst) t.burst_ms = timed(iters) / iters;
  }  // the events are destroyed here, before the launch check, as on every way out
  detail::check_launch("the timed forwards");
  t.median_ms = analysis::median(t.ms);
  t.min_ms = *std::min_element(t.ms.begin(), t.ms.end());
  return t;
}

}  // namespace attnprof::cuda
