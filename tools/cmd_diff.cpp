// attnprof diff BASE NEW: two profiles side by side, op by op and per forward: what a change of
// implementation removed, added or turned in place, and where the time and memory went. BASE and NEW are
// `<variant>.summary.json` files that profile or compare wrote (e.g. attnprof-out/naive.summary.json and
// attnprof-out/inplace.summary.json: the blog's first two scripts).
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "attnprof/error.h"
#include "attnprof/report.h"

namespace attnprof::cli {
namespace {

struct DiffArgs {
  std::string base, next;
  int row_limit = -1;
  bool json = false;
  std::string out;  // also write the diff here (.json: JSON, else the table)
};

nlohmann::json load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  ATTNPROF_CHECK(f.good(), "cannot read {}: no such file or not readable", path);
  std::ostringstream bytes;
  bytes << f.rdbuf();
  nlohmann::json j = nlohmann::json::parse(bytes.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) ATTNPROF_FAIL("{}: not valid JSON", path);
  return j;
}

std::string file_label(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  if (const size_t dot = name.find(".summary.json"); dot != std::string::npos) name.resize(dot);
  return name;
}

void run_diff(const DiffArgs& a) {
  ATTNPROF_CHECK(a.row_limit >= -1, "--row-limit must be -1 (all) or more, got {}", a.row_limit);
  const report::ProfileDiff d =
      report::diff_summaries(load(a.base), load(a.next), file_label(a.base), file_label(a.next));
  const std::string text = report::diff_table(d, a.row_limit);
  const nlohmann::json j = report::diff_json(d);
  if (!a.out.empty())
    report::write_text_atomic(a.out, a.out.ends_with(".json") || a.out.ends_with(".json.gz") ? j.dump(2) + "\n" : text);
  if (a.json) std::printf("%s\n", j.dump(2).c_str());
  else std::printf("%s", text.c_str());
}

}  // namespace

void add_diff_command(CLI::App& app) {
  auto args = std::make_shared<DiffArgs>();
  CLI::App* sub = app.add_subcommand(
      "diff", "two profiles side by side, op by op per forward (e.g. naive.summary.json inplace.summary.json)");
  sub->add_option("base", args->base, "the summary to compare from (<variant>.summary.json)")->required();
  sub->add_option("new", args->next, "the summary to compare to")->required();
  sub->add_option("--row-limit", args->row_limit, "rows to print, largest change in time first (default: all)");
  sub->add_flag("--json", args->json, "machine-readable JSON on stdout");
  sub->add_option("--save", args->out, "also write the diff to this file (.json: the JSON, else the table)");
  sub->callback([args] { run_diff(*args); });
}

}  // namespace attnprof::cli
