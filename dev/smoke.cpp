#include <chrono>
#include <cstdio>
#include "attnprof/attention.h"
#include "attnprof/allocator.h"
using namespace attnprof;
int main(int argc, char** argv) {
  int64_t B = 8, H = 16, N = argc > 1 ? atoi(argv[1]) : 1024, D = 64;
  DType t = argc > 2 ? parse_dtype(argv[2]) : DType::BF16;
  Tensor q = Tensor::empty({B, H, N, D}, t), k = q.clone(), v = q.clone();
  fill_randn(q, 1); fill_randn(k, 2); fill_randn(v, 3);
  AttnOptions o{.is_causal = true};
  AttnProblem p = AttnProblem::from(q, k, v, o);
  for (const Variant& var : registry()) {
    auto r = var.prepare(p, o);
    r->run(q, k, v);
    auto t0 = std::chrono::steady_clock::now();
    int it = 3;
    for (int i = 0; i < it; ++i) r->run(q, k, v);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / it;
    printf("%-12s %9.2f ms  %7.1f GFLOP/s peak=%.1f MB\n", var.name.c_str(), ms, attention_flops(p) / ms / 1e6,
           memory_stats().peak_bytes / 1e6);
  }
}
