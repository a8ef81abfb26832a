// matmul: batched GEMM over [B, H] through real GEMM libraries (never hand-written for the naive path).
//   fp32 -> OpenBLAS cblas_sgemm, one call per (b, h); batches spread over OpenMP threads.
//   bf16 -> oneDNN matmul with bf16 inputs, fp32 accumulation and a bf16 result, like PyTorch's CPU path.
//           oneDNN 2.6 implements bf16 matmul only from AVX-512 (avx512_core) up; on other CPUs (AVX2-only
//           ones) each (b, h) slice is widened to fp32, multiplied by cblas_sgemm and rounded to bf16 once:
//           the same arithmetic (bf16 inputs, fp32 accumulation, one rounding), on the fp32 FMA units.
//           Dispatch below AVX-512 (an IsaOverride in the tests) takes this path too, so the suite on an
//           AVX-512 machine runs both paths.
//   fp16 -> always the widened path (fp16 inputs, fp32 accumulation, one rounding to fp16): oneDNN's f16
//           matmul needs AVX512-FP16, which these CPUs lack.
// OpenBLAS is loaded on first use, not linked (ops/blas_loader.cpp); prepare_matmul loads it ahead of a run.
#include <omp.h>

#include <algorithm>

#include <dnnl.hpp>

#include "attnprof/allocator.h"
#include "attnprof/error.h"
#include "attnprof/isa.h"
#include "attnprof/ops.h"
#include "attnprof/profiler.h"
#include "kernels.h"
#include "ops/blas_loader.h"

namespace attnprof::ops {
namespace {

void check_matmul(const Tensor& a, const Tensor& b) {
  ATTNPROF_CHECK(a.defined() && b.defined(), "matmul on an undefined tensor");
  ATTNPROF_CHECK(a.dtype() == b.dtype(), "matmul dtypes differ: {} vs {}", dtype_name(a.dtype()),
                 dtype_name(b.dtype()));
  ATTNPROF_CHECK(a.dtype() != DType::Bool, "matmul does not take bool tensors");
  ATTNPROF_CHECK(a.shape(0) == b.shape(0), "matmul batch sizes differ: {} vs {}", shape_str(a.shape()),
                 shape_str(b.shape()));
  ATTNPROF_CHECK(a.shape(1) % b.shape(1) == 0, "matmul heads: {} is not a multiple of {} ({} x {})", a.shape(1),
                 b.shape(1), shape_str(a.shape()), shape_str(b.shape()));
  ATTNPROF_CHECK(a.shape(3) == b.shape(2), "matmul inner dims differ: {} x {}", shape_str(a.shape()),
                 shape_str(b.shape()));
}

// Row-major leading dimension and transpose flag of a 2-D slice, or false when neither dim is unit-stride.
// A stride past sgemm's 32-bit leading dimension is neither: the slice is copied contiguous (ld = its width).
bool blas_layout(const Tensor& t, CBLAS_TRANSPOSE& trans, int& ld) {
  if (std::max(t.stride(2), t.stride(3)) > kSgemmMaxDim) return false;
  if (t.stride(3) == 1 && t.stride(2) >= t.shape(3)) {
    trans = CblasNoTrans;
    ld = int(std::max<int64_t>(t.stride(2), 1));
    return true;
  }
  if (t.stride(2) == 1 && t.stride(3) >= t.shape(2)) {
    trans = CblasTrans;
    ld = int(std::max<int64_t>(t.stride(3), 1));
    return true;
  }
  return false;
}

// Batches spread over OpenMP threads, one single-threaded sgemm each (OpenBLAS's OpenMP build runs serially
// inside a parallel region), when there are at least as many as threads; else BLAS threads inside each call.
bool batches_in_parallel(int64_t batches) { return batches >= omp_get_max_threads() && batches > 1; }

void sgemm_batched(const Tensor& a0, const Tensor& b0, Tensor& c) {
  Tensor a = a0, b = b0;
  CBLAS_TRANSPOSE ta, tb;
  int lda, ldb;
  if (!blas_layout(a, ta, lda)) {
    a = a.contiguous();
    blas_layout(a, ta, lda);
  }
  if (!blas_layout(b, tb, ldb)) {
    b = b.contiguous();
    blas_layout(b, tb, ldb);
  }
  const int64_t B = a.shape(0), Ha = a.shape(1), group = Ha / b.shape(1);
  const int M = int(a.shape(2)), K = int(a.shape(3)), N = int(b.shape(3));
  const int64_t batches = B * Ha;
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = c.data<float>();
  const auto sgemm = detail::blas_api().cblas_sgemm;  // loaded here, before the parallel region
  auto one = [&](int64_t bh) {
    const int64_t bi = bh / Ha, hi = bh % Ha;
    sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, pa + bi * a.stride(0) + hi * a.stride(1), lda,
          pb + bi * b.stride(0) + (hi / group) * b.stride(1), ldb, 0.0f, pc + bi * c.stride(0) + hi * c.stride(1), N);
  };
  if (batches_in_parallel(batches)) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < batches; ++bh) one(bh);
  } else {
    for (int64_t bh = 0; bh < batches; ++bh) one(bh);  // BLAS threads inside each call
  }
}

