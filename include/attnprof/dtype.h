// attnprof/dtype.h: element types.
//
//   DType t = parse_dtype("bf16");          // DType::BF16
//   uint16_t h = float_to_bf16(1.5f);       // round to nearest even
//   float f = bf16_to_float(h);
//   uint16_t g = float_to_f16(1.5f);        // IEEE binary16, round to nearest even
//
// bf16 and fp16 are stored as uint16_t (bf16: the top half of an IEEE float; fp16: IEEE 754 binary16, 5
// exponent and 10 mantissa bits, max 65504) and always accumulated in fp32. Bool is one byte per element
// (0 or 1), used for masks.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace attnprof {

enum class DType : uint8_t { F32, BF16, F16, Bool };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::Bool: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "fp32";
    case DType::BF16: return "bf16";
    case DType::F16: return "fp16";
    case DType::Bool: return "bool";
  }
  return "?";
}

// The 16-bit floating types (stored as uint16_t, computed in fp32).
constexpr bool is_half(DType t) { return t == DType::BF16 || t == DType::F16; }

// Accepts fp32|float32|f32|float, bf16|bfloat16 and fp16|float16|f16|half; throws attnprof::Error naming the
// bad value otherwise.
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

// IEEE binary16 -> fp32, exact (subnormals and infinities kept; a NaN keeps its payload and comes out quiet,
// as F16C's vcvtph2ps gives it).
inline float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1fu) {
    bits = sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0u);  // inf / quiet NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);  // rebias 15 -> 127
  } else {
    // zero or subnormal (man · 2^-24): exact in fp32 through the float product
    const float f = float(man) * 5.9604644775390625e-8f;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    bits = sign | u;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// fp32 -> IEEE binary16, round to nearest even (as vcvtps2ph with imm 0 and CUDA's __float2half_rn):
// overflow past 65520 gives inf, results below 2^-14 become subnormals, NaN stays a quiet NaN.
inline uint16_t float_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN: quiet, payload's top
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 (rounds past 65504) and inf
  if (a >= 0x38800000u) {                                 // >= 2^-14: normal
    const uint32_t r = a + 0xfffu + ((a >> 13) & 1u);     // round the 13 dropped bits to nearest even
    return uint16_t(sign | ((r - 0x38000000u) >> 13));    // rebias 127 -> 15 (a carry bumps the exponent)
  }
  if (a < 0x33000000u) return sign;  // below 2^-25: rounds to zero (2^-25 itself ties to even, zero)
  // Subnormal: man · 2^-24 with man = round(|f| · 2^24); shift the 24-bit significand right.
  const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;  // e in [102, 112]: shift 14..24
  const uint32_t half = 1u << (shift - 1), rest = m & ((1u << shift) - 1u);
  uint32_t r = m >> shift;
  if (rest > half || (rest == half && (r & 1u))) ++r;  // may carry into the smallest normal: still right
  return uint16_t(sign | r);
}

// The conversions of a half type (BF16 or F16) by value.
inline float half_to_float(DType t, uint16_t h) { return t == DType::F16 ? f16_to_float(h) : bf16_to_float(h); }
inline uint16_t float_to_half(DType t, float f) { return t == DType::F16 ? float_to_f16(f) : float_to_bf16(f); }

// Element i of an fp32, bf16 or fp16 buffer as fp32, and back: the scalar and strided paths' one accessor.
inline float load_float(const void* p, DType t, int64_t i) {
  return t == DType::F32 ? static_cast<const float*>(p)[i] : half_to_float(t, static_cast<const uint16_t*>(p)[i]);
}
inline void store_float(void* p, DType t, int64_t i, float v) {
  if (t == DType::F32)
    static_cast<float*>(p)[i] = v;
  else
    static_cast<uint16_t*>(p)[i] = float_to_half(t, v);
}

}  // namespace attnprof
