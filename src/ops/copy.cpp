// Copies and masks: clone (copy_), dtype conversion (to), triu_mask, logical_not, where.
#include <algorithm>
#include <cstring>

#include "attnprof/error.h"
#include "attnprof/ops.h"
#include "attnprof/profiler.h"
#include "ops/kernels.h"

namespace attnprof::ops {
namespace {

// Contiguous copy or fp32 <-> bf16/fp16 conversion, split over threads in cache-friendly chunks; nullopt-like
// empty Tensor when the layout needs the general strided path (Tensor::to).
Tensor fast_copy(const Tensor& a, DType to) {
  if (!a.is_contiguous() || a.dtype() == DType::Bool || to == DType::Bool) return {};
  if (a.dtype() != to && is_half(a.dtype()) && is_half(to)) return {};  // bf16 <-> fp16: through Tensor::to
  Tensor out = Tensor::empty(a.shape(), to);
  const int64_t n = a.numel(), chunk = 1 << 16;
  const int64_t chunks = (n + chunk - 1) / chunk;
  const detail::RowKernels& k = detail::row_kernels();
  const DType from = a.dtype();
  ATTNPROF_PARALLEL_REGION(region);
#pragma omp parallel if (chunks > 1)
  {
    ATTNPROF_WORK_SHARE(share, region);
#pragma omp for schedule(static) nowait
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t i = c * chunk, len = std::min(chunk, n - i);
      if (from == to)
        std::memcpy(static_cast<char*>(out.raw()) + i * int64_t(dtype_size(to)),
                    static_cast<const char*>(a.raw()) + i * int64_t(dtype_size(to)), size_t(len) * dtype_size(to));
      else if (from == DType::F32)
        k.half(to).from_f32(a.data<float>() + i, out.data<uint16_t>() + i, len);
      else
        k.half(from).to_f32(a.data<uint16_t>() + i, out.data<float>() + i, len);
    }
  }
  return out;
}

}  // namespace

OpCost copy_cost(const Shape4& a, DType from, DType to) {
  const double n = double(numel(a));
  return OpCost{0.0, n * double(dtype_size(from)), n * double(dtype_size(to))};
}

Tensor clone(const Tensor& a) {
  ATTNPROF_OP_ZONE(z, "copy_");
  ATTNPROF_CHECK(a.defined(), "clone of an undefined tensor");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.set_cost(copy_cost(a.shape(), a.dtype(), a.dtype()));
  if (Tensor out = fast_copy(a, a.dtype()); out.defined()) return out;
  return a.clone();
}

Tensor to(const Tensor& a, DType dtype) {
  ATTNPROF_OP_ZONE(z, "to");
  ATTNPROF_CHECK(a.defined(), "to() of an undefined tensor");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.set_cost(copy_cost(a.shape(), a.dtype(), dtype));
  if (Tensor out = fast_copy(a, dtype); out.defined()) return out;
  return a.to(dtype);
}

OpCost triu_mask_cost(int64_t nq, int64_t nk) { return OpCost{0.0, 0.0, double(nq) * double(nk)}; }

OpCost logical_not_cost(const Shape4& mask) { return copy_cost(mask, DType::Bool, DType::Bool); }

Tensor triu_mask(int64_t nq, int64_t nk, int64_t diagonal) {
  ATTNPROF_OP_ZONE(z, "triu");
  ATTNPROF_CHECK(nq > 0 && nk > 0, "triu mask needs positive sizes, got {}x{}", nq, nk);
  z.add_shape({1, 1, nq, nk}, dtype_name(DType::Bool).data());
  z.set_cost(triu_mask_cost(nq, nk));
  Tensor m = Tensor::empty({1, 1, nq, nk}, DType::Bool);
  uint8_t* p = m.data<uint8_t>();
  ATTNPROF_PARALLEL_REGION(region);  // each thread's share recorded, as the other ops' regions are
#pragma omp parallel if (nq * nk > 65536)
  {
    ATTNPROF_WORK_SHARE(share, region);
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t j = 0; j < nk; ++j) p[i * nk + j] = (j - i) >= diagonal;
  }
  return m;
}

Tensor logical_not(const Tensor& mask) {
  ATTNPROF_OP_ZONE(z, "logical_not");
  ATTNPROF_CHECK(mask.defined() && mask.dtype() == DType::Bool, "logical_not needs a bool tensor");
  z.add_shape(mask.shape(), dtype_name(mask.dtype()).data());
  z.set_cost(logical_not_cost(mask.shape()));
  Tensor out = Tensor::empty(mask.shape(), DType::Bool);
  uint8_t* o = out.data<uint8_t>();
  int64_t k = 0;
  for (int64_t b = 0; b < mask.shape(0); ++b)
    for (int64_t h = 0; h < mask.shape(1); ++h)
      for (int64_t i = 0; i < mask.shape(2); ++i)
        for (int64_t j = 0; j < mask.shape(3); ++j) o[k++] = !mask.data<uint8_t>()[mask.offset_of(b, h, i, j)];
  return out;
}

OpCost where_cost(const Shape4& cond, DType dtype) { return copy_cost(cond, DType::Bool, dtype); }

Tensor where(const Tensor& cond, float if_true, float if_false, DType dtype) {
  ATTNPROF_OP_ZONE(z, "where");
  ATTNPROF_CHECK(cond.defined() && cond.dtype() == DType::Bool, "where needs a bool condition, got {}",
                 cond.defined() ? dtype_name(cond.dtype()) : "undefined");
  ATTNPROF_CHECK(dtype == DType::F32 || is_half(dtype), "where makes fp32, bf16 or fp16, not {}", dtype_name(dtype));
  z.add_shape(cond.shape(), dtype_name(cond.dtype()).data());
  z.set_cost(where_cost(cond.shape(), dtype));
  Tensor out = Tensor::empty(cond.shape(), dtype);
  const int64_t B = cond.shape(0), H = cond.shape(1), N = cond.shape(2), M = cond.shape(3);
  const uint8_t* c = cond.data<uint8_t>();
  void* o = out.raw();
  const bool contiguous_f32 = cond.is_contiguous() && dtype == DType::F32;
  ATTNPROF_PARALLEL_REGION(region);
#pragma omp parallel if (B * H * N * M > 65536)
  {
    ATTNPROF_WORK_SHARE(share, region);
#pragma omp for schedule(static) nowait
    for (int64_t r = 0; r < B * H * N; ++r) {
      if (contiguous_f32) {  // torch's causal mask: one select per element, which the compiler vectorises
        const uint8_t* cr = c + r * M;
        float* orow = static_cast<float*>(o) + r * M;
        for (int64_t j = 0; j < M; ++j) orow[j] = cr[j] ? if_true : if_false;
        continue;
      }
      const int64_t b = r / (H * N), h = r / N % H, i = r % N;
      for (int64_t j = 0; j < M; ++j)
        store_float(o, dtype, r * M + j, c[cond.offset_of(b, h, i, j)] ? if_true : if_false);
    }
  }
  return out;
}

}  // namespace attnprof::ops
