// attnprof/dtype.h: element types.
//
//   DType t = parse_dtype("bf16");          // DType::BF16
//   uint16_t h = float_to_bf16(1.5f);       // round to nearest even
//   float f = bf16_to_float(h);
//
// bf16 is stored as uint16_t (the top half of an IEEE float) and always accumulated in fp32.
// Bool is one byte per element (0 or 1), used for masks.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace attnprof {

enum class DType : uint8_t { F32, BF16, Bool };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::Bool: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "fp32";
    case DType::BF16: return "bf16";
    case DType::Bool: return "bool";
  }
  return "?";
}

// Accepts fp32|float32|f32 and bf16|bfloat16; throws attnprof::Error naming the bad value otherwise.
DType parse_dtype(std::string_view s);

inline float bf16_to_float(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                          // round to nearest even
  return uint16_t(u >> 16);
}

}  // namespace attnprof
