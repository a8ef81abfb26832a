// The reporters' whole-or-nothing text output (io::AtomicFile: temporary file + rename, gzip for ".gz").
#include "attnprof/report.h"
#include "io/atomic_file.h"

namespace attnprof::report {

void write_text_atomic(const std::string& path, const std::string& contents) {
  io::AtomicFile f(path);
  f.write(contents);
  f.commit();
}

}  // namespace attnprof::report
