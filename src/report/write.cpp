// Whole-or-nothing file output: a temporary file in the target's directory, then rename(2).
// A reader never sees a half-written trace, and a failed write leaves no file behind.
// Paths ending in ".gz" are gzip-compressed (zlib level 1: traces still shrink ~10x and export stays fast).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "attnprof/error.h"
#include "attnprof/report.h"
#include "report/atomic_file.h"

namespace attnprof::report::detail {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

struct AtomicFile::Impl {
  std::string path, tmp;
  int fd = -1;
  bool gz = false;
  z_stream zs{};
  std::string zbuf;

  [[noreturn]] void fail(const char* what, int err) {
    abort_file();
    ATTNPROF_FAIL("cannot write '{}': {} ({})", path, what, std::strerror(err));
  }
  void abort_file() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    if (!tmp.empty()) ::unlink(tmp.c_str());
    tmp.clear();
    if (gz) deflateEnd(&zs);
    gz = false;
  }
  void raw_write(const char* p, size_t left) {
    while (left > 0) {
      const ssize_t n = ::write(fd, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("write failed", errno);
      }
      p += n;
      left -= size_t(n);
    }
  }
  void deflate_chunk(std::string_view in, int flush) {
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs.avail_in = uInt(in.size());
    do {
      zs.next_out = reinterpret_cast<Bytef*>(zbuf.data());
      zs.avail_out = uInt(zbuf.size());
      const int rc = deflate(&zs, flush);
      if (rc == Z_STREAM_ERROR) fail("gzip compression failed", EIO);
      raw_write(zbuf.data(), zbuf.size() - zs.avail_out);
    } while (zs.avail_out == 0 || zs.avail_in > 0);
  }
};

AtomicFile::AtomicFile(std::string path) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  ATTNPROF_CHECK(!path.empty(), "cannot write a file with an empty path");
  m.path = std::move(path);
  m.tmp = m.path + ".tmp.XXXXXX";
  m.fd = ::mkstemp(m.tmp.data());
  if (m.fd < 0) {
    const int err = errno;
    m.tmp.clear();
    ATTNPROF_FAIL("cannot write '{}': cannot create a temporary file in its directory ({})", m.path,
                  std::strerror(err));
  }
  if (ends_with(m.path, ".gz")) {
    // windowBits 15 + 16: a gzip header and trailer rather than a raw zlib stream.
    if (deflateInit2(&m.zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      m.fail("zlib initialisation failed", ENOMEM);
    m.gz = true;
    m.zbuf.resize(1 << 18);
  }
}

AtomicFile::~AtomicFile() { impl_->abort_file(); }

void AtomicFile::write(std::string_view bytes) {
  Impl& m = *impl_;
  ATTNPROF_CHECK(m.fd >= 0, "cannot write '{}': file already committed or failed", m.path);
  if (m.gz) m.deflate_chunk(bytes, Z_NO_FLUSH);
  else m.raw_write(bytes.data(), bytes.size());
}

void AtomicFile::commit() {
  Impl& m = *impl_;
  ATTNPROF_CHECK(m.fd >= 0, "cannot write '{}': file already committed or failed", m.path);
  if (m.gz) {
    m.deflate_chunk({}, Z_FINISH);
    deflateEnd(&m.zs);
    m.gz = false;
  }
  // mkstemp creates 0600; a report is an ordinary readable file. (Reading the umask would need umask(2),
  // which is process-wide and racy, so 0644 it is.)
  if (::fchmod(m.fd, 0644) != 0) m.fail("chmod failed", errno);
  const int fd = m.fd;
  m.fd = -1;
  if (::close(fd) != 0) m.fail("close failed", errno);
  if (::rename(m.tmp.c_str(), m.path.c_str()) != 0) m.fail("rename from its temporary file failed", errno);
  m.tmp.clear();  // committed: nothing to remove
}

}  // namespace attnprof::report::detail

namespace attnprof::report {

void write_text_atomic(const std::string& path, const std::string& contents) {
  detail::AtomicFile f(path);
  f.write(contents);
  f.commit();
}

}  // namespace attnprof::report
