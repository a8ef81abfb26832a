// The CUDA backend's small kernels (src/cuda/unfused_kernels.cuh: softmax, masked_fill, scale, convert,
// triu), their own source run on the CPU by the SIMT emulation of tests/simt_emulator.h, against fp64 or an
// independent loop. Launch shapes come from the same constants the launchers use (kThreads, kSoftmaxWarps,
// softmax_per_lane); the grid-stride kernels also run on a single block, which any grid must equal.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "simt_emulator.h"  // first: the primitives the kernels are written in

#include "attnprof/dtype.h"
#include "cuda/unfused_kernels.cuh"

using namespace attnprof;
namespace kernels = attnprof::cuda::kernels;
using kernels::bf16;
using kernels::f16;
using simt::from_storage;
using simt::to_storage;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Deterministic values in about [-4, 4].
float value_at(int64_t i) {
  uint64_t s = uint64_t(i) * 6364136223846793005ull + 1442695040888963407ull;
  s ^= s >> 29;
  return float(int64_t(s % 8001) - 4000) / 1000.0f;
}

void expect_clean(const std::vector<std::string>& errors) {
  for (const std::string& e : errors) ADD_FAILURE() << e;
}

// softmax_rows as kernels.cu launches it: the register kernel for rows up to 1024, else three passes.
template <class T>
void softmax(const T* x, T* y, int64_t rows, int64_t n, size_t bytes_x, size_t bytes_y) {
  simt::Device dev;
  dev.add_buffer(x, bytes_x, "x", x == y);
  if (x != y) dev.add_buffer(y, bytes_y, "y", true);
  const unsigned grid = unsigned((rows + kernels::kSoftmaxWarps - 1) / kernels::kSoftmaxWarps);
  const unsigned threads = kernels::kSoftmaxWarps * 32;
  const int per = kernels::softmax_per_lane(n);
  expect_clean(dev.launch(grid, threads, 0, [&] {
    if (per == 4)
      kernels::softmax_regs_kernel<T, 4>(x, y, rows, int(n));
    else if (per == 32)
      kernels::softmax_regs_kernel<T, 32>(x, y, rows, int(n));
    else
      kernels::softmax_kernel<T>(x, y, rows, n);
  }));
}

template <class T>
void check_softmax(int64_t n, bool in_place) {
  constexpr int64_t kRows = 13;  // two blocks, the second with three of its eight warps past the last row
  constexpr const char* kType = std::is_same_v<T, float> ? "fp32" : std::is_same_v<T, f16> ? "fp16" : "bf16";
  SCOPED_TRACE(fmt::format("{} n={} {}", kType, n, in_place ? "in place" : ""));
  std::vector<T> x(size_t(kRows * n)), y(x.size(), to_storage<T>(std::nanf("")));
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      float v = value_at(r * n + j);
      if (r == 3) v = -kInf;                        // nothing visible: zeros
      if (r == 5 && j % 2 == 1) v = -kInf;          // every other key masked
      if (r == 7 && j != n - 1) v = -kInf;          // only the last key visible: exactly 1
      if (r == 9 && j == n / 2) v = std::nanf("");  // a NaN: the whole row NaN
      if (r == 11) v = j == n - 1 ? std::nanf("") : -kInf;  // a NaN beside -inf only: NaN, not zeros
      x[size_t(r * n + j)] = to_storage<T>(v);
    }
  const std::vector<T> x0 = x;
  T* out = in_place ? x.data() : y.data();
  softmax<T>(x.data(), out, kRows, n, x.size() * sizeof(T), y.size() * sizeof(T));
  // one rounding of the result: bf16 2^-8 relative, fp16 2^-11 (and 2^-25 absolute below its normals)
  const double rel = std::is_same_v<T, float> ? 2e-6 : std::is_same_v<T, f16> ? 1.0 / 2048 : 1.0 / 256;
  for (int64_t r = 0; r < kRows; ++r) {
    auto in = [&](int64_t j) { return double(from_storage(x0[size_t(r * n + j)])); };
    if (r == 9 || r == 11) {
      for (int64_t j = 0; j < n; ++j) ASSERT_TRUE(std::isnan(double(from_storage(out[size_t(r * n + j)])))) << "row " << r << " col " << j;
      continue;
    }
    double mx = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, in(j));
    for (int64_t j = 0; j < n; ++j) sum += mx == -INFINITY ? 0.0 : std::exp(in(j) - mx);
    for (int64_t j = 0; j < n; ++j) {
      const double want = mx == -INFINITY ? 0.0 : std::exp(in(j) - mx) / sum;
      const double got = from_storage(out[size_t(r * n + j)]);
      ASSERT_NEAR(got, want, rel * want + 1e-7) << "row " << r << " col " << j;
    }
  }
}

}  // namespace

