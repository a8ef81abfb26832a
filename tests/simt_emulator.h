// tests/simt_emulator.h: runs a CUDA kernel's source on the CPU, one OS thread per CUDA thread, so that
// device code can be checked without a GPU. It defines, with the semantics of the PTX ISA, the primitives
// that src/cuda/flash_ptx.cuh implements in PTX (include this file first, then the kernel):
//   cp_async16 / cp_async_commit / cp_async_wait<N>   cp.async.cg 16 bytes, commit_group, wait_group
//   ldmatrix_x4 / ldmatrix_x4_trans                    ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16
//   mma_bf16 / mma_f16                                 mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}...f32
//   exp2_ftz, pack_bf16, pack_f16, ld32, st32, st_f32, dynamic_smem
// and those of src/cuda/kernels.cu (load, store, __expf) that src/cuda/unfused_kernels.cuh is written in,
// and threadIdx, blockIdx, blockDim, gridDim, __syncthreads and __shfl_xor_sync.
//
// mma.sync and ldmatrix place every lane's registers by the PTX ISA's tables (tests/ptx_tables.h), written
// independently of src/cuda/fragment.h, which the kernel uses: a kernel whose index math disagreed with the
// hardware's layouts computes wrong numbers here too.
//
// What the emulation checks, besides the numbers: every warp-collective (mma, ldmatrix, shuffle) is reached
// by all 32 lanes in the same order (no divergent collective); every thread passes the same number of
// __syncthreads; shared-memory accesses stay inside the launch's dynamic shared memory with the
// instructions' alignment; global loads, cp.async sources and stores stay inside the buffers registered
// with the Device (stores only into writable ones); no cp.async group is left unwaited at exit. Shared
// memory starts as 0xFF bytes (bf16 NaN), so reading a tile before its copy landed poisons the output.
// cp.async copies land either at the wait that covers them (Copies::AtWait, the latest the hardware may)
// or when issued (Copies::AtIssue, the earliest): a kernel must be right under both. A block whose threads
// wait on each other in different barriers is a deadlock: after a timeout the emulator prints where each
// thread waits and aborts, instead of hanging the test.
#pragma once

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "attnprof/dtype.h"
#include "ptx_tables.h"

#define __global__
#define __device__
#define __forceinline__
#define __launch_bounds__(...)

namespace attnprof::simt {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

enum class Copies { AtWait, AtIssue };

class Device;

struct Warp {
  Warp() : bar(32) {}
  std::barrier<> bar;
  struct Slot {
    int op = 0;
    uint64_t seq = 0;  // how many collectives the lane had entered, this one included
    alignas(16) unsigned char data[64];
  };
  // Two sets, alternating by collective: a lane can only write set s again two collectives later, after
  // every lane has passed the barrier in between, so after its last read of set s. One barrier per collective.
  std::array<std::array<Slot, 32>, 2> slots;
};

// Where a thread is, for the deadlock report: running, inside collective Op, in __syncthreads, or exited.
enum Where { kRunning = 0, kInSync = 100, kExited = 200 };

struct Block {
  Block(int threads, size_t smem_bytes)
      : bar(threads), warps(size_t(threads / 32)), where(new std::atomic<int>[size_t(threads)]), bytes(smem_bytes) {
    for (int t = 0; t < threads; ++t) where[size_t(t)] = kRunning;
    raw.reset(new unsigned char[smem_bytes + 128]);
    smem = raw.get() + (128 - reinterpret_cast<uintptr_t>(raw.get()) % 128) % 128;
    std::memset(smem, 0xFF, smem_bytes);  // bf16 NaN: a read before the data landed shows in the output
  }
  std::barrier<> bar;
  std::vector<Warp> warps;
  std::unique_ptr<std::atomic<int>[]> where;  // per thread
  std::mutex mu;
  std::condition_variable cv;
  unsigned exited = 0;  // under mu
  std::unique_ptr<unsigned char[]> raw;
  unsigned char* smem = nullptr;
  size_t bytes = 0;
};

struct Thread {
  Device* dev = nullptr;
  Block* block = nullptr;
  Warp* warp = nullptr;
  Dim3 thread_idx, block_idx, block_dim, grid_dim;
  int lane = 0;
  uint64_t collectives = 0, syncs = 0;
  struct Copy {
    unsigned char* dst;
    const unsigned char* src;  // nullptr: zero-fill
  };
  std::vector<Copy> pending;              // issued, not yet committed
  std::vector<std::vector<Copy>> groups;  // committed, not yet waited for (oldest first)
};

inline thread_local Thread* t_thread = nullptr;
inline Thread& self() { return *t_thread; }

enum Op { kMma = 1, kLdmatrix, kLdmatrixTrans, kShfl };
inline const char* op_name(int op) {
  switch (op) {
    case kMma: return "mma.sync";
    case kLdmatrix: return "ldmatrix";
    case kLdmatrixTrans: return "ldmatrix.trans";
    case kShfl: return "shfl.sync";
  }
  return "?";
}

class Device {
 public:
  explicit Device(Copies copies = Copies::AtWait) : copies_(copies) {}

