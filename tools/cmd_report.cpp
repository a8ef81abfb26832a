// attnprof report [--out DIR]: one self-contained report.html drawn from the JSON files that compare, sweep,
// roofline and profile wrote into DIR (see docs/report.md). It runs nothing itself; a missing or unusable input
// file leaves its section out with a note, but a directory with no usable input at all is an error (exit 2). The same page is what `--html` on profile, compare and sweep writes,
// through attnprof::report::write_html_report.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "attnprof/error.h"
#include "attnprof/html.h"
#include "common.h"

namespace attnprof::cli {
namespace {

struct ReportArgs {
  std::string out = "attnprof-out";
  std::string web_dir;
  std::string title = "attnprof report";
};

void run_report(const ReportArgs& a) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool is_dir = fs::is_directory(a.out, ec);
  // A path that exists but cannot be followed (a loop of symbolic links, a directory it may not search) says why.
  if (!is_dir && ec && ec != std::errc::no_such_file_or_directory)
    ATTNPROF_FAIL("report: --out {}: {}", a.out, ec.message());
  // Missing: the run that fills it has not happened. Something else: no run can write there either.
  ATTNPROF_CHECK(is_dir || fs::symlink_status(a.out, ec).type() != fs::file_type::not_found,
                 "report: --out {} does not exist (run `attnprof compare --out {}` first)", a.out, a.out);
  ATTNPROF_CHECK(is_dir, "report: --out {} is not a directory (it holds the results of a run, which write into a "
                 "directory: pass that directory)", a.out);
  report::HtmlOptions opt;
  opt.web_dir = a.web_dir;
  opt.title = a.title;
  // A directory with nothing to draw (empty, unrelated files, every input corrupt) is bad input: no page, one
  // line per file that could not be used, then the error itself (exit 2).
  opt.require_input = true;
  std::vector<std::string> unusable;
  opt.unusable = &unusable;
  std::string path;
  try {
    path = report::write_html_report(a.out, opt);
  } catch (const report::NoReportInput& e) {
    for (const std::string& line : e.problems) print_error(line);  // a parser's message may quote the file's bytes
    throw Error(e.what());
  }
  // The page was written without them (each section says why); stderr says so too, for whoever reads only it.
  for (const std::string& line : unusable) progress("attnprof: note: " + line + " (left out of the page)");
  print_out("{}\n", terminal_line(path));
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* sub = app.add_subcommand(
      "report", "write DIR/report.html: one self-contained page with the tables and plots of the run in DIR");
  sub->add_option("--out,-o", args->out,
                  "directory with compare.json, sweep.json, roofline.json, <variant>.summary.json and traces "
                  "(default: attnprof-out)");
  sub->add_option("--web-dir", args->web_dir,
                  "directory whose node_modules holds vega, vega-lite and vega-embed (default: $ATTNPROF_WEB_DIR when "
                  "set, and then only it; else web/ beside or above the executable, then ../share/attnprof/web (an installed "
                  "copy), then the source tree's web/)");
  sub->add_option("--title", args->title, "page title");
  sub->callback([args] { run_report(*args); });
}

}  // namespace attnprof::cli
