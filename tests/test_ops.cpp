// The elementwise ops (mul, mul_, masked_fill(_), add(_), softmax(_), clone, to) and matmul against plain loops over
// Tensor::get/set, for fp32 and bf16, contiguous, strided (transposed views) and broadcast operands, on every
// ISA target. mul/masked_fill/add/copies are exact (one fp32 operation, one rounding); softmax is compared
// to an fp64 loop with a tolerance of a few ulps of the stored type. First, how OpenBLAS is loaded.
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>

#include "attnprof/attention.h"
#include "attnprof/error.h"
#include "attnprof/isa.h"
#include "attnprof/ops.h"
#include "child_process.h"
#include "loaded_libraries.h"
#include "ops/blas_loader.h"

using namespace attnprof;

namespace {

float round_to(DType t, float x) { return is_half(t) ? half_to_float(t, float_to_half(t, x)) : x; }

// Operands: a contiguous [2,3,5,37] tensor (37: every vector tail) and the transpose of a [2,3,37,5] one.
std::vector<std::pair<std::string, Tensor>> operands(DType t) {
  Tensor c = Tensor::empty({2, 3, 5, 37}, t);
  fill_randn(c, 11);
  Tensor s = Tensor::empty({2, 3, 37, 5}, t);
  fill_randn(s, 12);
  Tensor big = Tensor::empty({1, 2, 3, 1000}, t);  // long rows: the vector main loops
  fill_randn(big, 13);
  return {{"contiguous", c}, {"strided", s.transpose()}, {"long", big}};
}

template <class Fn>
void for_each_element(const Shape4& s, Fn&& fn) {
  for (int64_t b = 0; b < s[0]; ++b)
    for (int64_t h = 0; h < s[1]; ++h)
      for (int64_t i = 0; i < s[2]; ++i)
        for (int64_t j = 0; j < s[3]; ++j) fn(b, h, i, j);
}

// Broadcast index helper: dims of size 1 read index 0.
float get_b(const Tensor& m, int64_t b, int64_t h, int64_t i, int64_t j) {
  return m.get(m.shape(0) == 1 ? 0 : b, m.shape(1) == 1 ? 0 : h, m.shape(2) == 1 ? 0 : i, m.shape(3) == 1 ? 0 : j);
}

void expect_exact(const Tensor& got, const std::function<float(int64_t, int64_t, int64_t, int64_t)>& want,
                  const std::string& what) {
  int64_t bad = 0;
  for_each_element(got.shape(), [&](int64_t b, int64_t h, int64_t i, int64_t j) {
    const float g = got.get(b, h, i, j), w = want(b, h, i, j);
    if (!(g == w || (std::isnan(g) && std::isnan(w)))) {
      if (bad++ < 3) ADD_FAILURE() << what << " at " << b << "," << h << "," << i << "," << j << ": " << g << " vs " << w;
    }
  });
  EXPECT_EQ(bad, 0) << what;
}

std::vector<Tensor> bool_masks(const Shape4& s) {
  // [1,1,N,M] broadcast over B and H, [B,1,N,M], and [1,H,N,1] (broadcast along the row).
  std::vector<Tensor> out;
  for (Shape4 ms : {Shape4{1, 1, s[2], s[3]}, Shape4{s[0], 1, s[2], s[3]}, Shape4{1, s[1], s[2], 1}}) {
    Tensor m = Tensor::empty(ms, DType::Bool);
    for_each_element(ms, [&](int64_t b, int64_t h, int64_t i, int64_t j) {
      m.set(b, h, i, j, float(((b * 5 + h * 3 + i * 7 + j) % 3) == 0));
    });
    out.push_back(m);
  }
  return out;
}

bool loaded(const char* stem) { return attnprof::testing::library_loaded(stem); }

using attnprof::testing::vm_size;

}  // namespace

// OpenBLAS is loaded by the first run that multiplies with it, not at start-up: linked, its constructor ran
// before main in every process and, under a small `ulimit -v`, retried its failed mmaps forever. This test
// runs first in this binary, before any matmul. It also holds the address-space check's figures
// (openblas_reserve_bytes) to what OpenBLAS maps here: as it loads, and once threads call it at once.

