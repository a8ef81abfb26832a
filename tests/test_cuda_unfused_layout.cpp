// The unfused CUDA path's index math (src/cuda/unfused_layout.h), checked on the CPU: no GPU needed.
//   - cuBLAS argument mapping: the StridedGemm descriptors that device_ops.cpp hands to
//     cublasGemmStridedBatchedEx are run through an emulation of cuBLAS's documented column-major semantics
//     and must give the row-major Q·Kᵀ and P·V (MHA and GQA, square and not), touch only elements inside
//     each operand, and satisfy cuBLAS's argument rules (lda ≥ rows of the stored matrix, ...);
//   - masked_fill's broadcast: the mask element every score element reads, for every broadcast pattern;
//   - the causal mask the device builds equals the CPU's triu_mask.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "attnprof/ops.h"
#include "cuda/unfused_layout.h"

using namespace attnprof;
namespace layout = attnprof::cuda::layout;

namespace {

// cublasGemmStridedBatchedEx with alpha = 1, beta = 0, as the cuBLAS documentation defines it. Records
// whether any access fell outside an operand of `na`, `nb`, `nc` elements.
struct Emulated {
  std::vector<double> c;
  bool out_of_bounds = false;
};
Emulated run_cublas(const layout::StridedGemm& g, const std::vector<double>& A, const std::vector<double>& B,
                    size_t nc) {
  Emulated r{std::vector<double>(nc, 0.0), false};
  auto at = [&](const std::vector<double>& v, int64_t i) {
    if (i < 0 || i >= int64_t(v.size())) {
      r.out_of_bounds = true;
      return 0.0;
    }
    return v[size_t(i)];
  };
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.m; ++i) {
        double acc = 0.0;
        for (int64_t l = 0; l < g.k; ++l) {
          const int64_t ia = b * g.stride_a + (g.trans_a ? l + i * g.lda : i + l * g.lda);
          const int64_t ib = b * g.stride_b + (g.trans_b ? j + l * g.ldb : l + j * g.ldb);
          acc += at(A, ia) * at(B, ib);
        }
        const int64_t ic = b * g.stride_c + i + j * g.ldc;
        if (ic < 0 || ic >= int64_t(nc)) r.out_of_bounds = true;
        else r.c[size_t(ic)] = acc;
      }
  return r;
}

// cuBLAS's argument rules (CUBLAS_STATUS_INVALID_VALUE otherwise).
void expect_valid_arguments(const layout::StridedGemm& g) {
  EXPECT_GT(g.m, 0);
  EXPECT_GT(g.n, 0);
  EXPECT_GT(g.k, 0);
  EXPECT_GE(g.lda, g.trans_a ? g.k : g.m);
  EXPECT_GE(g.ldb, g.trans_b ? g.n : g.k);
  EXPECT_GE(g.ldc, g.m);
  EXPECT_TRUE(layout::fits_cublas_int(g));
}

std::vector<double> random_values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

struct Dims {
  int64_t B, Hq, Hkv, Nq, Nk, D;
};
const Dims kDims[] = {{1, 1, 1, 1, 1, 1},  {2, 3, 3, 5, 7, 4},  {2, 4, 2, 6, 3, 8},
                      {1, 8, 1, 4, 9, 16}, {3, 2, 2, 17, 17, 5}, {1, 6, 3, 1, 33, 2}};

std::string describe(const Dims& d) {
  return "B=" + std::to_string(d.B) + " Hq=" + std::to_string(d.Hq) + " Hkv=" + std::to_string(d.Hkv) +
         " Nq=" + std::to_string(d.Nq) + " Nk=" + std::to_string(d.Nk) + " D=" + std::to_string(d.D);
}

// The largest difference between `got` (a row-major [B, Hq, rows, cols] result) and the row-major batched
// product C[b, h, i, j] = Σ_l x(b, h, i, l) · y(b, h / G, l, j), l < inner.
template <class X, class Y>
double worst_error(const std::vector<double>& got, const Dims& d, int64_t rows, int64_t cols, int64_t inner, X x, Y y) {
  const int64_t G = d.Hq / d.Hkv;
  double worst = 0.0;
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.Hq; ++h)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          double want = 0.0;
          for (int64_t l = 0; l < inner; ++l) want += x(b, h, i, l) * y(b, h / G, l, j);
          worst = std::max(worst, std::abs(got[size_t(((b * d.Hq + h) * rows + i) * cols + j)] - want));
        }
  return worst;
}

// Runs `g` on operands A and B as cuBLAS would, checks its arguments and bounds, and compares the result with
// the row-major product of worst_error.
template <class X, class Y>
void expect_gemm(const layout::StridedGemm& g, const std::vector<double>& A, const std::vector<double>& B,
                 const Dims& d, int64_t rows, int64_t cols, int64_t inner, X x, Y y) {
  expect_valid_arguments(g);
  const Emulated c = run_cublas(g, A, B, size_t(d.B * d.Hq * rows * cols));
  EXPECT_FALSE(c.out_of_bounds);
  EXPECT_LT(worst_error(c.c, d, rows, cols, inner, x, y), 1e-12);
}

