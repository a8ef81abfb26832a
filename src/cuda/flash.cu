// FlashAttention-2 forward for bf16 on tensor cores (sm_80+: mma.sync m16n8k16, ldmatrix, cp.async).
//
// One thread block per (64 query rows, batch × head); 4 warps, each owning 16 query rows for the whole
// pass, so the softmax statistics (running max m, running sum l) never leave registers (FA2, section 3.1):
//   for each 64-key block of K/V (causal: only blocks at or left of the diagonal):
//     S = Q·Kᵀ (mma, fp32 accumulators)   mask only diagonal / ragged blocks
//     m_new = max(m, rowmax(S·scale));  P = exp2(S·scale·log2e − m_new);  l = l·α + rowsum(P)
//     O = O·α + P·V   (P re-used from the accumulators as the A operand, rounded to bf16)
//   O /= l once at the end; lse = (m + log2 l)·ln 2.
// K/V tiles are double-buffered in shared memory with cp.async, so the next block loads while this one
// computes. Heavy (causal) query blocks are scheduled first to balance the tail.
//
// Tile choices (traits below): 64×64 is what FlashAttention uses for causal, square blocks waste the least
// work on the diagonal. Row stride D+8 elements (16 bytes of skew) makes the ldmatrix loads of K and V
// (ldmatrix.trans) bank-conflict free: the 8 rows of a matrix start in 8 distinct 16-byte bank groups.
// UNVERIFIED ON A GPU so far: scripts/gpu-check.sh runs the tests that validate it against the reference.
#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/kernels.h"

namespace attnprof::cuda::kernels {
namespace {

using bf16 = __nv_bfloat16;

template <int D>
struct FlashTraits {
  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  static constexpr int kBlockM = 64;           // query rows per block: 4 warps × 16
  static constexpr int kBlockN = 64;           // keys per K/V tile
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kStride = D + 8;        // smem row stride in elements (16 B skew)
  static constexpr int kTileElems = kBlockN * kStride;
  static constexpr int kStages = 2;            // double buffering
  static constexpr int kSmemBytes = kStages * 2 * kTileElems * int(sizeof(bf16));  // 36 KiB (D64), 68 KiB (D128)
};

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool pred) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = pred ? 16 : 0;  // 0: zero-fill (keys past Nk)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// D = A·B + D, A 16×16 row-major bf16 (4 regs), B 16×8 col-major bf16 (2 regs), D 16×8 fp32.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8×8 b16 matrices; lane l gives the address of row l%8 of matrix l/8; lane t receives, of each
// matrix, row t/4, columns 2(t%4) and 2(t%4)+1: the mma B fragment when the rows are the n index.
__device__ __forceinline__ void ldmatrix_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                            const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(s));
}

// Four 8×8 b16 matrices, transposed on load; lane l gives the address of row l%8 of matrix l/8.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                                  const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(s));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low 16 bits) = lo
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ uint32_t ld32(const bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }

