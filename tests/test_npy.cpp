// The .npy reader and writer: round trips, NumPy-compatible bytes, and every corruption the reader must
// refuse with a clear message (and without allocating what a hostile header declares).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "attnprof/allocator.h"
#include "attnprof/error.h"
#include "attnprof/npy.h"

using namespace attnprof;

namespace {

std::string preamble_v1(const std::string& dict) {
  std::string h = dict;
  const size_t unpadded = 10 + h.size() + 1;
  h.append((64 - unpadded % 64) % 64, ' ');
  h += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += char(h.size() & 0xff);
  out += char(h.size() >> 8);
  return out + h;
}

std::string image(const std::string& dict, size_t data_bytes) { return preamble_v1(dict) + std::string(data_bytes, '\0'); }

std::string error_of(const std::string& bytes) {
  try {
    npy::load_from_memory(bytes.data(), bytes.size(), "t.npy");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Tensor ramp(const Shape4& s, DType t) {
  Tensor x = Tensor::empty(s, t);
  for (int64_t b = 0; b < s[0]; ++b)
    for (int64_t h = 0; h < s[1]; ++h)
      for (int64_t i = 0; i < s[2]; ++i)
        for (int64_t j = 0; j < s[3]; ++j) x.set(b, h, i, j, float(b * 1000 + h * 100 + i * 10 + j) * 0.25f - 7.f);
  return x;
}

void expect_equal(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.dtype(), b.dtype());
  for (int64_t bb = 0; bb < a.shape(0); ++bb)
    for (int64_t h = 0; h < a.shape(1); ++h)
      for (int64_t i = 0; i < a.shape(2); ++i)
        for (int64_t j = 0; j < a.shape(3); ++j) ASSERT_EQ(a.get(bb, h, i, j), b.get(bb, h, i, j));
}

}  // namespace

TEST(Npy, RoundTripFp32Bf16AndFp16InMemory) {
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    const Tensor x = ramp({2, 3, 5, 4}, t);
    const std::string bytes = npy::to_bytes(x);
    EXPECT_EQ(npy::parse_header(bytes.data(), bytes.size()).data_offset % 64, 0u);  // NumPy's alignment
    expect_equal(npy::load_from_memory(bytes.data(), bytes.size()), x);
  }
}

TEST(Npy, RoundTripThroughAFileAndNonContiguousInput) {
  const Tensor x = ramp({1, 2, 6, 3}, DType::F32).transpose();  // a view: saved in C order of its shape
  const auto path = (std::filesystem::temp_directory_path() / "attnprof_test_npy_rt.npy").string();
  npy::save(path, x);
  expect_equal(npy::load(path), x.contiguous());
  std::filesystem::remove(path);
}

TEST(Npy, HeaderMatchesNumpysFormat) {
  const std::string bytes = npy::to_bytes(ramp({1, 1, 2, 2}, DType::F32));
  const std::string header = bytes.substr(10, bytes.find('\n') - 10);
  EXPECT_EQ(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 2, 2), }", 0), 0u) << header;
  EXPECT_EQ(bytes.find('\n') + 1, npy::parse_header(bytes.data(), bytes.size()).data_offset);  // header ends the preamble
  const std::string bf = npy::to_bytes(ramp({1, 1, 2, 2}, DType::BF16));
  EXPECT_NE(bf.find("'<u2'"), std::string::npos);
  EXPECT_NE(npy::to_bytes(ramp({1, 1, 2, 2}, DType::F16)).find("'<f2'"), std::string::npos);
}

TEST(Npy, ReadsVersion2And3AndDoubleQuotesAndNoTrailingComma) {
  const std::string dict = "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1, 1, 1, 2)}";
  for (char major : {'\x02', '\x03'}) {
    std::string h = dict + "\n";
    std::string bytes("\x93NUMPY", 6);
    bytes += major;
    bytes += '\0';
    const uint32_t n = uint32_t(h.size());
    for (int i = 0; i < 4; ++i) bytes += char((n >> (8 * i)) & 0xff);
    bytes += h;
    const float v[2] = {1.5f, -2.0f};
    bytes.append(reinterpret_cast<const char*>(v), 8);
    const Tensor t = npy::load_from_memory(bytes.data(), bytes.size());
    EXPECT_EQ(t.get(0, 0, 0, 1), -2.0f);
    EXPECT_EQ(npy::parse_header(bytes.data(), bytes.size()).major, int(major));
  }
}

