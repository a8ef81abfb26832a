// Internal: the portable FlashAttention-2 forward, the scalar body (included by flash_scalar.cpp only; the
// AVX2 and AVX-512 bodies are flash_simd.h). Plain loops the compiler vectorises for the baseline target.
//
// Algorithm (Dao, "FlashAttention-2", 2023, Alg. 1): for each block of Br query rows, stream the K/V
// blocks of Bc keys: S = Q·Kᵀ·scale (+mask), keep the running row max m and sum ℓ, rescale the
// unnormalised output by exp(m_old − m_new), accumulate P·V, divide by ℓ once at the end and store
// L = m + log ℓ. Causal: K/V blocks wholly above the diagonal are skipped and only diagonal blocks are
// masked. No N×N buffer exists: the scratch per thread is 2·Br·D + 2·Bc·D + Br·Bc + 2·Br floats, from the
// tracked allocator (ThreadScratch in flash.h).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attention/flash/flash.h"
#include "attnprof/error.h"
#include "attnprof/profiler.h"

namespace attnprof::flash {
namespace FLASH_NS {

// Default tile sizes: 64×64 keeps Q, K, V, S tiles of D=64..128 within L2 (1 MiB/core on Zen 4). Any other
// positive sizes run as well (Params::br, bc, which flash_attention always sets).
inline constexpr int64_t kBr = kFlashScalarDefaultBlock.rows;  // 64
inline constexpr int64_t kBc = kFlashScalarDefaultBlock.cols;  // 64
inline constexpr int64_t kRowMultiple = 1;
inline constexpr int64_t kColMultiple = 1;

// Per thread: Q [Br][D] | K [Bc][D] | V [Bc][D] | S [Br][Bc] | acc [Br][D] | m, l [Br] (floats).
inline size_t scratch_bytes(int64_t D, int64_t br, int64_t bc) {
  return size_t(2 * br * D + 2 * bc * D + br * bc + 2 * br) * sizeof(float);
}

inline void forward(const Params& p) {
  ATTNPROF_DASSERT(p.br > 0 && p.bc > 0);
  const int64_t br = p.br, bc = p.bc;  // this forward's block sizes
  const int64_t D = p.D, group = p.Hq / p.Hkv;
  const int64_t q_blocks = (p.Nq + br - 1) / br;
  const int64_t tasks = p.B * p.Hq * q_blocks;
  constexpr float kLog2e = 1.4426950408889634f;
  const float ninf = -std::numeric_limits<float>::infinity();
  const bool causal = p.mask == MaskKind::Causal;
  const ThreadScratch scratch(scratch_bytes(D, br, bc), tasks > 1 ? omp_get_max_threads() : 1);
  ATTNPROF_PARALLEL_REGION(region);
#pragma omp parallel if (tasks > 1) num_threads(scratch.threads())
  {
    ATTNPROF_WORK_SHARE(share, region);  // until this thread's last task (the loop's barrier is waived)
    share.phases(kPhaseNames);  // under the profiler: the share's time split by step, per row here
    const double flops_per_product = 2.0 * double(D);
    float* const Q = scratch.slice(omp_get_thread_num());
    float* const K = Q + br * D;
    float* const V = K + bc * D;
    float* const S = V + bc * D;
    float* const acc = S + br * bc;
    float* const m = acc + br * D;
    float* const l = m + br;
    // Causal work grows with the Q block index: hand out the heaviest blocks first.
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t t = 0; t < tasks; ++t) {
      share.add_items(1);
      const int64_t qb = causal ? q_blocks - 1 - t / (p.B * p.Hq) : t / (p.B * p.Hq);
      const int64_t bh = t % (p.B * p.Hq);
      const int64_t b = bh / p.Hq, h = bh % p.Hq, hk = h / group;
      const int64_t i0 = qb * br, rows = std::min(br, p.Nq - i0);
      share.begin_item(kTileNames, int32_t(b), int32_t(h), int32_t(qb));
      const float qscale = p.scale * kLog2e;  // work in base 2: exp2 is cheaper than exp
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t off = b * p.qs[0] + h * p.qs[1] + (i0 + r) * p.qs[2];
        for (int64_t d = 0; d < D; ++d) Q[size_t(r * D + d)] = load_float(p.q, p.dtype, off + d) * qscale;
      }
      std::fill(acc, acc + br * D, 0.0f);
      std::fill(m, m + br, ninf);
      std::fill(l, l + br, 0.0f);
      share.lap(kPhaseLoad);
      const int64_t kv_end = causal ? std::min(p.Nk, i0 + rows) : p.Nk;
      for (int64_t j0 = 0; j0 < kv_end; j0 += bc) {
        const int64_t cols = std::min(bc, kv_end - j0);
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t ko = b * p.ks[0] + hk * p.ks[1] + (j0 + c) * p.ks[2];
          const int64_t vo = b * p.vs[0] + hk * p.vs[1] + (j0 + c) * p.vs[2];
          for (int64_t d = 0; d < D; ++d) {
            K[size_t(c * D + d)] = load_float(p.k, p.dtype, ko + d);
            V[size_t(c * D + d)] = load_float(p.v, p.dtype, vo + d);
          }
        }
        const bool diagonal = causal && j0 + cols - 1 > i0;
        share.lap(kPhaseLoad);
        for (int64_t r = 0; r < rows; ++r) {
          float* s = &S[size_t(r * bc)];
          const float* qr = &Q[size_t(r * D)];
          for (int64_t c = 0; c < cols; ++c) {
            const float* kr = &K[size_t(c * D)];
            float dot = 0.0f;
            for (int64_t d = 0; d < D; ++d) dot += qr[d] * kr[d];
            s[c] = dot;
          }
          share.lap(kPhaseScores, flops_per_product * double(cols));
          if (diagonal)
            for (int64_t c = 0; c < cols; ++c)
              if (j0 + c > i0 + r) s[c] = ninf;
          if (p.mask == MaskKind::Bool) {
            const uint8_t* mk = static_cast<const uint8_t*>(p.mask_ptr) + b * p.ms[0] + h * p.ms[1] +
                                (i0 + r) * p.ms[2] + j0 * p.ms[3];
            for (int64_t c = 0; c < cols; ++c)
              if (!mk[c * p.ms[3]]) s[c] = ninf;
          } else if (p.mask == MaskKind::Additive) {
            const int64_t mo = b * p.ms[0] + h * p.ms[1] + (i0 + r) * p.ms[2] + j0 * p.ms[3];
            for (int64_t c = 0; c < cols; ++c) s[c] += load_float(p.mask_ptr, p.mask_dtype, mo + c * p.ms[3]) * kLog2e;
          }
          if (p.mask == MaskKind::Bool || p.mask == MaskKind::Additive) share.lap(kPhaseMask);
          float mx = m[size_t(r)];
          // A NaN score sticks in the max (std::max would drop it), so it reaches the row's sum and output.
          for (int64_t c = 0; c < cols; ++c)
            if (s[c] > mx || std::isnan(s[c])) mx = s[c];
          if (mx == ninf) {  // nothing visible yet in this row
            share.lap(kPhaseSoftmax);
            continue;
          }
          const float alpha = std::exp2(m[size_t(r)] - mx);
          float sum = 0.0f;
          for (int64_t c = 0; c < cols; ++c) {
            s[c] = std::exp2(s[c] - mx);
            sum += s[c];
          }
          l[size_t(r)] = l[size_t(r)] * alpha + sum;
          m[size_t(r)] = mx;
          float* ar = &acc[size_t(r * D)];
          share.lap(kPhaseSoftmax);
          for (int64_t d = 0; d < D; ++d) ar[d] *= alpha;
          for (int64_t c = 0; c < cols; ++c) {
            const float w = s[c];
            const float* vr = &V[size_t(c * D)];
            for (int64_t d = 0; d < D; ++d) ar[d] += w * vr[d];
          }
          share.lap(kPhasePv, flops_per_product * double(cols));
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t oo = b * p.os[0] + h * p.os[1] + (i0 + r) * p.os[2];
        const float lr = l[size_t(r)];
        const float inv = lr > 0.0f ? 1.0f / lr : 0.0f;  // a row that saw no key gives zeros
        for (int64_t d = 0; d < D; ++d) {
          const float x = acc[size_t(r * D + d)] * inv;
          if (p.dtype == DType::F32)
            static_cast<float*>(p.o)[oo + d] = x;
          else
            static_cast<uint16_t*>(p.o)[oo + d] = float_to_half(p.dtype, x);
        }
        p.lse[(b * p.Hq + h) * p.Nq + i0 + r] = lr > 0.0f ? (m[size_t(r)] + std::log2(lr)) / kLog2e : ninf;
      }
      share.lap(kPhaseStore);
      share.end_item(int32_t((kv_end + bc - 1) / bc));
    }
  }
}

}  // namespace FLASH_NS
}  // namespace attnprof::flash