dnnl::engine& dnnl_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::memory::desc desc4(const Shape4& dims, const Shape4& strides) {
  return dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()), dnnl::memory::data_type::bf16,
                            dnnl::memory::dims(strides.begin(), strides.end()));
}

void bf16_matmul(const Tensor& a, const Tensor& b, Tensor& c) {
  // One oneDNN batched matmul per position in the head group: heads h = hk*group + j share b's head hk.
  const int64_t B = a.shape(0), Hb = b.shape(1), group = a.shape(1) / Hb;
  const int64_t M = a.shape(2), K = a.shape(3), N = b.shape(3);
  Shape4 ad{B, Hb, M, K}, as{a.stride(0), a.stride(1) * group, a.stride(2), a.stride(3)};
  Shape4 bd{B, Hb, K, N}, bs{b.stride(0), b.stride(1), b.stride(2), b.stride(3)};
  Shape4 cd{B, Hb, M, N}, cs{c.stride(0), c.stride(1) * group, c.stride(2), c.stride(3)};
  auto amd = desc4(ad, as), bmd = desc4(bd, bs), cmd = desc4(cd, cs);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(amd, bmd, cmd), dnnl_engine());
  dnnl::matmul prim(pd);
  dnnl::stream stream(dnnl_engine());
  for (int64_t j = 0; j < group; ++j) {
    dnnl::memory am(amd, dnnl_engine(), a.data<uint16_t>() + j * a.stride(1));
    dnnl::memory bm(bmd, dnnl_engine(), b.data<uint16_t>());
    dnnl::memory cm(cmd, dnnl_engine(), c.data<uint16_t>() + j * c.stride(1));
    prim.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  }
  stream.wait();
}

// Rows [r0, r0 + R) of one operand slice (dims 2 and 3 of `t` at batch bi, head hi) widened to fp32 in `buf`
// (R·C floats), laid out for sgemm. A unit stride along dim 3 keeps rows; along dim 2 (a transposed view such
// as kᵀ) keeps columns, passed as CblasTrans; anything else is gathered element by element.
void widen_rows(const Tensor& t, int64_t bi, int64_t hi, int64_t r0, int64_t R, float* buf, CBLAS_TRANSPOSE& trans,
                int& ld) {
  const int64_t C = t.shape(3);
  const uint16_t* base = t.data<uint16_t>() + bi * t.stride(0) + hi * t.stride(1) + r0 * t.stride(2);
  const detail::HalfRowKernels& k = detail::row_kernels().half(t.dtype());
  if (t.stride(3) == 1 || C == 1) {
    for (int64_t r = 0; r < R; ++r) k.to_f32(base + r * t.stride(2), buf + r * C, C);
    trans = CblasNoTrans;
    ld = int(std::max<int64_t>(C, 1));
  } else if (t.stride(2) == 1) {
    for (int64_t c = 0; c < C; ++c) k.to_f32(base + c * t.stride(3), buf + c * R, R);
    trans = CblasTrans;
    ld = int(std::max<int64_t>(R, 1));
  } else {
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) buf[r * C + c] = half_to_float(t.dtype(), base[r * t.stride(2) + c * t.stride(3)]);
    trans = CblasNoTrans;
    ld = int(std::max<int64_t>(C, 1));
  }
}

// Each thread widens one (b, h) slice of b whole, then a and c in panels of rows, so its scratch stays near
// kPanelFloats beside b's slice (the attention matmuls' A side, the N×N probabilities, is never widened whole).
constexpr int64_t kPanelFloats = int64_t(1) << 20;  // 4 MiB of fp32 per thread for a's and c's panels

