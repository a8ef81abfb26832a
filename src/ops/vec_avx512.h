// Internal: 16-lane fp32 vector traits for the AVX-512 target (flash kernel and elementwise ops).
// Include only between ATTNPROF_TARGET_BEGIN(ATTNPROF_FEATURES_AVX512) and ATTNPROF_TARGET_END, after the
// std headers and <immintrin.h>, so nothing here is emitted for the baseline target.
#pragma once

namespace attnprof::simd {

struct Avx512 {
  using V = __m512;
  static constexpr int W = 16;

  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static __mmask16 lanes(int64_t n) { return n >= W ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1); }
  static V load_n(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(lanes(n), p); }
  static void store_n(float* p, V v, int64_t n) { _mm512_mask_storeu_ps(p, lanes(n), v); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V zero() { return _mm512_setzero_ps(); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static float hmax(V v) { return _mm512_reduce_max_ps(v); }
  static float hsum(V v) { return _mm512_reduce_add_ps(v); }
  static bool any_nan(V v) { return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0; }
  // Lanes at index < n become x (causal masking of a column of transposed scores).
  static V mask_first(V v, int64_t n, float x) { return _mm512_mask_blend_ps(lanes(n), v, _mm512_set1_ps(x)); }
  // Lanes at index >= valid become x (the causal / ragged tail of a score row).
  static V keep_first(V v, int64_t valid, float x) { return _mm512_mask_blend_ps(lanes(valid), _mm512_set1_ps(x), v); }

  // 2^x for x <= 0 (softmax arguments), -inf -> 0, NaN -> NaN (a NaN score must not vanish from its row).
  // Range reduction x = n + f, |f| <= 1/2; degree-6 polynomial for 2^f (Cephes exp2f coefficients, relative
  // error ~2e-7); 2^n applied with vscalefps. Arguments below -125 give exactly 0 (they would be denormals,
  // which only cost time).
  static V exp2(V x) {
    const __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-125.0f), _CMP_NLT_UQ);  // NaN passes, and stays
    x = _mm512_max_ps(_mm512_set1_ps(-125.0f), x);  // NaN: vmaxps returns its second operand when either is NaN
    const V n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const V f = _mm512_sub_ps(x, n);
    V p = _mm512_set1_ps(1.535336188319500e-4f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.339887440266574e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618437357674640e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550332471162809e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264791363012e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931472028550421e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps(ok, p, n);
  }

  // bf16 <-> fp32, bit-identical to bf16_to_float / float_to_bf16 (round to nearest even, quiet NaN).
  static V load_bf16(const uint16_t* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)p)), 16));
  }
  static V load_bf16_n(const uint16_t* p, int64_t n) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(lanes(n), p)), 16));
  }
  static __m256i to_bf16(V v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
    return _mm512_cvtepi32_epi16(r);
  }
  static void store_bf16(uint16_t* p, V v) { _mm256_storeu_si256((__m256i*)p, to_bf16(v)); }
  static void store_bf16_n(uint16_t* p, V v, int64_t n) { _mm256_mask_storeu_epi16(p, lanes(n), to_bf16(v)); }

  // fp16 <-> fp32 (vcvtph2ps, vcvtps2ph round to nearest even), bit-identical to f16_to_float / float_to_f16.
  static V load_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p)); }
  static V load_f16_n(const uint16_t* p, int64_t n) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes(n), p)); }
  static void store_f16(uint16_t* p, V v) {
    _mm256_storeu_si256((__m256i*)p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static void store_f16_n(uint16_t* p, V v, int64_t n) {
    _mm256_mask_storeu_epi16(p, lanes(n), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }

  // Bool mask bytes (0/1) -> lane mask of nonzero bytes.
  using Mask = __mmask16;
  static __mmask16 nonzero_bytes(const uint8_t* m) {
    return _mm_test_epi8_mask(_mm_loadu_si128((const __m128i*)m), _mm_set1_epi8(-1));
  }
  static V select(__mmask16 k, V if_set, V otherwise) { return _mm512_mask_blend_ps(k, otherwise, if_set); }
};

}  // namespace attnprof::simd