// A team has the count set: OpenMP's dynamic adjustment (OMP_DYNAMIC, which shrinks teams on a loaded machine)
// is turned off, even when it was on, so the threads every peak is reported against are the threads that run.
TEST(Threads, SetNumThreadsFixesTheTeamSize) {
  omp_set_dynamic(1);
  const int before = ops::num_threads();
  ops::set_num_threads(2);
  EXPECT_EQ(omp_get_dynamic(), 0);
  int team = 0;
#pragma omp parallel
  {
#pragma omp single
    team = omp_get_num_threads();
  }
  EXPECT_EQ(team, 2);
  ops::set_num_threads(before);
}
TEST(OpenBlas, IsLoadedOnFirstUseNotAtStartUp) {
  EXPECT_FALSE(loaded("libopenblas")) << "libopenblas is in the process before any matmul";
  EXPECT_FALSE(ops::detail::blas_loaded());
  const int threads = ops::num_threads();
  ops::set_num_threads(1);  // threads are set before OpenBLAS loads: nothing loads for that
  ops::set_num_threads(threads);
  if (ops::bf16_matmul_uses_onednn()) {
    ops::prepare_matmul(DType::BF16);
    EXPECT_FALSE(loaded("libopenblas")) << "oneDNN's bf16 matmul needs no BLAS";
  }
  EXPECT_FALSE(ops::detail::blas_loaded());
  // OpenMP's threads (and their stacks) started and the operands allocated, so that what VmSize gains below is
  // OpenBLAS's alone: batches spread over the threads, each calling sgemm at once (a buffer each), then one call
  // from this thread.
#pragma omp parallel
  { (void)omp_get_thread_num(); }
  const int64_t batches = 4 * threads;
  Tensor a = Tensor::empty({1, batches, 256, 256}, DType::F32), b = Tensor::empty({1, batches, 256, 256}, DType::F32);
  Tensor c = Tensor::empty({1, batches, 256, 256}, DType::F32), one = Tensor::empty({1, 1, 512, 512}, DType::F32);
  fill_randn(a, 1);
  fill_randn(b, 2);
  fill_randn(one, 3);

  const int64_t before = vm_size();
  ops::prepare_matmul(DType::F32);
  const int64_t at_load = vm_size() - before;
  EXPECT_TRUE(loaded("libopenblas")) << ops::detail::blas_api().file;
  EXPECT_TRUE(ops::detail::blas_loaded());
  for (int i = 0; i < 3; ++i) c = ops::matmul(a, b);
  c = ops::matmul(one, one);
  const int64_t used = vm_size() - before;
#ifndef ATTNPROF_SANITIZED  // a sanitizer's allocator maps memory of its own as it goes
  // Its code, and a buffer for each thread it has: those it starts with, then OpenMP's.
  const int64_t load_estimate =
      ops::detail::kOpenblasLibraryBytes +
      std::max(ops::detail::openblas_load_threads(), threads) * ops::detail::kOpenblasBufferBytes;
  EXPECT_LE(at_load, load_estimate);
  EXPECT_GE(at_load, load_estimate - (int64_t(8) << 20)) << "the figures are measured, not padded";
  EXPECT_LE(used, ops::detail::openblas_reserve_bytes(threads) + ops::detail::kOpenblasMarginBytes)
      << "OpenBLAS mapped more than the address-space check allows for at " << threads << " threads";
#else
  (void)at_load;
  (void)used;
#endif

  // A matmul after all that still multiplies.
  Tensor x = Tensor::empty({1, 1, 2, 3}, DType::F32), y = Tensor::empty({1, 1, 3, 2}, DType::F32);
  for (int64_t i = 0; i < 6; ++i) x.set(0, 0, i / 3, i % 3, float(i)), y.set(0, 0, i / 2, i % 2, float(i));
  EXPECT_EQ(ops::matmul(x, y).get(0, 0, 1, 1), 3.0f * 1 + 4.0f * 3 + 5.0f * 5);
}