TEST(Npy, Float16LoadsAsFp16) {
  std::string bytes = preamble_v1("{'descr': '<f2', 'fortran_order': False, 'shape': (1, 1, 1, 4), }");
  const uint16_t halves[4] = {0x3c00 /*1*/, 0xc000 /*-2*/, 0x0001 /*2^-24*/, 0x7c00 /*inf*/};
  bytes.append(reinterpret_cast<const char*>(halves), 8);
  const Tensor t = npy::load_from_memory(bytes.data(), bytes.size());
  EXPECT_EQ(t.dtype(), DType::F16);
  EXPECT_EQ(t.get(0, 0, 0, 0), 1.0f);
  EXPECT_EQ(t.get(0, 0, 0, 1), -2.0f);
  EXPECT_EQ(t.get(0, 0, 0, 2), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(t.get(0, 0, 0, 3)));
  EXPECT_EQ(std::memcmp(t.raw(), halves, 8), 0);  // the bits as stored
}

TEST(Npy, Float64IsRoundedToFloat32) {
  std::string bytes = preamble_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 2, 2), }");
  const double v[4] = {0.1, -3.0, 1e-50 /* below fp32's subnormals: 0 */, 1e300 /* beyond its range: inf */};
  bytes.append(reinterpret_cast<const char*>(v), sizeof v);
  EXPECT_EQ(npy::parse_header(bytes.data(), bytes.size()).data_bytes, 32u);
  const Tensor t = npy::load_from_memory(bytes.data(), bytes.size());
  EXPECT_EQ(t.dtype(), DType::F32);
  EXPECT_EQ(t.get(0, 0, 0, 0), 0.1f);  // round to nearest
  EXPECT_EQ(t.get(0, 0, 0, 1), -3.0f);
  EXPECT_EQ(t.get(0, 0, 1, 0), 0.0f);
  EXPECT_TRUE(std::isinf(t.get(0, 0, 1, 1)));
  // Eight bytes per element: a file with float32's size for this shape is a size mismatch.
  std::string short_data = preamble_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 2, 2), }");
  short_data.append(16, '\0');
  try {
    (void)npy::load_from_memory(short_data.data(), short_data.size());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("size mismatch"), std::string::npos) << e.what();
  }
}