  // Global memory the kernel may touch: loads and cp.async read from any buffer, stores need `writable`.
  void add_buffer(const void* p, size_t bytes, const char* name, bool writable) {
    buffers_.push_back({static_cast<const unsigned char*>(p), bytes, name, writable});
  }
  Copies copies() const { return copies_; }
  // Warp-level instructions executed so far (one per warp, not per lane), by Op.
  uint64_t executed(int op) const { return executed_[size_t(op)].load(); }
  void count(int op) { executed_[size_t(op)].fetch_add(1); }
  // A block whose threads have not all exited after this long is deadlocked (threads waiting on each other
  // in different barriers or collectives): launch() prints where every thread is and aborts the process.
  void set_deadlock_timeout(std::chrono::milliseconds t) { deadlock_timeout_ = t; }

  // Runs `kernel()` on a grid of `grid` blocks of `threads` threads (a multiple of 32) with `smem_bytes` of
  // dynamic shared memory, block after block. Returns the problems found (empty: none).
  template <class Kernel>
  std::vector<std::string> launch(unsigned grid, unsigned threads, size_t smem_bytes, Kernel kernel) {
    if (threads == 0 || threads % 32 != 0 || threads > 1024) {
      fail(fmt::format("bad block size {}", threads));
      return errors_;
    }
    for (unsigned b = 0; b < grid && errors_.empty(); ++b) {
      Block block(int(threads), smem_bytes);
      std::vector<Thread> state(threads);
      {
        std::vector<std::jthread> pool;
        pool.reserve(threads);
        for (unsigned t = 0; t < threads; ++t) {
          Thread& th = state[t];
          th = Thread{.dev = this, .block = &block, .warp = &block.warps[t / 32], .thread_idx = {t, 0, 0},
                      .block_idx = {b, 0, 0}, .block_dim = {threads, 1, 1}, .grid_dim = {grid, 1, 1},
                      .lane = int(t % 32)};
          pool.emplace_back([&th, &kernel] {
            t_thread = &th;
            kernel();
            th.dev->exit_thread(th);
          });
        }
        std::unique_lock<std::mutex> lock(block.mu);
        if (!block.cv.wait_for(lock, deadlock_timeout_, [&] { return block.exited == threads; }))
          report_deadlock(block, b, threads);
      }
      for (const Thread& th : state)
        if (th.syncs != state[0].syncs)
          fail(fmt::format("block {}: thread {} passed {} __syncthreads, thread 0 {}", b, th.thread_idx.x, th.syncs,
                           state[0].syncs));
    }
    return errors_;
  }

  void fail(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (errors_.size() < 16) errors_.push_back(std::move(what));
  }

  // True when [p, p + n) lies inside a registered buffer (writable if `write`); else records `what`.
  bool check_global(const void* p, size_t n, size_t align, bool write, const char* what) {
    const auto* c = static_cast<const unsigned char*>(p);
    if (reinterpret_cast<uintptr_t>(c) % align != 0) {
      fail(fmt::format("{}: global address {} is not {}-byte aligned", what, p, align));
      return false;
    }
    for (const Buffer& b : buffers_)
      if (c >= b.p && c + n <= b.p + b.bytes) {
        if (write && !b.writable) {
          fail(fmt::format("{}: store into read-only buffer {}", what, b.name));
          return false;
        }
        return true;
      }
    fail(fmt::format("{}: {} bytes at {} lie outside every buffer of the launch", what, n, p));
    return false;
  }

