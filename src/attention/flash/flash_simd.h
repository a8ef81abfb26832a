// Internal: the fast FlashAttention-2 forward, written once over a vector-traits type F (simd::Avx512,
// simd::Avx2 in src/ops/vec_*.h) and compiled per target by flash_avx512.cpp / flash_avx2.cpp inside
// their ATTNPROF_TARGET region (flash_body.h stays the portable scalar fallback and the readable spec).
//
// The scores are kept transposed, Sᵀ[key][row], so that vectors run over query rows:
//   * Q·Kᵀ broadcasts K straight from the input (no K packing) against Qᵀ, which is packed once per task;
//   * the online softmax keeps m, ℓ, α as vectors over 16 (8) rows: no horizontal reductions, no scalar exp;
//   * P·V broadcasts Pᵀ[key][row] (consecutive rows are consecutive in memory) against rows of V, which
//     are read in place for fp32 (D a multiple of the vector width) or packed per K/V block otherwise.
// Per task (one block of Br query rows of one (b, h)):
//   1. Qᵀ block -> scratch (fp32 [D][Br], or bf16 pairs [D/2][Br] for vdpbf16ps).
//   2. For each K/V block of Bc keys (causal: only blocks left of the diagonal):
//      Sᵀ = K·Qᵀ with an MR×NR register-blocked micro-kernel (MR keys × NR vectors of rows);
//      online softmax in base 2 (scale·log2e applied inside the exponent, (s − m)·scale, vectorised exp2),
//      masks applied here, causal masking only in diagonal blocks;
//      O = diag(α)·O + P·V with an MR×NV micro-kernel (MR rows × NV vectors of D) that rescales O as it
//      loads it (bf16: P rounded to bf16 and paired over keys, V interleaved in key pairs [Bc/2][Dp][2]).
//   3. O / ℓ stored once (deferred normalisation), L = m + log ℓ; a row that saw no key gives 0, -inf.
// Scratch per thread comes from the tracked allocator, through ThreadScratch (flash.h: allocated by the calling
// thread, so the profiler bills it to flash_attention_fwd), and memory_stats() counts it:
// 4·(2·Br·Dp + 2·Bc·Dp + 1.5·Bc·Br + 3·Br) bytes, 0.72 MiB at D = 256 (Br = 256, Bc = 64).
// Br and Bc are chosen at run time (Params::br, bc: `--flash-block`, else the defaults below).
#pragma once

namespace attnprof::flash::FLASH_NS {

using F = FLASH_VEC;
using V = typename F::V;
inline constexpr int W = F::W;

// Default tile sizes, measured with bench_attention on this 2-core Zen 4 VM (1 thread, CPU ms per forward, two
// interleaved runs each; the VM was shared, so differences under ~5% are noise):
//   Br × Bc      fp32 [1,16,4096,128]   bf16 [1,16,4096,64]
//   64 × 64      1112, 990              430, 340
//   128 × 64     934, 902               273, 268
//   256 × 64     886, 859               271, 262     <- chosen
//   256 × 128    914, 925               315, 305
// A taller Q block amortises Qᵀ packing and the O rescale over more keys; Bc = 64 keeps Sᵀ (Bc·Br·4 =
// 64 KiB) and a K/V block in L2 next to Qᵀ and O. Causal D=64 showed no difference between 128 and 256.
// See docs/performance.md; `attnprof profile flash --flash-block 128x64` runs another.
inline constexpr int64_t kBr = kFlashSimdDefaultBlock.rows;  // 256
inline constexpr int64_t kBc = kFlashSimdDefaultBlock.cols;  // 64
// Micro-kernel shapes. AVX-512 (32 zmm): 6 × 4 = 24 accumulators + 4 loads + 1 broadcast. AVX2 (16 ymm):
// 6 × 2 = 12 accumulators + 2 + 1. FMA latency 4 × 2 pipes needs >= 8 independent accumulators.
inline constexpr int kMr = 6;
inline constexpr int kNr = W == 16 ? 4 : 2;   // row vectors per Q·Kᵀ micro-tile
inline constexpr int64_t kRp = kNr * W;       // rows per Q·Kᵀ micro-tile (a "row panel")
inline constexpr int kNv = W == 16 ? 4 : 2;   // output vectors per P·V micro-tile
static_assert(kBr % kRp == 0 && kBr % W == 0 && kBc % 2 == 0, "tiles must hold whole panels");
// What a block size chosen at run time must be: Br whole row panels (so whole vectors too), Bc whole key pairs.
inline constexpr int64_t kRowMultiple = kRp;
inline constexpr int64_t kColMultiple = 2;

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

inline uint32_t load_pair(const uint16_t* p) {
  uint32_t x;
  std::memcpy(&x, p, 4);
  return x;
}

// --- fp32 micro-kernels ------------------------------------------------------------------------------
// st[i][0:kRp) = Σ_d k[i][d] · qt[d][0:kRp)   for keys i < MR; qt and st rows are br floats apart
template <int MR>
inline void qk_f32(const float* k, int64_t ldk, const float* qt, int64_t D, float* st, int64_t br) {
  V acc[MR][kNr];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) acc[i][j] = F::zero();
  for (int64_t d = 0; d < D; ++d) {
    V qv[kNr];
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) qv[j] = F::load(qt + d * br + j * W);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const V kb = F::set1(k[i * ldk + d]);
#pragma GCC unroll 4
      for (int j = 0; j < kNr; ++j) acc[i][j] = F::fma(kb, qv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) F::store(st + i * br + j * W, acc[i][j]);
}

