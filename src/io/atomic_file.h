// Internal: a file written whole or not at all (temporary file in the same directory + rename), streamed in
// chunks, optionally gzip-compressed on the fly. Every file attnprof writes goes through it: the reporters'
// write_text_atomic and trace writer (which streams megabyte chunks instead of building one string the size
// of the trace), and io::write_file_atomic (.npy files, the machine-peaks cache).
// A symbolic link's target is replaced (the link stays); a path naming no regular file (/dev/null,
// /dev/stdout, a FIFO) is written straight through instead of being replaced by a plain file.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace attnprof::io {

class AtomicFile {
 public:
  enum class Gzip { ByExtension, Never };  // ByExtension: compress when the path ends in ".gz"
  enum class Commit { WithBatch, Now };     // WithBatch: staged in the thread's open FileBatch, if any
  explicit AtomicFile(std::string path, Gzip gzip = Gzip::ByExtension,
                      Commit when = Commit::WithBatch);  // throws Error naming `path`
  ~AtomicFile();                          // not committed: the temporary file is removed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::string_view bytes);  // throws Error naming the path (and removes the temporary file)
  void commit();  // flush, close, rename onto the path (or hand the complete file to the open FileBatch)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The checks AtomicFile's constructor makes on `path` before it creates anything (a symbolic link to a file
// that does not exist, a directory), for callers that must refuse a path before a long run writes to it, and
// the others the constructor or the commit would make on `path` only later, short of
// creating a file: a name too long for the temporary file beside it, a device that cannot be opened for
// writing (access(2); a FIFO is not opened, which would end a waiting reader's input), a file flagged immutable
// or append-only (chattr +i / +a), which no rename replaces. Returns the directory
// the temporary file would be made in (the path's, or its symbolic link's target's), or "" for a path written
// straight through (a device, a FIFO). Whether a file can be created there is the caller's to probe.
std::string atomic_target_dir(const std::string& path);

// The staging behind report::FileBatch (see report.h): files committed while a batch is open on this thread
// wait, complete, in their temporary files, and are renamed together by commit_staged().
namespace detail {
struct Staged {
  std::string tmp, path;
};
struct Batch {
  std::vector<Staged> files;
  Batch* outer = nullptr;
};
Batch*& current_batch();
void commit_staged(Batch& b);   // renames every staged file, in the order they were written
// link(2) as commit_staged calls it to keep each old file under a second name while it is replaced: tests
// swap in one that fails as a filesystem without hard links does (EPERM, EOPNOTSUPP, EMLINK, EXDEV), where
// the old file is kept as a byte copy instead. 0, or -1 with errno set.
using LinkFunction = int (*)(const char* existing, const char* new_name);
LinkFunction& link_function();
void discard_staged(Batch& b);  // removes every staged temporary file
// For a signal handler, first thing: true while a batch's renames run, and then the signal is raised again
// as soon as they end, so the handler should return at once and a run is never left half renamed.
// Async-signal-safe.
bool defer_signal(int sig) noexcept;

// Every temporary file that exists now (being written, or staged in a batch) is also kept in a fixed table
// of paths, so that remove_temporaries() can run in a signal handler: no allocation, no lock, only unlink(2).
// make_temporary is mkstemp(3) on `tmpl` ("...XXXXXX", rewritten to the name made) with the name entered in
// the table before the file is created, so a signal at any moment finds every file that exists.
// Returns the descriptor, or -1 with errno set.
int make_temporary(std::string& tmpl) noexcept;
void untrack_temporary(const std::string& tmp) noexcept;
}  // namespace detail

// Removes every temporary file not yet renamed into place. Async-signal-safe (see detail::make_temporary).
void remove_temporaries() noexcept;

}  // namespace attnprof::io
