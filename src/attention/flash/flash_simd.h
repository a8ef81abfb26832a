// Internal: the fast FlashAttention-2 forward, written once over a vector-traits type F (simd::Avx512,
// simd::Avx2 in src/ops/vec_*.h) and compiled per target by flash_avx512.cpp / flash_avx2.cpp inside
// their ATTNPROF_TARGET region (flash_body.h stays the portable scalar fallback and the readable spec).
//
// Per task (one block of kBr query rows of one (b, h)):
//   1. Q block -> scratch (fp32 rows, or bf16 pairs for vdpbf16ps).
//   2. For each K/V block of kBc keys (causal: only blocks left of the diagonal):
//      pack K transposed into panels [kBc/PW][D][PW] (PW = NR·W columns) that the Q·Kᵀ micro-kernel
//      streams with unit stride, and V into rows padded to Dp = D rounded up to W (bf16: key pairs
//      interleaved, [kBc/2][Dp][2]);
//      S = Q·Kᵀ with an MR×NR register-blocked micro-kernel (MR rows × NR vectors of keys);
//      online softmax per row in base 2 (scale·log2e folded into one multiply, vectorised exp2),
//      masks applied here, causal masking only in diagonal blocks;
//      O = diag(α)·O + P·V with an MR×NV micro-kernel that rescales O while loading it.
//   3. O / ℓ stored once (deferred normalisation), L = m + log ℓ; a row that saw no key gives 0, -inf.
// Scratch per thread comes from the tracked allocator (so memory_stats() counts it): with kBr = 128,
// kBc = 64 it is 4·(2·kBr·Dp + 2·kBc·Dp + 1.5·kBr·kBc) bytes, 0.48 MiB at D = 256.
#pragma once

namespace attnprof::flash::FLASH_NS {

using F = FLASH_VEC;
using V = typename F::V;
inline constexpr int W = F::W;

// Tile sizes, measured on the Zen 4 VM (2 cores) with bench_attention, fp32 [1,16,4096,128] non-causal,
// 1 thread: see docs/performance.md ("Tile sizes") for the table. kBc = 64 = one 4-vector AVX-512 panel
// (the whole S row block of a micro-tile lives in 24 zmm accumulators); larger kBr amortises the K/V
// packing over more query rows until Q + O tiles (2·kBr·D·4 bytes) leave L2.
inline constexpr int64_t kBr = 128;
inline constexpr int64_t kBc = 64;
// Micro-kernel shapes. AVX-512 (32 zmm): 6 rows × 4 vectors = 24 accumulators + 4 loads + 1 broadcast.
// AVX2 (16 ymm): 6 × 2 = 12 accumulators + 2 + 1. FMA latency 4 × 2 pipes needs >= 8 in flight.
inline constexpr int kMr = 6;
inline constexpr int kNr = W == 16 ? 4 : 2;   // key vectors per Q·Kᵀ micro-tile
inline constexpr int kPw = kNr * W;           // K panel width in keys
inline constexpr int kNv = W == 16 ? 4 : 2;   // output vectors per P·V micro-tile
static_assert(kBc % kPw == 0 && kBc % W == 0, "kBc must hold whole panels");

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// --- fp32 micro-kernels ------------------------------------------------------------------------------
// s[i][0:PW) = Σ_d q[i][d] · kp[d][0:PW)   for i < MR
template <int MR>
inline void qk_f32(const float* q, int64_t ldq, const float* kp, int64_t D, float* s, int64_t lds) {
  V acc[MR][kNr];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) acc[i][j] = F::zero();
  for (int64_t d = 0; d < D; ++d) {
    const float* kr = kp + d * kPw;
    V kv[kNr];
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) kv[j] = F::load(kr + j * W);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const V qb = F::set1(q[i * ldq + d]);
#pragma GCC unroll 4
      for (int j = 0; j < kNr; ++j) acc[i][j] = F::fma(qb, kv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) F::store(s + i * lds + j * W, acc[i][j]);
}