// Once loaded, OpenBLAS adds 128 MiB buffers for more threads, and retries forever when the address-space limit
// leaves no room for one: set_num_threads refuses such a count, naming the limit, and changes nothing. In a
// child process, where the limit is set.
TEST(OpenBlas, MoreThreadsThanTheAddressSpaceLimitHasRoomForAreRefused) {
#ifdef ATTNPROF_SANITIZED
  GTEST_SKIP() << "a sanitizer's runtime reserves terabytes of address space: no address-space limit can be set";
#endif
  ops::prepare_matmul(DType::F32);
  const int threads = ops::num_threads();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(attnprof::testing::say_and_exit([&] {
                std::string said = "no error";
                const int64_t limit = vm_size() + (int64_t(64) << 20);
                const rlimit rl{rlim_t(limit), rlim_t(limit)};
                if (setrlimit(RLIMIT_AS, &rl) != 0) said = "setrlimit failed";
                try {
                  ops::set_num_threads(threads + 4);
                } catch (const Error& e) {
                  said = e.what();
                }
                return said + (ops::num_threads() == threads ? " | thread count unchanged" : " | thread count changed");
              }),
              ::testing::ExitedWithCode(0),
              fmt::format("the address-space limit \\(ulimit -v\\) of .* is too small for OpenBLAS, which reserves up "
                          "to ~[0-9]+ MiB more at {} threads \\(.*, or use at most .* \\| thread count unchanged",
                          threads + 4));
}

TEST(Ops, MulMatchesLoop) {
  for (Isa isa : available_isas()) {
    IsaOverride use(isa);
    for (DType t : {DType::F32, DType::BF16, DType::F16})
      for (auto& [name, a] : operands(t)) {
        const std::string what = fmt::format("mul {} {} {}", isa_name(isa), dtype_name(t), name);
        const float f = 0.125f * 3.0f + 1e-3f;
        Tensor ref = a.clone();
        Tensor o = ops::mul(a, f);
        expect_exact(o, [&](auto b, auto h, auto i, auto j) { return round_to(t, ref.get(b, h, i, j) * f); }, what);
        Tensor inplace = a.clone();
        ops::mul_(inplace, f);
        expect_exact(inplace, [&](auto b, auto h, auto i, auto j) { return round_to(t, ref.get(b, h, i, j) * f); },
                     what + " (in place)");
        Tensor view = a;  // in place through a strided view
        ops::mul_(view, 2.0);
        expect_exact(a, [&](auto b, auto h, auto i, auto j) { return round_to(t, ref.get(b, h, i, j) * 2.0f); },
                     what + " (view)");
      }
  }
}

TEST(Ops, MaskedFillMatchesLoop) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (Isa isa : available_isas()) {
    IsaOverride use(isa);
    for (DType t : {DType::F32, DType::BF16, DType::F16})
      for (auto& [name, operand] : operands(t))
        for (const Tensor& m : bool_masks(operand.shape())) {
          const Tensor& a = operand;  // a plain reference: clang before 16 cannot capture a structured binding in a lambda
          const std::string what =
              fmt::format("masked_fill {} {} {} mask {}", isa_name(isa), dtype_name(t), name, shape_str(m.shape()));
          auto want = [&](auto b, auto h, auto i, auto j) { return get_b(m, b, h, i, j) != 0 ? ninf : a.get(b, h, i, j); };
          expect_exact(ops::masked_fill(a, m, ninf), want, what);
          Tensor c = a.clone();
          ops::masked_fill_(c, m, ninf);
          expect_exact(c, want, what + " (in place)");
        }
  }
}

TEST(Ops, AddMatchesLoop) {
  for (Isa isa : available_isas()) {
    IsaOverride use(isa);
    for (DType t : {DType::F32, DType::BF16, DType::F16})
      for (auto& [name, operand] : operands(t))
        for (DType mt : {DType::F32, DType::BF16, DType::F16}) {
          const Tensor& a = operand;  // a plain reference: clang before 16 cannot capture a structured binding in a lambda
          if (is_half(t) && is_half(mt) && t != mt) {  // bf16 + fp16: refused, as attn_mask is
            EXPECT_THROW(ops::add(a, Tensor::zeros({1, 1, 1, 1}, mt)), Error);
            continue;
          }
          for (Shape4 ms : {Shape4{1, 1, a.shape(2), a.shape(3)}, Shape4{a.shape(0), a.shape(1), a.shape(2), a.shape(3)},
                            Shape4{1, a.shape(1), a.shape(2), 1}}) {
            Tensor m = Tensor::empty(ms, mt);
            fill_randn(m, 21);
            const std::string what = fmt::format("add {} {}+{} {} mask {}", isa_name(isa), dtype_name(t),
                                                 dtype_name(mt), name, shape_str(ms));
            auto want = [&](auto b, auto h, auto i, auto j) {
              return round_to(t, a.get(b, h, i, j) + get_b(m, b, h, i, j));
            };
            expect_exact(ops::add(a, m), want, what);
            Tensor c = a.clone();
            ops::add_(c, m);
            expect_exact(c, want, what + " (in place)");
          }
        }
  }
}

