// report/html_run.h (internal): what the HTML report reads from a run directory: compare.json, sweep.json,
// roofline.json, every <variant>.summary.json with its trace and table. Reading is lenient: a missing or
// damaged file becomes a note that the page shows in place of its section, never an error.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnprof/report.h"

namespace attnprof::report::html_run {

using json = nlohmann::json;

// A JSON input: parsed, or absent, or unreadable (a note says which; the report still renders).
struct Input {
  std::optional<json> doc;
  std::string note;  // why it is missing, "" when present
  std::string why;   // a file that is there but cannot be used: why not, without its name ("" otherwise)
};

// A file's bytes (gzip-compressed ones inflated), or nothing when it cannot be read. When the file is there
// but cannot be read (not a regular file, no permission, over `limit` compressed or once inflated, corrupt
// gzip data), `why` (when given) says so; it stays empty for a file that does not exist.
std::optional<std::string> read_file(const std::filesystem::path& p, std::string* why = nullptr,
                                     uint64_t limit = kMaxInputBytes);
// A JSON file attnprof wrote, or a note saying why it is not there.
Input read_json(const std::filesystem::path& p);

// Lenient accessors: a number, a string (numbers and booleans as their JSON text), a flag (true only when the
// member is the boolean true) or the first present member.
double num(const json& j, std::string_view key, double def = 0.0);
bool flag(const json& j, std::string_view key);
std::string str(const json& j, std::string_view key, std::string def = "");
const json* member(const json& j, std::initializer_list<std::string_view> keys);

// One row of a profile's key averages, as the summary stores it.
struct OpRow {
  std::string name, category;
  double calls = 0, self_ns = 0, total_ns = 0, flops = 0, bf16_flops = 0, bytes = 0;
  double library_flops = 0, library_bf16_flops = 0;  // 0 in a summary written before they were recorded
};

// A user annotation (the per-forward zone, ProfilerStep#), not an op.
bool is_annotation(const OpRow& r);

// The flame graph draws frames this many deep below the threads at most; read_stacks keeps no more of a line.
inline constexpr int kMaxFlameDepth = 16;

// Which recorded forward the timeline draws: the one closest to the median of the trace's forwards.
struct ForwardDrawn {
  int index = 0, count = 0;                         // 0-based, of the trace's recorded forwards
  double ms = NAN, first_ms = NAN, median_ms = NAN;  // its length, the first one's, their median
};

// Everything the page shows of one variant.
struct VariantData {
  std::string name;
  std::string summary_file, trace_file;
  std::optional<json> summary;
  std::vector<OpRow> ops;
  double forwards = 1;          // calls of the per-forward annotation, when one is found
  bool per_forward = false;
  std::string forward_zone;     // that annotation's name ("attn_fwd"), "" when none was found
  double compare_ms = NAN;      // its ms per forward in compare.json; NaN when compare.json did not run it
  std::vector<std::pair<double, double>> memory;  // (ms since start, live bytes)
  std::string memory_source;
  json forward_spans = json::array();  // one forward's trace events (forward_timeline), for the timeline chart
  std::string forward_note;            // why there are none, or that they were cut; "" when all are there
  ForwardDrawn forward_drawn;          // which forward forward_spans are of
  bool trace_unreadable = false;       // the trace is there but could not be read (cut short, over the size limit)
  std::string table;            // torch-style table text, when available
  std::string table_csv;        // "<variant>.table.csv" when it is beside the summary and of its run, else ""
  // <variant>.stacks.txt (folded stacks) when it is of the summary's run: each stack's frames, root first, and
  // its weight in ns summed over the recorded forwards. Empty when absent, older, or not folded stacks (a note).
  std::vector<std::pair<std::vector<std::string>, double>> stacks;
  std::vector<std::string> uneven;  // its ops whose mean per forward slow forwards lift (uneven_op_notes)
};

// The whole run: the three run-level files and every variant, in compare.json's order, then any other
// <variant>.summary.json in the directory. `op_notes` says which summaries could not be read.
struct Run {
  Input compare, sweep, roofline;
  std::vector<VariantData> variants;
  std::vector<std::string> op_notes;
  std::vector<std::string> notes;  // files left out of the page (another problem than the run's), shown first
  std::set<std::string> left_out;  // their names, and the traces and tables of the same variants
  // The inputs the page is drawn from (compare.json, sweep.json, roofline.json, summaries), counted when one
  // could be used (a file left out as another problem's counts: it is a good file), and, one line each
  // (file name, why: "naive.summary.json", "not an attnprof summary ..."), those that are there but could not
  // be: unreadable, not JSON, or not what attnprof writes under that name. A directory that cannot be listed
  // is an entry with an empty file name.
  int usable = 0;
  std::vector<std::pair<std::string, std::string>> unusable;
};
// `max_spans`: the most trace events of one forward kept per variant for the timeline.
Run read_run(const std::filesystem::path& dir, size_t max_spans);

}  // namespace attnprof::report::html_run
