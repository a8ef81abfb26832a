// The .npy reader and writer. The header is a Python dict literal; we parse the small subset NumPy writes
// (quoted keys, a quoted descr, True/False, a tuple of ints) with a strict hand-written scanner rather than
// a general evaluator, so that nothing in a hostile file can do more than produce an error message.
#include "attnprof/npy.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/ranges.h>

#include "attnprof/error.h"
#include "io/file.h"

namespace attnprof::npy {
namespace {

constexpr unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

size_t elem_size(ElemType e) { return e == ElemType::F64 ? 8 : e == ElemType::F32 ? 4 : 2; }

// Header text as one printable line: newlines as \n, other control and non-ASCII bytes as \xNN, so a NUL or
// a carriage return in a file's header cannot cut an error message short or rewrite the terminal line.
std::string escaped(std::string_view s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    out += c == '\n' ? std::string("\\n") : (u >= 32 && u < 127) ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  return out;
}

// A cursor over the header dict text.
class Scanner {
 public:
  Scanner(std::string_view s, std::string_view what) : s_(s), what_(what) {}

  [[noreturn]] void fail(std::string_view msg) const {
    ATTNPROF_FAIL("{}: invalid .npy header: {} at offset {} of header '{}'", what_, msg, pos_, printable());
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool at_end() {
    skip_ws();
    return pos_ >= s_.size();
  }
  char peek() {
    skip_ws();
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }
  void expect(char c) {
    if (peek() != c) fail(fmt::format("expected '{}'", c));
    ++pos_;
  }
  bool accept(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  std::string quoted() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    ++pos_;
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\' || s_[pos_] == '\n') fail("unsupported character in a string");
      out += s_[pos_++];
      if (out.size() > 64) fail("string too long");
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    ++pos_;
    return out;
  }
  bool boolean() {
    skip_ws();
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("expected True or False");
  }
  int64_t integer() {
    skip_ws();
    const size_t start = pos_;
    int64_t v = 0;
    if (pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '+')) fail("signed dimension in shape");
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (__builtin_mul_overflow(v, int64_t(10), &v) || __builtin_add_overflow(v, int64_t(s_[pos_] - '0'), &v))
        fail("dimension does not fit in 64 bits");
      ++pos_;
    }
    if (pos_ == start) fail("expected a non-negative integer");
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 long suffix
    return v;
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> dims;
    if (accept(')')) return dims;
    while (true) {
      dims.push_back(integer());
      if (dims.size() > 32) fail("more than 32 dimensions");
      if (accept(')')) break;
      expect(',');
      if (accept(')')) break;
    }
    return dims;
  }

