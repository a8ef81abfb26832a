#include "attnprof/tensor.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "attnprof/allocator.h"
#include "attnprof/error.h"

namespace attnprof {

std::string shape_str(const Shape4& s) { return fmt::format("[{}, {}, {}, {}]", s[0], s[1], s[2], s[3]); }

Storage::Storage(size_t bytes) : data_(tracked_alloc(bytes)), bytes_(bytes) {}
Storage::~Storage() { tracked_free(data_, bytes_); }

namespace {

Shape4 contiguous_strides(const Shape4& s) { return {s[1] * s[2] * s[3], s[2] * s[3], s[3], 1}; }

// dtype.h's accessors, plus bool (0 or 1), which tensors hold and the kernels' paths never see.
float load_as_float(const char* base, DType t, int64_t off) {
  if (t == DType::Bool) return reinterpret_cast<const uint8_t*>(base)[off] ? 1.0f : 0.0f;
  return load_float(base, t, off);
}

void store_from_float(char* base, DType t, int64_t off, float v) {
  if (t == DType::Bool)
    reinterpret_cast<uint8_t*>(base)[off] = v != 0.0f;
  else
    store_float(base, t, off, v);
}

}  // namespace

Tensor Tensor::empty(const Shape4& shape, DType dtype) {
  for (int64_t d : shape) ATTNPROF_CHECK(d > 0, "tensor dimensions must be positive, got shape {}", shape_str(shape));
  const int64_t limit = int64_t(1) << 48;
  int64_t n = 1;
  for (int64_t d : shape) {
    ATTNPROF_CHECK(n <= limit / d, "tensor of shape {} is too large to allocate", shape_str(shape));
    n *= d;
  }
  Tensor t;
  t.storage_ = std::make_shared<Storage>(size_t(n) * dtype_size(dtype));
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(const Shape4& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.raw(), 0, t.nbytes());
  return t;
}

Tensor Tensor::full(const Shape4& shape, DType dtype, float value) {
  Tensor t = empty(shape, dtype);
  const int64_t n = t.numel();
  char* base = static_cast<char*>(t.raw());
  for (int64_t i = 0; i < n; ++i) store_from_float(base, dtype, i, value);
  return t;
}

bool Tensor::is_contiguous() const { return strides_ == contiguous_strides(shape_); }

Tensor Tensor::transpose() const {
  Tensor t = *this;
  std::swap(t.shape_[2], t.shape_[3]);
  std::swap(t.strides_[2], t.strides_[3]);
  return t;
}

Tensor Tensor::expand(const Shape4& shape) const {
  Tensor t = *this;
  for (size_t i = 0; i < 4; ++i) {
    if (shape_[i] == shape[i]) continue;
    ATTNPROF_CHECK(shape_[i] == 1, "cannot expand shape {} to {}: dim {} is {}, not 1", shape_str(shape_),
                   shape_str(shape), i, shape_[i]);
    t.shape_[i] = shape[i];
    t.strides_[i] = 0;
  }
  return t;
}

Tensor Tensor::to(DType dtype) const {
  Tensor out = empty(shape_, dtype);
  const char* src = static_cast<const char*>(raw());
  char* dst = static_cast<char*>(out.raw());
  int64_t o = 0;
  if (dtype == dtype_ && is_contiguous()) {
    std::memcpy(dst, src, nbytes());
    return out;
  }
  for (int64_t b = 0; b < shape_[0]; ++b)
    for (int64_t h = 0; h < shape_[1]; ++h)
      for (int64_t i = 0; i < shape_[2]; ++i) {
        const int64_t row = b * strides_[0] + h * strides_[1] + i * strides_[2];
        if (is_half(dtype_) && dtype == DType::F32 && strides_[3] == 1) {
          const uint16_t* s = reinterpret_cast<const uint16_t*>(src) + row;
          float* d = reinterpret_cast<float*>(dst) + o;
          for (int64_t j = 0; j < shape_[3]; ++j) d[j] = half_to_float(dtype_, s[j]);
          o += shape_[3];
          continue;
        }
        if (dtype_ == DType::F32 && is_half(dtype) && strides_[3] == 1) {
          const float* s = reinterpret_cast<const float*>(src) + row;
          uint16_t* d = reinterpret_cast<uint16_t*>(dst) + o;
          for (int64_t j = 0; j < shape_[3]; ++j) d[j] = float_to_half(dtype, s[j]);
          o += shape_[3];
          continue;
        }
        for (int64_t j = 0; j < shape_[3]; ++j)
          store_from_float(dst, dtype, o++, load_as_float(src, dtype_, row + j * strides_[3]));
      }
  return out;
}

Tensor Tensor::clone() const { return to(dtype_); }

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

float Tensor::get(int64_t b, int64_t h, int64_t i, int64_t j) const {
  return load_as_float(static_cast<const char*>(raw()), dtype_, offset_of(b, h, i, j));
}

void Tensor::set(int64_t b, int64_t h, int64_t i, int64_t j, float v) {
  store_from_float(static_cast<char*>(raw()), dtype_, offset_of(b, h, i, j), v);
}

namespace {

// SplitMix64's finaliser: spreads a counter into a well-mixed 64-bit seed.
uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

void fill_randn(Tensor& t, uint64_t seed) {
  ATTNPROF_CHECK(t.defined(), "fill_randn on an undefined tensor");
  ATTNPROF_CHECK(t.is_contiguous(), "fill_randn needs a contiguous tensor");
  // Blocks of 2^16 elements, each from its own generator seeded by (seed, block): the threads share the work
  // and the bits depend on the seed alone, not on how many threads drew them. Even-sized, so no Box-Muller
  // pair straddles two blocks. Seeds seed, seed+1, seed+2 (q, k, v) give streams that never meet: block b of
  // one equals block b' of another only if b - b' = 1 / golden ratio (mod 2^64), no block count a tensor has.
  constexpr int64_t kBlock = int64_t(1) << 16;
  constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
  const double two_pi = 6.283185307179586;
  const int64_t n = t.numel();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  char* base = static_cast<char*>(t.raw());
  const DType dtype = t.dtype();
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    std::mt19937_64 gen(mix64(seed + kGolden * uint64_t(b + 1)));
    auto uniform = [&] { return (double(gen() >> 11) + 0.5) * (1.0 / 9007199254740992.0); };  // (0,1)
    const int64_t end = std::min(n, (b + 1) * kBlock);
    for (int64_t i = b * kBlock; i < end; i += 2) {
      const double r = std::sqrt(-2.0 * std::log(uniform()));
      const double a = two_pi * uniform();
      store_from_float(base, dtype, i, float(r * std::cos(a)));
      if (i + 1 < end) store_from_float(base, dtype, i + 1, float(r * std::sin(a)));
    }
  }
}

std::string nonfinite_summary(const Tensor& t, bool allow_neg_inf) {
  if (!t.defined()) return "";
  int64_t nans = 0, infs = 0;
  Shape4 first{-1, -1, -1, -1};
  for (int64_t b = 0; b < t.shape(0); ++b)
    for (int64_t h = 0; h < t.shape(1); ++h)
      for (int64_t i = 0; i < t.shape(2); ++i)
        for (int64_t j = 0; j < t.shape(3); ++j) {
          const float x = t.get(b, h, i, j);
          if (std::isfinite(x) || (allow_neg_inf && x < 0 && std::isinf(x))) continue;
          ++(std::isnan(x) ? nans : infs);
          if (first[0] < 0) first = {b, h, i, j};
        }
  if (nans + infs == 0) return "";
  return fmt::format("{} NaN and {} Inf, the first at {}", nans, infs, shape_str(first));
}

}  // namespace attnprof
