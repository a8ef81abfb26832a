// attnprof diff BASE NEW: two results side by side.
//   - two `<variant>.summary.json` (from profile or compare): op by op and per forward, what a change of
//     implementation removed, added or turned in place, and where the time and memory went (e.g. naive and
//     inplace: the blog's first two scripts);
//   - two compare.json, or two directories holding one: variant by variant, ms per forward and the speed-up,
//     peak memory, ops and error (two runs before and after a change, two machines, a CPU run and a GPU run).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "attnprof/error.h"
#include "attnprof/report.h"
#include "common.h"

namespace attnprof::cli {
namespace {

struct DiffArgs {
  std::string base, next;
  int row_limit = -1;
  bool json = false;
  bool brief = false;  // stdout without the lines that define the columns (--save keeps them)
  std::string out;  // also write the diff here (.json: JSON, else the table)
};

// A directory stands for the compare.json inside it, else for its one <variant>.summary.json (a profile's
// --out); one with several summaries and no compare.json names them, since which to compare is the user's call.
std::string input_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;
  const fs::path compare = fs::path(path) / "compare.json";
  if (fs::exists(compare, ec)) return compare.string();
  // A directory that cannot be searched (mode 000) is not one without the files: say what stopped the reading.
  if (ec && ec != std::errc::no_such_file_or_directory)
    ATTNPROF_FAIL("cannot read the directory '{}': {}", path, ec.message());
  std::vector<std::string> summaries;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
    if (const std::string name = it->path().filename().string(); name.ends_with(".summary.json"))
      summaries.push_back(name);
  if (ec) ATTNPROF_FAIL("cannot read the directory '{}': {}", path, ec.message());
  std::sort(summaries.begin(), summaries.end());
  if (summaries.empty())
    ATTNPROF_FAIL("{} is a directory without a compare.json or a <variant>.summary.json: diff takes two "
                  "<variant>.summary.json, or two compare.json (or two directories holding one)",
                  path);
  if (summaries.size() == 1) return (fs::path(path) / summaries.front()).string();
  ATTNPROF_FAIL("{} holds no compare.json, only summaries ({}): name the summary to compare, e.g. {}", path,
                fmt::join(summaries, ", "), (fs::path(path) / summaries.front()).string());
}

std::string file_label(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  if (const size_t dot = name.find(".summary.json"); dot != std::string::npos) name.resize(dot);
  return name;
}

// --save's extension, read as a file manager reads it: d.JSON is JSON.
std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// The names of the files a run writes into its --out: --save there under one of them would replace a result
// that report, roofline --from and a later diff read.
bool run_result_name(const std::string& name) {
  for (std::string_view whole : report::kRunFileNames)
    if (name == whole) return true;
  for (std::string_view end : report::kVariantFileSuffixes)
    if (name.ends_with(end)) return true;
  return false;
}

// Where the op-by-op view of two compare runs is: each variant's summary beside its compare.json. The command
// for the variants that ran on both sides and have a summary there on both, or "" for none.
std::string op_by_op_line(const report::RunDiff& d, const std::string& base_path, const std::string& next_path) {
  namespace fs = std::filesystem;
  const fs::path base_dir = fs::path(base_path).parent_path(), next_dir = fs::path(next_path).parent_path();
  std::vector<std::string> both;
  std::error_code ec;
  for (const report::RunDiffRow& r : d.rows)
    if (r.base_status == "ok" && r.new_status == "ok" &&
        fs::is_regular_file(base_dir / (r.variant + ".summary.json"), ec) &&
        fs::is_regular_file(next_dir / (r.variant + ".summary.json"), ec))
      both.push_back(r.variant);
  if (both.empty()) return "";
  return terminal_line(fmt::format("Op by op: attnprof diff {} {}, for {}.",
                                   (base_dir / "<variant>.summary.json").string(),
                                   (next_dir / "<variant>.summary.json").string(), report::spoken_list(both))) +
         "\n";
}

void run_diff(const DiffArgs& a) {
  const std::string base_path = input_file(a.base), next_path = input_file(a.next);
  // --save over one of the two inputs would replace it with the diff: refused before either is read.
  if (!a.out.empty()) {
    std::error_code ec;
    for (const std::string& input : {base_path, next_path})
      if (std::filesystem::equivalent(a.out, input, ec) && !ec)
        ATTNPROF_FAIL("--save '{}' is one of the files being compared", a.out);
    // Nor over another result of a run being compared: 'diff runA runB --save runA/naive.summary.json'.
    auto dir_of = [](const std::filesystem::path& p) { return p.has_parent_path() ? p.parent_path() : "."; };
    const std::string save_name = std::filesystem::path(a.out).filename().string();
    for (const std::string& input : {base_path, next_path})
      if (run_result_name(save_name) && std::filesystem::equivalent(dir_of(a.out), dir_of(input), ec) && !ec)
        ATTNPROF_FAIL("--save '{}' would replace the run's {} beside {}, which is being compared: save the diff "
                      "elsewhere or under another name",
                      a.out, save_name, input);
    check_output_flag("--save", a.out);  // what writing it would refuse, before the files are read
    if (lowercase(a.out).ends_with(".gz"))
      ATTNPROF_FAIL("--save '{}': diff writes no gzip; name a .json file for the JSON, any other for the table", a.out);
  }
  const nlohmann::json base = read_json_file(base_path), next = read_json_file(next_path);
  auto is_compare = [](const nlohmann::json& j) {
    return j.is_object() && j.contains("kind") && j["kind"].is_string() && j["kind"] == "compare";
  };
  std::string text, shown;  // the whole table (--save), and what stdout gets
  nlohmann::json j;
  if (is_compare(base) != is_compare(next)) {
    const std::string& run = is_compare(base) ? base_path : next_path;
    const std::string& other = is_compare(base) ? next_path : base_path;
    ATTNPROF_FAIL("cannot diff {} (a compare.json) against {}, which has no \"kind\": \"compare\": give two "
                  "compare.json (or two directories holding one) or two <variant>.summary.json",
                  run, other);
  }
  // Each file is checked as a whole first, so an error names the file at fault and its first bad field.
  if (is_compare(base)) {
    ATTNPROF_CHECK(a.row_limit <= 0, "--row-limit applies to the op rows of two summaries; a diff of two compare runs "
                                     "has one row per variant");
    report::check_compare_json(base, base_path);
    report::check_compare_json(next, next_path);
    const report::RunDiff d = report::diff_compare_runs(base, next);
    const std::string op_by_op = op_by_op_line(d, base_path, next_path);
    text = report::diff_table(d) + op_by_op;
    shown = (a.brief ? report::diff_table(d, /*definitions=*/false) : report::diff_table(d)) + op_by_op;
    j = report::diff_json(d);
  } else {
    report::check_summary(base, base_path, /*run_figures=*/true);
    report::check_summary(next, next_path, /*run_figures=*/true);
    const report::ProfileDiff d = report::diff_summaries(base, next, file_label(a.base), file_label(a.next));
    text = report::diff_table(d, a.row_limit);
    shown = a.brief ? report::diff_table(d, a.row_limit, /*definitions=*/false) : text;
    j = report::diff_json(d, a.row_limit);
  }
  if (!a.out.empty())
    report::write_text_atomic(a.out, lowercase(a.out).ends_with(".json") ? json_text(j) + "\n" : text);
  if (a.json) print_out("{}\n", json_text(j));
  else print_out("{}", shown);
}

}  // namespace

void add_diff_command(CLI::App& app) {
  auto args = std::make_shared<DiffArgs>();
  CLI::App* sub = app.add_subcommand(
      "diff", "two profiles op by op (two <variant>.summary.json) or two runs variant by variant (two compare.json "
              "or directories)");
  sub->add_option("base", args->base, "what to compare from: a <variant>.summary.json, a compare.json or its directory")
      ->required();
  sub->add_option("new", args->next, "what to compare to (the same kind)")->required();
  add_integer_option(sub, "--row-limit", args->row_limit, "op rows of two summaries, largest change in time first; 0 or less: all (default)");
  CLI::Option* json = sub->add_flag("--json", args->json, "machine-readable JSON on stdout");
  sub->add_flag("--brief", args->brief,
                "print the table and what changed without the lines that define the columns (--save keeps them)")
      ->excludes(json);
  sub->add_option("--save", args->out, "also write the diff to this file (.json: the JSON, else the table)");
  sub->callback([args] { run_diff(*args); });
}

}  // namespace attnprof::cli
