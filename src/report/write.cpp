// The reporters' whole-or-nothing text output (io::AtomicFile: temporary file + rename, gzip for ".gz").
#include <cmath>

#include "attnprof/report.h"
#include "io/atomic_file.h"

namespace attnprof::report {

nlohmann::json count_json(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) <= 9007199254740992.0) return int64_t(v);
  return v;
}

void write_text_atomic(const std::string& path, const std::string& contents) {
  io::AtomicFile f(path);
  f.write(contents);
  f.commit();
}

}  // namespace attnprof::report