// o[i][0:NV·W) = α_i · o[i][0:NV·W) + Σ_c pt[c][i] · v[c][0:NV·W)   for rows i < MR, keys c < kc (pt's rows
// br floats apart)
template <int MR, int NV>
inline void pv_f32(const float* pt, int64_t br, const float* v, int64_t ldv, int64_t kc, float* o, int64_t ldo,
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
      const V pb = F::set1(pt[c * br + i]);
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
// Sᵀ from K pairs read in place and Qᵀ pairs [D/2][br]; an odd D ends with the pair (k[D-1], 0).
template <int MR>
inline void qk_bf16(const uint16_t* k, int64_t ldk, const uint32_t* qt, int64_t D, float* st, int64_t br) {
  __m512 acc[MR][kNr];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) acc[i][j] = _mm512_setzero_ps();
  auto step = [&](int64_t d2, bool last_odd) {
    __m512i qv[kNr];
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) qv[j] = _mm512_loadu_si512(qt + d2 * br + j * 16);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const uint16_t* kr = k + i * ldk + 2 * d2;
      const __m512i kb = _mm512_set1_epi32(int(last_odd ? uint32_t(kr[0]) : load_pair(kr)));
#pragma GCC unroll 4
      for (int j = 0; j < kNr; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], (__m512bh)kb, (__m512bh)qv[j]);
    }
  };
  for (int64_t d2 = 0; d2 < D / 2; ++d2) step(d2, false);
  if (D % 2) step(D / 2, true);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) _mm512_storeu_ps(st + i * br + j * 16, acc[i][j]);
}

// P pairs [Bc/2][br] (keys 2c, 2c+1 of row r in one lane) against V pairs [Bc/2][Dp].
template <int MR, int NV>
inline void pv_bf16(const uint32_t* p2, int64_t br, const uint32_t* v, int64_t ldv, int64_t kc2, float* o,
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
      const __m512i pb = _mm512_set1_epi32(int(p2[c * br + i]));
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], (__m512bh)pb, (__m512bh)vv[j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) _mm512_storeu_ps(o + i * ldo + j * 16, acc[i][j]);
}

