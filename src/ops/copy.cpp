// Copies and masks: clone (copy_), dtype conversion (to), triu_mask, logical_not.
#include "attnprof/error.h"
#include "attnprof/ops.h"
#include "attnprof/profiler.h"

namespace attnprof::ops {

OpCost copy_cost(const Shape4& a, DType from, DType to) {
  const double n = double(a[0] * a[1] * a[2] * a[3]);
  return OpCost{0.0, n * double(dtype_size(from)), n * double(dtype_size(to))};
}

Tensor clone(const Tensor& a) {
  ATTNPROF_OP_ZONE(z, "copy_");
  ATTNPROF_CHECK(a.defined(), "clone of an undefined tensor");
  z.add_shape(a.shape());
  z.set_cost(copy_cost(a.shape(), a.dtype(), a.dtype()));
  return a.clone();
}

Tensor to(const Tensor& a, DType dtype) {
  ATTNPROF_OP_ZONE(z, "to");
  ATTNPROF_CHECK(a.defined(), "to() of an undefined tensor");
  z.add_shape(a.shape());
  z.set_cost(copy_cost(a.shape(), a.dtype(), dtype));
  return a.to(dtype);
}

Tensor triu_mask(int64_t nq, int64_t nk, int64_t diagonal) {
  ATTNPROF_OP_ZONE(z, "triu");
  ATTNPROF_CHECK(nq > 0 && nk > 0, "triu mask needs positive sizes, got {}x{}", nq, nk);
  z.add_shape({1, 1, nq, nk});
  z.set_cost(OpCost{0.0, 0.0, double(nq * nk)});
  Tensor m = Tensor::empty({1, 1, nq, nk}, DType::Bool);
  uint8_t* p = m.data<uint8_t>();
#pragma omp parallel for schedule(static) if (nq * nk > 65536)
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t j = 0; j < nk; ++j) p[i * nk + j] = (j - i) >= diagonal;
  return m;
}

Tensor logical_not(const Tensor& mask) {
  ATTNPROF_OP_ZONE(z, "logical_not");
  ATTNPROF_CHECK(mask.defined() && mask.dtype() == DType::Bool, "logical_not needs a bool tensor");
  z.add_shape(mask.shape());
  z.set_cost(copy_cost(mask.shape(), DType::Bool, DType::Bool));
  Tensor out = Tensor::empty(mask.shape(), DType::Bool);
  uint8_t* o = out.data<uint8_t>();
  int64_t k = 0;
  for (int64_t b = 0; b < mask.shape(0); ++b)
    for (int64_t h = 0; h < mask.shape(1); ++h)
      for (int64_t i = 0; i < mask.shape(2); ++i)
        for (int64_t j = 0; j < mask.shape(3); ++j) o[k++] = !mask.data<uint8_t>()[mask.offset_of(b, h, i, j)];
  return out;
}

}  // namespace attnprof::ops
