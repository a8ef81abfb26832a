// What a fresh buffer costs before the first byte of work: the first touch of memory from the tracked
// allocator (2 MiB aligned, transparent huge pages, as every N×N tensor of the naive variants gets it),
// against writing memory the process already holds. Three cases:
//   memory/first_touch/reused        free, then allocate again at once: the kernel hands back pages it still
//                                    holds and only zeroes them;
//   memory/first_touch/after_pause   free, wait `pause` seconds untimed, allocate again: on a VM with
//                                    virtio-balloon free page reporting the pages have gone back to the host,
//                                    and each first touch waits for the hypervisor to back them again;
//   memory/memset/held               the same bytes written into a buffer that stays allocated.
// `GB/s` is the buffer's size over the timed part. docs/performance.md ("Fresh memory on a VM") has a run.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "attnprof/allocator.h"
#include "attnprof/analysis.h"

namespace {

using namespace attnprof;

constexpr size_t kPage = 4096;

// One write per 4 KiB page: what it costs to fault the buffer in, without the work of filling it.
void touch_pages(char* p, size_t bytes) {
  for (size_t i = 0; i < bytes; i += kPage) p[i] = 1;
  benchmark::ClobberMemory();
}

void first_touch(benchmark::State& state, double pause_s) {
  const size_t bytes = size_t(state.range(0)) << 20;
  for (auto _ : state) {
    char* p = static_cast<char*>(tracked_alloc(bytes));
    touch_pages(p, bytes);
    state.PauseTiming();
    tracked_free(p, bytes);
    if (pause_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(pause_s));
    state.ResumeTiming();
  }
  state.counters["GB/s"] = benchmark::Counter(double(bytes), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_FirstTouchReused(benchmark::State& state) { first_touch(state, 0.0); }
void BM_FirstTouchAfterPause(benchmark::State& state) { first_touch(state, 3.0); }

void BM_MemsetHeld(benchmark::State& state) {
  const size_t bytes = size_t(state.range(0)) << 20;
  char* p = static_cast<char*>(tracked_alloc(bytes));
  touch_pages(p, bytes);
  for (auto _ : state) {
    std::memset(p, 2, bytes);
    benchmark::ClobberMemory();
  }
  tracked_free(p, bytes);
  state.counters["GB/s"] = benchmark::Counter(double(bytes), benchmark::Counter::kIsIterationInvariantRate);
}

// 256 MiB: the bf16 scores of the blog's shape, [8,16,1024,1024]; 1024 MiB: the fp32 [1,16,4096,4096] scores
// of the N = 4096 benchmarks.
// The warm-up takes the process's first touch of memory the guest may never have held out of the timing.
BENCHMARK(BM_FirstTouchReused)->Name("memory/first_touch/reused")->Arg(256)->Arg(1024)->MinWarmUpTime(0.5)->MinTime(2)
    ->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FirstTouchAfterPause)->Name("memory/first_touch/after_pause/3s")->Arg(256)->Arg(1024)->Iterations(3)
    ->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemsetHeld)->Name("memory/memset/held")->Arg(256)->Arg(1024)->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const auto note = analysis::memory_reclaim_note();
  benchmark::AddCustomContext("memory_reclaim", note ? *note : "no free page reporting found");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
