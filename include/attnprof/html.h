// attnprof/html.h: one self-contained HTML page per run, drawn from the JSON files in an output directory.
//
//   // after `compare`, `sweep`, `profile` or `roofline` wrote their files into out/:
//   std::string page = attnprof::report::write_html_report("out");   // -> "out/report.html"
//
// The page reads compare.json, sweep.json, roofline.json, <variant>.summary.json and the
// <variant>.trace.json[.gz] files that exist in the directory; a section whose input is missing is left out
// with a one-line note, never an error. Everything the page needs is inside it: the data as JSON in a
// <script type="application/json"> block (with <, >, &, U+2028 and U+2029 escaped) and the chart library
// (Vega, Vega-Lite, vega-embed) inlined from the npm packages pinned in web/package.json. The page opens from
// file:// and asks the network for nothing.
//
// The chart library is found under HtmlOptions::web_dir when it is set (and nowhere else), else under
// $ATTNPROF_WEB_DIR when that is set (and nowhere else), otherwise, in this order, in the directories beside
// and above the running executable (web/,
// share/attnprof/web/), and the source tree's web/ configured at build time. Each candidate must hold node_modules/vega/build/vega.min.js. When none does,
// write_html_report throws Error naming what to install (`npm ci --prefix web`, which scripts/setup.sh runs).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnprof/error.h"

namespace attnprof::report {

struct HtmlOptions {
  std::string web_dir;                   // directory holding node_modules/{vega,vega-lite,vega-embed}, the only
                                         // one tried; "" = search
  std::string title = "attnprof report";
  std::string file_name = "report.html"; // written inside the output directory
  // `attnprof report`: when the directory holds no input the page can draw (compare.json, sweep.json,
  // roofline.json or a <variant>.summary.json that is readable and what attnprof writes), write_html_report
  // throws NoReportInput and writes nothing, instead of a page that only says what to run.
  bool require_input = false;
  // When set, write_html_report fills it with one line per input that is there but could not be used,
  // "<dir>/<file>: <why>" as NoReportInput's problems (the page leaves its section out with a note), so that the
  // command can say so on stderr too: a script that reads only the exit status sees 0 for a page drawn without them.
  std::vector<std::string>* unusable = nullptr;
};

// What write_html_report throws with HtmlOptions::require_input when nothing in the directory can be drawn.
// what() is one line saying so; `problems` has one line per input that is there but could not be used,
// "<dir>/<file>: <why>" ("run/compare.json: not valid JSON (...)"), empty when there was none at all.
class NoReportInput : public Error {
 public:
  NoReportInput(std::string message, std::vector<std::string> problems)
      : Error(std::move(message)), problems(std::move(problems)) {}
  std::vector<std::string> problems;
};

// The chart library's JavaScript, read from the installed npm packages.
struct ChartLibrary {
  std::string web_dir;        // where it was found
  std::string vega, vega_lite, vega_embed;            // the minified builds
  std::string vega_version, vega_lite_version, vega_embed_version;
};

// Directories searched for the chart library, in order (for error messages and docs); just `web_dir` when given.
std::vector<std::string> chart_library_candidates(const std::string& web_dir = "");
// Loads the library; throws Error listing the directories tried and what to install.
ChartLibrary load_chart_library(const std::string& web_dir = "");

// The whole page as a string, built from the files in `out_dir`.
std::string render_html_report(const std::string& out_dir, const ChartLibrary& lib,
                               const HtmlOptions& opt = {});

// Renders and writes `out_dir/report.html` (whole or not at all); returns the path written. This is the
// function behind `attnprof report` and the `--html` flag of profile, compare and sweep.
std::string write_html_report(const std::string& out_dir, const HtmlOptions& opt = {});
// What write_html_report would refuse, checked before a run (--html): the chart library can be loaded, and
// `out_dir/report.html` (when the directory exists) is not, and does not link to, a file the page reads.
void check_html_report_possible(const std::string& out_dir, const HtmlOptions& opt = {});

// ---- escaping, exposed for tests ---------------------------------------------------------------------------
// Text and attribute values: & < > " ' become entities.
std::string html_escape(std::string_view s);
// JSON that is safe inside <script type="application/json">: <, >, & and U+2028/U+2029 as \u escapes,
// so no "</script>" or "<!--" can appear in the block. JSON.parse reads it back unchanged.
std::string script_json(const nlohmann::json& j);
// A relative file name made safe for href="...": percent-encodes everything but unreserved characters and '/'.
std::string href_for_file(std::string_view name);

}  // namespace attnprof::report