// An in-place op on a broadcast view would write each shared element many times, from several threads: every
// in-place op refuses it by name, and leaves the tensor as it was.
TEST(Ops, InPlaceOpsRefuseABroadcastView) {
  Tensor t = Tensor::zeros({1, 1, 1, 64}, DType::F32);
  t.set(0, 0, 0, 3, 1.5f);
  Tensor e = t.expand({1, 1, 4096, 64});
  const Tensor mask = Tensor::zeros({1, 1, 1, 64}, DType::Bool);
  const Tensor add = Tensor::zeros({1, 1, 1, 64}, DType::F32);
  auto refused = [](const std::function<void()>& f, const std::string& op) {
    try {
      f();
      ADD_FAILURE() << op << " wrote to a broadcast view";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(op + " cannot write in place to a broadcast view"), std::string::npos)
          << err.what();
      EXPECT_NE(std::string(err.what()).find("dim 2"), std::string::npos) << err.what();
    }
  };
  refused([&] { ops::mul_(e, 2.0); }, "mul_");
  refused([&] { ops::masked_fill_(e, mask, 0.0f); }, "masked_fill_");
  refused([&] { ops::add_(e, add); }, "add_");
  refused([&] { ops::softmax_(e); }, "softmax_");
  EXPECT_EQ(t.get(0, 0, 0, 3), 1.5f);
  // A size-1 dim's stride does not matter: the plain tensor is written as before.
  ops::mul_(t, 2.0);
  EXPECT_EQ(t.get(0, 0, 0, 3), 3.0f);
}

TEST(Ops, CopiesMatchLoop) {
  for (Isa isa : available_isas()) {
    IsaOverride use(isa);
    for (DType t : {DType::F32, DType::BF16, DType::F16})
      for (auto& [name, operand] : operands(t)) {
        const Tensor& a = operand;  // a plain reference: clang before 16 cannot capture a structured binding in a lambda
        const std::string what = fmt::format("copy {} {} {}", isa_name(isa), dtype_name(t), name);
        expect_exact(ops::clone(a), [&](auto b, auto h, auto i, auto j) { return a.get(b, h, i, j); }, what);
        for (DType to : {DType::F32, DType::BF16, DType::F16})
          expect_exact(ops::to(a, to), [&](auto b, auto h, auto i, auto j) { return round_to(to, a.get(b, h, i, j)); },
                       what + " to " + std::string(dtype_name(to)));
      }
    // fp32 -> bf16 rounding ties, NaN and infinities, bit for bit with float_to_bf16.
    Tensor s = Tensor::empty({1, 1, 1, 40}, DType::F32);
    const float specials[] = {1.00390625f, 1.01171875f, -3.0e38f, std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(), 1e-40f, -0.0f, 65504.5f};
    for (int64_t j = 0; j < 40; ++j) s.set(0, 0, 0, j, specials[j % 8] * (j < 8 ? 1.0f : 1.0f + float(j) / 64.0f));
    Tensor h = ops::to(s, DType::BF16);
    for (int64_t j = 0; j < 40; ++j)
      EXPECT_EQ(h.data<uint16_t>()[j], float_to_bf16(s.get(0, 0, 0, j))) << isa_name(isa) << " j=" << j;
    // ... and fp32 -> fp16 (overflow to inf, subnormals, ties), bit for bit with float_to_f16.
    Tensor g = ops::to(s, DType::F16);
    for (int64_t j = 0; j < 40; ++j)
      EXPECT_EQ(g.data<uint16_t>()[j], float_to_f16(s.get(0, 0, 0, j))) << isa_name(isa) << " j=" << j;
  }
}