TEST(CudaUnfusedEmulated, SoftmaxMatchesFp64ForEveryKernelAndRowLength) {
  static_assert(kernels::softmax_per_lane(128) == 4 && kernels::softmax_per_lane(129) == 32 &&
                kernels::softmax_per_lane(1024) == 32 && kernels::softmax_per_lane(1025) == 0);
  for (int64_t n : {1, 37, 128, 129, 1024, 1500}) {
    check_softmax<float>(n, false);
    check_softmax<bf16>(n, false);
    check_softmax<f16>(n, false);
  }
  check_softmax<bf16>(100, true);  // y == x, as softmax_ launches it
  check_softmax<f16>(1030, true);
  check_softmax<float>(1030, true);
}

// masked_fill_ with a mask broadcast over any size-1 dim, on one block and on the launchers' grid.
TEST(CudaUnfusedEmulated, MaskedFillBroadcastsTheMask) {
  constexpr int64_t B = 2, H = 3, Nq = 5, Nk = 7, n = B * H * Nq * Nk;
  const std::vector<std::array<int64_t, 4>> mask_shapes = {{1, H, 1, Nk}, {B, 1, Nq, 1}, {B, H, Nq, Nk}, {1, 1, 1, 1}};
  for (const auto& [Bm, Hm, Mq, Mk] : mask_shapes)
    for (unsigned grid : {1u, unsigned((n + kernels::kThreads - 1) / kernels::kThreads)}) {
      SCOPED_TRACE(fmt::format("mask [{},{},{},{}] grid {}", Bm, Hm, Mq, Mk, grid));
      std::vector<uint8_t> mask(size_t(Bm * Hm * Mq * Mk));
      for (size_t i = 0; i < mask.size(); ++i) mask[i] = uint8_t(i % 3 == 1);
      if (mask.size() == 1) mask[0] = 1;
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[size_t(i)] = value_at(i);
      simt::Device dev;
      dev.add_buffer(x.data(), x.size() * 4, "x", true);
      const auto ms = cuda::layout::mask_strides(Bm, Hm, Mq, Mk);
      expect_clean(dev.launch(grid, kernels::kThreads, 0, [&] {
        kernels::masked_fill_kernel<float>(x.data(), mask.data(), H, Nq, Nk, n, ms, -kInf);
      }));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < Nq; ++i)
            for (int64_t j = 0; j < Nk; ++j) {
              const int64_t e = ((b * H + h) * Nq + i) * Nk + j;
              const int64_t m = (((Bm == 1 ? 0 : b) * Hm + (Hm == 1 ? 0 : h)) * Mq + (Mq == 1 ? 0 : i)) * Mk +
                                (Mk == 1 ? 0 : j);
              ASSERT_EQ(x[size_t(e)], mask[size_t(m)] ? -kInf : value_at(e)) << b << h << i << j;
            }
    }
}

