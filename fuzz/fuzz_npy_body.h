// The .npy fuzz body, shared by the libFuzzer target (fuzz_npy.cpp) and the corpus replay in the normal test
// suite (tests/test_npy.cpp), so CI without clang still runs every corpus file through the same checks.
//
// Contract under test: for any bytes, npy::load_from_memory either returns a tensor or throws attnprof::Error;
// it never crashes, reads out of bounds (ASan) or allocates more than the input can fill. A file it accepts
// survives a save/load round trip (fp32/bf16 bit for bit; fp16 arrives as fp32).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "attnprof/error.h"
#include "attnprof/npy.h"

namespace attnprof::fuzz {

inline int npy_one_input(const uint8_t* data, size_t size) {
  Tensor t;
  try {
    (void)npy::parse_header(data, size, "fuzz");
  } catch (const Error&) {
  }
  try {
    t = npy::load_from_memory(data, size, "fuzz");
  } catch (const Error&) {
    return 0;  // rejected with a message: fine
  }
  // Accepted: at most as many elements as the input had bytes for, and a faithful round trip.
  if (size_t(t.numel()) > size) std::abort();
  const std::string bytes = npy::to_bytes(t);
  const Tensor back = npy::load_from_memory(bytes.data(), bytes.size(), "fuzz round trip");
  if (back.shape() != t.shape() || back.dtype() != t.dtype() || std::memcmp(back.raw(), t.raw(), t.nbytes()) != 0)
    std::abort();
  return 0;
}

}  // namespace attnprof::fuzz