// where (sdpa-math's additive mask from its bool one): every element the condition's, contiguous (the fast row
// path, the causal mask's) or a broadcast or transposed view (the strided path), in fp32 and a half type, over
// sizes past the team's threshold.
TEST(Ops, WhereMatchesLoop) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const Tensor causal = ops::triu_mask(300, 300);  // [1,1,300,300], past 65536 elements: a team of threads
  Tensor rows = Tensor::empty({2, 1, 300, 1}, DType::Bool);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 300; ++i) rows.set(b, 0, i, 0, (b + i) % 3 == 0 ? 1.0f : 0.0f);
  for (DType t : {DType::F32, DType::BF16})
    for (const auto& [name, cond] : std::vector<std::pair<std::string, Tensor>>{
             {"causal", causal}, {"transposed", causal.transpose()}, {"broadcast", rows.expand({2, 3, 300, 300})}}) {
      const Tensor& c = cond;
      const Tensor out = ops::where(c, ninf, 0.0f, t);
      ASSERT_EQ(out.shape(), c.shape()) << name;
      int64_t wrong = 0;
      for (int64_t b = 0; b < c.shape(0); ++b)
        for (int64_t h = 0; h < c.shape(1); ++h)
          for (int64_t i = 0; i < c.shape(2); ++i)
            for (int64_t j = 0; j < c.shape(3); ++j)
              wrong += out.get(b, h, i, j) != (c.get(b, h, i, j) != 0.0f ? ninf : 0.0f);
      EXPECT_EQ(wrong, 0) << name << " " << dtype_name(t);
    }
}

TEST(Ops, SoftmaxMatchesLoop) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (Isa isa : available_isas()) {
    IsaOverride use(isa);
    // Scores with a wide range, and scores of magnitude 1e10, where exp(x - max) computed as one FMA
    // x·log2e - round(max·log2e) would give the maximum a positive exponent past exp2's range (inf, NaN).
    for (const double spread : {4.0, 1e10})
    for (DType t : {DType::F32, DType::BF16, DType::F16})
      for (auto& [name, a0] : operands(t)) {
        if (spread > 65504.0 && t == DType::F16) continue;  // beyond fp16's range
        Tensor a = a0.clone();
        ops::mul_(a, spread);
        // Row (0,0,1) fully masked, row (0,1,2) partially.
        for (int64_t j = 0; j < a.shape(3); ++j) {
          a.set(0, 0, 1, j, ninf);
          if (j % 2) a.set(0, 1, 2, j, ninf);
        }
        const std::string what = fmt::format("softmax {} {} {} x{}", isa_name(isa), dtype_name(t), name, spread);
        // relative: fp32 sums of up to 1000 terms (scalar target: one serial accumulator) / one bf16 or fp16
        // ulp; absolute: fp16's subnormal spacing (2^-24) halved, for probabilities below 2^-14
        const double tol = t == DType::F32 ? 1e-5 : t == DType::F16 ? 1e-3 : 8e-3;
        const double atol = t == DType::F16 ? std::ldexp(1.0, -25) : 1e-30;
        // The same values laid out with rows strided (a transposed buffer): the row loop, not the vector kernels.
        Tensor a_strided = Tensor::empty({a.shape(0), a.shape(1), a.shape(3), a.shape(2)}, t).transpose();
        for_each_element(a.shape(), [&](int64_t b, int64_t h, int64_t i, int64_t j) {
          a_strided.set(b, h, i, j, a.get(b, h, i, j));
        });
        for (const auto& [inplace, strided] : {std::pair{false, false}, {false, true}, {true, false}, {true, true}}) {
          Tensor o;
          if (inplace) {  // written where each row was read, strides kept
            o = strided ? a_strided.transpose().clone().transpose() : a.clone();  // a fresh copy either way
            ops::softmax_(o);
            if (strided) EXPECT_FALSE(o.is_contiguous()) << what;
          } else {
            o = ops::softmax(strided ? a_strided : a);
            EXPECT_TRUE(o.is_contiguous()) << what;
          }
          int64_t bad = 0;
          for (int64_t b = 0; b < a.shape(0); ++b)
            for (int64_t h = 0; h < a.shape(1); ++h)
              for (int64_t i = 0; i < a.shape(2); ++i) {
                double mx = -INFINITY, sum = 0.0;
                for (int64_t j = 0; j < a.shape(3); ++j) mx = std::max(mx, double(a.get(b, h, i, j)));
                for (int64_t j = 0; j < a.shape(3); ++j) sum += std::exp(double(a.get(b, h, i, j)) - mx);
                for (int64_t j = 0; j < a.shape(3); ++j) {
                  const double want = std::isinf(mx) ? 0.0 : std::exp(double(a.get(b, h, i, j)) - mx) / sum;
                  const double got = o.get(b, h, i, j);
                  if (!(std::fabs(got - want) <= atol + tol * want)) ++bad;
                }
              }
          EXPECT_EQ(bad, 0) << what << (inplace ? " (in place)" : "") << (strided ? " (strided rows)" : "");
        }
      }
  }
}