// SDPA math's mask on the GPU: where (bool -> an additive fp32 mask), then add_ of that mask broadcast over any
// size-1 dim, into fp32 and bf16 scores, on one block and on the launchers' grid.
TEST(CudaUnfusedEmulated, WhereAndAddMaskBroadcastTheMask) {
  constexpr int64_t B = 2, H = 3, Nq = 5, Nk = 7, n = B * H * Nq * Nk;
  const std::vector<std::array<int64_t, 4>> mask_shapes = {{1, 1, Nq, Nk}, {B, 1, 1, Nk}, {B, H, Nq, Nk}, {1, 1, 1, 1}};
  for (const auto& [Bm, Hm, Mq, Mk] : mask_shapes)
    for (unsigned grid : {1u, unsigned((n + kernels::kThreads - 1) / kernels::kThreads)}) {
      SCOPED_TRACE(fmt::format("mask [{},{},{},{}] grid {}", Bm, Hm, Mq, Mk, grid));
      const int64_t nm = Bm * Hm * Mq * Mk;
      std::vector<uint8_t> cond(static_cast<size_t>(nm));
      for (size_t i = 0; i < cond.size(); ++i) cond[i] = uint8_t(i % 3 == 1);
      std::vector<float> m(static_cast<size_t>(nm), 7.0f);
      std::vector<float> x(static_cast<size_t>(n));
      std::vector<bf16> xb(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        x[size_t(i)] = value_at(i);
        xb[size_t(i)] = float_to_bf16(value_at(i) * 1.001f);
      }
      const std::vector<bf16> xb0 = xb;
      simt::Device dev;
      dev.add_buffer(cond.data(), cond.size(), "cond", false);
      dev.add_buffer(m.data(), m.size() * 4, "m", true);
      dev.add_buffer(x.data(), x.size() * 4, "x", true);
      dev.add_buffer(xb.data(), xb.size() * 2, "xb", true);
      expect_clean(dev.launch(grid, kernels::kThreads, 0, [&] {
        kernels::where_kernel<float>(cond.data(), m.data(), nm, -kInf, 0.0f);
      }));
      for (int64_t i = 0; i < nm; ++i) ASSERT_EQ(m[size_t(i)], cond[size_t(i)] ? -kInf : 0.0f) << i;
      for (size_t i = 0; i < m.size(); ++i) m[i] = cond[i] ? -kInf : value_at(int64_t(i) + 1000);  // a live mask
      const auto ms = cuda::layout::mask_strides(Bm, Hm, Mq, Mk);
      expect_clean(dev.launch(grid, kernels::kThreads, 0, [&] {
        kernels::add_mask_kernel<float>(x.data(), m.data(), H, Nq, Nk, n, ms);
        kernels::add_mask_kernel<bf16>(xb.data(), m.data(), H, Nq, Nk, n, ms);
      }));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < Nq; ++i)
            for (int64_t j = 0; j < Nk; ++j) {
              const int64_t e = ((b * H + h) * Nq + i) * Nk + j;
              const int64_t mo = (((Bm == 1 ? 0 : b) * Hm + (Hm == 1 ? 0 : h)) * Mq + (Mq == 1 ? 0 : i)) * Mk +
                                 (Mk == 1 ? 0 : j);
              ASSERT_EQ(x[size_t(e)], value_at(e) + m[size_t(mo)]) << b << h << i << j;
              ASSERT_EQ(xb[size_t(e)], float_to_bf16(bf16_to_float(xb0[size_t(e)]) + m[size_t(mo)]))
                  << b << h << i << j;
            }
    }
}

