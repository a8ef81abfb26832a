// Primitive device ops: cuBLAS strided-batched GEMMs (bf16 or fp16 in, fp32 accumulate on tensor cores) and the
// small kernels of kernels.cu, each inside a zone that carries its CPU twin's cost model.
#include "cuda/device_ops.h"

#include <cmath>

#include "attnprof/ops.h"
#include "attnprof/profiler.h"
#include "cuda/backend.h"
#include "cuda/kernels.h"
#include "cuda/unfused_layout.h"

namespace attnprof::cuda::dops {
namespace {

cudaDataType_t cuda_type(DType t) {
  ATTNPROF_CHECK(t == DType::BF16 || t == DType::F16 || t == DType::F32,
                 "device matmul needs fp32, bf16 or fp16, got {}", dtype_name(t));
  return t == DType::BF16 ? CUDA_R_16BF : t == DType::F16 ? CUDA_R_16F : CUDA_R_32F;
}


// One strided-batched GEMM (layout::qk_gemm / pv_gemm say how the row-major matmul maps onto cuBLAS's
// column-major view); bf16 or fp16 in, fp32 accumulate.
void gemm(const layout::StridedGemm& g, const void* A, const void* B, void* C, DType dt) {
  ATTNPROF_CHECK(layout::fits_cublas_int(g), "device matmul: m={} n={} k={} batch={} exceed cuBLAS's int range",
                 g.m, g.n, g.k, g.batch);
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t t = cuda_type(dt);
  const auto op = [](bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; };
  // fp32 stays true fp32 (torch's default, allow_tf32=False for matmul); bf16 and fp16 accumulate in fp32.
  ATTNPROF_CUBLAS_CHECK(detail::cublas_api().cublasGemmStridedBatchedEx(
      detail::cublas(), op(g.trans_a), op(g.trans_b), int(g.m), int(g.n), int(g.k), &alpha, A, t, int(g.lda),
      g.stride_a, B, t, int(g.ldb), g.stride_b, &beta, C, t, int(g.ldc), g.stride_c, int(g.batch),
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

DeviceTensor matmul_qk(const DeviceTensor& q, const DeviceTensor& k) {
  ATTNPROF_ZONE_AS(z, "matmul", "cpu_op");
  NvtxRange nv("matmul");
  const int64_t B = q.shape(0), Hq = q.shape(1), Nq = q.shape(2), D = q.shape(3);
  const int64_t Hkv = k.shape(1), Nk = k.shape(2);
  const Shape4 kt{B, Hkv, D, Nk};
  z.add_shape(q.shape(), dtype_name(q.dtype()).data());
  z.add_shape(kt, dtype_name(k.dtype()).data());
  z.set_cost(ops::gemm_cost(q.shape(), kt, detail::tensor_core_dtype(q.dtype())));
  DeviceTensor s = DeviceTensor::empty({B, Hq, Nq, Nk}, q.dtype());
  gemm(layout::qk_gemm(B, Hq, Hkv, Nq, Nk, D), k.raw(), q.raw(), s.raw(), q.dtype());
  return s;
}

DeviceTensor matmul_pv(const DeviceTensor& p, const DeviceTensor& v) {
  ATTNPROF_ZONE_AS(z, "matmul", "cpu_op");
  NvtxRange nv("matmul");
  const int64_t B = p.shape(0), Hq = p.shape(1), Nq = p.shape(2), Nk = p.shape(3);
  const int64_t Hkv = v.shape(1), D = v.shape(3);
  z.add_shape(p.shape(), dtype_name(p.dtype()).data());
  z.add_shape(v.shape(), dtype_name(v.dtype()).data());
  z.set_cost(ops::gemm_cost(p.shape(), v.shape(), detail::tensor_core_dtype(p.dtype())));
  DeviceTensor o = DeviceTensor::empty({B, Hq, Nq, D}, p.dtype());
  gemm(layout::pv_gemm(B, Hq, Hkv, Nq, Nk, D), v.raw(), p.raw(), o.raw(), p.dtype());
  return o;
}

DeviceTensor mul(const DeviceTensor& a, double s) {
  ATTNPROF_ZONE_AS(z, "mul", "cpu_op");
  NvtxRange nv("mul");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.set_cost(ops::mul_cost(a.shape(), a.dtype()));
  DeviceTensor out = DeviceTensor::empty(a.shape(), a.dtype());
  kernels::scale(a.raw(), out.raw(), a.numel(), float(s), a.dtype(), detail::stream());
  detail::check_launch("scale");
  return out;
}

void mul_(DeviceTensor& a, double s) {
  ATTNPROF_ZONE_AS(z, "mul_", "cpu_op");
  NvtxRange nv("mul_");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.set_cost(ops::mul_cost(a.shape(), a.dtype()));
  kernels::scale(a.raw(), a.raw(), a.numel(), float(s), a.dtype(), detail::stream());
  detail::check_launch("scale");
}

void masked_fill_(DeviceTensor& a, const DeviceTensor& mask, float value) {
  ATTNPROF_ZONE_AS(z, "masked_fill_", "cpu_op");
  NvtxRange nv("masked_fill_");
  ATTNPROF_CHECK(mask.dtype() == DType::Bool, "masked_fill needs a Bool mask, got {}", dtype_name(mask.dtype()));
  ops::check_broadcast(mask.shape(), a.shape(), "masked_fill mask");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.add_shape(mask.shape(), dtype_name(mask.dtype()).data());
  z.set_cost(ops::masked_fill_cost(a.shape(), a.dtype(), mask.shape()));
  kernels::masked_fill(a.raw(), mask.data<uint8_t>(), a.shape(0), a.shape(1), a.shape(2), a.shape(3), mask.shape(0),
                       mask.shape(1), mask.shape(2), mask.shape(3), value, a.dtype(), detail::stream());
  detail::check_launch("masked_fill");
}

void add_(DeviceTensor& a, const DeviceTensor& m) {
  ATTNPROF_ZONE_AS(z, "add_", "cpu_op");
  NvtxRange nv("add_");
  ATTNPROF_CHECK(m.dtype() == DType::F32, "device add_ takes an fp32 additive mask, got {}", dtype_name(m.dtype()));
  ops::check_broadcast(m.shape(), a.shape(), "additive mask");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.add_shape(m.shape(), dtype_name(m.dtype()).data());
  z.set_cost(ops::add_cost(a.shape(), a.dtype(), m.shape(), m.dtype()));
  kernels::add_mask(a.raw(), m.data<float>(), a.shape(0), a.shape(1), a.shape(2), a.shape(3), m.shape(0), m.shape(1),
                    m.shape(2), m.shape(3), a.dtype(), detail::stream());
  detail::check_launch("add_mask");
}

DeviceTensor where(const DeviceTensor& cond, float if_true, float if_false, DType dtype) {
  ATTNPROF_ZONE_AS(z, "where", "cpu_op");
  NvtxRange nv("where");
  ATTNPROF_CHECK(cond.dtype() == DType::Bool, "where needs a Bool condition, got {}", dtype_name(cond.dtype()));
  ATTNPROF_CHECK(dtype == DType::F32 || is_half(dtype), "where makes fp32, bf16 or fp16, not {}", dtype_name(dtype));
  z.add_shape(cond.shape(), dtype_name(cond.dtype()).data());
  z.set_cost(ops::where_cost(cond.shape(), dtype));
  DeviceTensor out = DeviceTensor::empty(cond.shape(), dtype);
  kernels::where(cond.data<uint8_t>(), out.raw(), cond.numel(), if_true, if_false, dtype, detail::stream());
  detail::check_launch("where");
  return out;
}

DeviceTensor clone(const DeviceTensor& a) {
  ATTNPROF_ZONE_AS(z, "copy_", "cpu_op");
  NvtxRange nv("copy_");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.set_cost(ops::copy_cost(a.shape(), a.dtype(), a.dtype()));
  DeviceTensor out = DeviceTensor::empty(a.shape(), a.dtype());
  ATTNPROF_CUDA_CHECK(cudaMemcpyAsync(out.raw(), a.raw(), a.nbytes(), cudaMemcpyDeviceToDevice, detail::stream()));
  return out;
}

DeviceTensor masked_fill(const DeviceTensor& a, const DeviceTensor& mask, float value) {
  // As in ATen: clone (the Memcpy DtoD the blog saw) then fill in place; the children carry the cost.
  ATTNPROF_ZONE_AS(z, "masked_fill", "cpu_op");
  NvtxRange nv("masked_fill");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.add_shape(mask.shape(), dtype_name(mask.dtype()).data());
  DeviceTensor out = clone(a);
  masked_fill_(out, mask, value);
  return out;
}

DeviceTensor softmax(const DeviceTensor& a) {
  ATTNPROF_ZONE_AS(z, "softmax", "cpu_op");
  NvtxRange nv("softmax");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.set_cost(ops::softmax_cost(a.shape(), a.dtype()));
  DeviceTensor out = DeviceTensor::empty(a.shape(), a.dtype());
  kernels::softmax_rows(a.raw(), out.raw(), a.numel() / a.shape(3), a.shape(3), a.dtype(), detail::stream());
  detail::check_launch("softmax");
  return out;
}

void softmax_(DeviceTensor& a) {
  ATTNPROF_ZONE_AS(z, "softmax_", "cpu_op");
  NvtxRange nv("softmax_");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.set_cost(ops::softmax_cost(a.shape(), a.dtype()));
  kernels::softmax_rows(a.raw(), a.raw(), a.numel() / a.shape(3), a.shape(3), a.dtype(), detail::stream());
  detail::check_launch("softmax");
}

DeviceTensor to(const DeviceTensor& a, DType dtype) {
  ATTNPROF_ZONE_AS(z, "to", "cpu_op");
  NvtxRange nv("to");
  z.add_shape(a.shape(), dtype_name(a.dtype()).data());
  z.set_cost(ops::copy_cost(a.shape(), a.dtype(), dtype));
  DeviceTensor out = DeviceTensor::empty(a.shape(), dtype);
  ATTNPROF_CHECK(a.dtype() == dtype || a.dtype() == DType::F32 || dtype == DType::F32,
                 "device to(): {} -> {} is not a conversion to or from fp32", dtype_name(a.dtype()), dtype_name(dtype));
  kernels::convert(a.raw(), out.raw(), a.numel(), a.dtype(), dtype, detail::stream());
  detail::check_launch("convert");
  return out;
}

DeviceTensor triu_mask(int64_t nq, int64_t nk, int64_t diagonal) {
  ATTNPROF_ZONE_AS(z, "triu", "cpu_op");
  NvtxRange nv("triu");
  z.add_shape({1, 1, nq, nk});
  z.set_cost(ops::triu_mask_cost(nq, nk));
  DeviceTensor m = DeviceTensor::empty({1, 1, nq, nk}, DType::Bool);
  kernels::triu_mask(m.data<uint8_t>(), nq, nk, diagonal, detail::stream());
  detail::check_launch("triu_mask");
  return m;
}

void set_flash_config(int config) { kernels::set_flash_config(config); }
int flash_config_for(int64_t D) { return kernels::flash_config_for(int(D)); }

DeviceTensor mask_from_host(const Tensor& host_bool) {
  ATTNPROF_CHECK(host_bool.dtype() == DType::Bool, "expected a Bool mask, got {}", dtype_name(host_bool.dtype()));
  return DeviceTensor::from_host(host_bool);
}

}  // namespace attnprof::cuda::dops