// o[i][0:NV·W) = α_i · o[i][0:NV·W) + Σ_c p[i][c] · v[c][0:NV·W)   for i < MR, c < kc
template <int MR, int NV>
inline void pv_f32(const float* p, int64_t ldp, const float* v, int64_t ldv, int64_t kc, float* o, int64_t ldo,
                   const float* alpha) {
  V acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const V a = F::set1(alpha[i]);
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = F::mul(F::load(o + i * ldo + j * W), a);
  }
  for (int64_t c = 0; c < kc; ++c) {
    const float* vr = v + c * ldv;
    V vv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) vv[j] = F::load(vr + j * W);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const V pb = F::set1(p[i * ldp + c]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = F::fma(pb, vv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) F::store(o + i * ldo + j * W, acc[i][j]);
}

#if FLASH_BF16_DOT
// --- bf16 micro-kernels (vdpbf16ps: each 32-bit lane holds a pair, acc += a.lo·b.lo + a.hi·b.hi) ---------
template <int MR>
inline void qk_bf16(const uint32_t* q, int64_t ldq, const uint32_t* kp, int64_t D2, float* s, int64_t lds) {
  __m512 acc[MR][kNr];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t d = 0; d < D2; ++d) {
    const uint32_t* kr = kp + d * kPw;
    __m512i kv[kNr];
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) kv[j] = _mm512_loadu_si512(kr + j * 16);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512i qb = _mm512_set1_epi32(int(q[i * ldq + d]));
#pragma GCC unroll 4
      for (int j = 0; j < kNr; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], (__m512bh)qb, (__m512bh)kv[j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) _mm512_storeu_ps(s + i * lds + j * 16, acc[i][j]);
}

template <int MR, int NV>
inline void pv_bf16(const uint32_t* p, int64_t ldp, const uint32_t* v, int64_t ldv, int64_t kc2, float* o,
                    int64_t ldo, const float* alpha) {
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m512 a = _mm512_set1_ps(alpha[i]);
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_mul_ps(_mm512_loadu_ps(o + i * ldo + j * 16), a);
  }
  for (int64_t c = 0; c < kc2; ++c) {
    const uint32_t* vr = v + c * ldv;
    __m512i vv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) vv[j] = _mm512_loadu_si512(vr + j * 16);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512i pb = _mm512_set1_epi32(int(p[i * ldp + c]));
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], (__m512bh)pb, (__m512bh)vv[j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) _mm512_storeu_ps(o + i * ldo + j * 16, acc[i][j]);
}
#endif

// Row-count (and vector-count) remainders dispatch to the template instance that fits.
template <class Fn>
inline void by_rows(int64_t mr, Fn&& fn) {
  switch (mr) {
    case 6: fn(std::integral_constant<int, 6>{}); break;
    case 5: fn(std::integral_constant<int, 5>{}); break;
    case 4: fn(std::integral_constant<int, 4>{}); break;
    case 3: fn(std::integral_constant<int, 3>{}); break;
    case 2: fn(std::integral_constant<int, 2>{}); break;
    default: fn(std::integral_constant<int, 1>{}); break;
  }
}
template <class Fn>
inline void by_vecs(int64_t nv, Fn&& fn) {
  if constexpr (kNv == 4) {
    switch (nv) {
      case 4: fn(std::integral_constant<int, 4>{}); return;
      case 3: fn(std::integral_constant<int, 3>{}); return;
      default: break;
    }
  }
  if (nv >= 2) fn(std::integral_constant<int, 2>{});
  else fn(std::integral_constant<int, 1>{});
}
static_assert(kMr == 6, "by_rows covers 1..6 rows");

inline float load1(const void* ptr, DType t, int64_t i) {
  return t == DType::F32 ? static_cast<const float*>(ptr)[i] : bf16_to_float(static_cast<const uint16_t*>(ptr)[i]);
}

// Row of n values of dtype t starting at src (unit stride) -> fp32 dst[0:n), zeros up to n_pad.
inline void row_to_f32(const void* src, DType t, int64_t n, int64_t n_pad, float* dst) {
  if (t == DType::F32) {
    std::memcpy(dst, src, size_t(n) * 4);
  } else {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    int64_t d = 0;
    for (; d + W <= n; d += W) F::store(dst + d, F::load_bf16(s + d));
    for (; d < n; ++d) dst[d] = bf16_to_float(s[d]);
  }
  for (int64_t d = n; d < n_pad; ++d) dst[d] = 0.0f;
}