// scale (out of place and in place), convert in all four directions, triu, each rounding once.
TEST(CudaUnfusedEmulated, ElementwiseKernelsRoundOnceOnStore) {
  constexpr int64_t n = 1000;
  std::vector<bf16> xb(n), yb(n);
  std::vector<float> xf(n), yf(n);
  for (int64_t i = 0; i < n; ++i) {
    xf[size_t(i)] = value_at(i) * 1.001f;
    xb[size_t(i)] = float_to_bf16(xf[size_t(i)]);
  }
  for (unsigned grid : {1u, 4u}) {
    simt::Device dev;
    dev.add_buffer(xb.data(), n * 2, "xb", true);
    dev.add_buffer(yb.data(), n * 2, "yb", true);
    dev.add_buffer(xf.data(), n * 4, "xf", false);
    dev.add_buffer(yf.data(), n * 4, "yf", true);
    std::vector<bf16> xb0 = xb;
    expect_clean(dev.launch(grid, kernels::kThreads, 0, [&] {
      kernels::scale_kernel<bf16>(xb.data(), yb.data(), n, 0.125f);
      kernels::convert_kernel<float, float>(xf.data(), yf.data(), n);
    }));
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(yb[size_t(i)], float_to_bf16(bf16_to_float(xb0[size_t(i)]) * 0.125f)) << i;
      ASSERT_EQ(yf[size_t(i)], xf[size_t(i)]) << i;
    }
    expect_clean(dev.launch(grid, kernels::kThreads, 0, [&] {
      kernels::scale_kernel<bf16>(xb.data(), xb.data(), n, 3.0f);  // mul_
      kernels::convert_kernel<float, bf16>(xf.data(), yb.data(), n);
    }));
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(xb[size_t(i)], float_to_bf16(bf16_to_float(xb0[size_t(i)]) * 3.0f)) << i;
      ASSERT_EQ(yb[size_t(i)], float_to_bf16(xf[size_t(i)])) << i;
    }
    xb = xb0;
    expect_clean(dev.launch(grid, kernels::kThreads, 0, [&] {
      kernels::convert_kernel<bf16, float>(xb.data(), yf.data(), n);
    }));
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(yf[size_t(i)], bf16_to_float(xb[size_t(i)])) << i;
  }
  // fp16: scale, and both conversions (overflow past 65504 and subnormals included), bit for bit.
  {
    std::vector<f16> xh(n), yh(n);
    std::vector<float> big(n), back(n);
    for (int64_t i = 0; i < n; ++i) {
      xh[size_t(i)] = to_storage<f16>(xf[size_t(i)]);
      big[size_t(i)] = xf[size_t(i)] * (i % 3 == 0 ? 3e4f : i % 3 == 1 ? 1e-5f : 1.0f);
    }
    simt::Device dev;
    dev.add_buffer(xh.data(), n * 2, "xh", false);
    dev.add_buffer(yh.data(), n * 2, "yh", true);
    dev.add_buffer(big.data(), n * 4, "big", false);
    dev.add_buffer(back.data(), n * 4, "back", true);
    expect_clean(dev.launch(4, kernels::kThreads, 0, [&] {
      kernels::scale_kernel<f16>(xh.data(), yh.data(), n, 0.125f);
    }));
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(yh[size_t(i)].bits, float_to_f16(f16_to_float(xh[size_t(i)].bits) * 0.125f)) << i;
    expect_clean(dev.launch(4, kernels::kThreads, 0, [&] {
      kernels::convert_kernel<float, f16>(big.data(), yh.data(), n);
    }));
    expect_clean(dev.launch(4, kernels::kThreads, 0, [&] {
      kernels::convert_kernel<f16, float>(yh.data(), back.data(), n);
    }));
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(yh[size_t(i)].bits, float_to_f16(big[size_t(i)])) << i;
      ASSERT_EQ(back[size_t(i)], f16_to_float(yh[size_t(i)].bits)) << i;
    }
  }
  for (int64_t diagonal : {int64_t(1), int64_t(-2), int64_t(0)}) {
    constexpr int64_t nq = 5, nk = 9;
    std::vector<uint8_t> mask(nq * nk, 7);
    simt::Device dev;
    expect_clean(dev.launch(1, kernels::kThreads, 0, [&] { kernels::triu_kernel(mask.data(), nq, nk, diagonal); }));
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t j = 0; j < nk; ++j) ASSERT_EQ(mask[size_t(i * nk + j)], j - i >= diagonal ? 1 : 0) << i << "," << j;
  }
}