// A NaN score makes its whole row NaN, as in PyTorch, wherever it sits: in a vector block or the tail, first
// or last (the max instruction drops one operand's NaN, and exp2 clamps its argument), beside finite scores or
// -inf ones only. Rows without a NaN are untouched, and an all -inf row is still zeros.
TEST(Ops, SoftmaxRowWithANaNIsNaN) {
  const float ninf = -std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (Isa isa : available_isas()) {
    IsaOverride use(isa);
    for (DType t : {DType::F32, DType::BF16, DType::F16})
      for (int64_t n : {1, 3, 16, 20, 40, 100})
        for (bool masked_rest : {false, true}) {
          // Row i holds its NaN at position i % n (rows n.. have none); with masked_rest the others are -inf.
          Tensor a = Tensor::empty({1, 1, n + 2, n}, t);
          for (int64_t i = 0; i < n + 2; ++i)
            for (int64_t j = 0; j < n; ++j)
              a.set(0, 0, i, j, i < n && j == i ? nan : masked_rest && i < n ? ninf : 0.1f * float(j));
          a.set(0, 0, n + 1, 0, ninf);
          for (int64_t j = 0; j < n; ++j) a.set(0, 0, n + 1, j, ninf);  // all -inf: zeros
          const Tensor strided = a.transpose().clone().transpose();     // the row loop, not the vector kernels
          for (const auto& [label, o] : {std::pair{"out of place", ops::softmax(a)}, {"strided", ops::softmax(strided)},
                                         {"in place", [&] { Tensor c = a.clone(); ops::softmax_(c); return c; }()}}) {
            const std::string what = fmt::format("{} {} n={} {} {}", isa_name(isa), dtype_name(t), n,
                                                 masked_rest ? "rest -inf" : "rest finite", label);
            int64_t not_nan = 0;
            for (int64_t i = 0; i < n; ++i)
              for (int64_t j = 0; j < n; ++j) not_nan += !std::isnan(o.get(0, 0, i, j));
            EXPECT_EQ(not_nan, 0) << what;
            double sum = 0.0;
            for (int64_t j = 0; j < n; ++j) {
              sum += o.get(0, 0, n, j);
              EXPECT_EQ(o.get(0, 0, n + 1, j), 0.0f) << what;
            }
            EXPECT_NEAR(sum, 1.0, 1e-2) << what;
          }
        }
  }
}

