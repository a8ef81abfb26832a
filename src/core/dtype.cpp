#include "attnprof/dtype.h"

#include "attnprof/error.h"

namespace attnprof {

DType parse_dtype(std::string_view s) {
  if (s == "fp32" || s == "float32" || s == "f32" || s == "float") return DType::F32;
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "fp16" || s == "float16" || s == "f16" || s == "half") return DType::F16;
  ATTNPROF_FAIL("unsupported dtype '{}': expected fp32, bf16 or fp16", s);
}

}  // namespace attnprof
