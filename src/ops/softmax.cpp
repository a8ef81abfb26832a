// softmax over the last dim, out of place and in place. Computed in fp32 for bf16 and fp16 inputs.
// A row whose entries are all -inf yields zeros (PyTorch's eager softmax would give NaN; its flash
// kernels give 0, and attnprof uses one convention for every variant). A NaN anywhere in a row makes the
// whole row NaN, as in PyTorch, so that validation sees it.
#include <omp.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attnprof/error.h"
#include "attnprof/ops.h"
#include "attnprof/profiler.h"
#include "ops/kernels.h"
#include "ops/rows.h"

namespace attnprof::ops {
namespace {

// src and dst may alias. n elements, strides in elements.
void softmax_row(const void* src, int64_t so, int64_t sst, void* dst, int64_t dof, int64_t dst_st, int64_t n,
                 DType t, float* tmp) {
  float mx = -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (int64_t j = 0; j < n; ++j) {
    tmp[j] = load_float(src, t, so + j * sst);
    mx = std::max(mx, tmp[j]);
    nan = nan || std::isnan(tmp[j]);
  }
  if (nan || mx == -std::numeric_limits<float>::infinity()) {  // a NaN makes the row NaN, as in PyTorch
    const float fill = nan ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
    for (int64_t j = 0; j < n; ++j) store_float(dst, t, dof + j * dst_st, fill);
    return;
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    tmp[j] = std::exp(tmp[j] - mx);
    sum += tmp[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) store_float(dst, t, dof + j * dst_st, tmp[j] * inv);
}

// Every row of `a` (any strides) into `dst`: in place (dst is a's data, each row written where it was read) or
// into a fresh contiguous tensor (row r at r·n). The vector kernels take contiguous rows; strided ones the loop.
void softmax_rows(const Tensor& a, void* dst, bool in_place) {
  const int64_t n = a.shape(3), st = a.stride(3);
  const DType t = a.dtype();
  const void* src = a.raw();
  const detail::RowKernels& k = detail::row_kernels();
  // A row of fp32 per thread for the strided loop and the half-precision kernels (the contiguous fp32 kernel
  // needs none), allocated here: an allocation that fails inside the parallel region could not be reported.
  const bool scratch = st != 1 || t != DType::F32;
  std::vector<float> row_scratch(scratch ? size_t(omp_get_max_threads()) * size_t(n) : 0);
  detail::for_each_row(a, nullptr, [&](int64_t r, int64_t ro, int64_t) {
    float* const tmp = scratch ? row_scratch.data() + size_t(omp_get_thread_num()) * size_t(n) : nullptr;
    const int64_t wo = in_place ? ro : r * n;  // written with a's stride in place, else contiguously
    if (st != 1)
      softmax_row(src, ro, st, dst, wo, in_place ? st : 1, n, t, tmp);
    else if (t == DType::F32)
      k.softmax_f32(static_cast<const float*>(src) + ro, static_cast<float*>(dst) + wo, n);
    else
      k.half(t).softmax(static_cast<const uint16_t*>(src) + ro, static_cast<uint16_t*>(dst) + wo, n, tmp);
  });
}

}  // namespace

OpCost softmax_cost(const Shape4& a, DType dtype) {
  // Per element: max-compare, subtract, exp, add to the sum, multiply by 1/sum = 5 FLOPs (exp counted as 1).
  const double n = double(numel(a)), es = double(dtype_size(dtype));
  return OpCost{5.0 * n, n * es, n * es};
}

Tensor& softmax_(Tensor& a) {
  ATTNPROF_OP_ZONE(z, "softmax_");
  detail::check_float(a, "softmax_");
  detail::check_writable(a, "softmax_");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.set_cost(softmax_cost(a.shape(), a.dtype()));
  softmax_rows(a, a.raw(), /*in_place=*/true);
  return a;
}

Tensor softmax(const Tensor& a) {
  ATTNPROF_OP_ZONE(z, "softmax");
  detail::check_float(a, "softmax");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.set_cost(softmax_cost(a.shape(), a.dtype()));
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  softmax_rows(a, out.raw(), /*in_place=*/false);
  return out;
}

}  // namespace attnprof::ops