// matmul against an fp64 loop over the same (rounded) inputs: contiguous operands, kᵀ as a transposed view,
// a broadcast (stride-0) operand and grouped heads (b with fewer heads than a), fp32 and bf16, on every ISA
// target. bf16 below AVX-512 is widened to fp32 and multiplied by sgemm; from AVX-512 up it is oneDNN's bf16
// matmul; both accumulate in fp32 and round once, so the error is one rounding of the result plus fp32 sums.
TEST(Ops, MatmulMatchesFp64Loop) {
  for (Isa isa : available_isas()) {
    IsaOverride use(isa);
    for (DType t : {DType::F32, DType::BF16, DType::F16}) {
      Tensor a = Tensor::empty({2, 4, 33, 40}, t);
      fill_randn(a, 21);
      Tensor b = Tensor::empty({2, 4, 40, 70}, t);
      fill_randn(b, 22);
      Tensor kt = Tensor::empty({2, 4, 70, 40}, t);
      fill_randn(kt, 23);
      Tensor grouped = Tensor::empty({2, 2, 40, 70}, t);
      fill_randn(grouped, 24);
      Tensor col = Tensor::empty({2, 4, 40, 1}, t);
      fill_randn(col, 25);
      const std::vector<std::pair<std::string, Tensor>> rhs = {
          {"contiguous", b}, {"transposed", kt.transpose()}, {"grouped heads", grouped},
          {"broadcast", col.expand({2, 4, 40, 70})}};
      for (const auto& [name, operand] : rhs) {
        const Tensor& bb = operand;  // a plain reference: clang before 16 cannot capture a structured binding in a lambda
        const std::string what = fmt::format("matmul {} {} {}", isa_name(isa), dtype_name(t), name);
        const Tensor c = ops::matmul(a, bb);
        ASSERT_EQ(c.shape(), (Shape4{2, 4, 33, 70})) << what;
        ASSERT_EQ(c.dtype(), t) << what;
        const int64_t group = a.shape(1) / bb.shape(1);
        double worst = 0.0;
        for_each_element(c.shape(), [&](int64_t bi, int64_t h, int64_t i, int64_t j) {
          double want = 0.0, mag = 0.0;
          for (int64_t k = 0; k < 40; ++k) {
            const double p = double(a.get(bi, h, i, k)) * double(bb.get(bi, h / group, k, j));
            want += p;
            mag += std::abs(p);
          }
          const double round = t == DType::BF16 ? std::ldexp(std::abs(want), -8)
                               : t == DType::F16 ? std::ldexp(std::abs(want), -11) + std::ldexp(1.0, -25)
                                                 : 0.0;  // one rounding of the result (fp16: or of a subnormal)
          const double tol = round + 1e-5 * mag + 1e-30;
          worst = std::max(worst, std::abs(double(c.get(bi, h, i, j)) - want) / tol);
        });
        EXPECT_LE(worst, 1.0) << what << ": worst error " << worst << " of the tolerance";
      }
    }
  }
}

// Every matmul path is a library's (OpenBLAS sgemm, oneDNN), so all its FLOPs are library FLOPs, which the
// roofline bills at the library's ISA; a bf16 product's are on bf16 units only where oneDNN runs it.
TEST(Ops, MatmulCostSaysItsFlopsAreTheLibrarys) {
  const Shape4 a{2, 4, 33, 40}, b{2, 2, 40, 70};
  for (Isa isa : available_isas()) {
    IsaOverride use(isa);
    for (DType t : {DType::F32, DType::BF16, DType::F16}) {
      const std::string what = fmt::format("{} {}", isa_name(isa), dtype_name(t));
      const OpCost c = ops::matmul_cost(a, b, t);
      EXPECT_DOUBLE_EQ(c.flops, 2.0 * 2 * 4 * 33 * 70 * 40) << what;
      EXPECT_EQ(c.library_flops, c.flops) << what;
      const bool on_bf16 = t == DType::BF16 && ops::bf16_matmul_uses_onednn();
      if (isa != Isa::AVX512) EXPECT_FALSE(on_bf16) << what << ": below AVX-512 bf16 is widened for sgemm";
      EXPECT_EQ(c.bf16_flops, on_bf16 ? c.flops : 0.0) << what;
      EXPECT_EQ(c.library_bf16_flops, c.bf16_flops) << what;
      // The GEMM's cost wherever it runs (the GPU's cuBLAS GEMMs) keeps bf16 on bf16 units.
      const OpCost g = ops::gemm_cost(a, b, t);
      EXPECT_EQ(g.bytes(), c.bytes()) << what;
      EXPECT_EQ(g.library_flops, g.flops) << what;
      EXPECT_EQ(g.bf16_flops, t == DType::BF16 ? g.flops : 0.0) << what;
      EXPECT_EQ(g.library_bf16_flops, g.bf16_flops) << what;
    }
  }
}

