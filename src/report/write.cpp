// The reporters' whole-or-nothing text output (io::AtomicFile: temporary file + rename, gzip for ".gz").
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

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

std::string write_probe_error(const std::string& dir) {
  // A file actually created and removed: access(2) would let root pass where a write then fails (/proc).
  // Made where a signal handler finds it (remove_temporary_files), so Ctrl-C here leaves no probe behind.
  std::string probe = (std::filesystem::path(dir) / ".attnprof-write-probe.XXXXXX").string();
  const int fd = io::detail::make_temporary(probe);
  // The reason as strerror alone misleads: /proc answers ENOENT for a directory that plainly exists.
  if (fd < 0) return fmt::format("a file cannot be created there ({})", std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  io::detail::untrack_temporary(probe);
  return {};
}

void write_text_atomic(const std::string& path, const std::string& contents) {
  io::AtomicFile f(path);
  f.write(contents);
  f.commit();
}

}  // namespace attnprof::report