TEST(CudaUnfusedLayout, GemmDescriptorsComputeTheRowMajorProducts) {
  for (const Dims& d : kDims) {
    SCOPED_TRACE(describe(d));
    const std::vector<double> q = random_values(size_t(d.B * d.Hq * d.Nq * d.D), 1);
    const std::vector<double> k = random_values(size_t(d.B * d.Hkv * d.Nk * d.D), 2);
    const std::vector<double> p = random_values(size_t(d.B * d.Hq * d.Nq * d.Nk), 3);
    const std::vector<double> v = random_values(size_t(d.B * d.Hkv * d.Nk * d.D), 4);
    auto qx = [&](int64_t b, int64_t h, int64_t i, int64_t x) { return q[size_t(((b * d.Hq + h) * d.Nq + i) * d.D + x)]; };
    auto kt = [&](int64_t b, int64_t kh, int64_t x, int64_t j) { return k[size_t(((b * d.Hkv + kh) * d.Nk + j) * d.D + x)]; };
    auto pj = [&](int64_t b, int64_t h, int64_t i, int64_t j) { return p[size_t(((b * d.Hq + h) * d.Nq + i) * d.Nk + j)]; };
    auto vx = [&](int64_t b, int64_t kh, int64_t j, int64_t x) { return v[size_t(((b * d.Hkv + kh) * d.Nk + j) * d.D + x)]; };
    // As device_ops.cpp calls them: S = Q·Kᵀ with A = K, B = Q; O = P·V with A = V, B = P.
    {
      SCOPED_TRACE("qk_gemm");
      expect_gemm(layout::qk_gemm(d.B, d.Hq, d.Hkv, d.Nq, d.Nk, d.D), k, q, d, d.Nq, d.Nk, d.D, qx, kt);
    }
    {
      SCOPED_TRACE("pv_gemm");
      expect_gemm(layout::pv_gemm(d.B, d.Hq, d.Hkv, d.Nq, d.Nk, d.D), v, p, d, d.Nq, d.D, d.Nk, pj, vx);
    }
  }
}

TEST(CudaUnfusedLayout, TheBlogsShapeIsOneGemmPerHeadWithinCublasLimits) {
  const layout::StridedGemm qk = layout::qk_gemm(8, 16, 16, 1024, 1024, 64);
  EXPECT_EQ(qk.batch, 128);
  EXPECT_EQ(qk.m, 1024);
  EXPECT_EQ(qk.n, 1024);
  EXPECT_EQ(qk.k, 64);
  EXPECT_TRUE(layout::fits_cublas_int(qk));
  // A problem whose G·Nq passes int's range is refused before cuBLAS sees it.
  EXPECT_FALSE(layout::fits_cublas_int(layout::qk_gemm(1, 1 << 16, 1, 1 << 16, 8, 8)));
}

TEST(CudaUnfusedLayout, MaskOffsetFollowsBroadcastingForEveryPattern) {
  const int64_t B = 2, H = 3, Nq = 4, Nk = 5;
  for (int pattern = 0; pattern < 16; ++pattern) {
    const int64_t Bm = pattern & 1 ? B : 1, Hm = pattern & 2 ? H : 1, Mq = pattern & 4 ? Nq : 1,
                  Mk = pattern & 8 ? Nk : 1;
    SCOPED_TRACE(testing::Message() << "mask [" << Bm << "," << Hm << "," << Mq << "," << Mk << "]");
    const layout::MaskStrides ms = layout::mask_strides(Bm, Hm, Mq, Mk);
    std::vector<int> reads(size_t(Bm * Hm * Mq * Mk), 0);
    for (int64_t e = 0; e < B * H * Nq * Nk; ++e) {
      const int64_t j = e % Nk, i = (e / Nk) % Nq, h = (e / (Nk * Nq)) % H, b = e / (Nk * Nq * H);
      // Broadcasting: a size-1 mask dim is read at index 0.
      const int64_t want = ((std::min(b, Bm - 1) * Hm + std::min(h, Hm - 1)) * Mq + std::min(i, Mq - 1)) * Mk +
                           std::min(j, Mk - 1);
      const int64_t got = layout::mask_offset(e, H, Nq, Nk, ms);
      ASSERT_EQ(got, want) << "element " << e;
      ++reads[size_t(got)];
    }
    for (int r : reads) EXPECT_EQ(r, B * H * Nq * Nk / (Bm * Hm * Mq * Mk));  // every mask element, evenly
  }
}

TEST(CudaUnfusedLayout, DeviceCausalMaskEqualsTheCpuTriuMask) {
  for (const auto& [nq, nk, diag] : {std::tuple<int64_t, int64_t, int64_t>{7, 7, 1}, {5, 9, 1}, {9, 5, 1},
                                     {6, 6, 0}, {4, 8, 5}, {8, 4, -2}}) {
    SCOPED_TRACE(testing::Message() << nq << "x" << nk << " diagonal " << diag);
    const Tensor m = ops::triu_mask(nq, nk, diag);
    const uint8_t* cpu = m.data<uint8_t>();
    for (int64_t e = 0; e < nq * nk; ++e) ASSERT_EQ(layout::triu_at(e, nk, diag), cpu[e] != 0) << "element " << e;
  }
}

}  // namespace
