// The flash kernel's launch: one template instantiation per (element type, head dim, tile configuration),
// chosen at run time (flash_config_for). The kernel is flash_kernel.cuh, written in the PTX primitives of
// flash_ptx.cuh.
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <utility>

#include "cuda/flash_ptx.cuh"  // first: the primitives the kernel is written in
#include "cuda/flash_kernel.cuh"
#include "cuda/fragment.h"
#include "cuda/kernels.h"

namespace attnprof::cuda::kernels {
namespace {

// Returns whether a kernel was launched: a configuration that does not support D launches none.
template <class E, int D, int C>
bool launch(const FlashParams& p, cudaStream_t st) {
  constexpr frag::TileConfig c = frag::kFlashConfigs[C];
  if constexpr (!c.supports(D)) {
    return false;
  } else {
    constexpr int smem = c.smem_bytes(D);
    auto* kernel = flash_fwd_kernel<E, D, c.warps, c.m_tiles, c.block_n, c.min_blocks(D)>;
    if constexpr (smem > 48 * 1024) {
      // Opt-in above 48 KiB, once per process (one device). A failure is named here; the launch then fails
      // with it and the caller's launch check reports it.
      static const cudaError_t configured =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      if (configured != cudaSuccess) {
        static std::atomic<bool> said{false};
        if (!said.exchange(true))
          std::fprintf(stderr, "attnprof: the flash kernel (head dim %d, config %d) could not opt in to %d bytes of "
                       "shared memory: %s\n", D, C, smem, cudaGetErrorString(configured));
      }
    }
    const long long blocks = c.grid_blocks(p.Nq, p.B * p.Hq);
    // A grid past 2^31-1 blocks cannot be expressed: launch an empty one, which fails with
    // cudaErrorInvalidConfiguration for the caller's launch check.
    const unsigned grid = blocks <= INT_MAX ? unsigned(blocks) : 0u;
    kernel<<<grid, c.threads(), smem, st>>>(p);
    return true;
  }
}

template <class E, int D, int... Cs>
bool dispatch(int config, const FlashParams& p, cudaStream_t st, std::integer_sequence<int, Cs...>) {
  return ((config == Cs && launch<E, D, Cs>(p, st)) || ...);
}

template <class E>
bool forward(int config, const FlashParams& p, cudaStream_t st) {
  if (p.D == 64) return dispatch<E, 64>(config, p, st, std::make_integer_sequence<int, frag::kFlashConfigCount>{});
  if (p.D == 128) return dispatch<E, 128>(config, p, st, std::make_integer_sequence<int, frag::kFlashConfigCount>{});
  return false;
}

std::atomic<int> g_config{-1};

}  // namespace

void set_flash_config(int config) { g_config.store(config >= 0 && config < frag::kFlashConfigCount ? config : -1); }

int flash_config_for(int D) {
  const int c = g_config.load();
  return c >= 0 && frag::kFlashConfigs[c].supports(D) ? c : frag::default_config(D);
}

bool flash_forward(const FlashParams& p, cudaStream_t st) {
  const int config = flash_config_for(p.D);
  return p.fp16 ? forward<ElemF16>(config, p, st) : forward<ElemBf16>(config, p, st);
}

}  // namespace attnprof::cuda::kernels
