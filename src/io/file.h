// Internal: whole-file writes that either complete or leave nothing behind, and whole regular-file reads.
//
//   io::write_file_atomic("out/peaks.json", text);   // temp file in the same directory, then rename
//   const std::string text = io::read_file("out/compare.json");
//
// Writes go through io::AtomicFile (atomic_file.h), which the reporters' write_text_atomic uses too.
#pragma once

#include <string>
#include <string_view>

namespace attnprof::io {

// Writes `bytes` to `path` via a temporary file + rename (never gzip). Throws Error naming the path on
// failure and removes the temporary file.
// `now`: renamed at once even inside a report::FileBatch (a cache that must survive the command failing).
void write_file_atomic(const std::string& path, std::string_view bytes, bool now = false);

// The whole file as bytes; throws Error naming the path when it cannot be read or is not a regular file.
std::string read_file(const std::string& path);

}  // namespace attnprof::io
