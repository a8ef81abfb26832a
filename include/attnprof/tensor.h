// attnprof/tensor.h: 4-D strided tensors over tracked, 64-byte aligned storage.
//
//   Tensor q = Tensor::empty({8, 16, 1024, 64}, DType::BF16);   // [B, H, N, D], contiguous
//   fill_randn(q, /*seed=*/0);                                   // reproducible N(0,1), rounded to bf16
//   Tensor kt = k.transpose();                                   // view: swaps the last two dims
//   float x = q.get(0, 3, 17, 5);                                // slow element read, for tests/reference
//
// Every tensor is 4-D (attention's [B, H, N, D]); masks are [B|1, H|1, Nq, Nk]. Strides are in elements;
// a stride of 0 broadcasts. Copies of a Tensor share storage (like torch), `clone()` copies data.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "attnprof/dtype.h"

namespace attnprof {

using Shape4 = std::array<int64_t, 4>;

std::string shape_str(const Shape4& s);  // "[8, 16, 1024, 64]"
constexpr int64_t numel(const Shape4& s) { return s[0] * s[1] * s[2] * s[3]; }  // elements of a shape

// A block of tracked memory; frees itself through the tracked allocator.
class Storage {
 public:
  explicit Storage(size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_;
  size_t bytes_;
};

class Tensor {
 public:
  Tensor() = default;

  // Uninitialised contiguous tensor. Throws on a non-positive dimension.
  static Tensor empty(const Shape4& shape, DType dtype);
  static Tensor zeros(const Shape4& shape, DType dtype);
  static Tensor full(const Shape4& shape, DType dtype, float value);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape4& shape() const { return shape_; }
  const Shape4& strides() const { return strides_; }
  int64_t shape(int i) const { return shape_[size_t(i < 0 ? i + 4 : i)]; }
  int64_t stride(int i) const { return strides_[size_t(i < 0 ? i + 4 : i)]; }
  int64_t numel() const { return attnprof::numel(shape_); }
  size_t element_size() const { return dtype_size(dtype_); }
  size_t nbytes() const { return size_t(numel()) * element_size(); }
  bool is_contiguous() const;

  // Pointer to element (0,0,0,0): the start of the storage, which no view moves.
  template <class T>
  T* data() const { return static_cast<T*>(storage_->data()); }
  void* raw() const { return data<char>(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Views (no copy).
  Tensor transpose() const;                        // swap dims 2 and 3
  Tensor expand(const Shape4& shape) const;        // broadcast size-1 dims with stride 0

  // Copies.
  Tensor clone() const;                            // contiguous copy, same dtype
  Tensor contiguous() const;                       // *this if already contiguous, else clone()
  Tensor to(DType dtype) const;                    // contiguous copy converted to dtype

  // Slow element access (reads bf16/fp16/bool as float). For tests, references and I/O, not kernels.
  float get(int64_t b, int64_t h, int64_t i, int64_t j) const;
  void set(int64_t b, int64_t h, int64_t i, int64_t j, float v);
  int64_t offset_of(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return b * strides_[0] + h * strides_[1] + i * strides_[2] + j * strides_[3];
  }

 private:
  std::shared_ptr<Storage> storage_;
  Shape4 shape_{0, 0, 0, 0};
  Shape4 strides_{0, 0, 0, 0};
  DType dtype_ = DType::F32;
};

// Fills with N(0,1) samples from a portable generator (mt19937_64 + Box-Muller, one generator per block of
// 2^16 elements, seeded from the seed and the block): same seed, same bits on every platform and at every
// thread count, drawn in parallel. bf16 and fp16 tensors receive the samples rounded to their type.
void fill_randn(Tensor& t, uint64_t seed);

// The non-finite elements of `t`, described for an error message ("1 NaN and 2 Inf, the first at
// [0, 0, 0, 5]"), or "" when every element is finite. With `allow_neg_inf`, -inf counts as finite (an
// additive mask's "masked out").
std::string nonfinite_summary(const Tensor& t, bool allow_neg_inf = false);

}  // namespace attnprof