// OpenBLAS's sgemm takes 32-bit sizes: a matmul past them on that path is refused by name before anything is
// allocated (a size cut to int had left the result unwritten), and the variants that would call it say they
// cannot run the problem. The operand here is a broadcast view (stride 0): nothing of its 2^31 columns exists.
TEST(Ops, MatmulPastSgemmsIntSizesIsRefused) {
  const int64_t wide = ops::kSgemmMaxDim + 1;
  for (Isa isa : available_isas()) {
    IsaOverride use(isa);
    for (DType t : {DType::F32, DType::BF16, DType::F16}) {
      if (!ops::matmul_uses_sgemm(t)) continue;  // bf16 on oneDNN: 64-bit sizes
      const Tensor a = Tensor::full({1, 1, 1, 1}, t, 1.0f);
      const Tensor b = Tensor::full({1, 1, 1, 1}, t, 1.0f).expand({1, 1, 1, wide});
      try {
        (void)ops::matmul(a, b);
        ADD_FAILURE() << isa_name(isa) << " " << dtype_name(t) << ": not refused";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("sgemm takes sizes up to 2147483647"), std::string::npos) << e.what();
      }
    }
  }
  AttnProblem p;
  p.Nq = 1;
  p.Nk = wide;
  p.D = 64;
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    p.dtype = t;
    const auto naive = find_variant("naive").unsupported(p), math = find_variant("sdpa-math").unsupported(p);
    ASSERT_TRUE(math.has_value()) << dtype_name(t) << ": SDPA's math backend upcasts to fp32, always sgemm";
    EXPECT_NE(math->find("Nk = 2147483648"), std::string::npos) << *math;
    EXPECT_EQ(naive.has_value(), ops::matmul_uses_sgemm(t)) << dtype_name(t);
    EXPECT_EQ(find_variant("inplace").unsupported(p).has_value(), ops::matmul_uses_sgemm(t)) << dtype_name(t);
    EXPECT_FALSE(find_variant("flash").unsupported(p).has_value()) << "64-bit indexing throughout";
    EXPECT_TRUE(sdpa_backend_unsupported(SdpaBackend::Math, p).has_value());
  }
  p.Nk = ops::kSgemmMaxDim;
  p.dtype = DType::F32;
  EXPECT_FALSE(find_variant("naive").unsupported(p).has_value()) << "the largest int is still a size";
}

// The widened bf16 path (below AVX-512) multiplies a and c in panels of rows, about 2^20 fp32 values per
// panel: a [600, 64] x [64, 2000] takes two panels of 300 rows, for a contiguous a and for a transposed
// view of it. Checked on every ISA target against fp64 sums of the same bf16 inputs.
TEST(Ops, MatmulAcrossRowPanelsMatchesFp64) {
  const int64_t M = 600, K = 64, N = 2000;
  Tensor a = Tensor::empty({1, 1, M, K}, DType::BF16);
  fill_randn(a, 31);
  Tensor at = Tensor::empty({1, 1, K, M}, DType::BF16);
  fill_randn(at, 32);
  Tensor b = Tensor::empty({1, 1, K, N}, DType::BF16);
  fill_randn(b, 33);
  std::vector<double> bf(size_t(K * N));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) bf[size_t(k * N + j)] = b.get(0, 0, k, j);
  for (const auto& [name, lhs] : {std::pair<std::string, Tensor>{"contiguous", a}, {"transposed", at.transpose()}}) {
    std::vector<double> af(size_t(M * K));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) af[size_t(i * K + k)] = lhs.get(0, 0, i, k);
    for (Isa isa : available_isas()) {
      IsaOverride use(isa);
      const Tensor c = ops::matmul(lhs, b);
      double worst = 0.0;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double want = 0.0, mag = 0.0;
          for (int64_t k = 0; k < K; ++k) {
            const double p = af[size_t(i * K + k)] * bf[size_t(k * N + j)];
            want += p;
            mag += std::abs(p);
          }
          const double tol = std::ldexp(std::abs(want), -8) + 1e-5 * mag + 1e-30;
          worst = std::max(worst, std::abs(double(c.get(0, 0, i, j)) - want) / tol);
        }
      EXPECT_LE(worst, 1.0) << name << " " << isa_name(isa) << ": worst error " << worst << " of the tolerance";
    }
  }
}