  // True when [p, p + n) lies inside the block's shared memory and p is `align`-byte aligned.
  bool check_shared(const void* p, size_t n, size_t align, const char* what) {
    const Block& b = *self().block;
    const auto* c = static_cast<const unsigned char*>(p);
    if (c < b.smem || c + n > b.smem + b.bytes) {
      fail(fmt::format("{}: shared offset {} + {} bytes past the {} bytes of dynamic shared memory", what,
                       c - b.smem, n, b.bytes));
      return false;
    }
    if (size_t(c - b.smem) % align != 0) {
      fail(fmt::format("{}: shared offset {} is not {}-byte aligned", what, c - b.smem, align));
      return false;
    }
    return true;
  }

 private:
  void exit_thread(Thread& th) {
    if (!th.pending.empty() || !th.groups.empty())
      fail(fmt::format("thread {} of block {} exits with cp.async copies never waited for", th.thread_idx.x,
                       th.block_idx.x));
    // An exited thread no longer takes part: the rest of its warp and block go on without it (and a
    // collective that still expects it reports the missing lane).
    th.warp->bar.arrive_and_drop();
    th.block->bar.arrive_and_drop();
    th.block->where[th.thread_idx.x] = kExited;
    {
      std::lock_guard<std::mutex> lock(th.block->mu);
      ++th.block->exited;
    }
    th.block->cv.notify_one();
  }

  [[noreturn]] void report_deadlock(const Block& block, unsigned b, unsigned threads) const {
    std::fprintf(stderr, "simt emulator: deadlock in block %u after %lld ms; threads not exited:\n", b,
                 static_cast<long long>(deadlock_timeout_.count()));
    for (unsigned t = 0, shown = 0; t < threads && shown < 16; ++t) {
      const int w = block.where[t];
      if (w == kExited) continue;
      ++shown;
      std::fprintf(stderr, "  thread %u (warp %u lane %u): %s\n", t, t / 32, t % 32,
                   w == kInSync ? "in __syncthreads" : w == kRunning ? "running" : op_name(w));
    }
    std::fflush(stderr);
    std::abort();  // the waiting threads cannot be cancelled
  }

  struct Buffer {
    const unsigned char* p;
    size_t bytes;
    const char* name;
    bool writable;
  };
  Copies copies_;
  std::chrono::milliseconds deadlock_timeout_{120'000};
  std::vector<Buffer> buffers_;
  std::mutex mu_;
  std::array<std::atomic<uint64_t>, 8> executed_{};
  std::vector<std::string> errors_;
};

// A warp-collective instruction: every lane deposits `in`, and once all 32 have, each computes its result
// from all of them with `f(get)`, get(lane) returning that lane's input.
template <class In, class F>
auto collective(int op, const In& in, F&& f) {
  static_assert(sizeof(In) <= 64 && std::is_trivially_copyable_v<In>);
  Thread& th = self();
  Warp& w = *th.warp;
  ++th.collectives;
  std::array<Warp::Slot, 32>& set = w.slots[th.collectives % 2];
  Warp::Slot& mine = set[size_t(th.lane)];
  mine.op = op;
  mine.seq = th.collectives;
  std::memcpy(mine.data, &in, sizeof(In));
  th.block->where[th.thread_idx.x] = op;
  w.bar.arrive_and_wait();
  th.block->where[th.thread_idx.x] = kRunning;
  if (th.lane == 0) th.dev->count(op);
  for (int l = 0; l < 32; ++l) {
    const Warp::Slot& s = set[size_t(l)];
    if (l != th.lane && (s.seq != th.collectives || s.op != op)) {
      th.dev->fail(fmt::format("block {} warp {}: lane {} is at its collective #{} ({}), lane {} is not (#{} {})",
                               th.block_idx.x, th.thread_idx.x / 32, th.lane, th.collectives, op_name(op), l, s.seq,
                               op_name(s.op)));
      break;
    }
  }
  auto get = [&set](int l) {
    In v;
    std::memcpy(&v, set[size_t(l)].data, sizeof(In));
    return v;
  };
  return f(get);
}

// The bf16 or fp16 in the low (half 0) or high (half 1) 16 bits of a register.
inline float bf16_half(uint32_t r, int half) { return bf16_to_float(uint16_t(r >> (16 * half))); }
inline float f16_half(uint32_t r, int half) { return f16_to_float(uint16_t(r >> (16 * half))); }

// The kernels' fp16 storage type on the host (__half on the device): a type of its own, so that the
// unfused kernels' load / store overloads tell it from bf16 (uint16_t).
struct F16Bits {
  uint16_t bits;
};
static_assert(sizeof(F16Bits) == 2);

// fp32 to and from a kernel's storage type: float, bf16 held as uint16_t or fp16 as F16Bits (round to
// nearest even).
template <class T>
T to_storage(float f) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, uint16_t> || std::is_same_v<T, F16Bits>);
  if constexpr (std::is_same_v<T, float>)
    return f;
  else if constexpr (std::is_same_v<T, F16Bits>)
    return F16Bits{float_to_f16(f)};
  else
    return float_to_bf16(f);
}
template <class T>
float from_storage(T v) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, uint16_t> || std::is_same_v<T, F16Bits>);
  if constexpr (std::is_same_v<T, float>)
    return v;
  else if constexpr (std::is_same_v<T, F16Bits>)
    return f16_to_float(v.bits);
  else
    return bf16_to_float(v);
}

