// Internal: 1-lane "vector" traits for the baseline target, so bodies written over vector traits
// (ops/kernels_body.h) also compile as the portable scalar fallback.
#pragma once

#include <algorithm>
#include <cmath>

#include "attnprof/dtype.h"

namespace attnprof::simd {

struct Scalar {
  using V = float;
  using Mask = bool;
  static constexpr int W = 1;
  static V load(const float* p) { return *p; }
  static void store(float* p, V v) { *p = v; }
  static V load_n(const float* p, int64_t n) { return n > 0 ? *p : 0.0f; }
  static void store_n(float* p, V v, int64_t n) { if (n > 0) *p = v; }
  static V set1(float x) { return x; }
  static V zero() { return 0.0f; }
  static V fma(V a, V b, V c) { return a * b + c; }
  static V mul(V a, V b) { return a * b; }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V max(V a, V b) { return std::max(a, b); }
  static float hmax(V v) { return v; }
  static float hsum(V v) { return v; }
  static bool any_nan(V v) { return std::isnan(v); }
  // Lanes at index < n become x (causal masking of a column of transposed scores).
  static V mask_first(V v, int64_t n, float x) { return n > 0 ? x : v; }
  static V keep_first(V v, int64_t valid, float x) { return valid > 0 ? v : x; }
  static V exp2(V x) { return std::exp2(x); }
  static V load_bf16(const uint16_t* p) { return bf16_to_float(*p); }
  static V load_bf16_n(const uint16_t* p, int64_t n) { return n > 0 ? bf16_to_float(*p) : 0.0f; }
  static void store_bf16(uint16_t* p, V v) { *p = float_to_bf16(v); }
  static void store_bf16_n(uint16_t* p, V v, int64_t n) { if (n > 0) *p = float_to_bf16(v); }
  static V load_f16(const uint16_t* p) { return f16_to_float(*p); }
  static V load_f16_n(const uint16_t* p, int64_t n) { return n > 0 ? f16_to_float(*p) : 0.0f; }
  static void store_f16(uint16_t* p, V v) { *p = float_to_f16(v); }
  static void store_f16_n(uint16_t* p, V v, int64_t n) { if (n > 0) *p = float_to_f16(v); }
  static Mask nonzero_bytes(const uint8_t* m) { return *m != 0; }
  static V select(Mask k, V if_set, V otherwise) { return k ? if_set : otherwise; }
};

}  // namespace attnprof::simd
