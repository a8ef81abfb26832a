// Internal: whole-file writes that either complete or leave nothing behind.
//
//   io::write_file_atomic("out/peaks.json", text);   // temp file in the same directory, fsync, rename
//
// The public reporters have report::write_text_atomic (with gzip); this is the plain-bytes primitive the
// library's lower layers (the .npy writer, the machine-peaks cache) use without depending on report/.
#pragma once

#include <string>
#include <string_view>

namespace attnprof::io {

// Writes `bytes` to `path` via "<path>.tmp.<pid>.<n>" + rename. Throws Error naming the path on failure
// and removes the temporary file.
void write_file_atomic(const std::string& path, std::string_view bytes);

// The whole file as bytes; throws Error naming the path when it cannot be read.
std::string read_file(const std::string& path);

}  // namespace attnprof::io