 private:
  // The header as one line: its padding (spaces and the closing newline) left off, other control and
  // non-ASCII bytes escaped (\n, \xNN), cut at 200 characters.
  std::string printable() const {
    std::string_view h = s_;
    while (!h.empty() && (h.back() == ' ' || h.back() == '\n')) h.remove_suffix(1);
    std::string out = escaped(h.substr(0, 200));
    if (h.size() > 200) out += "...";
    return out;
  }
  std::string_view s_;
  std::string_view what_;
  size_t pos_ = 0;
};

ElemType parse_descr(const std::string& d, std::string_view what) {
  if (d == "<f4") return ElemType::F32;
  if (d == "<f2") return ElemType::F16;
  if (d == "<f8") return ElemType::F64;
  if (d == "<u2") return ElemType::BF16;
  if (!d.empty() && d[0] == '>')
    ATTNPROF_FAIL("{}: big-endian dtype '{}' is not supported: save the array as little-endian ('<')", what,
                  escaped(d));
  ATTNPROF_FAIL(
      "{}: unsupported dtype '{}': expected '<f4' (float32), '<f2' (float16), '<f8' (float64, rounded to "
      "float32) or '<u2' (bfloat16 bits stored as uint16)",
      what, escaped(d));
}

uint32_t read_le(const unsigned char* p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Reads the preamble (magic, version, header length); returns the total header size and fills the version.
size_t preamble(const unsigned char* p, size_t size, std::string_view what, int& major, int& minor) {
  if (size < 10) ATTNPROF_FAIL("{}: not a .npy file: {} bytes is shorter than the .npy preamble", what, size);
  if (std::memcmp(p, kMagic, 6) != 0) ATTNPROF_FAIL("{}: not a .npy file: wrong magic (expected \\x93NUMPY)", what);
  major = p[6];
  minor = p[7];
  if (minor != 0 || major < 1 || major > 3)
    ATTNPROF_FAIL("{}: unsupported .npy format version {}.{} (supported: 1.0, 2.0, 3.0)", what, major, minor);
  const int len_bytes = major == 1 ? 2 : 4;
  if (size < size_t(8 + len_bytes)) ATTNPROF_FAIL("{}: truncated .npy preamble", what);
  const size_t hlen = read_le(p + 8, len_bytes);
  if (hlen > kMaxHeaderBytes)
    ATTNPROF_FAIL("{}: .npy header length {} exceeds the limit of {} bytes", what, hlen, kMaxHeaderBytes);
  return size_t(8 + len_bytes) + hlen;
}

Header parse_after_preamble(const unsigned char* p, size_t size, std::string_view what, int major, int minor,
                            size_t total) {
  if (size < total)
    ATTNPROF_FAIL("{}: truncated .npy header: it declares {} bytes but only {} are present", what, total, size);
  Header h;
  h.major = major;
  h.minor = minor;
  h.data_offset = total;
  const size_t start = major == 1 ? 10 : 12;
  const std::string_view text(reinterpret_cast<const char*>(p + start), total - start);
  if (major < 3)
    for (char c : text)
      if (static_cast<unsigned char>(c) >= 128) ATTNPROF_FAIL("{}: non-ASCII byte in a version {} .npy header", what, major);
  Scanner sc(text, what);
  sc.expect('{');
  bool have_descr = false, have_fortran = false, have_shape = false;
  while (!sc.accept('}')) {
    const std::string key = sc.quoted();
    sc.expect(':');
    if (key == "descr" && !have_descr) {
      h.descr = sc.quoted();
      have_descr = true;
    } else if (key == "fortran_order" && !have_fortran) {
      h.fortran_order = sc.boolean();
      have_fortran = true;
    } else if (key == "shape" && !have_shape) {
      h.shape = sc.tuple();
      have_shape = true;
    } else {
      sc.fail(fmt::format("unexpected or repeated key '{}'", escaped(key)));
    }
    if (sc.accept('}')) break;
    sc.expect(',');
  }
  if (!sc.at_end()) sc.fail("trailing characters after the dict");
  if (!have_descr || !have_fortran || !have_shape)
    ATTNPROF_FAIL("{}: invalid .npy header: it must have the keys 'descr', 'fortran_order' and 'shape'", what);
  h.elem = parse_descr(h.descr, what);
  if (h.fortran_order)
    ATTNPROF_FAIL("{}: Fortran-order arrays are not supported: save with np.ascontiguousarray", what);
  h.numel = 1;
  for (int64_t d : h.shape) {
    if (d <= 0) ATTNPROF_FAIL("{}: shape {} has a zero dimension: attnprof needs non-empty tensors", what, fmt::join(h.shape, "x"));
    if (__builtin_mul_overflow(h.numel, d, &h.numel) || h.numel > kMaxElements)
      ATTNPROF_FAIL("{}: declared shape ({}) is too large (over 2^40 elements)", what, fmt::join(h.shape, ", "));
  }
  h.data_bytes = size_t(h.numel) * elem_size(h.elem);
  return h;
}

void check_4d(const Header& h, std::string_view what) {
  if (h.shape.size() != 4)
    ATTNPROF_FAIL("{}: expected a 4-D array [B, H, N, D], got {}-D shape ({})", what, h.shape.size(),
                  fmt::join(h.shape, ", "));
}

void check_size(const Header& h, uint64_t file_bytes, std::string_view what) {
  const uint64_t have = file_bytes - h.data_offset;
  if (have != h.data_bytes)
    ATTNPROF_FAIL("{}: size mismatch: shape ({}) of '{}' needs {} data bytes but the file has {}", what,
                  fmt::join(h.shape, ", "), escaped(h.descr), h.data_bytes, have);
}

// Copies raw little-endian data into a freshly allocated tensor, converting fp16 and fp64 to fp32.
Tensor from_raw(const Header& h, const unsigned char* src) {
  const Shape4 shape{h.shape[0], h.shape[1], h.shape[2], h.shape[3]};
  if (h.elem == ElemType::F64) {  // NumPy's default dtype: rounded to nearest fp32 (beyond its range: ±inf)
    Tensor t = Tensor::empty(shape, DType::F32);
    float* dst = t.data<float>();
    for (int64_t i = 0; i < h.numel; ++i) {
      double x;
      std::memcpy(&x, src + 8 * i, 8);
      dst[i] = float(x);
    }
    return t;
  }
  const DType t_dtype = h.elem == ElemType::F32 ? DType::F32 : h.elem == ElemType::F16 ? DType::F16 : DType::BF16;
  Tensor t = Tensor::empty(shape, t_dtype);
  std::memcpy(t.raw(), src, h.data_bytes);  // x86 is little-endian, as the files are
  return t;
}

}  // namespace

Header parse_header(const void* data, size_t size, std::string_view what) {
  const auto* p = static_cast<const unsigned char*>(data);
  int major = 0, minor = 0;
  const size_t total = preamble(p, size, what, major, minor);
  return parse_after_preamble(p, size, what, major, minor, total);
}

Tensor load_from_memory(const void* data, size_t size, std::string_view what) {
  const Header h = parse_header(data, size, what);
  check_4d(h, what);
  check_size(h, size, what);
  return from_raw(h, static_cast<const unsigned char*>(data) + h.data_offset);
}

Tensor load(const std::string& path) {
  // stat before open: opening a FIFO would block until a writer came.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) ATTNPROF_FAIL("cannot open '{}': {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) ATTNPROF_FAIL("'{}' is not a regular file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) ATTNPROF_FAIL("cannot open '{}': {}", path, std::strerror(errno));
  const uint64_t file_bytes = uint64_t(st.st_size);
  // Preamble first, then exactly the header it declares: nothing large is read before validation.
  std::string head(size_t(std::min<uint64_t>(file_bytes, 12)), '\0');
  in.read(head.data(), std::streamsize(head.size()));
  const auto* hp = reinterpret_cast<const unsigned char*>(head.data());
  int major = 0, minor = 0;
  const size_t total = preamble(hp, head.size(), path, major, minor);
  if (total > file_bytes)
    ATTNPROF_FAIL("{}: truncated .npy header: it declares {} bytes but the file has {}", path, total, file_bytes);
  head.resize(total);
  in.seekg(0);
  in.read(head.data(), std::streamsize(total));
  if (!in) ATTNPROF_FAIL("cannot read the header of '{}'", path);
  const Header h = parse_after_preamble(reinterpret_cast<const unsigned char*>(head.data()), total, path, major,
                                        minor, total);
  check_4d(h, path);
  check_size(h, file_bytes, path);
  std::string data(h.data_bytes, '\0');
  in.read(data.data(), std::streamsize(h.data_bytes));
  if (!in) ATTNPROF_FAIL("{}: cannot read {} data bytes", path, h.data_bytes);
  return from_raw(h, reinterpret_cast<const unsigned char*>(data.data()));
}

std::string to_bytes(const Tensor& t0) {
  ATTNPROF_CHECK(t0.defined(), "cannot save an undefined tensor");
  ATTNPROF_CHECK(t0.dtype() != DType::Bool, "cannot save a {} tensor as .npy",
                 dtype_name(t0.dtype()));
  const Tensor t = t0.contiguous();
  const Shape4& s = t.shape();
  const char* descr = t.dtype() == DType::F32 ? "<f4" : t.dtype() == DType::F16 ? "<f2" : "<u2";
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}, {}, {}, {}), }}", descr,
                                 s[0], s[1], s[2], s[3]);
  // NumPy pads with spaces so that magic + version + length + header is a multiple of 64, ending in '\n'.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  ATTNPROF_CHECK(dict.size() <= 0xffff, "npy header too long");
  std::string out;
  out.reserve(10 + dict.size() + t.nbytes());
  out.append(reinterpret_cast<const char*>(kMagic), 6);
  out += char(1);
  out += char(0);
  out += char(dict.size() & 0xff);
  out += char(dict.size() >> 8);
  out += dict;
  out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

void save(const std::string& path, const Tensor& t) { io::write_file_atomic(path, to_bytes(t)); }

}  // namespace attnprof::npy
