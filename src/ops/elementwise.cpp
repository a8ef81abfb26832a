// Elementwise ops: mul, masked_fill, add (out of place and in place), and their cost models.
#include <cmath>

#include "attnprof/error.h"
#include "attnprof/ops.h"
#include "attnprof/profiler.h"
#include "ops/kernels.h"
#include "ops/rows.h"

namespace attnprof::ops {
void check_broadcast(const Shape4& mask, const Shape4& target, const char* what) {
  for (int i = 0; i < 4; ++i)
    ATTNPROF_CHECK(mask[size_t(i)] == target[size_t(i)] || mask[size_t(i)] == 1,
                   "{} of shape {} does not broadcast to {} (dim {} is {}, needs 1 or {})", what, shape_str(mask),
                   shape_str(target), i, mask[size_t(i)], target[size_t(i)]);
}

OpCost mul_cost(const Shape4& a, DType dtype) {
  const double n = double(numel(a)), es = double(dtype_size(dtype));
  return OpCost{n, n * es, n * es};
}

Tensor& mul_(Tensor& a, double s) {
  ATTNPROF_OP_ZONE(z, "mul_");
  detail::check_float(a, "mul_");
  detail::check_writable(a, "mul_");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.set_cost(mul_cost(a.shape(), a.dtype()));
  const float f = float(s);
  const DType t = a.dtype();
  const int64_t n = a.shape(3), st = a.stride(3);
  void* base = a.raw();
  const detail::RowKernels& k = detail::row_kernels();
  detail::for_each_row(a, nullptr, [&](int64_t, int64_t ro, int64_t) {
    if (st == 1 && t == DType::F32) {
      k.scale_f32(static_cast<float*>(base) + ro, static_cast<float*>(base) + ro, n, f);
    } else if (st == 1) {
      k.half(t).scale(static_cast<uint16_t*>(base) + ro, static_cast<uint16_t*>(base) + ro, n, f);
    } else {
      for (int64_t j = 0; j < n; ++j) store_float(base, t, ro + j * st, load_float(base, t, ro + j * st) * f);
    }
  });
  return a;
}

Tensor mul(const Tensor& a, double s) {
  ATTNPROF_OP_ZONE(z, "mul");
  detail::check_float(a, "mul");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.set_cost(mul_cost(a.shape(), a.dtype()));
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  const float f = float(s);
  const DType t = a.dtype();
  const int64_t n = a.shape(3), st = a.stride(3);
  const void* src = a.raw();
  void* dst = out.raw();
  // The output is contiguous: row r of the output is r * n.
  const detail::RowKernels& k = detail::row_kernels();
  detail::for_each_row(a, nullptr, [&](int64_t r, int64_t ro, int64_t) {
    if (t == DType::F32 && st == 1) {
      k.scale_f32(static_cast<const float*>(src) + ro, static_cast<float*>(dst) + r * n, n, f);
    } else if (st == 1) {
      k.half(t).scale(static_cast<const uint16_t*>(src) + ro, static_cast<uint16_t*>(dst) + r * n, n, f);
    } else {
      for (int64_t j = 0; j < n; ++j) store_float(dst, t, r * n + j, load_float(src, t, ro + j * st) * f);
    }
  });
  return out;
}

OpCost masked_fill_cost(const Shape4& a, DType dtype, const Shape4& mask) {
  // One compare/select per element; reads the tensor and the (un-broadcast) mask once, writes the tensor.
  const double n = double(numel(a)), es = double(dtype_size(dtype));
  return OpCost{n, n * es + double(numel(mask)), n * es};
}

Tensor& masked_fill_(Tensor& a, const Tensor& mask, float value) {
  ATTNPROF_OP_ZONE(z, "masked_fill_");
  detail::check_float(a, "masked_fill_");
  detail::check_writable(a, "masked_fill_");
  ATTNPROF_CHECK(mask.defined() && mask.dtype() == DType::Bool, "masked_fill_ needs a bool mask, got {}",
                 mask.defined() ? dtype_name(mask.dtype()) : "undefined");
  check_broadcast(mask.shape(), a.shape(), "mask");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.add_shape(mask.shape(), dtype_name(mask.dtype()).data());
  z.set_cost(masked_fill_cost(a.shape(), a.dtype(), mask.shape()));
  const DType t = a.dtype();
  const int64_t n = a.shape(3), st = a.stride(3);
  const Tensor me = mask.expand(a.shape());
  const int64_t mst = me.stride(3);
  void* base = a.raw();
  const uint8_t* mb = mask.data<uint8_t>();
  const detail::RowKernels& k = detail::row_kernels();
  detail::for_each_row(a, &mask, [&](int64_t, int64_t ro, int64_t mo) {
    if (st == 1 && (mst == 1 || n == 1)) {
      if (t == DType::F32)
        k.fill_f32(static_cast<float*>(base) + ro, mb + mo, n, value);
      else
        k.half(t).fill(static_cast<uint16_t*>(base) + ro, mb + mo, n, value);
      return;
    }
    for (int64_t j = 0; j < n; ++j)
      if (mb[mo + j * mst]) store_float(base, t, ro + j * st, value);
  });
  return a;
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, float value) {
  // As in ATen: clone (the copy the blog sees as a Memcpy on the GPU), then fill in place.
  ATTNPROF_OP_ZONE(z, "masked_fill");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  if (mask.defined()) z.add_shape(mask.shape(), dtype_name(mask.dtype()).data());
  // No cost of its own: its children (copy_, masked_fill_) carry it; analysis sums children into totals.
  Tensor out = clone(a);
  masked_fill_(out, mask, value);
  return out;
}

OpCost add_cost(const Shape4& a, DType dtype, const Shape4& m, DType mdtype) {
  const double n = double(numel(a)), es = double(dtype_size(dtype));
  return OpCost{n, n * es + double(numel(m)) * double(dtype_size(mdtype)), n * es};
}

Tensor& add_(Tensor& a, const Tensor& m) {
  ATTNPROF_OP_ZONE(z, "add_");
  detail::check_float(a, "add_");
  detail::check_writable(a, "add_");
  detail::check_float(m, "add_ (mask)");
  check_broadcast(m.shape(), a.shape(), "additive mask");
  ATTNPROF_CHECK(!(is_half(a.dtype()) && is_half(m.dtype()) && a.dtype() != m.dtype()),
                 "add_: a {} additive mask cannot be added to {} scores: use an fp32 mask or one of the scores' dtype",
                 dtype_name(m.dtype()), dtype_name(a.dtype()));
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.add_shape(m.shape(), dtype_name(m.dtype()).data());
  z.set_cost(add_cost(a.shape(), a.dtype(), m.shape(), m.dtype()));
  const DType t = a.dtype(), mt = m.dtype();
  const int64_t n = a.shape(3), st = a.stride(3);
  const Tensor me = m.expand(a.shape());
  const int64_t mst = me.stride(3);
  void* base = a.raw();
  const void* mb = m.raw();
  const detail::RowKernels& k = detail::row_kernels();
  detail::for_each_row(a, &m, [&](int64_t, int64_t ro, int64_t mo) {
    if (st == 1 && (mst == 1 || n == 1)) {
      float* af = static_cast<float*>(base) + ro;
      uint16_t* ah = static_cast<uint16_t*>(base) + ro;
      const float* mf = static_cast<const float*>(mb) + mo;
      const uint16_t* mh = static_cast<const uint16_t*>(mb) + mo;
      if (t == DType::F32)
        mt == DType::F32 ? k.add_f32_f32(af, mf, n) : k.half(mt).add_f32(af, mh, n);
      else
        mt == DType::F32 ? k.half(t).add_to_half(ah, mf, n) : k.half(t).add_half(ah, mh, n);
      return;
    }
    for (int64_t j = 0; j < n; ++j)
      store_float(base, t, ro + j * st, load_float(base, t, ro + j * st) + load_float(mb, mt, mo + j * mst));
  });
  return a;
}

Tensor add(const Tensor& a, const Tensor& m) {
  ATTNPROF_OP_ZONE(z, "add");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.add_shape(m.shape(), dtype_name(m.dtype()).data());
  // Cost recorded by the children (copy_, add_).
  Tensor out = clone(a);
  add_(out, m);
  return out;
}

}  // namespace attnprof::ops
