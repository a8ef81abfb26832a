// Whole-or-nothing file output: a temporary file in the target's directory, then rename(2).
// A reader never sees a half-written trace, and a failed write leaves no file behind.
// The target is what the path names after symbolic links: a link to a regular file has its target replaced
// (the link stays a link), and a path that names no regular file (/dev/null, /dev/stdout, a FIFO) is
// written straight through, since renaming over it would replace the device or pipe with a plain file.
// Paths ending in ".gz" are gzip-compressed (zlib level 1: traces still shrink ~10x and export stays fast).
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "attnprof/error.h"
#include "io/atomic_file.h"

namespace attnprof::io {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

struct AtomicFile::Impl {
  std::string path, tmp;  // tmp empty: writing straight into `path` (not a regular file)
  int fd = -1;
  bool gz = false;
  bool batched = true;  // Commit::WithBatch
  z_stream zs{};
  std::string zbuf;

  [[noreturn]] void fail(const char* what, int err) {
    abort_file();
    ATTNPROF_FAIL("cannot write '{}': {} ({})", path, what, std::strerror(err));
  }
  void abort_file() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    if (!tmp.empty()) {
      ::unlink(tmp.c_str());
      detail::untrack_temporary(tmp);
    }
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

namespace {
struct TargetInfo {
  bool exists = false, is_link = false;
  struct stat target {};
};
// `path` as its directory ("." for a bare name) and the name in it.
std::pair<std::string, std::string> split_path(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// Where a process id means this process: the boot (another host, or this one since a reboot, has other
// processes under the same ids) and the pid namespace (a container's ids are its own). Eight hex digits of a
// hash of both; "" when either cannot be read, and then no temporary file is judged stale.
const std::string& process_place() {
  static const std::string place = [] {
    std::string boot;
    if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
      char buf[64] = {};
      if (std::fgets(buf, sizeof buf, f)) boot = buf;
      std::fclose(f);
    }
    struct stat ns {};
    if (boot.empty() || ::stat("/proc/self/ns/pid", &ns) != 0) return std::string();
    uint32_t h = 2166136261u;  // FNV-1a
    for (const char c : boot + ":" + std::to_string(ns.st_dev) + ":" + std::to_string(ns.st_ino)) h = (h ^ uint8_t(c)) * 16777619u;
    return fmt::format("{:08x}", h);
  }();
  return place;
}

// ".tmp.PID.PLACE.XXXXXX": the writing process's id and where that id holds (process_place) in its temporary
// files' names, so that a later run can tell the files of a run that was killed outright (SIGKILL, the OOM
// killer: no handler removes them) from those of a run still writing, here or on another host sharing --out.
std::string temporary_suffix() {
  const std::string& place = process_place();
  return ".tmp." + std::to_string(::getpid()) + "." + (place.empty() ? std::string("00000000") : place) + ".XXXXXX";
}

// The temporary files of `path` that a process no longer alive left beside it: removed before a new one is
// made. Only `path`'s own, only those written where this process is (same boot, same pid namespace), and only
// where their process is gone (kill(pid, 0): ESRCH). A ".old" backup is kept: a run killed while it replaced
// its files may have left there the only copy of a file's previous contents.
void remove_stale_temporaries(const std::string& path) noexcept {
  const std::string& place = process_place();
  if (place.empty()) return;
  const auto [dir, name] = split_path(path);
  const std::string prefix = name + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view entry(e->d_name);
    if (entry.substr(0, prefix.size()) != prefix) continue;
    const std::string_view rest = entry.substr(prefix.size());  // PID.PLACE.XXXXXX
    const size_t dot = rest.find('.');
    if (dot == 0 || dot == std::string_view::npos || dot > 9 || rest.size() != dot + 1 + 8 + 1 + 6) continue;
    if (rest.substr(dot + 1, 8) != place || rest[dot + 9] != '.') continue;
    long pid = 0;
    bool digits = true;
    for (const char c : rest.substr(0, dot)) {
      digits = digits && c >= '0' && c <= '9';
      pid = pid * 10 + (c - '0');
    }
    if (!digits || pid <= 0 || pid == long(::getpid())) continue;
    if (::kill(pid_t(pid), 0) != 0 && errno == ESRCH) stale.emplace_back(dir + "/" + std::string(entry));
  }
  ::closedir(d);
  for (const std::string& f : stale) ::unlink(f.c_str());
}

// What `path` names now, refused when no file can be written there whole.
TargetInfo inspect_target(const std::string& path) {
  ATTNPROF_CHECK(!path.empty(), "cannot write a file with an empty path");
  TargetInfo t;
  struct stat link {};
  t.exists = ::stat(path.c_str(), &t.target) == 0;
  const int err = t.exists ? 0 : errno;
  t.is_link = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
  ATTNPROF_CHECK(t.exists || !t.is_link || err != ELOOP,
                 "cannot write '{}': it is a symbolic link that never reaches a file (a loop of links)", path);
  ATTNPROF_CHECK(t.exists || !t.is_link, "cannot write '{}': it is a symbolic link to a file that does not exist", path);
  ATTNPROF_CHECK(!t.exists || !S_ISDIR(t.target.st_mode), "cannot write '{}': it is a directory", path);
  return t;
}
}  // namespace

std::string atomic_target_dir(const std::string& path) {
  const TargetInfo t = inspect_target(path);
  if (t.exists && !S_ISREG(t.target.st_mode)) {
    // Written straight through. A FIFO is not opened here: opening and closing it would end the input of a
    // reader already waiting on it. Whether one reads it is known when the run writes it.
    if (!S_ISFIFO(t.target.st_mode) && ::access(path.c_str(), W_OK) != 0)
      ATTNPROF_FAIL("cannot write '{}': it is not a regular file and cannot be opened for writing ({})", path,
                    std::strerror(errno));
    return {};
  }
  std::string target = path;
  if (t.is_link) {  // the constructor writes beside the link's target
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved) == nullptr)
      ATTNPROF_FAIL("cannot write '{}': cannot resolve the symbolic link ({})", path, std::strerror(errno));
    target = resolved;
  }
  // An immutable or append-only file (chattr +i / +a) can be neither renamed over nor linked to its ".old"
  // name, even by root: the commit would fail with EPERM after the whole run. Its flags are read through a
  // read-only descriptor; a file this user cannot read is left to the commit to report.
  if (t.exists) {
    if (const int fd = ::open(target.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC); fd >= 0) {
      int flags = 0;
      const bool got = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
      ::close(fd);
      const bool immutable = got && (flags & FS_IMMUTABLE_FL) != 0, append = got && (flags & FS_APPEND_FL) != 0;
      if (immutable || append)
        ATTNPROF_FAIL("cannot write '{}': it is {} (chattr +{}), so it cannot be replaced; `chattr -{}` clears the flag",
                      path, immutable ? "immutable" : "append-only", immutable ? 'i' : 'a', immutable ? 'i' : 'a');
    }
  }
  const auto [dir, name] = split_path(target);
  // The temporary file's name is the file's plus ".tmp.PID.PLACE.XXXXXX" (temporary_suffix), and an old file is kept under that plus
  // ".old" while it is replaced: a name near the filesystem's limit is refused by mkstemp or link(2) only then.
  const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  const size_t extra = temporary_suffix().size() + (t.exists ? std::strlen(".old") : 0);
  if (name_max > 0 && name.size() + extra > size_t(name_max))
    ATTNPROF_FAIL("cannot write '{}': its name is {} bytes long, and the temporary file written beside it needs {} more "
                  "(at most {} bytes a name there)",
                  path, name.size(), extra, name_max);
  // In a sticky directory (mode +t, as /tmp) only the file's owner, the directory's or root may rename over a
  // file or remove it: another user's file there would fail the commit's rename (EPERM) after the whole run.
  if (t.exists) {
    struct stat d {};
    const uid_t me = ::geteuid();
    if (::stat(dir.c_str(), &d) == 0 && (d.st_mode & S_ISVTX) != 0 && me != 0 &&
        t.target.st_uid != me && d.st_uid != me)
      ATTNPROF_FAIL("cannot write '{}': the file belongs to another user (uid {}) and its directory is sticky (mode "
                    "+t, as /tmp), where only the file's owner can replace it; remove it as that user, or write "
                    "somewhere else",
                    path, unsigned(t.target.st_uid));
  }
  return dir;
}

