// The reporters' whole-or-nothing text output (io::AtomicFile: temporary file + rename, gzip for ".gz").
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "attnprof/error.h"
#include "attnprof/report.h"
#include "io/atomic_file.h"

namespace attnprof::report {

struct FileBatchState {
  io::detail::Batch batch;
};

FileBatch::FileBatch() : state_(std::make_unique<FileBatchState>()) {
  state_->batch.outer = io::detail::current_batch();
  io::detail::current_batch() = &state_->batch;
}

FileBatch::~FileBatch() {
  io::detail::discard_staged(state_->batch);
  if (io::detail::current_batch() == &state_->batch) io::detail::current_batch() = state_->batch.outer;
}

void FileBatch::commit() {
  if (io::detail::current_batch() == &state_->batch) io::detail::current_batch() = state_->batch.outer;
  io::detail::commit_staged(state_->batch);
}

nlohmann::json count_json(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) <= 9007199254740992.0) return int64_t(v);
  return v;
}

void remove_temporary_files() noexcept { io::remove_temporaries(); }

bool defer_signal_while_committing(int sig) noexcept { return io::detail::defer_signal(sig); }

namespace {

// Directories where a probe file was created and removed in this process: a run checks its output files
// against them rather than creating a probe beside each file.
std::mutex g_writable_mutex;
std::set<std::string> g_writable_dirs;

std::string canonical_dir(const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path c = std::filesystem::canonical(dir, ec);
  return ec ? std::string() : c.string();
}

}  // namespace

std::string write_probe_error(const std::string& dir) {
  // A file actually created and removed: access(2) would let root pass where a write then fails (/proc), and
  // the reason as strerror alone misleads (/proc answers ENOENT for a directory that plainly exists).
  // Made where a signal handler finds it (remove_temporary_files), so Ctrl-C here leaves no probe behind.
  // An append-only or immutable directory takes no rename (an append-only one takes new files, which then
  // cannot be removed): read from its flags where the filesystem keeps them, so no probe is left in it.
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    int flags = 0;
    const bool known = ::ioctl(dfd, FS_IOC_GETFLAGS, &flags) == 0;
    ::close(dfd);
    if (known && (flags & FS_APPEND_FL)) return "it is append-only (chattr +a): no file in it can be replaced";
    if (known && (flags & FS_IMMUTABLE_FL)) return "it is immutable (chattr +i): no file can be created in it";
  }
  std::string probe = (std::filesystem::path(dir) / ".attnprof-write-probe.XXXXXX").string();
  const int fd = io::detail::make_temporary(probe);
  if (fd < 0) return fmt::format("a file cannot be created there ({})", std::strerror(errno));
  ::close(fd);
  const bool removed = ::unlink(probe.c_str()) == 0;
  const int e = errno;
  io::detail::untrack_temporary(probe);
  if (!removed)
    return fmt::format("a file created there cannot be removed ({}; '{}' is left in it)", std::strerror(e), probe);
  if (const std::string c = canonical_dir(dir); !c.empty()) {
    const std::lock_guard<std::mutex> lock(g_writable_mutex);
    g_writable_dirs.insert(c);
  }
  return {};
}

void check_output_file(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string dir = io::atomic_target_dir(path);
  if (dir.empty()) return;  // a device or a FIFO, written straight through
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) ATTNPROF_FAIL("cannot write '{}': its directory '{}' does not exist", path, dir);
  if (!fs::is_directory(st)) ATTNPROF_FAIL("cannot write '{}': '{}' is not a directory", path, dir);
  if (const std::string c = canonical_dir(dir); !c.empty()) {
    const std::lock_guard<std::mutex> lock(g_writable_mutex);
    if (g_writable_dirs.contains(c)) return;
  }
  if (const std::string why = write_probe_error(dir); !why.empty())
    ATTNPROF_FAIL("cannot write '{}' in '{}': {}", path, dir, why);
}

void write_text_atomic(const std::string& path, const std::string& contents) {
  io::AtomicFile f(path);
  f.write(contents);
  f.commit();
}

}  // namespace attnprof::report
