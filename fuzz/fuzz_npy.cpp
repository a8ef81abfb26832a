// libFuzzer target for the .npy reader. Build with clang:
//   cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DATTNPROF_BUILD_FUZZ=ON \
//         -DATTNPROF_BUILD_TESTS=OFF -DATTNPROF_BUILD_BENCH=OFF -DATTNPROF_CUDA=OFF
//   cmake --build build-fuzz --target fuzz_npy
//   build-fuzz/fuzz/fuzz_npy -max_total_time=30 -rss_limit_mb=2048 fuzz/corpus/npy
#include <cstddef>
#include <cstdint>

#include "fuzz_npy_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return attnprof::fuzz::npy_one_input(data, size);
}
