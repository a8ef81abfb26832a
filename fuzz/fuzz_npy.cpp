// libFuzzer target for the .npy reader. Build with clang (scripts/test.sh builds it in its sanitizer build):
//   cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DATTNPROF_BUILD_FUZZ=ON \
//         -DCMAKE_BUILD_TYPE=Release -DATTNPROF_BUILD_TESTS=OFF -DATTNPROF_BUILD_BENCH=OFF -DATTNPROF_CUDA=OFF
//   cmake --build build-fuzz --target fuzz_npy
//   mkdir -p build-fuzz/corpus
//   build-fuzz/fuzz/fuzz_npy -max_total_time=30 -rss_limit_mb=2048 build-fuzz/corpus fuzz/corpus/npy
// (new inputs go to the first directory, so the checked-in seeds stay as they are)
#include <cstddef>
#include <cstdint>

#include "fuzz_npy_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return attnprof::fuzz::npy_one_input(data, size);
}