TEST(Npy, RefusesEveryCorruption) {
  const std::string good = npy::to_bytes(ramp({1, 2, 3, 4}, DType::F32));
  struct Case {
    std::string bytes, expect;
  };
  std::string wrong_magic = good;
  wrong_magic[1] = 'X';
  std::string bad_version = good;
  bad_version[6] = 9;
  std::string huge_len = good;
  huge_len[8] = char(0xff), huge_len[9] = char(0xff);
  const std::vector<Case> cases = {
      {"", "shorter than the .npy preamble"},
      {good.substr(0, 5), "shorter than the .npy preamble"},
      {wrong_magic, "wrong magic"},
      {bad_version, "unsupported .npy format version 9.0"},
      {huge_len, "truncated .npy header"},
      {good.substr(0, 40), "truncated .npy header"},
      {good.substr(0, good.size() - 1), "size mismatch"},
      {good + "x", "size mismatch"},
      {image("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2, 3, 4), }", 96), "size mismatch"},
      {image("{'descr': '<i8', 'fortran_order': False, 'shape': (1, 1, 1, 1), }", 8), "unsupported dtype '<i8'"},
      {image("{'descr': '>f4', 'fortran_order': False, 'shape': (1, 1, 1, 1), }", 4), "big-endian"},
      {image("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 1, 1, 1), }", 4), "Fortran-order"},
      {image("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 1), }", 16), "expected a 4-D array"},
      {image("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 0, 1, 1), }", 0), "zero dimension"},
      {image("{'descr': '<f4', 'fortran_order': False, 'shape': (1, -1, 1, 1), }", 4), "signed dimension"},
      {image("{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000, 100000, 100000), }", 4),
       "too large"},
      {image("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 1, 1, 1), }", 4),
       "does not fit in 64 bits"},
      {image("{'descr': '<f4', 'fortran_order': False, 'shape': (1024, 1024, 1024, 64), }", 4), "size mismatch"},
      {image("{'descr': '<f4', 'fortran_order': False}", 4), "must have the keys"},
      {image("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1), 'x': 1}", 4), "unexpected or repeated key"},
      {image("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1)}", 4), "repeated key"},
      {image("{'descr': '<f4' 'fortran_order': False, 'shape': (1, 1, 1, 1)}", 4), "expected ','"},
      {image("{'descr': '<f4', 'fortran_order': false, 'shape': (1, 1, 1, 1)}", 4), "expected True or False"},
      {image("{'descr': '<f4, 'fortran_order': False, 'shape': (1, 1, 1, 1)}", 4), "invalid .npy header"},
      {image("['descr', '<f4']", 4), "expected '{'"},
      {image("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1)} junk", 4), "trailing characters"},
  };
  // A header quoted in a message is one line of what the file holds: padding off, a newline inside it escaped.
  const std::string quoted = error_of(image("{'descr': '<f4, 'fortran_order':\nFalse, 'shape': (1, 1, 1, 1)}", 4));
  EXPECT_NE(quoted.find("of header '{'descr': '<f4, 'fortran_order':\\nFalse, 'shape': (1, 1, 1, 1)}'"),
            std::string::npos) << quoted;
  for (const Case& c : cases) {
    const std::string msg = error_of(c.bytes);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << "expected '" << c.expect << "', got '" << msg << "'";
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;  // one line
    if (!c.bytes.empty()) EXPECT_NE(msg.find("t.npy"), std::string::npos) << msg;  // names the source
  }
}

TEST(Npy, HugeDeclaredShapeIsRefusedBeforeAllocating) {
  const auto path = (std::filesystem::temp_directory_path() / "attnprof_test_npy_huge.npy").string();
  {
    std::ofstream f(path, std::ios::binary);
    f << image("{'descr': '<f4', 'fortran_order': False, 'shape': (1024, 1024, 1024, 1024), }", 16);
  }
  const int64_t before = memory_stats().total_allocated;
  try {
    npy::load(path);
    FAIL() << "a 4 TiB declared shape was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("size mismatch"), std::string::npos) << e.what();
  }
  EXPECT_EQ(memory_stats().total_allocated, before);
  std::filesystem::remove(path);
}

TEST(Npy, MissingFileAndUnwritableDestinationAreClearErrors) {
  EXPECT_THROW(npy::load("/nonexistent/dir/q.npy"), Error);
  EXPECT_THROW(npy::save("/nonexistent/dir/o.npy", ramp({1, 1, 1, 1}, DType::F32)), Error);
}

// The fuzz corpus, replayed through the fuzz target's body in every build (no clang needed): valid seeds
// load, corrupt ones are refused with an Error, none crashes.
#include "../fuzz/fuzz_npy_body.h"

TEST(NpyFuzzCorpus, ReplaysEverySeedWithoutCrashing) {
  const std::filesystem::path dir = std::filesystem::path(ATTNPROF_SOURCE_DIR) / "fuzz" / "corpus" / "npy";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  int files = 0, valid = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(entry.path().filename().string());
    EXPECT_EQ(attnprof::fuzz::npy_one_input(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
    ++files;
    bool loads = true;
    try {
      npy::load_from_memory(bytes.data(), bytes.size());
    } catch (const Error&) {
      loads = false;
    }
    const bool named_valid = entry.path().filename().string().rfind("valid_", 0) == 0;
    EXPECT_EQ(loads, named_valid) << "seeds named valid_* must load, all others must be refused";
    valid += loads;
  }
  EXPECT_GE(files, 20);
  EXPECT_GE(valid, 6);
}
