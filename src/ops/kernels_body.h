// Internal: the row kernels of kernels.h, written once over vector traits F (simd::Scalar, Avx2, Avx512)
// and compiled per target. Every loop is a full-vector main part plus one masked tail; bf16 and fp16 round
// once on store, bit-identical to float_to_bf16 / float_to_f16. Included inside the target region with
// KERNELS_NS / KERNELS_VEC.
#pragma once

namespace attnprof::ops::detail::KERNELS_NS {

using F = KERNELS_VEC;
using V = typename F::V;
inline constexpr int W = F::W;

// The two 16-bit storage types through one interface, so each half kernel below is written once.
struct Bf16Io {
  static V load(const uint16_t* p) { return F::load_bf16(p); }
  static V load_n(const uint16_t* p, int64_t n) { return F::load_bf16_n(p, n); }
  static void store(uint16_t* p, V v) { F::store_bf16(p, v); }
  static void store_n(uint16_t* p, V v, int64_t n) { F::store_bf16_n(p, v, n); }
  static uint16_t round(float f) { return float_to_bf16(f); }
};
struct F16Io {
  static V load(const uint16_t* p) { return F::load_f16(p); }
  static V load_n(const uint16_t* p, int64_t n) { return F::load_f16_n(p, n); }
  static void store(uint16_t* p, V v) { F::store_f16(p, v); }
  static void store_n(uint16_t* p, V v, int64_t n) { F::store_f16_n(p, v, n); }
  static uint16_t round(float f) { return float_to_f16(f); }
};

inline void scale_f32(const float* a, float* out, int64_t n, float s) {
  const V vs = F::set1(s);
  int64_t j = 0;
  for (; j + 2 * W <= n; j += 2 * W) {
    const V x0 = F::load(a + j), x1 = F::load(a + j + W);
    F::store(out + j, F::mul(x0, vs));
    F::store(out + j + W, F::mul(x1, vs));
  }
  for (; j < n; j += W) F::store_n(out + j, F::mul(F::load_n(a + j, n - j), vs), n - j);
}

inline void fill_f32(float* a, const uint8_t* mask, int64_t n, float value) {
  const V vv = F::set1(value);
  int64_t j = 0;
  for (; j + W <= n; j += W) F::store(a + j, F::select(F::nonzero_bytes(mask + j), vv, F::load(a + j)));
  for (; j < n; ++j)
    if (mask[j]) a[j] = value;
}

template <class H>
inline void scale_h(const uint16_t* a, uint16_t* out, int64_t n, float s) {
  const V vs = F::set1(s);
  int64_t j = 0;
  for (; j + W <= n; j += W) H::store(out + j, F::mul(H::load(a + j), vs));
  for (; j < n; j += W) H::store_n(out + j, F::mul(H::load_n(a + j, n - j), vs), n - j);
}

template <class H>
inline void fill_h(uint16_t* a, const uint8_t* mask, int64_t n, float value) {
  const V vv = F::set1(value);
  int64_t j = 0;
  for (; j + W <= n; j += W) H::store(a + j, F::select(F::nonzero_bytes(mask + j), vv, H::load(a + j)));
  const uint16_t hv = H::round(value);
  for (; j < n; ++j)
    if (mask[j]) a[j] = hv;
}

template <class LoadA, class StoreA, class LoadM>
inline void add_any(int64_t n, LoadA la, StoreA sa, LoadM lm) {
  int64_t j = 0;
  for (; j + W <= n; j += W) sa(j, F::add(la(j, W), lm(j, W)), W);
  if (j < n) sa(j, F::add(la(j, n - j), lm(j, n - j)), n - j);
}
inline auto ld_f32(const float* p) {
  return [p](int64_t j, int64_t k) { return k >= W ? F::load(p + j) : F::load_n(p + j, k); };
}
template <class H>
inline auto ld_h(const uint16_t* p) {
  return [p](int64_t j, int64_t k) { return k >= W ? H::load(p + j) : H::load_n(p + j, k); };
}
inline auto st_f32(float* p) {
  return [p](int64_t j, V v, int64_t k) { k >= W ? F::store(p + j, v) : F::store_n(p + j, v, k); };
}
template <class H>
inline auto st_h(uint16_t* p) {
  return [p](int64_t j, V v, int64_t k) { k >= W ? H::store(p + j, v) : H::store_n(p + j, v, k); };
}
inline void add_f32_f32(float* a, const float* m, int64_t n) { add_any(n, ld_f32(a), st_f32(a), ld_f32(m)); }
template <class H>
inline void add_f32_h(float* a, const uint16_t* m, int64_t n) { add_any(n, ld_f32(a), st_f32(a), ld_h<H>(m)); }
template <class H>
inline void add_h_f32(uint16_t* a, const float* m, int64_t n) { add_any(n, ld_h<H>(a), st_h<H>(a), ld_f32(m)); }
template <class H>
inline void add_h_h(uint16_t* a, const uint16_t* m, int64_t n) { add_any(n, ld_h<H>(a), st_h<H>(a), ld_h<H>(m)); }

template <class H>
inline void cvt_f32_h(const float* a, uint16_t* out, int64_t n) {
  int64_t j = 0;
  for (; j + W <= n; j += W) H::store(out + j, F::load(a + j));
  if (j < n) H::store_n(out + j, F::load_n(a + j, n - j), n - j);
}
template <class H>
inline void cvt_h_f32(const uint16_t* a, float* out, int64_t n) {
  int64_t j = 0;
  for (; j + W <= n; j += W) F::store(out + j, H::load(a + j));
  if (j < n) F::store_n(out + j, H::load_n(a + j, n - j), n - j);
}

// softmax of the n values `ld` reads (as fp32), written through `st`; `ex` (n floats) holds the exponentials
// between the passes and may be the input itself (each pass reads a block before it overwrites it).
// exp(x - max) = exp2((x - max)·log2e). Not one FMA x·log2e - round(max·log2e): the max's own exponent
// would be the rounding residual, up to half an ulp of max·log2e, which is positive half the time and past
// 2^7 once |max| exceeds ~1.5e9: exp2 then overflows, and the row is inf or NaN. x - max is <= 0 exactly.
template <class Load, class Store>
inline void softmax_any(int64_t n, Load ld, float* ex, Store st) {
  constexpr float kLog2e = 1.4426950408889634f;
  const float ninf = -std::numeric_limits<float>::infinity();
  V vmax = F::set1(ninf);
  int64_t j = 0;
  for (; j + W <= n; j += W) vmax = F::max(vmax, ld(j, W));
  if (j < n) vmax = F::max(vmax, F::keep_first(ld(j, n - j), n - j, ninf));
  const float mx = F::hmax(vmax);
  if (mx == ninf) {
    // Every score -inf gives zeros (one convention for every variant), unless the max skipped a NaN (vmaxps
    // drops one operand's NaN): a NaN anywhere in a row makes the row NaN, as in PyTorch. Elsewhere the NaN
    // reaches the sum through exp2.
    bool nan = false;
    for (j = 0; j < n && !nan; j += W) nan = F::any_nan(F::keep_first(ld(j, std::min<int64_t>(W, n - j)), n - j, 0.0f));
    const V fill = nan ? F::set1(std::numeric_limits<float>::quiet_NaN()) : F::zero();
    for (j = 0; j < n; j += W) st(j, fill, std::min<int64_t>(W, n - j));
    return;
  }
  const V l2e = F::set1(kLog2e), vmx = F::set1(mx);
  V vsum = F::zero();
  for (j = 0; j < n; j += W) {
    const int64_t k = std::min<int64_t>(W, n - j);
    V e = F::exp2(F::mul(F::sub(ld(j, k), vmx), l2e));
    if (k < W) e = F::keep_first(e, k, 0.0f);
    vsum = F::add(vsum, e);
    if (k >= W) F::store(ex + j, e); else F::store_n(ex + j, e, k);
  }
  const V inv = F::set1(1.0f / F::hsum(vsum));
  for (j = 0; j < n; j += W) {
    const int64_t k = std::min<int64_t>(W, n - j);
    st(j, F::mul(k >= W ? F::load(ex + j) : F::load_n(ex + j, k), inv), k);
  }
}

inline void softmax_f32(const float* in, float* out, int64_t n) {
  // exponentials go straight to `out` (in place: over the inputs already consumed by the max pass)
  softmax_any(n, ld_f32(in), out, st_f32(out));
}
template <class H>
inline void softmax_h(const uint16_t* in, uint16_t* out, int64_t n, float* tmp) {
  softmax_any(n, ld_h<H>(in), tmp, st_h<H>(out));
}

template <class H>
constexpr HalfRowKernels half_table() {
  return {scale_h<H>, fill_h<H>, add_f32_h<H>, add_h_f32<H>, add_h_h<H>, cvt_f32_h<H>, cvt_h_f32<H>, softmax_h<H>};
}

inline const RowKernels& table() {
  static const RowKernels k{scale_f32, fill_f32, add_f32_f32, softmax_f32, half_table<Bf16Io>(), half_table<F16Io>()};
  return k;
}

}  // namespace attnprof::ops::detail::KERNELS_NS
