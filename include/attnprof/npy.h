// attnprof/npy.h: NumPy .npy files in and out, so real tensors can be profiled and outputs checked
// against any other implementation.
//
//   Tensor q = npy::load("q.npy");                 // 4-D [B, H, N, D]: '<f4' -> fp32, '<f2' -> fp16,
//                                                  // '<u2' -> bf16, '<f8' -> rounded to fp32 (fp64 is
//                                                  // only the reference's precision)
//   npy::save("out.npy", out);                     // fp32 '<f4', fp16 '<f2', bf16 '<u2'; written atomically
//   npy::Header h = npy::parse_header(bytes, n);   // the validating header parser on its own
//
// Supported: format versions 1.0, 2.0 and 3.0, little-endian (or byte-order-free) dtypes, C order. The reader
// checks the magic, the version, the header length, the header dict's syntax and keys, the dtype,
// fortran_order, the shape (positive, product without overflow) and that the declared data size matches
// the file size before it allocates anything, so a huge declared shape is refused rather than attempted.
// Every problem is an attnprof::Error whose message names the file and what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attnprof/tensor.h"

namespace attnprof::npy {

// Element types the reader understands. F64 is rounded to fp32 on load.
enum class ElemType { F32, F16, BF16, F64 };

struct Header {
  int major = 1, minor = 0;
  std::string descr;             // as written, e.g. "<f4"
  ElemType elem = ElemType::F32;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  int64_t numel = 1;             // product of shape, checked for overflow
  size_t data_offset = 0;        // bytes before the data: magic + version + length field + header
  size_t data_bytes = 0;         // numel × element size
};

// Largest header we accept (NumPy's own default limit is 10000 bytes).
inline constexpr size_t kMaxHeaderBytes = 1 << 16;
// Largest element count we accept from a file (2^40), whatever the file size claims.
inline constexpr int64_t kMaxElements = int64_t(1) << 40;

// Parses and validates the header at the start of `data` (`size` bytes available, at least the whole
// header). `what` names the source in error messages. Does not look at the data section.
Header parse_header(const void* data, size_t size, std::string_view what = "<memory>");

// Loads a whole .npy image from memory (what the fuzzer drives): the header, then exactly
// data_bytes bytes of data. The result is a 4-D tensor.
Tensor load_from_memory(const void* data, size_t size, std::string_view what = "<memory>");

// Loads a file. Reads only the header before checking the declared size against the file size.
Tensor load(const std::string& path);

// Serialises a tensor as a version 1.0 .npy image (header padded to 64 bytes, NumPy's alignment): the bytes
// save() writes, for a stream or a pipe.
std::string to_bytes(const Tensor& t);
// Writes a tensor to `path` through a temporary file and a rename (no partial files on failure).
void save(const std::string& path, const Tensor& t);

}  // namespace attnprof::npy
