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

namespace attnprof::io {

class AtomicFile {
 public:
  enum class Gzip { ByExtension, Never };  // ByExtension: compress when the path ends in ".gz"
  explicit AtomicFile(std::string path, Gzip gzip = Gzip::ByExtension);  // throws Error naming `path`
  ~AtomicFile();                          // not committed: the temporary file is removed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::string_view bytes);  // throws Error naming the path (and removes the temporary file)
  void commit();                       // flush, close, rename onto the path

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnprof::io
