// The fuzz body for the readers of attnprof's own JSON files, shared by the libFuzzer target (fuzz_json.cpp)
// and the corpus replay in the normal test suite (tests/test_diff.cpp). These files come back from disk, so
// they may be truncated, hand-edited or from another tool: `attnprof diff` reads two summaries or two
// compare.json, `attnprof report` reads every JSON file in a directory.
//
// Input: one mode byte, then up to seven documents separated by NUL bytes (JSON text never holds a raw NUL).
//   mode % 3 == 0: diff_summaries(doc0, doc1), then both tables and the JSON of the diff;
//   mode % 3 == 1: diff_compare_runs(doc0, doc1), the same;
//   mode % 3 == 2: the documents as the files of an output directory (compare.json, naive.summary.json,
//                  inplace.summary.json, sweep.json, roofline.json, naive.trace.json, flash.summary.json,
//                  written byte for byte) and render_html_report on it.
//
// Contract under test: diff either works or throws attnprof::Error (the CLI's one-line message), never
// another exception (the CLI would call that an internal error) or a crash; what it returns renders as a
// table and as JSON. The report never throws for any file contents (a file it cannot read becomes a note) and
// its embedded data block holds no '<' (so no "</script>" can end it early).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnprof/error.h"
#include "attnprof/html.h"
#include "attnprof/report.h"

namespace attnprof::fuzz {

inline std::vector<std::string_view> split_documents(const uint8_t* data, size_t size, size_t max_docs) {
  std::vector<std::string_view> docs;
  const char* p = reinterpret_cast<const char*>(data);
  size_t start = 0;
  for (size_t i = 0; i <= size && docs.size() < max_docs; ++i)
    if (i == size || p[i] == '\0') {
      docs.emplace_back(p + start, i - start);
      start = i + 1;
    }
  return docs;
}

inline constexpr const char* kReportFiles[] = {"compare.json",  "naive.summary.json", "inplace.summary.json",
                                               "sweep.json",    "roofline.json",      "naive.trace.json",
                                               "flash.summary.json"};

// What became of one input (for the replay test's assertions; the fuzzer only needs "no crash").
enum class JsonOutcome { NotJson, Diffed, Refused, Rendered };

// `scratch_dir` is an existing directory the report mode may fill and empty (one per process).
inline JsonOutcome json_outcome(const uint8_t* data, size_t size, const std::string& scratch_dir) {
  if (size == 0) return JsonOutcome::NotJson;
  const int mode = data[0] % 3;
  const auto docs = split_documents(data + 1, size - 1, std::size(kReportFiles));
  if (mode < 2) {
    if (docs.size() < 2) return JsonOutcome::NotJson;
    // As cmd_diff.cpp loads them: text that is not JSON is refused before the diff sees it.
    const nlohmann::json a = nlohmann::json::parse(docs[0], nullptr, false);
    const nlohmann::json b = nlohmann::json::parse(docs[1], nullptr, false);
    if (a.is_discarded() || b.is_discarded()) return JsonOutcome::NotJson;
    try {
      if (mode == 0) {
        const report::ProfileDiff d = report::diff_summaries(a, b, "base", "new");
        (void)report::diff_table(d);
        (void)report::diff_table(d, 2);
        (void)report::diff_json(d).dump(2);
      } else {
        const report::RunDiff d = report::diff_compare_runs(a, b);
        (void)report::diff_table(d);
        (void)report::diff_json(d).dump(2);
      }
    } catch (const Error&) {
      return JsonOutcome::Refused;  // refused with a message: fine
    }
    return JsonOutcome::Diffed;
  }

  namespace fs = std::filesystem;
  std::error_code ec;
  for (const char* name : kReportFiles) fs::remove(fs::path(scratch_dir) / name, ec);
  for (size_t i = 0; i < docs.size(); ++i) {
    std::ofstream f(fs::path(scratch_dir) / kReportFiles[i], std::ios::binary);
    f.write(docs[i].data(), std::streamsize(docs[i].size()));
  }
  report::ChartLibrary lib;  // the page's charts are not under test here, only what it makes of the files
  lib.vega_version = lib.vega_lite_version = lib.vega_embed_version = "fuzz";
  const std::string page = report::render_html_report(scratch_dir, lib);  // must not throw
  const std::string open = "<script type=\"application/json\" id=\"attnprof-data\">";
  const size_t begin = page.find(open);
  if (begin == std::string::npos) std::abort();
  const size_t end = page.find("</script>", begin + open.size());
  if (end == std::string::npos || page.find('<', begin + open.size()) != end) std::abort();
  if (nlohmann::json::parse(page.substr(begin + open.size(), end - begin - open.size()), nullptr, false).is_discarded())
    std::abort();
  return JsonOutcome::Rendered;
}

inline int json_one_input(const uint8_t* data, size_t size, const std::string& scratch_dir) {
  (void)json_outcome(data, size, scratch_dir);
  return 0;
}

}  // namespace attnprof::fuzz