template <int D>
__global__ void __launch_bounds__(FlashTraits<D>::kThreads) flash_fwd_kernel(const FlashParams p) {
  using Tr = FlashTraits<D>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* smem = reinterpret_cast<bf16*>(smem_raw);

  const int bh = blockIdx.x;
  const int m_block = int(gridDim.y) - 1 - int(blockIdx.y);  // heaviest causal blocks first
  const int b = bh / p.Hq, h = bh % p.Hq, kvh = h / (p.Hq / p.Hkv);
  const bf16* Q = static_cast<const bf16*>(p.q) + (int64_t(b) * p.Hq + h) * p.Nq * D;
  const bf16* K = static_cast<const bf16*>(p.k) + (int64_t(b) * p.Hkv + kvh) * p.Nk * D;
  const bf16* V = static_cast<const bf16*>(p.v) + (int64_t(b) * p.Hkv + kvh) * p.Nk * D;
  bf16* O = static_cast<bf16*>(p.o) + (int64_t(b) * p.Hq + h) * p.Nq * D;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, tig = lane & 3;  // mma fragment coordinates: row group, thread in group
  const int m0 = m_block * Tr::kBlockM;
  const int row0 = m0 + warp * 16 + g, row1 = row0 + 8;

  // Q fragments for the warp's 16 rows, all of D, in registers for the whole pass.
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc) {
    const int c = kc * 16 + tig * 2;
    qf[kc][0] = row0 < p.Nq ? ld32(Q + int64_t(row0) * D + c) : 0u;
    qf[kc][1] = row1 < p.Nq ? ld32(Q + int64_t(row1) * D + c) : 0u;
    qf[kc][2] = row0 < p.Nq ? ld32(Q + int64_t(row0) * D + c + 8) : 0u;
    qf[kc][3] = row1 < p.Nq ? ld32(Q + int64_t(row1) * D + c + 8) : 0u;
  }

  int n_blocks = (p.Nk + Tr::kBlockN - 1) / Tr::kBlockN;
  if (p.causal) {
    const int last_row = min(m0 + Tr::kBlockM, p.Nq) - 1;  // keys j <= last_row are visible
    n_blocks = min(n_blocks, last_row / Tr::kBlockN + 1);
  }

  auto load_tile = [&](int nb, int stage) {
    bf16* ks = smem + (2 * stage) * Tr::kTileElems;
    bf16* vs = ks + Tr::kTileElems;
    constexpr int kChunksPerRow = D / 8;  // 16-byte chunks
#pragma unroll
    for (int c = threadIdx.x; c < Tr::kBlockN * kChunksPerRow; c += Tr::kThreads) {
      const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
      const int key = nb * Tr::kBlockN + r;
      const bool ok = key < p.Nk;
      const int64_t off = int64_t(ok ? key : 0) * D + col;
      cp_async16(ks + r * Tr::kStride + col, K + off, ok);
      cp_async16(vs + r * Tr::kStride + col, V + off, ok);
    }
    cp_async_commit();
  };

  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m_r[2] = {-INFINITY, -INFINITY};  // running max of scaled scores, log2 domain
  float l_r[2] = {0.0f, 0.0f};            // this thread's partial running sums
  const float sl2 = p.scale * 1.4426950408889634f;

  load_tile(0, 0);
  for (int nb = 0; nb < n_blocks; ++nb) {
    const int stage = nb & 1;
    if (nb + 1 < n_blocks) {
      load_tile(nb + 1, stage ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const bf16* ks = smem + (2 * stage) * Tr::kTileElems;
    const bf16* vs = ks + Tr::kTileElems;

    // S = Q·Kᵀ for the warp's 16 rows × 64 keys (8 n-tiles of 8 keys). One ldmatrix.x4 (not transposed:
    // K's rows are keys, the B operand's columns) gives the B fragments of two n-tiles for 16 of D.
    float s[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
    {
      const int mi = lane >> 3;
      const int key_in_pair = (mi >> 1) * 8 + (lane & 7), d_off = (mi & 1) * 8;
#pragma unroll
      for (int ntp = 0; ntp < 4; ++ntp)
#pragma unroll
        for (int kc = 0; kc < D / 16; ++kc) {
          uint32_t b0, b1, b2, b3;
          ldmatrix_x4(b0, b1, b2, b3, ks + (ntp * 16 + key_in_pair) * Tr::kStride + kc * 16 + d_off);
          mma_bf16(s[2 * ntp], qf[kc], b0, b1);
          mma_bf16(s[2 * ntp + 1], qf[kc], b2, b3);
        }
    }

    // Mask keys past Nk and, on diagonal blocks, keys after the query (top-left causal).
    const int n0 = nb * Tr::kBlockN;
    if (n0 + Tr::kBlockN > p.Nk || (p.causal && n0 + Tr::kBlockN - 1 > m0)) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = n0 + nt * 8 + tig * 2 + (e & 1);
          const int row = e < 2 ? row0 : row1;
          if (col >= p.Nk || (p.causal && col > row)) s[nt][e] = -INFINITY;
        }
    }

    // Online softmax, one pass per row half (r = 0: row0, r = 1: row1); a row lives in one quad.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_r[r], mx * sl2);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing visible yet stays 0
      const float alpha = exp2f(m_r[r] - m_use);
      m_r[r] = m_new;
      float rs = 0.0f;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float pv = exp2f(fmaf(s[nt][2 * r + e], sl2, -m_use));
          s[nt][2 * r + e] = pv;
          rs += pv;
        }
      l_r[r] = l_r[r] * alpha + rs;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        o[dt][2 * r] *= alpha;
        o[dt][2 * r + 1] *= alpha;
      }
    }

    // O += P·V: the S accumulators of n-tiles 2kc, 2kc+1 are exactly the A fragment of keys 16kc..16kc+15.
#pragma unroll
    for (int kc = 0; kc < 4; ++kc) {
      const uint32_t a[4] = {pack_bf16(s[2 * kc][0], s[2 * kc][1]), pack_bf16(s[2 * kc][2], s[2 * kc][3]),
                             pack_bf16(s[2 * kc + 1][0], s[2 * kc + 1][1]),
                             pack_bf16(s[2 * kc + 1][2], s[2 * kc + 1][3])};
      const int mi = lane >> 3;
      const int key = kc * 16 + (mi & 1) * 8 + (lane & 7);
#pragma unroll
      for (int dt2 = 0; dt2 < D / 16; ++dt2) {
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4_trans(b0, b1, b2, b3, vs + key * Tr::kStride + dt2 * 16 + (mi >> 1) * 8);
        mma_bf16(o[2 * dt2], a, b0, b1);
        mma_bf16(o[2 * dt2 + 1], a, b2, b3);
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }

  // Epilogue: finish the row sums across the quad, normalise once, store bf16 and the logsumexp.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_r[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int row = r == 0 ? row0 : row1;
    if (row >= p.Nq) continue;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      *reinterpret_cast<uint32_t*>(O + int64_t(row) * D + dt * 8 + tig * 2) =
          pack_bf16(o[dt][2 * r] * inv, o[dt][2 * r + 1] * inv);
    if (p.lse && tig == 0)
      p.lse[(int64_t(b) * p.Hq + h) * p.Nq + row] =
          l > 0.0f ? (m_r[r] + log2f(l)) * 0.6931471805599453f : -INFINITY;
  }
}

template <int D>
void launch(const FlashParams& p, cudaStream_t st) {
  using Tr = FlashTraits<D>;
  static const cudaError_t configured = cudaFuncSetAttribute(
      flash_fwd_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  (void)configured;  // a failure shows up as the launch error the caller checks
  const dim3 grid(unsigned(p.B * p.Hq), unsigned((p.Nq + Tr::kBlockM - 1) / Tr::kBlockM));
  flash_fwd_kernel<D><<<grid, Tr::kThreads, Tr::kSmemBytes, st>>>(p);
}

}  // namespace

void flash_forward(const FlashParams& p, cudaStream_t st) {
  if (p.D == 64)
    launch<64>(p, st);
  else
    launch<128>(p, st);
}

}  // namespace attnprof::cuda::kernels