inline void forward(const Params& p, bool bf16_dot) {
  const int64_t D = p.D, Dp = round_up(D, W), D2 = (D + 1) / 2, group = p.Hq / p.Hkv;
  const int64_t q_blocks = (p.Nq + kBr - 1) / kBr;
  const int64_t bh_count = p.B * p.Hq, tasks = bh_count * q_blocks;
  constexpr float kLog2e = 1.4426950408889634f;
  const float ninf = -std::numeric_limits<float>::infinity();
  const bool causal = p.mask == MaskKind::Causal;
  const float qscale = p.scale * kLog2e;  // scores in base 2: exp2 is the cheap exponential
  const int64_t nvec = Dp / W;

  // Scratch layout (floats): Q [kBr][Dp] | K panels [kBc][Dp] | V [kBc][Dp] | S [kBr][kBc] |
  // P16 [kBr][kBc/2] | O [kBr][Dp] | m, l, alpha [kBr] each. bf16 mode keeps pairs in the same slots.
  const int64_t q_sz = kBr * Dp, k_sz = kBc * Dp, v_sz = kBc * Dp, s_sz = kBr * kBc, p_sz = kBr * kBc / 2,
                o_sz = kBr * Dp;
  const size_t scratch_bytes = size_t(q_sz + k_sz + v_sz + s_sz + p_sz + o_sz + 3 * kBr) * sizeof(float);

#pragma omp parallel if (tasks > 1)
  {
    float* const base = static_cast<float*>(tracked_alloc(scratch_bytes));
    float* const Qf = base;
    float* const Kf = Qf + q_sz;
    float* const Vf = Kf + k_sz;
    float* const S = Vf + v_sz;
    uint16_t* const P16 = reinterpret_cast<uint16_t*>(S + s_sz);
    float* const O = S + s_sz + p_sz;
    float* const m = O + o_sz;
    float* const l = m + kBr;
    float* const alpha = l + kBr;
    uint32_t* const Q32 = reinterpret_cast<uint32_t*>(Qf);
    uint32_t* const K32 = reinterpret_cast<uint32_t*>(Kf);
    uint32_t* const V32 = reinterpret_cast<uint32_t*>(Vf);

    // Causal work grows with the Q block index: hand out the heaviest blocks first.
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t qb = causal ? q_blocks - 1 - t / bh_count : t / bh_count;
      const int64_t bh = t % bh_count;
      const int64_t b = bh / p.Hq, h = bh % p.Hq, hk = h / group;
      const int64_t i0 = qb * kBr, rows = std::min(kBr, p.Nq - i0);

      // 1. Q block.
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t off = b * p.qs[0] + h * p.qs[1] + (i0 + r) * p.qs[2];
        if (bf16_dot) {
          uint16_t* dst = reinterpret_cast<uint16_t*>(Q32 + r * D2);
          std::memcpy(dst, static_cast<const uint16_t*>(p.q) + off, size_t(D) * 2);
          if (D % 2) dst[D] = 0;
        } else {
          row_to_f32(static_cast<const char*>(p.q) + off * int64_t(dtype_size(p.dtype)), p.dtype, D, D, Qf + r * Dp);
        }
      }
      std::fill(O, O + rows * Dp, 0.0f);
      std::fill(m, m + rows, ninf);
      std::fill(l, l + rows, 0.0f);

      const int64_t kv_end = causal ? std::min(p.Nk, i0 + rows) : p.Nk;
      for (int64_t j0 = 0; j0 < kv_end; j0 += kBc) {
        const int64_t cols = std::min(kBc, kv_end - j0);
        const int64_t npan = (cols + kPw - 1) / kPw, cw = round_up(cols, W);

        // 2a. Pack K (transposed panels) and V.
        const int64_t ko = b * p.ks[0] + hk * p.ks[1] + j0 * p.ks[2];
        const int64_t vo = b * p.vs[0] + hk * p.vs[1] + j0 * p.vs[2];
        if (bf16_dot) {
          const uint16_t* kb = static_cast<const uint16_t*>(p.k) + ko;
          const uint16_t* vb = static_cast<const uint16_t*>(p.v) + vo;
          for (int64_t c = 0; c < npan * kPw; ++c) {
            uint32_t* dst = K32 + (c / kPw) * D2 * kPw + c % kPw;
            if (c < cols) {
              const uint16_t* kr = kb + c * p.ks[2];
              for (int64_t d = 0; d + 1 < D; d += 2) {
                uint32_t pair;
                std::memcpy(&pair, kr + d, 4);
                dst[(d / 2) * kPw] = pair;
              }
              if (D % 2) dst[(D2 - 1) * kPw] = kr[D - 1];
            } else {
              for (int64_t d = 0; d < D2; ++d) dst[d * kPw] = 0;
            }
          }
          const int64_t kc2 = (cols + 1) / 2;
          for (int64_t c2 = 0; c2 < kc2; ++c2) {
            const uint16_t* v0 = vb + (2 * c2) * p.vs[2];
            const uint16_t* v1 = 2 * c2 + 1 < cols ? vb + (2 * c2 + 1) * p.vs[2] : nullptr;
            uint32_t* dst = V32 + c2 * Dp;
            int64_t d = 0;
            if (v1) {
              for (; d + 16 <= D; d += 16) {
                const __m256i a = _mm256_loadu_si256((const __m256i*)(v0 + d));
                const __m256i c = _mm256_loadu_si256((const __m256i*)(v1 + d));
                const __m256i lo = _mm256_unpacklo_epi16(a, c), hi = _mm256_unpackhi_epi16(a, c);
                _mm256_storeu_si256((__m256i*)(dst + d), _mm256_permute2x128_si256(lo, hi, 0x20));
                _mm256_storeu_si256((__m256i*)(dst + d + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
              }
            }
            for (; d < D; ++d) dst[d] = uint32_t(v0[d]) | (v1 ? uint32_t(v1[d]) << 16 : 0u);
            for (; d < Dp; ++d) dst[d] = 0;
          }
        } else {
          const char* kb = static_cast<const char*>(p.k) + ko * int64_t(dtype_size(p.dtype));
          const int64_t kstride = p.ks[2] * int64_t(dtype_size(p.dtype));
          for (int64_t c = 0; c < npan * kPw; ++c) {
            float* dst = Kf + (c / kPw) * D * kPw + c % kPw;
            if (c < cols) {
              if (p.dtype == DType::F32) {
                const float* kr = reinterpret_cast<const float*>(kb + c * kstride);
                for (int64_t d = 0; d < D; ++d) dst[d * kPw] = kr[d];
              } else {
                const uint16_t* kr = reinterpret_cast<const uint16_t*>(kb + c * kstride);
                for (int64_t d = 0; d < D; ++d) dst[d * kPw] = bf16_to_float(kr[d]);
              }
            } else {
              for (int64_t d = 0; d < D; ++d) dst[d * kPw] = 0.0f;
            }
          }
          const char* vb = static_cast<const char*>(p.v) + vo * int64_t(dtype_size(p.dtype));
          const int64_t vstride = p.vs[2] * int64_t(dtype_size(p.dtype));
          for (int64_t c = 0; c < cols; ++c) row_to_f32(vb + c * vstride, p.dtype, D, Dp, Vf + c * Dp);
        }

        // 2b. S = Q·Kᵀ (unscaled).
        for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
          by_rows(std::min<int64_t>(kMr, rows - r0), [&](auto mr) {
            for (int64_t pan = 0; pan < npan; ++pan) {
#if FLASH_BF16_DOT
              if (bf16_dot) {
                qk_bf16<mr>(Q32 + r0 * D2, D2, K32 + pan * D2 * kPw, D2, S + r0 * kBc + pan * kPw, kBc);
                continue;
              }
#endif
              qk_f32<mr>(Qf + r0 * Dp, Dp, Kf + pan * D * kPw, D, S + r0 * kBc + pan * kPw, kBc);
            }
          });
        }

        // 2c. Online softmax, row by row.
        const bool diagonal = causal && j0 + cols - 1 > i0;
        for (int64_t r = 0; r < rows; ++r) {
          float* s = S + r * kBc;
          const int64_t vis = diagonal ? std::clamp<int64_t>(i0 + r - j0 + 1, 0, cols) : cols;
          const V vq = F::set1(qscale);
          V vmax = F::set1(ninf);
          for (int64_t c = 0; c < cw; c += W) {
            const V x = F::keep_first(F::mul(F::load(s + c), vq), vis - c, ninf);
            F::store(s + c, x);
            vmax = F::max(vmax, x);
          }
          float mx = F::hmax(vmax);
          if (p.mask == MaskKind::Bool || p.mask == MaskKind::Additive) {
            const int64_t mo = b * p.ms[0] + h * p.ms[1] + (i0 + r) * p.ms[2] + j0 * p.ms[3];
            if (p.mask == MaskKind::Bool) {
              const uint8_t* mk = static_cast<const uint8_t*>(p.mask_ptr) + mo;
              for (int64_t c = 0; c < vis; ++c)
                if (!mk[c * p.ms[3]]) s[c] = ninf;
            } else {
              for (int64_t c = 0; c < vis; ++c) s[c] += load1(p.mask_ptr, p.mask_dtype, mo + c * p.ms[3]) * kLog2e;
            }
            mx = ninf;
            for (int64_t c = 0; c < vis; ++c) mx = std::max(mx, s[c]);
          }
          const float m_new = std::max(m[r], mx);
          if (m_new == ninf) {  // nothing visible yet in this row: P = 0, O untouched
            alpha[r] = 1.0f;
            if (bf16_dot)
              std::fill(P16 + r * kBc, P16 + r * kBc + cw, uint16_t(0));
            else
              std::fill(s, s + cw, 0.0f);
            continue;
          }
          alpha[r] = std::exp2(m[r] - m_new);
          const V vm = F::set1(m_new);
          V vsum = F::zero();
          for (int64_t c = 0; c < cw; c += W) {
            const V e = F::exp2(F::sub(F::load(s + c), vm));
            vsum = F::add(vsum, e);
            if (bf16_dot)
              F::store_bf16(P16 + r * kBc + c, e);
            else
              F::store(s + c, e);
          }
          l[r] = l[r] * alpha[r] + F::hsum(vsum);
          m[r] = m_new;
        }

        // 2d. O = diag(α)·O + P·V.
        for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
          by_rows(std::min<int64_t>(kMr, rows - r0), [&](auto mr) {
            for (int64_t v0 = 0; v0 < nvec; v0 += kNv) {
              by_vecs(std::min<int64_t>(kNv, nvec - v0), [&](auto nv) {
#if FLASH_BF16_DOT
                if (bf16_dot) {
                  pv_bf16<mr, nv>(reinterpret_cast<const uint32_t*>(P16 + r0 * kBc), kBc / 2, V32 + v0 * W, Dp,
                                  (cols + 1) / 2, O + r0 * Dp + v0 * W, Dp, alpha + r0);
                  return;
                }
#endif
                pv_f32<mr, nv>(S + r0 * kBc, kBc, Vf + v0 * W, Dp, cols, O + r0 * Dp + v0 * W, Dp, alpha + r0);
              });
            }
          });
        }
      }

      // 3. O / ℓ and the logsumexp.
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t oo = b * p.os[0] + h * p.os[1] + (i0 + r) * p.os[2];
        const float lr = l[r];
        const V inv = F::set1(lr > 0.0f ? 1.0f / lr : 0.0f);  // a row that saw no key gives zeros
        const float* orow = O + r * Dp;
        for (int64_t d = 0; d < D; d += W) {
          const V x = F::mul(F::load(orow + d), inv);
          if (p.dtype == DType::F32)
            F::store_n(static_cast<float*>(p.o) + oo + d, x, D - d);
          else
            F::store_bf16_n(static_cast<uint16_t*>(p.o) + oo + d, x, D - d);
        }
        p.lse[(b * p.Hq + h) * p.Nq + i0 + r] = lr > 0.0f ? (m[r] + std::log2(lr)) / kLog2e : ninf;
      }
    }
    tracked_free(base, scratch_bytes);
  }
}

}  // namespace attnprof::flash::FLASH_NS
