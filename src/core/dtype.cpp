#include "attnprof/dtype.h"

#include <cctype>
#include <string>

#include "attnprof/error.h"

namespace attnprof {

DType parse_dtype(std::string_view name) {
  std::string s(name);  // any case: FP32, BF16 and Half read as fp32, bf16 and half
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (s == "fp32" || s == "float32" || s == "f32" || s == "float") return DType::F32;
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "fp16" || s == "float16" || s == "f16" || s == "half") return DType::F16;
  ATTNPROF_FAIL("unsupported dtype '{}': expected fp32, bf16 or fp16", name);
}

}  // namespace attnprof
