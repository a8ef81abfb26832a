// Internal: iterate a 4-D tensor as rows of its last dim, with an optional broadcast companion tensor; the
// row ops' shared dtype check and element access.
#pragma once

#include <omp.h>

#include "attnprof/error.h"
#include "attnprof/profiler.h"
#include "attnprof/tensor.h"

namespace attnprof::ops::detail {

// `op`'s tensor argument must be defined and fp32, bf16 or fp16 (the dtypes the row kernels take).
inline void check_float(const Tensor& a, const char* op) {
  ATTNPROF_CHECK(a.defined(), "{} on an undefined tensor", op);
  ATTNPROF_CHECK(a.dtype() == DType::F32 || is_half(a.dtype()), "{} needs fp32, bf16 or fp16, got {}", op,
                 dtype_name(a.dtype()));
}

// An in-place op's target must not be a broadcast view (a dim of size > 1 with stride 0, as expand() makes): its
// elements alias one another, so the op would write each more than once, from several threads at once (as in
// PyTorch, which refuses in-place writes to overlapping memory).
inline void check_writable(const Tensor& a, const char* op) {
  for (int d = 0; d < 4; ++d)
    ATTNPROF_CHECK(a.shape(d) <= 1 || a.stride(d) != 0,
                   "{} cannot write in place to a broadcast view (dim {} of shape {} has stride 0, its elements "
                   "share memory): write to a contiguous copy (clone) instead",
                   op, d, shape_str(a.shape()));
}

// Calls f(r, row_offset_in_a, row_offset_in_m) for every row r = (b·H + h)·N + i of a's last dim (its index in
// a contiguous tensor of a's shape, where an out-of-place op writes it), in parallel over rows once the tensor
// holds more than 32768 elements (below that a team costs more than it saves). f may call omp_get_thread_num().
template <class F>
void for_each_row(const Tensor& a, const Tensor* m, F&& f) {
  const int64_t B = a.shape(0), H = a.shape(1), N = a.shape(2);
  const int64_t rows = B * H * N;
  Tensor me;
  if (m) me = m->expand(a.shape());
  ATTNPROF_PARALLEL_REGION(region);
#pragma omp parallel if (rows * a.shape(3) > 32768)
  {
    ATTNPROF_WORK_SHARE(share, region);
#pragma omp for schedule(static) nowait
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t b = r / (H * N), h = (r / N) % H, i = r % N;
      const int64_t ao = b * a.stride(0) + h * a.stride(1) + i * a.stride(2);
      const int64_t mo = m ? b * me.stride(0) + h * me.stride(1) + i * me.stride(2) : 0;
      f(r, ao, mo);
    }
  }
}

}  // namespace attnprof::ops::detail
