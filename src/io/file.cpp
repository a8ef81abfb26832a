#include "io/file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "attnprof/error.h"
#include "io/atomic_file.h"

namespace attnprof::io {

void write_file_atomic(const std::string& path, std::string_view bytes, bool now) {
  AtomicFile f(path, AtomicFile::Gzip::Never, now ? AtomicFile::Commit::Now : AtomicFile::Commit::WithBatch);
  f.write(bytes);
  f.commit();
}

std::string read_file(const std::string& path) {
  // Only a regular file: /dev/zero would be read forever, and opening a FIFO blocks until a writer comes.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) ATTNPROF_FAIL("cannot read '{}': {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) ATTNPROF_FAIL("cannot read '{}': it is not a regular file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) ATTNPROF_FAIL("cannot read '{}': {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) ATTNPROF_FAIL("cannot read '{}'", path);
  return std::move(ss).str();
}

}  // namespace attnprof::io
