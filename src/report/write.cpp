// Whole-or-nothing file output: a temporary file in the target's directory, then rename(2).
// A reader never sees a half-written trace, and a failed write leaves no file behind.
// Paths ending in ".gz" are gzip-compressed (zlib, level 1: traces compress ~10x and export stays fast).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "attnprof/error.h"
#include "attnprof/report.h"

namespace attnprof::report {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string gzip(const std::string& in, const std::string& path) {
  z_stream zs{};
  // windowBits 15 + 16: a gzip header and trailer rather than a raw zlib stream.
  ATTNPROF_CHECK(deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK,
                 "cannot write '{}': zlib initialisation failed", path);
  std::string out;
  out.resize(deflateBound(&zs, uLong(in.size())) + 64);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = uInt(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = uInt(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  const size_t produced = zs.total_out;
  deflateEnd(&zs);
  ATTNPROF_CHECK(rc == Z_STREAM_END, "cannot write '{}': gzip compression failed (zlib error {})", path, rc);
  out.resize(produced);
  return out;
}

}  // namespace

void write_text_atomic(const std::string& path, const std::string& contents) {
  ATTNPROF_CHECK(!path.empty(), "cannot write a file with an empty path");
  const bool gz = ends_with(path, ".gz");
  const std::string packed = gz ? gzip(contents, path) : std::string();
  const std::string& bytes = gz ? packed : contents;

  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    const int err = errno;
    ATTNPROF_FAIL("cannot write '{}': cannot create a temporary file in its directory ({})", path,
                  std::strerror(err));
  }
  auto fail = [&](const char* what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    ATTNPROF_FAIL("cannot write '{}': {} ({})", path, what, std::strerror(err));
  };
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write failed", errno);
    }
    p += n;
    left -= size_t(n);
  }
  // mkstemp creates 0600; a report is an ordinary readable file. (Reading the umask would need umask(2),
  // which is process-wide and racy, so 0644 it is.)
  if (::fchmod(fd, 0644) != 0) fail("chmod failed", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    ATTNPROF_FAIL("cannot write '{}': close failed ({})", path, std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    ATTNPROF_FAIL("cannot write '{}': rename from its temporary file failed ({})", path, std::strerror(err));
  }
}

}  // namespace attnprof::report