// The widened path's scratch layout for [B,Ha,M,K] x [..,K,N]: per thread, b's whole slice, then a's and c's
// panels of `panel` rows. One plan serves the kernel and matmul_scratch_bytes, so the budget pre-checks of
// the naive variants count exactly what the kernel allocates.
struct WidenedPlan {
  int64_t panel, b_sz, a_sz, per_thread, threads;
  double bytes() const { return 4.0 * double(threads) * double(per_thread); }
};

WidenedPlan widened_plan(int64_t batches, int64_t M, int64_t K, int64_t N) {
  // Rows per panel: as many as fit kPanelFloats, then evened out (1024 rows in two panels of 512, not 963 + 61).
  const int64_t fit = std::clamp<int64_t>(kPanelFloats / std::max<int64_t>(K + N, 1), 1, std::max<int64_t>(M, 1));
  const int64_t panels = (std::max<int64_t>(M, 1) + fit - 1) / fit;
  WidenedPlan w;
  w.panel = (std::max<int64_t>(M, 1) + panels - 1) / panels;
  w.b_sz = K * N;
  w.a_sz = w.panel * K;
  w.per_thread = w.b_sz + w.a_sz + w.panel * N;
  w.threads = batches_in_parallel(batches) ? omp_get_max_threads() : 1;
  return w;
}

void half_matmul_widened(const Tensor& a, const Tensor& b, Tensor& c) {
  const int64_t B = a.shape(0), Ha = a.shape(1), group = Ha / b.shape(1);
  const int64_t M = a.shape(2), K = a.shape(3), N = b.shape(3);
  const int64_t batches = B * Ha;
  const bool parallel = batches_in_parallel(batches);
  const detail::HalfRowKernels& k = detail::row_kernels().half(c.dtype());
  const WidenedPlan w = widened_plan(batches, M, K, N);
  const int64_t panel = w.panel, b_sz = w.b_sz, a_sz = w.a_sz, per_thread = w.per_thread;
  // A tensor, so the tracked allocator counts the scratch in the op's memory and the forward's peak, as the
  // flash kernel's scratch is; checked against the budget first like every large buffer.
  check_memory_budget(w.bytes(), fmt::format("{} matmul's fp32 scratch (widened for sgemm)", dtype_name(c.dtype())));
  Tensor scratch = Tensor::empty({1, 1, w.threads, per_thread}, DType::F32);
  const auto sgemm = detail::blas_api().cblas_sgemm;  // loaded here, before the parallel region
  auto one = [&](int64_t bh, float* sb) {
    const int64_t bi = bh / Ha, hi = bh % Ha;
    float* const sa = sb + b_sz;
    float* const sc = sa + a_sz;
    CBLAS_TRANSPOSE ta, tb;
    int lda, ldb;
    widen_rows(b, bi, hi / group, 0, K, sb, tb, ldb);
    uint16_t* const pc = c.data<uint16_t>() + bi * c.stride(0) + hi * c.stride(1);
    for (int64_t m0 = 0; m0 < M; m0 += panel) {
      const int64_t rows = std::min(panel, M - m0);
      widen_rows(a, bi, hi, m0, rows, sa, ta, lda);
      sgemm(CblasRowMajor, ta, tb, int(rows), int(N), int(K), 1.0f, sa, lda, sb, ldb, 0.0f, sc, int(N));
      for (int64_t r = 0; r < rows; ++r) k.from_f32(sc + r * N, pc + (m0 + r) * c.stride(2), N);
    }
  };
  float* const base = scratch.data<float>();
  if (parallel) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < batches; ++bh) one(bh, base + omp_get_thread_num() * per_thread);
  } else {
    for (int64_t bh = 0; bh < batches; ++bh) one(bh, base);  // BLAS threads inside each call
  }
}