inline void apply(const std::vector<Thread::Copy>& copies) {
  for (const Thread::Copy& c : copies) {
    if (c.src)
      std::memcpy(c.dst, c.src, 16);
    else
      std::memset(c.dst, 0, 16);
  }
}

}  // namespace attnprof::simt

#define threadIdx (::attnprof::simt::self().thread_idx)
#define blockIdx (::attnprof::simt::self().block_idx)
#define blockDim (::attnprof::simt::self().block_dim)
#define gridDim (::attnprof::simt::self().grid_dim)

inline void __syncthreads() {
  attnprof::simt::Thread& th = attnprof::simt::self();
  ++th.syncs;
  th.block->where[th.thread_idx.x] = attnprof::simt::kInSync;
  th.block->bar.arrive_and_wait();
  th.block->where[th.thread_idx.x] = attnprof::simt::kRunning;
}

template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
  using namespace attnprof::simt;
  if (mask != 0xffffffffu) self().dev->fail(fmt::format("__shfl_xor_sync with partial mask {:#x}", mask));
  return collective(kShfl, v, [&](auto get) { return get((self().lane ^ lane_mask) & 31); });
}

// The primitives of src/cuda/flash_ptx.cuh, in the namespace the kernel looks them up in.
namespace attnprof::cuda::kernels {
namespace {

using bf16 = uint16_t;        // storage only: the kernel converts through pack_bf16 and the MMAs
using f16 = simt::F16Bits;    // likewise, through pack_f16 and mma_f16

inline unsigned char* dynamic_smem() { return simt::self().block->smem; }

// cp.async.cg.shared.global [smem], [gmem], 16, src-size: src-size 0 (pred false) zero-fills, reads nothing.
inline void cp_async16(void* smem, const void* gmem, bool pred) {
  simt::Thread& th = simt::self();
  if (!th.dev->check_shared(smem, 16, 16, "cp.async destination")) return;
  if (pred && !th.dev->check_global(gmem, 16, 16, false, "cp.async source")) return;
  const auto* src = pred ? static_cast<const unsigned char*>(gmem) : nullptr;
  const simt::Thread::Copy c{static_cast<unsigned char*>(smem), src};
  if (th.dev->copies() == simt::Copies::AtIssue)
    simt::apply({c});
  else
    th.pending.push_back(c);
}
inline void cp_async_commit() {
  simt::Thread& th = simt::self();
  th.groups.push_back(std::move(th.pending));
  th.pending.clear();
}
// cp.async.wait_group N: all but the N most recent committed groups have landed.
template <int N>
void cp_async_wait() {
  simt::Thread& th = simt::self();
  while (th.groups.size() > size_t(N)) {
    simt::apply(th.groups.front());
    th.groups.erase(th.groups.begin());
  }
}

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32: D (16×8) = A (16×16) · B (16×8) + C, every
// lane's registers placed by the PTX tables (ptx_tables.h); register r holds elements 2r (low half) and
// 2r+1, read by `half` (bf16_half or f16_half). Products of either type are exact in fp32; they are summed
// in fp32.
template <class Half>
inline void mma_any(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, Half half) {
  using namespace testing_ptx;
  struct In {
    uint32_t a[4], b[2];
  };
  const In in{{a[0], a[1], a[2], a[3]}, {b0, b1}};
  const int lane = simt::self().lane;
  const std::array<float, 4> d = simt::collective(simt::kMma, in, [&](auto get) {
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; ++l) {
      const In x = get(l);
      for (int i = 0; i < 8; ++i) A[ptx_a(l, i).row][ptx_a(l, i).col] = half(x.a[i / 2], i % 2);
      for (int i = 0; i < 4; ++i) B[ptx_b(l, i).row][ptx_b(l, i).col] = half(x.b[i / 2], i % 2);
    }
    std::array<float, 4> out{};
    for (int i = 0; i < 4; ++i) {
      const auto [row, col] = ptx_c(lane, i);
      float acc = c[i];
      for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];
      out[size_t(i)] = acc;
    }
    return out;
  });
  for (int i = 0; i < 4; ++i) c[i] = d[size_t(i)];
}
inline void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  mma_any(c, a, b0, b1, simt::bf16_half);
}
inline void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  mma_any(c, a, b0, b1, simt::f16_half);
}

// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lanes 8m .. 8m+7 give the addresses of rows 0..7 of
// matrix m (16 bytes each, 16-byte aligned); destination register m of each lane gets the two elements
// ptx_ldsm_dest names (low half first).
inline void ldmatrix_any(uint32_t (&r)[4], const void* smem, bool trans) {
  simt::Thread& th = simt::self();
  const bool ok = th.dev->check_shared(smem, 16, 16, trans ? "ldmatrix.trans" : "ldmatrix");
  struct In {
    const unsigned char* row;  // nullptr: this lane's address was refused
  };
  const In in{ok ? static_cast<const unsigned char*>(smem) : nullptr};
  const int lane = th.lane;
  const int op = trans ? simt::kLdmatrixTrans : simt::kLdmatrix;
  const std::array<uint32_t, 4> out = simt::collective(op, in, [&](auto get) {
    std::array<uint32_t, 4> regs{};
    for (int m = 0; m < 4; ++m)
      for (int half = 0; half < 2; ++half) {
        const auto [row, col] = testing_ptx::ptx_ldsm_dest(lane, half, trans);
        const unsigned char* p = get(8 * m + row).row;  // the lane that gave the address of that row
        uint16_t v = 0;
        if (p) std::memcpy(&v, p + 2 * col, 2);
        regs[size_t(m)] |= uint32_t(v) << (16 * half);
      }
    return regs;
  });
  for (int m = 0; m < 4; ++m) r[m] = out[size_t(m)];
}
inline void ldmatrix_x4(uint32_t (&r)[4], const void* smem) { ldmatrix_any(r, smem, false); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) { ldmatrix_any(r, smem, true); }

// cvt.rn.bf16x2.f32: round to nearest even; `lo` in the low 16 bits.
inline uint32_t pack_bf16(float lo, float hi) {
  return uint32_t(float_to_bf16(lo)) | uint32_t(float_to_bf16(hi)) << 16;
}
// __floats2half2_rn (cvt.rn.f16x2.f32): the same with fp16.
inline uint32_t pack_f16(float lo, float hi) { return uint32_t(float_to_f16(lo)) | uint32_t(float_to_f16(hi)) << 16; }

// ex2.approx.ftz.f32: 2^x with subnormal inputs and results flushed to zero.
inline float exp2_ftz(float x) {
  if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.0f;
  const float y = std::exp2(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;
}

template <class T>
uint32_t ld32(const T* p) {
  static_assert(sizeof(T) == 2);
  uint32_t v = 0;
  if (simt::self().dev->check_global(p, 4, 4, false, "32-bit load")) std::memcpy(&v, p, 4);
  return v;
}
template <class T>
void st32(T* p, uint32_t v) {
  static_assert(sizeof(T) == 2);
  if (simt::self().dev->check_global(p, 4, 4, true, "32-bit store")) std::memcpy(p, &v, 4);
}
inline void st_f32(float* p, float v) {
  if (simt::self().dev->check_global(p, 4, 4, true, "fp32 store")) *p = v;
}

// The primitives of src/cuda/kernels.cu (unfused_kernels.cuh): element loads and stores in fp32 for float,
// bf16 and fp16 storage, bounds-checked, and __expf (ex2.approx-based on the GPU, within 2 ulp of exp).
template <class T>
float load(const T* p, int64_t i) {
  T v{};
  if (simt::self().dev->check_global(p + i, sizeof(T), sizeof(T), false, "element load"))
    std::memcpy(&v, p + i, sizeof(T));
  return simt::from_storage(v);
}
template <class T>
void store(T* p, int64_t i, float v) {
  if (simt::self().dev->check_global(p + i, sizeof(T), sizeof(T), true, "element store"))
    p[i] = simt::to_storage<T>(v);
}

}  // namespace
}  // namespace attnprof::cuda::kernels

inline float __expf(float x) { return std::exp(x); }