AtomicFile::AtomicFile(std::string path, Gzip gzip, Commit when) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.batched = when == Commit::WithBatch;
  const TargetInfo t = inspect_target(path);
  m.path = std::move(path);
  const bool compress = gzip == Gzip::ByExtension && ends_with(m.path, ".gz");  // the name asked for, not a link's
  const bool exists = t.exists, is_link = t.is_link;
  const struct stat& target = t.target;
  if (exists && !S_ISREG(target.st_mode)) {
    // A device or a pipe: open it for writing (a FIFO without a reader fails with ENXIO instead of blocking).
    m.fd = ::open(m.path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (m.fd < 0) {
      const int err = errno;
      ATTNPROF_FAIL("cannot write '{}': it is not a regular file and cannot be opened for writing ({})", m.path,
                    err == ENXIO ? "a FIFO with no reader" : std::strerror(err));
    }
    const int flags = ::fcntl(m.fd, F_GETFL);
    if (flags >= 0) ::fcntl(m.fd, F_SETFL, flags & ~O_NONBLOCK);
  } else {
    if (is_link) {  // replace the link's target, beside it, and keep the link
      char resolved[PATH_MAX];
      if (::realpath(m.path.c_str(), resolved) == nullptr)
        ATTNPROF_FAIL("cannot write '{}': cannot resolve the symbolic link ({})", m.path, std::strerror(errno));
      m.path = resolved;
    }
    remove_stale_temporaries(m.path);
    m.tmp = m.path + temporary_suffix();
    m.fd = detail::make_temporary(m.tmp);
    if (m.fd < 0) {
      const int err = errno;
      m.tmp.clear();
      ATTNPROF_FAIL("cannot write '{}': cannot create a temporary file in its directory ({})", m.path,
                    std::strerror(err));
    }
  }
  if (compress) {
    // windowBits 15 + 16: a gzip header and trailer rather than a raw zlib stream.
    if (deflateInit2(&m.zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      m.fail("zlib initialisation failed", ENOMEM);
    m.gz = true;
    try {
      m.zbuf.resize(1 << 18);
    } catch (...) {  // no destructor runs for a constructor that throws: the temporary file goes here
      m.abort_file();
      throw;
    }
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
  const bool direct = m.tmp.empty();
  // mkstemp creates 0600; a report is an ordinary readable file. (Reading the umask would need umask(2),
  // which is process-wide and racy, so 0644 it is.)
  if (!direct && ::fchmod(m.fd, 0644) != 0) m.fail("chmod failed", errno);
  // On the disk before the rename puts it in place: after a crash the name holds the old file or the whole new
  // one, never a new name over data the kernel had not written yet. A filesystem that cannot sync a file
  // (EINVAL, ENOTSUP) keeps what it has; a write error the sync reports (EIO, ENOSPC) fails the file.
  if (!direct && ::fdatasync(m.fd) != 0 && errno != EINVAL && errno != ENOTSUP && errno != ENOSYS)
    m.fail("writing it to the disk failed", errno);
  const int fd = m.fd;
  m.fd = -1;
  if (::close(fd) != 0) m.fail("close failed", errno);
  if (direct) return;
  if (detail::Batch* b = detail::current_batch(); b && m.batched) {
    b->files.push_back({m.tmp, m.path});  // the batch renames it, or removes it if never committed
    m.tmp.clear();
    return;
  }
  if (::rename(m.tmp.c_str(), m.path.c_str()) != 0) m.fail("rename from its temporary file failed", errno);
  detail::untrack_temporary(m.tmp);
  m.tmp.clear();  // committed: nothing to remove
}

namespace detail {

Batch*& current_batch() {
  thread_local Batch* current = nullptr;
  return current;
}

namespace {
// A batch's renames are one step: a signal that arrives while they run waits for them (defer_signal), so
// that a run is never left with some of its files new and the rest old.
std::atomic<int> g_committing{0};
std::atomic<int> g_deferred_signal{0};

// Ends the commit, then delivers a signal that arrived during it (its handler now removes what is left).
struct CommitScope {
  CommitScope() { g_committing.fetch_add(1); }
  ~CommitScope() {
    g_committing.fetch_sub(1);
    if (const int sig = g_deferred_signal.exchange(0); sig != 0) ::raise(sig);
  }
};
}  // namespace

bool defer_signal(int sig) noexcept {
  g_deferred_signal.store(sig);  // first, so that a commit ending now still sees it (no signal is lost)
  if (g_committing.load() > 0) return true;
  g_deferred_signal.store(0);
  return false;
}

LinkFunction& link_function() {
  static LinkFunction f = ::link;
  return f;
}

namespace {
// link(2)'s answers on a filesystem (or directory) that has no hard links: vfat and exFAT (EPERM), some FUSE
// and network filesystems (EOPNOTSUPP), a file at its link limit (EMLINK), a bind or overlay mount between
// the two names (EXDEV). The old file is then kept as a copy of its bytes.
bool no_hard_links(int err) {
  return err == EPERM || err == EOPNOTSUPP || err == ENOTSUP || err == EMLINK || err == EXDEV;
}

// A copy of `path` under `backup`, written as every file is (a temporary file beside it, then renamed) and
// with the old file's permissions, so that putting it back restores the file as it was. "" when it is in
// place, else why not.
std::string copy_backup(const std::string& path, const std::string& backup, mode_t mode) {
  const int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return std::string("cannot open it (") + std::strerror(errno) + ")";
  std::string why;
  try {
    AtomicFile out(backup, AtomicFile::Gzip::Never, AtomicFile::Commit::Now);
    std::string buf(size_t(1) << 20, '\0');
    while (true) {
      const ssize_t n = ::read(in, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        why = std::string("cannot read it (") + std::strerror(errno) + ")";
        break;
      }
      if (n == 0) {
        out.commit();
        if (::chmod(backup.c_str(), mode & 07777) != 0) why = std::string("chmod failed (") + std::strerror(errno) + ")";
        break;
      }
      out.write(std::string_view(buf.data(), size_t(n)));
    }
  } catch (const Error& e) {
    why = e.what();
  }
  ::close(in);
  if (!why.empty()) ::unlink(backup.c_str());
  return why;
}

// What stood at a staged file's path before the batch: its old file, kept under a hard link beside it, or a
// copy where the filesystem has no hard links (`backup` empty: nothing to put back, the path is removed
// instead, or a directory a rename cannot replace).
struct Previous {
  std::string backup;
  bool existed = false;
};

// Puts back the old file at the paths of staged files [0, n) (already renamed into place), last first so a
// path written twice in one batch ends with what it held before the batch, then removes every backup.
void restore_previous(const Batch& b, const std::vector<Previous>& prev, size_t n) {
  for (size_t i = n; i-- > 0;) {
    if (!prev[i].backup.empty()) ::rename(prev[i].backup.c_str(), b.files[i].path.c_str());
    else if (!prev[i].existed) ::unlink(b.files[i].path.c_str());
  }
  for (const Previous& p : prev)
    if (!p.backup.empty()) ::unlink(p.backup.c_str());  // gone already where it was renamed back
}
}  // namespace

void commit_staged(Batch& b) {
  const CommitScope one_step;
  // A rename can fail midway (a full quota, a file made immutable, a directory in the way): the run's files
  // must then be all old, not some new and the rest old. So every old file is first kept under a hard link
  // in its directory (a copy, where the filesystem has no hard links), and a failed rename puts them back.
  // Signals wait for this step (CommitScope), which removes every backup before it ends.
  std::vector<Previous> prev(b.files.size());
  auto fail = [&](size_t i, size_t renamed, const std::string& why) {
    const std::string path = b.files[i].path;
    restore_previous(b, prev, renamed);
    b.files.erase(b.files.begin(), b.files.begin() + std::ptrdiff_t(renamed));  // their temporaries are gone
    discard_staged(b);
    ATTNPROF_FAIL("cannot write '{}': {}", path, why);
  };
  auto because = [](const char* what, int err) { return fmt::format("{} ({})", what, std::strerror(err)); };
  for (size_t i = 0; i < b.files.size(); ++i) {
    struct stat st {};
    if (::lstat(b.files[i].path.c_str(), &st) != 0) continue;  // nothing there yet
    prev[i].existed = true;
    if (S_ISDIR(st.st_mode)) continue;  // the rename fails before anything is replaced
    // Named after the staged file's temporary, which mkstemp made unique in the same directory.
    const std::string backup = b.files[i].tmp + ".old";
    if (link_function()(b.files[i].path.c_str(), backup.c_str()) != 0) {
      const int err = errno;
      if (!no_hard_links(err)) fail(i, 0, because("cannot keep its old file while replacing it", err));
      if (const std::string why = copy_backup(b.files[i].path, backup, st.st_mode); !why.empty())
        fail(i, 0, "cannot keep a copy of its old file while replacing it (no hard links here): " + why);
    }
    prev[i].backup = backup;
  }
  for (size_t i = 0; i < b.files.size(); ++i) {
    if (::rename(b.files[i].tmp.c_str(), b.files[i].path.c_str()) != 0)
      fail(i, i, because("rename from its temporary file failed", errno));
    untrack_temporary(b.files[i].tmp);
  }
  restore_previous(b, prev, 0);  // all in place: only the backups go
  b.files.clear();
}

void discard_staged(Batch& b) {
  for (const Staged& f : b.files) {
    ::unlink(f.tmp.c_str());
    untrack_temporary(f.tmp);
  }
  b.files.clear();
}

namespace {

// A slot is free (0), being filled (1: mkstemp is writing the name into it and creating the file) or holds
// a live temporary file's path (2). A run stages a few dozen files at most; past the table's size a file is
// simply not removed by a signal (it still is on every other path).
struct TempSlot {
  std::atomic<int> state{0};
  char path[PATH_MAX];
};
TempSlot g_temporaries[128];

}  // namespace

int make_temporary(std::string& tmpl) noexcept {
  if (tmpl.size() < PATH_MAX)
    for (TempSlot& s : g_temporaries) {
      int free = 0;
      if (!s.state.compare_exchange_strong(free, 1, std::memory_order_acquire)) continue;
      std::memcpy(s.path, tmpl.c_str(), tmpl.size() + 1);
      const int fd = ::mkstemp(s.path);  // creates the file under the name it leaves in s.path
      if (fd < 0) {
        const int err = errno;
        s.state.store(0, std::memory_order_release);
        errno = err;
        return -1;
      }
      std::memcpy(tmpl.data(), s.path, tmpl.size());
      s.state.store(2, std::memory_order_release);
      return fd;
    }
  return ::mkstemp(tmpl.data());
}

void untrack_temporary(const std::string& tmp) noexcept {
  for (TempSlot& s : g_temporaries)
    if (s.state.load(std::memory_order_acquire) == 2 && std::strcmp(s.path, tmp.c_str()) == 0) {
      s.state.store(0, std::memory_order_release);
      return;
    }
}

}  // namespace detail

void remove_temporaries() noexcept {
  for (detail::TempSlot& s : detail::g_temporaries) {
    // A slot being filled by another thread is given up to 50 ms to finish creating its file. Filled by the
    // thread this handler interrupted, it never finishes: its name is then either made (the file may exist)
    // or not yet (nothing exists under it), so unlinking it is right either way.
    for (int i = 0; i < 50 && s.state.load(std::memory_order_acquire) == 1; ++i) {
      const timespec ms{0, 1000000};
      ::nanosleep(&ms, nullptr);
    }
    if (s.state.load(std::memory_order_acquire) != 0) {
      ::unlink(s.path);
      s.state.store(0, std::memory_order_release);
    }
  }
}

}  // namespace attnprof::io
