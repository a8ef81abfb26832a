// Internal: 8-lane fp32 vector traits for the AVX2+FMA target (flash kernel and elementwise ops).
// Include only between ATTNPROF_TARGET_BEGIN(ATTNPROF_FEATURES_AVX2) and ATTNPROF_TARGET_END, after the
// std headers and <immintrin.h>.
#pragma once

namespace attnprof::simd {

struct Avx2 {
  using V = __m256;
  static constexpr int W = 8;

  static __m256i lane_mask(int64_t n) {
    const int32_t k = int32_t(n < 0 ? 0 : n > W ? W : n);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V load_n(const float* p, int64_t n) { return _mm256_maskload_ps(p, lane_mask(n)); }
  static void store_n(float* p, V v, int64_t n) { _mm256_maskstore_ps(p, lane_mask(n), v); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V zero() { return _mm256_setzero_ps(); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static float hmax(V v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }
  static bool any_nan(V v) { return _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0; }
  static float hsum(V v) {
    __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }
  // Lanes at index < n become x (causal masking of a column of transposed scores).
  static V mask_first(V v, int64_t n, float x) {
    return _mm256_blendv_ps(v, _mm256_set1_ps(x), _mm256_castsi256_ps(lane_mask(n)));
  }
  // Lanes at index >= valid become x (the causal / ragged tail of a score row).
  static V keep_first(V v, int64_t valid, float x) {
    return _mm256_blendv_ps(_mm256_set1_ps(x), v, _mm256_castsi256_ps(lane_mask(valid)));
  }

  // 2^x for x <= 0, -inf -> 0, NaN -> NaN; see Avx512::exp2. 2^n is built in the exponent field (n >= -125
  // keeps the result normal); arguments below -125 give exactly 0.
  static V exp2(V x) {
    const V ok = _mm256_cmp_ps(x, _mm256_set1_ps(-125.0f), _CMP_NLT_UQ);  // NaN passes, and stays NaN:
    x = _mm256_max_ps(_mm256_set1_ps(-125.0f), x);                         // vmaxps returns its second operand
    const V n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const V f = _mm256_sub_ps(x, n);
    V p = _mm256_set1_ps(1.535336188319500e-4f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.339887440266574e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.618437357674640e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.550332471162809e-2f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.402264791363012e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.931472028550421e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
    return _mm256_and_ps(ok, _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e)));
  }

  static V load_bf16(const uint16_t* p) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p)), 16));
  }
  static V load_bf16_n(const uint16_t* p, int64_t n) {
    alignas(16) uint16_t t[8] = {};
    for (int64_t i = 0; i < n && i < W; ++i) t[i] = p[i];
    return load_bf16(t);
  }
  static __m128i to_bf16(V v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    const __m256i nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40)), nan);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    return _mm256_castsi256_si128(packed);
  }
  static void store_bf16(uint16_t* p, V v) { _mm_storeu_si128((__m128i*)p, to_bf16(v)); }
  static void store_bf16_n(uint16_t* p, V v, int64_t n) {
    alignas(16) uint16_t t[8];
    _mm_store_si128((__m128i*)t, to_bf16(v));
    for (int64_t i = 0; i < n && i < W; ++i) p[i] = t[i];
  }

  // fp16 <-> fp32 by F16C (vcvtph2ps, vcvtps2ph with round to nearest even): bit-identical to f16_to_float /
  // float_to_f16 (tests/test_tensor.cpp checks the hardware against them).
  static V load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)); }
  static V load_f16_n(const uint16_t* p, int64_t n) {
    alignas(16) uint16_t t[8] = {};
    for (int64_t i = 0; i < n && i < W; ++i) t[i] = p[i];
    return load_f16(t);
  }
  static void store_f16(uint16_t* p, V v) {
    _mm_storeu_si128((__m128i*)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static void store_f16_n(uint16_t* p, V v, int64_t n) {
    alignas(16) uint16_t t[8];
    store_f16(t, v);
    for (int64_t i = 0; i < n && i < W; ++i) p[i] = t[i];
  }

  using Mask = V;
  static V nonzero_bytes(const uint8_t* m) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)m));
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(b, _mm256_setzero_si256()));
  }
  static V select(V k, V if_set, V otherwise) { return _mm256_blendv_ps(otherwise, if_set, k); }
};

}  // namespace attnprof::simd
