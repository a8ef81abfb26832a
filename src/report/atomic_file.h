// Internal: a file written whole or not at all (temporary file in the same directory + rename), streamed in
// chunks, gzip-compressed on the fly when the path ends in ".gz". Used by write_text_atomic and the trace
// writer, which streams megabyte chunks instead of building one string the size of the trace.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace attnprof::report::detail {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // creates the temporary file; throws Error naming `path`
  ~AtomicFile();                          // not committed: the temporary file is removed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::string_view bytes);  // throws Error naming the path (and removes the temporary file)
  void commit();                       // flush, close, rename onto the path

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnprof::report::detail