// Two vectors of 16 probabilities (keys c and c+1 for rows r..r+15) -> 16 bf16 pairs, low half = key c.
// One two-source conversion (words 0..15 = key c, 16..31 = key c+1, rounded to nearest even like
// vcvtneps2bf16) and one word permute that interleaves them: 2 instructions where widening each half and
// merging took 6 (perf put the old sequence at ~15% of the kernel's non-GEMM time at the blog's shape).
inline void store_p_pairs(uint32_t* dst, __m512 p0, __m512 p1) {
  const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(p1, p0);
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,  //
                                              23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  _mm512_storeu_si512(dst, _mm512_permutexvar_epi16(interleave, both));
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

// Row of n values of dtype t starting at src (unit stride) -> fp32 dst[0:n), zeros up to n_pad.
inline void row_to_f32(const void* src, DType t, int64_t n, int64_t n_pad, float* dst) {
  if (t == DType::F32) {
    std::memcpy(dst, src, size_t(n) * 4);
  } else {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    int64_t d = 0;
    if (t == DType::F16)
      for (; d + W <= n; d += W) F::store(dst + d, F::load_f16(s + d));
    else
      for (; d + W <= n; d += W) F::store(dst + d, F::load_bf16(s + d));
    for (; d < n; ++d) dst[d] = half_to_float(t, s[d]);
  }
  for (int64_t d = n; d < n_pad; ++d) dst[d] = 0.0f;
}

// Scratch layout of one thread (floats): Qᵀ [Dp][Br] | Sᵀ [Bc][Br] | P pairs [Bc/2][Br] | K [Bc][Dp] |
// V [Bc][Dp] | O [Br][Dp] | m, l, α [Br] each.
struct Layout {
  int64_t br, bc, Dp, q_sz, s_sz, p_sz, k_sz, v_sz, o_sz;
  Layout(int64_t D, int64_t rows, int64_t cols)
      : br(rows), bc(cols), Dp(round_up(D, W)), q_sz(Dp * br), s_sz(bc * br), p_sz(bc / 2 * br), k_sz(bc * Dp),
        v_sz(bc * Dp), o_sz(br * Dp) {}
  size_t bytes() const { return size_t(q_sz + s_sz + p_sz + k_sz + v_sz + o_sz + 3 * br) * sizeof(float); }
};

inline int64_t task_count(const Params& p) { return p.B * p.Hq * ((p.Nq + p.br - 1) / p.br); }

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// What every task of one forward shares, derived once from the Params.
struct Plan {
  const Params& p;
  bool bf16_dot;  // bf16 inputs on vdpbf16ps: Qᵀ, P and V as bf16 pairs
  Layout lay;
  int64_t br, bc;  // query rows per block (Qᵀ, Sᵀ and P's row stride) and keys per K/V block
  int64_t D, Dp, D2, nvec, group, q_blocks, bh_count, es;
  bool causal, explicit_mask;
  float qscale;  // scale·log2e: the scores are exponentiated in base 2, exp2 being the cheap exponential
  // Sᵀ holds unscaled scores, and the exponent applies qscale, except where the scores are scaled before the
  // softmax: an explicit mask adds to scaled scores, and a negative scale reverses the order of the maxima (the
  // first softmax pass scales them). The running max m is in Sᵀ's units, so m·m_scale is the base-2 max.
  bool scale_first;
  float m_scale;
  // fp32 K and V are read in place; bf16 without vdpbf16ps and fp16 are widened per K/V block; V in place
  // needs whole vectors per row.
  bool k_in_place, v_in_place;

  Plan(const Params& params, bool dot)
      : p(params), bf16_dot(dot), lay(params.D, params.br, params.bc), br(lay.br), bc(lay.bc),
        D(params.D), Dp(lay.Dp), D2((params.D + 1) / 2), nvec(lay.Dp / W), group(params.Hq / params.Hkv),
        q_blocks((params.Nq + br - 1) / br), bh_count(params.B * params.Hq),
        es(int64_t(dtype_size(params.dtype))), causal(params.mask == MaskKind::Causal),
        explicit_mask(params.mask == MaskKind::Bool || params.mask == MaskKind::Additive),
        qscale(params.scale * kLog2e), scale_first(!explicit_mask && !(qscale > 0.0f)),
        m_scale(explicit_mask || scale_first ? 1.0f : qscale), k_in_place(dot || params.dtype == DType::F32),
        v_in_place(!dot && params.dtype == DType::F32 && params.D % W == 0) {}
};

// One thread's scratch slice, cut as Layout says.
struct Scratch {
  float* Qt;      // Qᵀ [Dp][Br] fp32, or as Qt2: bf16 pairs [D2][Br]
  float* St;      // Sᵀ [Bc][Br]: scores, then probabilities (fp32 P·V)
  uint32_t* P2;   // P as bf16 pairs [Bc/2][Br] (vdpbf16ps P·V)
  float* Kf;      // K block widened to fp32 [Bc][Dp]
  float* Vf;      // V block widened to fp32 [Bc][Dp], or as V2: bf16 key pairs [Bc/2][Dp]
  float* O;       // unnormalised output [Br][Dp]
  float *m, *l, *alpha;  // running max, running sum, and this block's rescale factor, per row
  uint32_t* Qt2;
  uint32_t* V2;
  Scratch(const Layout& lay, float* base)
      : Qt(base), St(Qt + lay.q_sz), P2(reinterpret_cast<uint32_t*>(St + lay.s_sz)), Kf(St + lay.s_sz + lay.p_sz),
        Vf(Kf + lay.k_sz), O(Vf + lay.v_sz), m(O + lay.o_sz), l(m + lay.br), alpha(l + lay.br),
        Qt2(reinterpret_cast<uint32_t*>(Qt)), V2(reinterpret_cast<uint32_t*>(Vf)) {}
};

// The block of query rows a task owns: rows i0 .. i0+rows of head h (K/V head hk) of batch b.
struct QBlock {
  int64_t b, h, hk, i0, rows;
  int64_t rows_p;  // rows the Q·Kᵀ micro-tiles cover (zeros past `rows`)
};

// Task t. Causal work grows with the Q block index: the heaviest blocks are handed out first.
inline QBlock task_block(const Plan& pl, int64_t t) {
  const int64_t qb = pl.causal ? pl.q_blocks - 1 - t / pl.bh_count : t / pl.bh_count;
  const int64_t bh = t % pl.bh_count;
  QBlock q;
  q.b = bh / pl.p.Hq;
  q.h = bh % pl.p.Hq;
  q.hk = q.h / pl.group;
  q.i0 = qb * pl.br;
  q.rows = std::min(pl.br, pl.p.Nq - q.i0);
  q.rows_p = round_up(q.rows, kRp);
  return q;
}

// A block of keys j0 .. j0+cols as the micro-kernels read it.
struct KvBlock {
  int64_t j0, cols;
  bool diagonal;   // causal and crossing the diagonal: some of its keys are masked for some rows
  const void* k;   // K rows (input or Kf), ldk apart
  int64_t ldk;
  const float* v;  // fp32 V rows (input or Vf), ldv apart; with bf16_dot, V2 holds the block
  int64_t ldv;
};

// 1. Qᵀ (unscaled; the scale is folded into the softmax), and O, m, ℓ reset.
inline void load_q(const Plan& pl, const Scratch& s, const QBlock& q) {
  const Params& p = pl.p;
  const int64_t D = pl.D, qo = q.b * p.qs[0] + q.h * p.qs[1] + q.i0 * p.qs[2];
  if (pl.bf16_dot) {
    const uint16_t* qb = static_cast<const uint16_t*>(p.q) + qo;
    for (int64_t r = 0; r < q.rows_p; ++r) {
      const uint16_t* qr = qb + r * p.qs[2];
      for (int64_t d2 = 0; d2 < pl.D2; ++d2)
        s.Qt2[d2 * pl.br + r] = r >= q.rows ? 0u
                                 : 2 * d2 + 1 < D ? load_pair(qr + 2 * d2)
                                                  : uint32_t(qr[2 * d2]);
    }
  } else {
    for (int64_t r = 0; r < q.rows_p; ++r) {
      if (r >= q.rows) {
        for (int64_t d = 0; d < D; ++d) s.Qt[d * pl.br + r] = 0.0f;
      } else if (p.dtype == DType::F32) {
        const float* qr = static_cast<const float*>(p.q) + qo + r * p.qs[2];
        for (int64_t d = 0; d < D; ++d) s.Qt[d * pl.br + r] = qr[d];
      } else {
        const uint16_t* qr = static_cast<const uint16_t*>(p.q) + qo + r * p.qs[2];
        for (int64_t d = 0; d < D; ++d) s.Qt[d * pl.br + r] = half_to_float(p.dtype, qr[d]);
      }
    }
  }
  std::fill(s.O, s.O + q.rows * pl.Dp, 0.0f);
  std::fill(s.m, s.m + pl.br, kNegInf);
  std::fill(s.l, s.l + pl.br, 0.0f);
}

// 2a. K rows (in place, or widened to fp32) and V (in place, widened, or interleaved in key pairs).
inline KvBlock load_kv(const Plan& pl, const Scratch& s, const QBlock& q, int64_t j0, int64_t cols) {
  const Params& p = pl.p;
  const int64_t D = pl.D, Dp = pl.Dp, es = pl.es;
  const int64_t ko = q.b * p.ks[0] + q.hk * p.ks[1] + j0 * p.ks[2];
  const int64_t vo = q.b * p.vs[0] + q.hk * p.vs[1] + j0 * p.vs[2];
  KvBlock kv{j0, cols, pl.causal && j0 + cols - 1 > q.i0, static_cast<const char*>(p.k) + ko * es, p.ks[2],
             s.Vf, Dp};
  if (!pl.k_in_place) {
    for (int64_t c = 0; c < cols; ++c)
      row_to_f32(static_cast<const char*>(kv.k) + c * p.ks[2] * es, p.dtype, D, D, s.Kf + c * Dp);
    kv.k = s.Kf;
    kv.ldk = Dp;
  }
  if (pl.bf16_dot) {
    const uint16_t* vb = static_cast<const uint16_t*>(p.v) + vo;
    for (int64_t c2 = 0; c2 < (cols + 1) / 2; ++c2) {
      const uint16_t* v0 = vb + (2 * c2) * p.vs[2];
      const uint16_t* v1 = 2 * c2 + 1 < cols ? vb + (2 * c2 + 1) * p.vs[2] : nullptr;
      uint32_t* dst = s.V2 + c2 * Dp;
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
  } else if (pl.v_in_place) {
    kv.v = static_cast<const float*>(p.v) + vo;
    kv.ldv = p.vs[2];
  } else {
    for (int64_t c = 0; c < cols; ++c)
      row_to_f32(static_cast<const char*>(p.v) + (vo + c * p.vs[2]) * es, p.dtype, D, Dp, s.Vf + c * Dp);
  }
  return kv;
}

// 2b. Sᵀ = K·Qᵀ (unscaled), row panels of kRp rows × micro-tiles of kMr keys. In a diagonal block a panel
// only needs the keys its last row can see; the tiles left out are fully masked below (the softmax writes
// P = 0 over every lane of them), so their stale contents are never read.
// Returns the scores it computed for the task's rows (padding rows left out), as flash_tiles counts them.
inline int64_t scores(const Plan& pl, const Scratch& s, const QBlock& q, const KvBlock& kv) {
  int64_t computed = 0;
  for (int64_t r0 = 0; r0 < q.rows_p; r0 += kRp) {
    const int64_t kc = kv.diagonal ? std::clamp<int64_t>(q.i0 + r0 + kRp - kv.j0, 0, kv.cols) : kv.cols;
    computed += std::clamp<int64_t>(q.rows - r0, 0, kRp) * kc;
    for (int64_t c0 = 0; c0 < kc; c0 += kMr) {
      by_rows(std::min<int64_t>(kMr, kc - c0), [&](auto mr) {
#if FLASH_BF16_DOT
        if (pl.bf16_dot) {
          qk_bf16<mr>(static_cast<const uint16_t*>(kv.k) + c0 * kv.ldk, kv.ldk, s.Qt2 + r0, pl.D,
                      s.St + c0 * pl.br + r0, pl.br);
          return;
        }
#endif
        qk_f32<mr>(static_cast<const float*>(kv.k) + c0 * kv.ldk, kv.ldk, s.Qt + r0, pl.D, s.St + c0 * pl.br + r0,
                   pl.br);
      });
    }
  }
  return computed;
}

// 2c, rare path: an explicit mask applied element by element on the scaled scores.
inline void apply_mask(const Plan& pl, const Scratch& s, const QBlock& q, const KvBlock& kv) {
  const Params& p = pl.p;
  for (int64_t c = 0; c < kv.cols; ++c) {
    float* sc = s.St + c * pl.br;
    for (int64_t r = 0; r < q.rows; ++r) {
      const int64_t mo = q.b * p.ms[0] + q.h * p.ms[1] + (q.i0 + r) * p.ms[2] + (kv.j0 + c) * p.ms[3];
      if (p.mask == MaskKind::Bool)
        sc[r] = static_cast<const uint8_t*>(p.mask_ptr)[mo] ? sc[r] * pl.qscale : kNegInf;
      else
        sc[r] = sc[r] * pl.qscale + load_float(p.mask_ptr, p.mask_dtype, mo) * kLog2e;
    }
  }
}

// 2c. Online softmax along keys, W rows at a time: m, ℓ updated, α = exp2(m_old − m) for the P·V rescale,
// Sᵀ (or P2) turned into probabilities. The scale is applied inside the exponent, exp2((s − m)·scale), so
// the first pass over the scores only finds the row maxima (a positive scale keeps them the maxima) and
// writes back only the causally masked scores of a diagonal block. A negative scale (allowed, if unusual)
// reverses the order: those scores are scaled in the first pass instead.
inline void online_softmax(const Plan& pl, const Scratch& s, const QBlock& q, const KvBlock& kv) {
  const V vq = F::set1(pl.m_scale), vq_first = F::set1(pl.qscale);
  const int64_t cols = kv.cols;
  for (int64_t r0 = 0; r0 < q.rows; r0 += W) {
    // In a diagonal block the rows of this group see only the first `vis` keys (the last row's view); the
    // keys past it are masked for every row, so they need no max and no exponential, only P = 0 where a P·V
    // micro-tile that straddles into the next group reads them. A group that sees no key of the block keeps
    // m and ℓ (α = 1).
    const int64_t vis = kv.diagonal ? std::clamp<int64_t>(q.i0 + r0 + W - kv.j0, 0, cols) : cols;
#if FLASH_BF16_DOT
    if (pl.bf16_dot)
      for (int64_t c2 = (vis + 1) / 2; c2 < (cols + 1) / 2; ++c2)
        F::store(reinterpret_cast<float*>(s.P2 + c2 * pl.br + r0), F::zero());
    else
#endif
      for (int64_t c = vis; c < cols; ++c) F::store(s.St + c * pl.br + r0, F::zero());
    if (vis == 0) {
      F::store(s.alpha + r0, F::set1(1.0f));
      continue;
    }
    const V m_old = F::load(s.m + r0);
    V smax = F::set1(kNegInf);
    for (int64_t c = 0; c < vis; ++c) {
      V x = F::load(s.St + c * pl.br + r0);
      if (pl.scale_first) x = F::mul(x, vq_first);
      // causal: row i0+r0+lane sees key j0+c only when j0+c <= i0+r0+lane
      if (kv.diagonal) x = F::mask_first(x, kv.j0 + c - q.i0 - r0, kNegInf);
      if (kv.diagonal || pl.scale_first) F::store(s.St + c * pl.br + r0, x);
      smax = F::max(smax, x);
    }
    // m is kept in the units of Sᵀ (unscaled scores, or scaled ones on the mask and negative-scale paths), so
    // every exponent is (s − m)·vq: s − m is <= 0 exactly, and so is its product with vq > 0. Not s·vq − m·vq:
    // m·vq is rounded, and the exact s·vq of an FMA (written out, or formed by the compiler from a multiply
    // and an add) leaves the row maximum the rounding residual as its exponent, positive half the time and
    // past exp2's range once the scaled scores pass ~1.5e9: inf, then NaN.
    const V vmax = F::max(m_old, smax);
    // A row that has seen nothing keeps m = -inf; exponentials use a finite stand-in so that
    // exp2(-inf - m) = 0 and α = exp2(m_old - m) = 0 without NaNs.
    const V m_safe = F::max(vmax, F::set1(-std::numeric_limits<float>::max()));
    auto exp_rel = [&](V x) { return F::exp2(F::mul(F::sub(x, m_safe), vq)); };  // 2^((x − m)·vq), x <= m
    const V a = exp_rel(m_old);
    V vsum = F::zero();
    int64_t c = 0;
#if FLASH_BF16_DOT
    if (pl.bf16_dot) {
      for (; c < vis; c += 2) {
        const V e0 = exp_rel(F::load(s.St + c * pl.br + r0));
        const V e1 = c + 1 < vis ? exp_rel(F::load(s.St + (c + 1) * pl.br + r0)) : F::zero();
        vsum = F::add(vsum, F::add(e0, e1));
        store_p_pairs(s.P2 + (c / 2) * pl.br + r0, e0, e1);
      }
    }
#endif
    for (; c < vis; ++c) {
      const V e = exp_rel(F::load(s.St + c * pl.br + r0));
      vsum = F::add(vsum, e);
      F::store(s.St + c * pl.br + r0, e);
    }
    F::store(s.l + r0, F::fma(F::load(s.l + r0), a, vsum));
    F::store(s.m + r0, vmax);
    F::store(s.alpha + r0, a);
  }
}

// 2d. O = diag(α)·O + P·V. In a diagonal block rows see keys up to their own index only: P is 0 past the last
// row's key, and rows that see no key of this block keep α = 1 and O as it is, so the micro-tile stops there
// (or is skipped). Returns the (row, key) products it summed, each over D.
inline int64_t accumulate_pv(const Plan& pl, const Scratch& s, const QBlock& q, const KvBlock& kv) {
  const int64_t Dp = pl.Dp;
  int64_t products = 0;
  for (int64_t r0 = 0; r0 < q.rows; r0 += kMr) {
    const int64_t mr_n = std::min<int64_t>(kMr, q.rows - r0);
    const int64_t kc = kv.diagonal ? std::clamp<int64_t>(q.i0 + r0 + mr_n - kv.j0, 0, kv.cols) : kv.cols;
    if (kc == 0) continue;
    products += mr_n * kc;
    by_rows(mr_n, [&](auto mr) {
      for (int64_t v0 = 0; v0 < pl.nvec; v0 += kNv) {
        by_vecs(std::min<int64_t>(kNv, pl.nvec - v0), [&](auto nv) {
#if FLASH_BF16_DOT
          if (pl.bf16_dot) {
            pv_bf16<mr, nv>(s.P2 + r0, pl.br, s.V2 + v0 * W, Dp, (kc + 1) / 2, s.O + r0 * Dp + v0 * W, Dp,
                            s.alpha + r0);
            return;
          }
#endif
          pv_f32<mr, nv>(s.St + r0, pl.br, kv.v + v0 * W, kv.ldv, kc, s.O + r0 * Dp + v0 * W, Dp, s.alpha + r0);
        });
      }
    });
  }
  return products;
}

// 3. O / ℓ and the logsumexp; a row that saw no key gives zeros and -inf.
inline void store_output(const Plan& pl, const Scratch& s, const QBlock& q) {
  const Params& p = pl.p;
  const int64_t D = pl.D;
  for (int64_t r = 0; r < q.rows; ++r) {
    const int64_t oo = q.b * p.os[0] + q.h * p.os[1] + (q.i0 + r) * p.os[2];
    const float lr = s.l[r];
    const V inv = F::set1(lr > 0.0f ? 1.0f / lr : 0.0f);
    const float* orow = s.O + r * pl.Dp;
    for (int64_t d = 0; d < D; d += W) {
      const V x = F::mul(F::load(orow + d), inv);
      if (p.dtype == DType::F32)
        F::store_n(static_cast<float*>(p.o) + oo + d, x, D - d);
      else if (p.dtype == DType::F16)
        F::store_f16_n(static_cast<uint16_t*>(p.o) + oo + d, x, D - d);
      else
        F::store_bf16_n(static_cast<uint16_t*>(p.o) + oo + d, x, D - d);
    }
    p.lse[(q.b * p.Hq + q.h) * p.Nq + q.i0 + r] = lr > 0.0f ? (s.m[r] * pl.m_scale + std::log2(lr)) / kLog2e : kNegInf;
  }
}

// One thread's share of forward(): the (batch, head, Q block) tasks the schedule hands it, in its scratch
// slice `base`. It is a function of its own rather than the parallel region's body so that the SIMD target
// applies to it under clang too: clang outlines a parallel region into a new function, which does not
// inherit the target of the function around it.
// Under the profiler each share's time is split into the steps above (kPhaseNames), a clock read per step, and
// each task is an item of its own (kTileNames: the trace's tile slices).
inline void forward_tasks(const Params& p, bool bf16_dot, float* base, const auto& region) {
  ATTNPROF_WORK_SHARE(share, region);  // until this thread's last task (the loop's barrier is waived)
  share.phases(kPhaseNames);
  const Plan pl(p, bf16_dot);
  const Scratch s(pl.lay, base);
  const int64_t tasks = task_count(p);
  const double flops_per_product = 2.0 * double(pl.D);  // a multiply and an add per head dim
#pragma omp for schedule(dynamic, 1) nowait
  for (int64_t t = 0; t < tasks; ++t) {
    share.add_items(1);
    const QBlock q = task_block(pl, t);
    share.begin_item(kTileNames, int32_t(q.b), int32_t(q.h), int32_t(q.i0 / pl.br));
    load_q(pl, s, q);
    share.lap(kPhaseLoad);
    const int64_t kv_end = pl.causal ? std::min(p.Nk, q.i0 + q.rows) : p.Nk;  // causal: blocks left of the diagonal
    for (int64_t j0 = 0; j0 < kv_end; j0 += pl.bc) {
      const KvBlock kv = load_kv(pl, s, q, j0, std::min(pl.bc, kv_end - j0));
      share.lap(kPhaseLoad);
      const int64_t computed = scores(pl, s, q, kv);
      share.lap(kPhaseScores, flops_per_product * double(computed));
      if (pl.explicit_mask) {
        apply_mask(pl, s, q, kv);
        share.lap(kPhaseMask);
      }
      online_softmax(pl, s, q, kv);
      share.lap(kPhaseSoftmax);
      const int64_t products = accumulate_pv(pl, s, q, kv);
      share.lap(kPhasePv, flops_per_product * double(products));
    }
    store_output(pl, s, q);
    share.lap(kPhaseStore);
    share.end_item(int32_t((kv_end + pl.bc - 1) / pl.bc));
  }
}

inline size_t scratch_bytes(int64_t D, int64_t br, int64_t bc) { return Layout(D, br, bc).bytes(); }

inline void forward(const Params& p, bool bf16_dot) {
  ATTNPROF_DASSERT(p.br % kRowMultiple == 0 && p.bc % kColMultiple == 0 && p.br > 0 && p.bc > 0);
  const int64_t tasks = task_count(p);
  const ThreadScratch scratch(scratch_bytes(p.D, p.br, p.bc), tasks > 1 ? omp_get_max_threads() : 1);
  ATTNPROF_PARALLEL_REGION(region);
#pragma omp parallel if (tasks > 1) num_threads(scratch.threads())
  forward_tasks(p, bf16_dot, scratch.slice(omp_get_thread_num()), region);
}

}  // namespace attnprof::flash::FLASH_NS