// Whether this oneDNN has a bf16 matmul for this CPU: asked once, with a tiny problem.
bool dnnl_bf16_matmul_available() {
  static const bool ok = [] {
    try {
      const auto md = desc4({1, 1, 2, 2}, {4, 4, 2, 1});
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(md, md, md), dnnl_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return ok;
}

}  // namespace

bool bf16_matmul_uses_onednn() { return best_isa() == Isa::AVX512 && dnnl_bf16_matmul_available(); }

bool matmul_uses_sgemm(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || (dtype == DType::BF16 && !bf16_matmul_uses_onednn());
}

double matmul_scratch_bytes(const Shape4& a, const Shape4& b, DType dtype) {
  const bool widened = dtype != DType::F32 && matmul_uses_sgemm(dtype);
  return widened ? widened_plan(a[0] * a[1], a[2], a[3], b[3]).bytes() : 0.0;
}

void prepare_matmul(DType dtype) {
  if (matmul_uses_sgemm(dtype)) (void)detail::blas_api();
}

std::string_view bf16_matmul_key() { return bf16_matmul_uses_onednn() ? "onednn" : "fp32-widened-sgemm"; }

OpCost gemm_cost(const Shape4& a, const Shape4& b, DType dtype) {
  const double es = double(dtype_size(dtype));
  const double batches = double(a[0] * a[1]);
  OpCost c;
  c.flops = 2.0 * batches * double(a[2]) * double(b[3]) * double(a[3]);
  c.bytes_read = es * double(numel(a) + numel(b));
  c.bytes_written = es * batches * double(a[2] * b[3]);
  c.library_flops = c.flops;  // OpenBLAS, oneDNN or cuBLAS: no GEMM here is our own kernel
  if (dtype == DType::BF16) c.bf16_flops = c.library_bf16_flops = c.flops;  // vdpbf16ps where the CPU has it
  return c;
}

OpCost matmul_cost(const Shape4& a, const Shape4& b, DType dtype) {
  OpCost c = gemm_cost(a, b, dtype);
  // The widened path multiplies in fp32 (sgemm), as SDPA math's upcast matmuls do: library fp32 FLOPs, whatever
  // bf16 units the CPU has.
  if (dtype == DType::BF16 && !bf16_matmul_uses_onednn()) c.bf16_flops = c.library_bf16_flops = 0.0;
  return c;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  ATTNPROF_OP_ZONE(z, "matmul");
  check_matmul(a, b);
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.add_shape(b.shape(), dtype_name(b.dtype()).data());
  z.set_cost(matmul_cost(a.shape(), b.shape(), a.dtype()));
  if (matmul_uses_sgemm(a.dtype()))
    ATTNPROF_CHECK(std::max({a.shape(2), a.shape(3), b.shape(3)}) <= kSgemmMaxDim,
                   "matmul {} x {} in {}: OpenBLAS's sgemm takes sizes up to {} (32-bit ints)", shape_str(a.shape()),
                   shape_str(b.shape()), dtype_name(a.dtype()), kSgemmMaxDim);
  Tensor c = Tensor::empty({a.shape(0), a.shape(1), a.shape(2), b.shape(3)}, a.dtype());
  if (a.dtype() == DType::F32) {
    sgemm_batched(a, b, c);
  } else if (a.dtype() == DType::F16 || !bf16_matmul_uses_onednn()) {
    half_matmul_widened(a, b, c);  // fp16 always: oneDNN's f16 matmul needs AVX512-FP16
  } else {
    try {
      bf16_matmul(a, b, c);
    } catch (const dnnl::error& e) {
      ATTNPROF_FAIL("oneDNN bf16 matmul failed for {} x {}: {}", shape_str(a.shape()), shape_str(b.shape()),
                    e.what());
    }
  }
  return c;
}

Tensor transpose(const Tensor& a) {
  ATTNPROF_OP_ZONE(z, "transpose");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  return a.transpose();
}

void set_num_threads(int n) {
  ATTNPROF_CHECK(n >= 1, "thread count must be >= 1, got {}", n);
  detail::reserve_blas_threads(n);  // first: OpenBLAS follows OpenMP's count on its next call by itself
  omp_set_dynamic(0);
  // OMP_MAX_ACTIVE_LEVELS=0 makes every team one thread while omp_get_max_threads() still says n: oneDNN splits
  // its work n ways and leaves the shares of the threads that never came unwritten (wrong results), and every
  // table would report n threads that were not there. One active level is what the count means.
  if (omp_get_max_active_levels() < 1) omp_set_max_active_levels(1);
  omp_set_num_threads(n);
  detail::set_blas_threads(n);
}

int num_threads() { return omp_get_max_threads(); }
int available_cpus() { return std::max(1, omp_get_num_procs()); }
int thread_limit() { return std::max(1, omp_get_thread_limit()); }

}  // namespace attnprof::ops
