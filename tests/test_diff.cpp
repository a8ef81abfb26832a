// report::diff_summaries: two summary documents op by op, per forward. Hand-written summaries with exact
// figures (the schema summary_json writes), so every number below is checked exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnprof/error.h"
#include "attnprof/report.h"

using namespace attnprof;
using nlohmann::json;

namespace {

json row(const std::string& name, double calls, double self_ns, double self_mem, double self_bytes,
         const std::string& cat = "cpu_op") {
  return {{"name", name}, {"category", cat}, {"calls", calls}, {"self_ns", self_ns}, {"total_ns", self_ns},
          {"self_mem_bytes", self_mem}, {"self_cost", {{"bytes", self_bytes}, {"flops", 0.0}}},
          {"cost", {{"bytes", self_bytes}, {"flops", 0.0}}}};
}

// Two recorded forwards of the blog's naive script (figures are totals over both, as a summary holds them).
json naive_summary() {
  return {{"schema", "attnprof.summary/1"},
          {"metadata", {{"variant", "naive"}, {"annotation", "attn_fwd"}, {"problem", "P"}}},
          {"run", {{"variant", "naive"}, {"annotation", "attn_fwd"}, {"problem", "P"}, {"ms_per_forward", 10.0},
                   {"peak_extra_bytes", 3000}, {"ops_per_forward", 8}, {"max_abs_err", 0.01}}},
          {"rows", json::array({row("ProfilerStep#2", 1, 5, 0, 0), row("attn_fwd", 2, 40, 0, 0, "user_annotation"),
                                row("matmul", 4, 8000, 400, 800), row("mul", 2, 4000, 200, 400),
                                row("masked_fill", 2, 20, 0, 0), row("copy_", 2, 3000, 200, 400),
                                row("masked_fill_", 2, 1000, 0, 400), row("softmax", 2, 2000, 200, 400)})}};
}

// Three recorded forwards of the in-place script.
json inplace_summary() {
  return {{"schema", "attnprof.summary/1"},
          {"metadata", {{"variant", "inplace"}, {"annotation", "attn_fwd"}, {"problem", "P"}}},
          {"run", {{"variant", "inplace"}, {"ms_per_forward", 5.0}, {"peak_extra_bytes", 1500},
                   {"ops_per_forward", 6}, {"max_abs_err", 0.01}}},
          {"rows", json::array({row("attn_fwd", 3, 30, 0, 0, "user_annotation"), row("matmul", 6, 12000, 600, 1200),
                                row("mul_", 3, 1500, 0, 600), row("masked_fill_", 3, 1500, 0, 600),
                                row("softmax_", 3, 3000, 0, 600), row("extra_op", 3, 300, 0, 0)})}};
}

std::map<std::string, report::DiffRow> by_label(const report::ProfileDiff& d) {
  std::map<std::string, report::DiffRow> m;
  for (const auto& r : d.rows) m[r.base_name.empty() ? "+" + r.new_name : r.base_name] = r;
  return m;
}

// Paired by name, an op that runs another number of times or moves other bytes is "changed", not "same": naive's
// mul over the N×N scores against SDPA math's two muls over q and k. A side whose timed forwards disagree is
// named under the medians' ratio.
TEST(Diff, AnOpDoingOtherWorkUnderTheSameNameIsChangedAndNoisySidesAreNamed) {
  json math = inplace_summary();
  math["metadata"]["variant"] = "sdpa-math";
  math["run"]["variant"] = "sdpa-math";
  math["run"]["forward_ms"] = {5.0, 4.9, 9.0};  // their median the run's 5.0 ms
  json wrapper = row("masked_fill", 3, 30, 0, 0);  // no bytes of its own; its children's grew
  wrapper["cost"]["bytes"] = 2400.0;
  math["rows"] = json::array({row("attn_fwd", 3, 30, 0, 0, "user_annotation"), row("matmul", 6, 12000, 600, 1200),
                              row("mul", 6, 600, 60, 120), row("softmax", 3, 3000, 0, 601), wrapper});
  json naive = naive_summary();
  naive["run"]["forward_ms"] = {9.95, 10.05};
  const report::ProfileDiff d = report::diff_summaries(naive, math);
  auto rows = by_label(d);
  EXPECT_EQ(rows["matmul"].change, "same");
  EXPECT_EQ(rows["mul"].change, "changed");       // 1 -> 2 calls, 200 -> 40 bytes per forward
  EXPECT_EQ(rows["softmax"].change, "same");      // 200 -> 200.33 bytes: within 1 %
  EXPECT_EQ(rows["masked_fill"].change, "changed");  // 0 -> 0 bytes of its own, its children's 0 -> 800
  EXPECT_EQ(d.next.forward_ms, (std::vector<double>{5.0, 4.9, 9.0}));
  const std::string t = report::diff_table(d);
  for (const char* s : {"changed (same name, other work): mul (1 -> 2 calls, 200 b -> 40 b moved)",
                        "masked_fill (1 -> 1 calls, 0 b -> 800 b moved by its children)",
                        "Noisy: sdpa-math (new) took 5.000ms / 4.900ms / 9.000ms per forward (slowest 1.84x the fastest)"})
    EXPECT_NE(t.find(s), std::string::npos) << s << "\n" << t;
  EXPECT_EQ(t.find("naive (base) took"), std::string::npos) << t;  // 1 % apart: not noisy
  EXPECT_EQ(report::diff_json(d)["new"]["forward_ms"].size(), 3u);
}

TEST(Diff, PerForwardFiguresPairInPlaceFormsAndNameWhatWasRemoved) {
  const report::ProfileDiff d = report::diff_summaries(naive_summary(), inplace_summary());
  EXPECT_FALSE(d.device);
  EXPECT_EQ(d.base.label, "naive");
  EXPECT_EQ(d.next.label, "inplace");
  EXPECT_DOUBLE_EQ(d.base.forwards, 2.0);  // calls of attn_fwd
  EXPECT_DOUBLE_EQ(d.next.forwards, 3.0);
  auto rows = by_label(d);
  EXPECT_EQ(rows.size(), 8u);  // annotations and ProfilerStep#N are not ops ...
  EXPECT_EQ(rows.count("attn_fwd"), 0u);
  EXPECT_EQ(rows.count("ProfilerStep#2"), 0u);
  // ... but the forward annotation's own time, what ran between its ops, is a row of its own on both sides.
  const report::DiffRow& between = rows["between ops"];
  EXPECT_EQ(between.change, "same");
  EXPECT_DOUBLE_EQ(between.base_ns, 20.0);  // attn_fwd's 40 ns over 2 forwards
  EXPECT_DOUBLE_EQ(between.new_ns, 10.0);   // 30 over 3
  EXPECT_DOUBLE_EQ(between.base_all_bytes, 0.0);

  const report::DiffRow& mm = rows["matmul"];
  EXPECT_EQ(mm.change, "same");
  EXPECT_DOUBLE_EQ(mm.base_calls, 2.0);  // 4 calls over 2 forwards
  EXPECT_DOUBLE_EQ(mm.new_calls, 2.0);   // 6 over 3
  EXPECT_DOUBLE_EQ(mm.base_ns, 4000.0);
  EXPECT_DOUBLE_EQ(mm.new_ns, 4000.0);
  EXPECT_DOUBLE_EQ(mm.base_mem, 200.0);
  EXPECT_DOUBLE_EQ(mm.new_bytes, 400.0);

  const report::DiffRow& mul = rows["mul"];
  EXPECT_EQ(mul.change, "in place");
  EXPECT_EQ(mul.new_name, "mul_");
  EXPECT_DOUBLE_EQ(mul.base_ns, 2000.0);
  EXPECT_DOUBLE_EQ(mul.new_ns, 500.0);
  EXPECT_DOUBLE_EQ(mul.base_mem, 100.0);
  EXPECT_DOUBLE_EQ(mul.new_mem, 0.0);
  EXPECT_EQ(rows["softmax"].change, "in place");
  EXPECT_EQ(rows["softmax"].new_name, "softmax_");
  // masked_fill_ exists on both sides: the same op, not a twin of masked_fill, which is removed.
  EXPECT_EQ(rows["masked_fill_"].change, "same");
  EXPECT_EQ(rows["masked_fill"].change, "removed");
  EXPECT_EQ(rows["copy_"].change, "removed");
  EXPECT_DOUBLE_EQ(rows["copy_"].base_ns, 1500.0);
  EXPECT_DOUBLE_EQ(rows["copy_"].new_ns, 0.0);
  EXPECT_EQ(rows["+extra_op"].change, "added");
  EXPECT_DOUBLE_EQ(rows["+extra_op"].new_ns, 100.0);

  // Totals per forward, and rows ordered by the size of the change.
  EXPECT_DOUBLE_EQ(d.base_ns, (40 + 8000 + 4000 + 20 + 3000 + 1000 + 2000) / 2.0);
  EXPECT_DOUBLE_EQ(d.new_ns, (30 + 12000 + 1500 + 1500 + 3000 + 300) / 3.0);
  for (size_t i = 1; i < d.rows.size(); ++i)
    EXPECT_GE(std::abs(d.rows[i - 1].new_ns - d.rows[i - 1].base_ns), std::abs(d.rows[i].new_ns - d.rows[i].base_ns));
  EXPECT_EQ(d.rows.front().base_name, "mul");  // -1500 ns, the largest change
  // Bytes one forward moved: every row's own cost model summed, over each side's forwards.
  const auto own_bytes = [](const json& s, double forwards) {
    double sum = 0;
    for (const json& r : s["rows"]) sum += r["self_cost"].value("bytes", 0.0);
    return sum / forwards;
  };
  const double base_bytes = own_bytes(naive_summary(), 2.0), new_bytes = own_bytes(inplace_summary(), 3.0);
  ASSERT_GT(base_bytes, new_bytes);
  EXPECT_DOUBLE_EQ(report::diff_json(d)["base"]["bytes_per_forward"].get<double>(), base_bytes);
  EXPECT_DOUBLE_EQ(report::diff_json(d)["new"]["bytes_per_forward"].get<double>(), new_bytes);
  EXPECT_NE(report::diff_table(d).find(fmt::format(
                "bytes moved per forward (the ops' own, cost model): {} -> {} ({:.2f}x)\n",
                report::format_bytes(int64_t(std::llround(base_bytes))),
                report::format_bytes(int64_t(std::llround(new_bytes))), new_bytes / base_bytes)),
            std::string::npos)
      << report::diff_table(d);

  const std::string t = report::diff_table(d);
  for (const char* s : {"naive (base) vs inplace (new)", "time per forward (median): 10.000 ms -> 5.000 ms (2.00x faster)",
                        "mul -> mul_", "in place", "removed: copy_, masked_fill", "turned in place: mul -> mul_, softmax -> softmax_",
                        "added: extra_op", "ops per forward: 8 -> 6",
                        "Self CPU total of the rows per forward (mean over 2 and 3 recorded forwards): "})
    EXPECT_NE(t.find(s), std::string::npos) << s << "\n" << t;
  // No line ends in padding, and the rules span the widest row.
  std::istringstream in(t);
  size_t rules = 0, rule = 0, widest = 0;
  for (std::string line; std::getline(in, line);) {
    EXPECT_TRUE(line.empty() || line.back() != ' ') << "trailing space: '" << line << "'";
    if (!line.empty() && line.find_first_not_of('-') == std::string::npos) {
      ++rules;
      rule = line.size();
    } else if (rules == 1 || rules == 2) {  // the header, then the rows
      widest = std::max(widest, line.size());
    }
  }
  EXPECT_EQ(rules, 3u);
  EXPECT_GE(rule, widest);
  const json j = report::diff_json(d);
  EXPECT_EQ(j["kind"], "diff");
  EXPECT_EQ(j["rows"].size(), d.rows.size());
  EXPECT_DOUBLE_EQ(j["rows"][0]["delta_ns"].get<double>(), -1500.0);
  EXPECT_TRUE(j["rows"][0]["new_name"] == "mul_");
}

// With `profile --counters` on both sides, each op's own page faults per forward: the first touches an in-place
// op no longer makes. A wrapper's faults are its children's (self_page_faults 0), so nothing is counted twice.
TEST(Diff, PageFaultsPerForwardWhenBothSidesRecordedThem) {
  json naive = naive_summary(), inplace = inplace_summary();
  const std::map<std::string, double> base_faults{{"matmul", 36}, {"mul", 16}, {"masked_fill", 0},
                                                  {"copy_", 16}, {"masked_fill_", 0}, {"softmax", 16}};
  for (json& r : naive["rows"])
    if (auto it = base_faults.find(r["name"].get<std::string>()); it != base_faults.end()) r["self_page_faults"] = it->second;
  for (json& r : inplace["rows"]) r["self_page_faults"] = r["name"] == "matmul" ? 54.0 : 0.0;
  const report::ProfileDiff d = report::diff_summaries(naive, inplace);
  ASSERT_TRUE(d.faults);
  auto rows = by_label(d);
  EXPECT_DOUBLE_EQ(rows["matmul"].base_faults, 18.0);  // 36 over 2 forwards
  EXPECT_DOUBLE_EQ(rows["matmul"].new_faults, 18.0);   // 54 over 3
  EXPECT_DOUBLE_EQ(rows["mul"].base_faults, 8.0);
  EXPECT_DOUBLE_EQ(rows["mul"].new_faults, 0.0);
  EXPECT_DOUBLE_EQ(rows["copy_"].new_faults, 0.0);     // removed: nothing to fault on the new side
  EXPECT_DOUBLE_EQ(rows["+extra_op"].base_faults, 0.0);
  const std::string t = report::diff_table(d);
  EXPECT_NE(t.find("Faults       new"), std::string::npos) << t;
  EXPECT_NE(t.find("removed: copy_, masked_fill (1.510us, 100 b allocated and 8 page faults per forward"), std::string::npos) << t;
  EXPECT_NE(t.find("Faults: the op's own page faults"), std::string::npos) << t;
  const json j = report::diff_json(d);
  EXPECT_DOUBLE_EQ(j["rows"][0]["base_page_faults"].get<double>(), 8.0);  // mul, the largest change
  EXPECT_DOUBLE_EQ(j["rows"][0]["new_page_faults"].get<double>(), 0.0);

  // One side without counters: no column, no figure made up for it.
  const report::ProfileDiff half = report::diff_summaries(naive_summary(), inplace);
  EXPECT_FALSE(half.faults);
  EXPECT_EQ(report::diff_table(half).find("Faults"), std::string::npos);
  EXPECT_TRUE(report::diff_json(half)["rows"][0]["base_page_faults"].is_null());
  // A corrupt count is refused naming the row and field.
  inplace["rows"][1]["self_page_faults"] = -3.0;
  try {
    (void)report::diff_summaries(naive, inplace);
    ADD_FAILURE() << "a negative page-fault count was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 'matmul': field 'self_page_faults' is -3"), std::string::npos) << e.what();
  }
}

// The table's times are means per forward; where both summaries hold each op's self time per step, a row whose
// mean a slow forward lifts (over 1.15x its median, and at least 5 % of that side's total) gets a line with the
// medians beside the means. A corrupt per-step field is refused naming the row.
TEST(Diff, MediansPerForwardBesideMeansAFewSlowForwardsLift) {
  json naive = naive_summary(), inplace = inplace_summary();
  auto set_steps = [](json& s, const std::string& name, const json& steps) {
    for (json& r : s["rows"])
      if (r["name"] == name) r["self_ns_per_step"] = steps;
  };
  set_steps(naive, "matmul", {4000, 4000});          // 8000 over 2 forwards: mean = median = 4000
  set_steps(inplace, "matmul", {3000, 3000, 6000});  // 12000 over 3: mean 4000, median 3000
  set_steps(inplace, "softmax_", {1000, 1000, 1000});
  const report::ProfileDiff d = report::diff_summaries(naive, inplace);
  auto rows = by_label(d);
  EXPECT_DOUBLE_EQ(rows["matmul"].base_median_ns, 4000.0);
  EXPECT_DOUBLE_EQ(rows["matmul"].new_median_ns, 3000.0);
  EXPECT_DOUBLE_EQ(rows["matmul"].new_ns, 4000.0);  // the mean, as before
  EXPECT_DOUBLE_EQ(rows["softmax"].base_median_ns, -1.0);  // naive's softmax has no per-step figures
  EXPECT_DOUBLE_EQ(rows["softmax"].new_median_ns, 1000.0);
  const std::string t = report::diff_table(d);
  EXPECT_NE(t.find("Uneven: matmul's self time per forward: medians 4.000us -> 3.000us (-1.000us); the means above, "
                   "4.000us -> 4.000us, include forwards over 1.15x the median on the new side.\n"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("Uneven: softmax"), std::string::npos) << t;
  // Only for the rows the table shows: under --row-limit 1 (mul's change is the largest) matmul is left out.
  EXPECT_EQ(report::diff_table(d, 1).find("Uneven"), std::string::npos);
  const json j = report::diff_json(d);
  for (const json& r : j["rows"])
    if (r["base_name"] == "matmul") {
      EXPECT_EQ(r["base_median_ns"], 4000.0);
      EXPECT_EQ(r["new_median_ns"], 3000.0);
    } else if (r["base_name"] == "copy_") {
      EXPECT_TRUE(r["base_median_ns"].is_null());
    }
  // A removed op whose mean one slow forward lifts gets its line too: the savings line above names its mean.
  {
    json base = inplace_summary(), less = inplace_summary();
    set_steps(base, "softmax_", {500, 500, 2000});  // 3000 over 3: mean 1000, median 500
    json kept = json::array();
    for (const json& r : less["rows"])
      if (r["name"] != "softmax_") kept.push_back(r);
    less["rows"] = kept;
    const std::string removed = report::diff_table(report::diff_summaries(base, less));
    EXPECT_NE(removed.find("Uneven: softmax_'s self time per forward: medians 0.500us -> 0.000us (-0.500us); the means "
                           "above, 1.000us -> 0.000us, include forwards over 1.15x the median on the base side.\n"),
              std::string::npos)
        << removed;
  }
  // Even steps: no line.
  set_steps(inplace, "matmul", {4000, 4000, 4000});
  EXPECT_EQ(report::diff_table(report::diff_summaries(naive, inplace)).find("Uneven"), std::string::npos);

  // Not an array; one time per forward, but not 3 of them; negative; not a number; out of range; not summing to
  // the row's self_ns (12000 ns).
  for (const json& bad : {json("fast"), json({6000, 6000}), json({13000, -1000, 0}), json({json("1"), 0, 0}),
                          json({1e300, 0, 0}), json({1, 1, 1})}) {
    set_steps(inplace, "matmul", bad);
    try {
      (void)report::diff_summaries(naive, inplace);
      ADD_FAILURE() << "self_ns_per_step " << bad.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("row 'matmul': field 'self_ns_per_step'"), std::string::npos) << e.what();
    }
  }
}

TEST(Diff, DifferentProblemsAreFlaggedUnknownOnesAreNot) {
  const std::string note = "note: the runs are of different problems";
  json other = naive_summary();
  other["run"]["problem"] = "Q";
  const std::string differ = report::diff_table(report::diff_summaries(naive_summary(), other));
  EXPECT_NE(differ.find("problems: base P; new Q\n" + note), std::string::npos) << differ;
  const std::string same = report::diff_table(report::diff_summaries(naive_summary(), naive_summary()));
  EXPECT_NE(same.find("problem: P\n"), std::string::npos) << same;
  EXPECT_EQ(same.find(note), std::string::npos) << same;
  // A summary that names no problem is not one attnprof wrote (it records the problem of every run): refused,
  // not compared as if the problems were known.
  json anon = naive_summary();
  anon["run"].erase("problem");
  anon["metadata"].erase("problem");
  try {
    report::diff_summaries(naive_summary(), anon);
    ADD_FAILURE() << "a summary without a problem was diffed";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "new summary: field 'problem' is missing (attnprof records it in \"run\" or \"metadata\")");
  }
}

// The figures above the op table come from "run": a summary without it, or without one of its figures, is
// refused naming the field, never printed as "8 -> 0".
TEST(Diff, SummariesWithoutTheRunFiguresAreRefusedNamingTheField) {
  auto error_of = [](const json& s) -> std::string {
    try {
      report::check_summary(s, "b.summary.json", /*run_figures=*/true);
      report::diff_summaries(naive_summary(), s);
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  json bad = inplace_summary();
  bad.erase("run");
  EXPECT_EQ(error_of(bad), "b.summary.json: field 'run' is missing (attnprof writes a \"run\" object with the time, "
                           "peak memory and ops per forward into every summary)");
  bad["run"] = "fast";
  EXPECT_EQ(error_of(bad), "b.summary.json: field 'run' is not an object");
  bad["run"] = nullptr;
  EXPECT_NE(error_of(bad).find("field 'run' is missing"), std::string::npos);
  for (const char* field : {"ms_per_forward", "peak_extra_bytes", "ops_per_forward"}) {
    bad = inplace_summary();
    bad["run"].erase(field);
    EXPECT_EQ(error_of(bad).rfind(fmt::format("b.summary.json run: field '{}' is missing", field), 0), 0u)
        << field << ": " << error_of(bad);
    bad["run"][field] = "x";
    EXPECT_EQ(error_of(bad), fmt::format("b.summary.json run: field '{}' is not a number", field)) << field;
    bad["run"][field] = -2;
    EXPECT_NE(error_of(bad).find(fmt::format("field '{}' is -2, out of range", field)), std::string::npos) << field;
  }
  // Counts no run writes: a fraction of an op per forward, a fraction of a byte.
  bad = inplace_summary();
  bad["run"]["ops_per_forward"] = 5e-324;
  EXPECT_EQ(error_of(bad), "b.summary.json run: field 'ops_per_forward' is 5e-324, not a whole number of ops per forward");
  bad = inplace_summary();
  bad["run"]["peak_extra_bytes"] = 1500.5;
  EXPECT_EQ(error_of(bad), "b.summary.json run: field 'peak_extra_bytes' is 1500.5, not a whole number of bytes");
  // The flash kernel's blocks: [rows, cols], each a count the kernel takes.
  for (const json& block : {json(256), json::array({256}), json::array({0, 64}), json::array({256, 64.5}),
                            json::array({256, 2048}), json::array({"256", 64})}) {
    bad = inplace_summary();
    bad["run"]["flash_block"] = block;
    EXPECT_NE(error_of(bad).find("field 'flash_block' is " + block.dump() + ", not [rows, cols]"), std::string::npos)
        << error_of(bad);
  }
  // Two CPU flash runs on different blocks: the line a tile study reads, beside the bytes and times.
  json a = naive_summary(), b = inplace_summary();
  a["run"]["flash_block"] = {256, 64};
  b["run"]["flash_block"] = {128, 64};
  const report::ProfileDiff blocks = report::diff_summaries(a, b);
  EXPECT_NE(report::diff_table(blocks).find("flash blocks (query rows × keys per tile): 256×64 -> 128×64\n"),
            std::string::npos);
  EXPECT_EQ(report::diff_json(blocks)["new"]["flash_block"], "128×64");
  b["run"]["flash_block"] = {256, 64};
  EXPECT_EQ(report::diff_table(report::diff_summaries(a, b)).find("flash blocks"), std::string::npos) << "the same";
  // "device" is a CUDA profile's section; as anything else the clock the times are on is unknown.
  bad = inplace_summary();
  bad["device"] = "cuda";
  EXPECT_EQ(error_of(bad), "b.summary.json: field 'device' is not an object (a CUDA profile's \"device\" section)");
  // Neither an annotation nor timed forwards: the forwards cannot be counted, so no figure is per forward.
  bad = inplace_summary();
  bad["metadata"].erase("annotation");
  EXPECT_EQ(error_of(bad), "b.summary.json: field 'annotation' is missing (attnprof records it in \"run\" or "
                           "\"metadata\"), so its forwards cannot be counted");
  bad["run"]["forward_ms"] = {5.0, 5.0, 5.0};  // profile's timed forwards count them instead
  EXPECT_EQ(error_of(bad), "accepted");
  bad["run"]["forward_ms"] = "slow";
  EXPECT_NE(error_of(bad).find("field 'forward_ms' is not an array"), std::string::npos) << error_of(bad);

  // ops_per_forward null: a GPU run whose activities CUPTI could not collect. Printed as unknown, not as 0.
  json uncounted = inplace_summary();
  uncounted["run"]["ops_per_forward"] = nullptr;
  const report::ProfileDiff d = report::diff_summaries(naive_summary(), uncounted);
  EXPECT_DOUBLE_EQ(d.next.ops_per_forward, -1.0);
  const std::string t = report::diff_table(d);
  EXPECT_NE(t.find("ops per forward: 8 -> --"), std::string::npos) << t;
  EXPECT_EQ(t.find("-> 0\n"), std::string::npos) << t;
  EXPECT_TRUE(report::diff_json(d)["new"]["ops_per_forward"].is_null());
  EXPECT_EQ(report::diff_json(d)["base"]["ops_per_forward"], 8);
  // The peak above the inputs is the run's own figure.
  EXPECT_DOUBLE_EQ(d.base.peak_bytes, 3000.0);
  EXPECT_DOUBLE_EQ(d.next.peak_bytes, 1500.0);
}

TEST(Diff, RowLimitAndTheReverseDirection) {
  const report::ProfileDiff d = report::diff_summaries(inplace_summary(), naive_summary());
  auto rows = by_label(d);
  EXPECT_EQ(rows["mul_"].change, "out of place");
  EXPECT_EQ(rows["+copy_"].change, "added");
  EXPECT_NE(report::diff_table(d).find("2.00x slower"), std::string::npos);
  const std::string two = report::diff_table(d, 2);
  EXPECT_NE(two.find("mul_ -> mul"), std::string::npos);
  EXPECT_EQ(two.find("extra_op  "), std::string::npos) << "only the two largest changes are listed";
  // The footer names the pairs turned out of place, as it names those turned in place the other way.
  EXPECT_NE(report::diff_table(d).find("turned out of place: mul_ -> mul, softmax_ -> softmax\n"), std::string::npos)
      << report::diff_table(d);
  // A pair that also runs another number of times, or moves other bytes, says so, as a changed op does.
  json twice = inplace_summary();
  for (json& r : twice["rows"])
    if (r["name"] == "mul_") r["calls"] = 6;  // two a forward
  const std::string t = report::diff_table(report::diff_summaries(naive_summary(), twice));
  EXPECT_NE(t.find("turned in place: mul -> mul_ (1 -> 2 calls, 200 b -> 200 b moved), softmax -> softmax_\n"),
            std::string::npos)
      << t;
}

TEST(Diff, ShapeGroupedRowsOfOneOpAreSummed) {
  json a = naive_summary();
  a["rows"].push_back(row("matmul", 2, 2000, 0, 100));  // the same op with other input shapes
  a["rows"].back()["input_shapes"] = "[[8, 16, 1024, 1024], [8, 16, 1024, 64]]";
  const report::ProfileDiff d = report::diff_summaries(a, a);
  auto rows = by_label(d);
  EXPECT_DOUBLE_EQ(rows["matmul"].base_calls, 3.0);
  EXPECT_DOUBLE_EQ(rows["matmul"].base_ns, 5000.0);
  for (const auto& r : d.rows) {
    EXPECT_EQ(r.change, "same");
    EXPECT_DOUBLE_EQ(r.new_ns - r.base_ns, 0.0);
  }
}

TEST(Diff, DeviceProfilesCompareSelfCudaAndRefuseACpuProfile) {
  auto device_summary = [](bool with_copy) {
    json rows = json::array({row("attn_fwd", 1, 10, 0, 0, "user_annotation"), row("matmul", 2, 50, 0, 64),
                             row("gemm_kernel", 2, 0, 0, 0, "kernel")});
    rows[1]["self_cuda_ns"] = 0.0;  // host op: its time on the GPU belongs to its kernels
    rows[2]["self_cuda_ns"] = 300.0;
    rows[2]["cost"] = {{"bytes", 64.0}, {"flops", 10.0}};
    if (with_copy) {
      rows.push_back(row("Memcpy DtoD (Device -> Device)", 1, 0, 0, 0, "gpu_memcpy"));
      rows.back()["self_cuda_ns"] = 40.0;
      rows.back()["cost"] = {{"bytes", 8.0}};
    }
    return json{{"schema", "attnprof.summary/1"}, {"metadata", {{"annotation", "attn_fwd"}, {"problem", "P"}}},
                {"run", {{"variant", with_copy ? "naive" : "inplace"}, {"ms_per_forward", 0.5},
                         {"peak_extra_bytes", 4096}, {"ops_per_forward", with_copy ? 2 : 1}}},
                {"device", {{"peak_bytes", 8192}}}, {"rows", rows}};
  };
  const report::ProfileDiff d = report::diff_summaries(device_summary(true), device_summary(false));
  EXPECT_TRUE(d.device);
  auto rows = by_label(d);
  EXPECT_EQ(rows["Memcpy DtoD (Device -> Device)"].change, "removed");
  EXPECT_DOUBLE_EQ(rows["Memcpy DtoD (Device -> Device)"].base_ns, 40.0);
  EXPECT_DOUBLE_EQ(rows["gemm_kernel"].base_ns, 300.0);
  EXPECT_DOUBLE_EQ(rows["gemm_kernel"].base_bytes, 64.0);
  EXPECT_DOUBLE_EQ(rows["matmul"].base_ns, 0.0);     // no host time mixed into device time
  EXPECT_DOUBLE_EQ(rows["matmul"].base_bytes, 0.0);  // its bytes are the kernel's, counted there once
  EXPECT_DOUBLE_EQ(d.base.peak_bytes, 4096.0);  // the run's peak above the inputs, not the device's total
  EXPECT_NE(report::diff_table(d).find("Self CUDA"), std::string::npos);
  try {
    report::diff_summaries(device_summary(true), naive_summary());
    ADD_FAILURE() << "a device and a CPU profile were diffed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("different clocks"), std::string::npos) << e.what();
  }
}

TEST(Diff, CorruptSummariesAreRefusedWithTheReason) {
  auto expect_error = [](const json& a, const std::string& needle) {
    try {
      report::diff_summaries(a, naive_summary(), "a.summary.json");
      ADD_FAILURE() << "accepted: " << a.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // Figures that contradict the ones beside them, or that no run makes: a time not the median of its forwards,
  // negative live bytes, threads working more than their regions' wall times the team.
  json edited = naive_summary();
  edited["run"]["forward_ms"] = {9.0, 30.0, 31.0};
  expect_error(edited, "'a.summary.json' run: field 'ms_per_forward' is 10, not the median of its 'forward_ms' (30)");
  edited = naive_summary();
  edited["memory"]["timeline"] = {{{"t_us", 1.0}, {"bytes", 100}}, {{"t_us", 2.0}, {"bytes", -5000}}};
  expect_error(edited, "memory.timeline point: field 'bytes' is -5000, out of range");
  edited = naive_summary();
  edited["thread_balance"] = {{{"name", "softmax"}, {"regions", 2}, {"threads", 2}, {"busy_share", 7}}};
  expect_error(edited, "thread_balance 'softmax': field 'busy_share' is 7, over 1");
  edited["thread_balance"][0]["busy_share"] = 0.9;
  EXPECT_NO_THROW(report::diff_summaries(edited, naive_summary(), "a.summary.json"));
  expect_error(json::array(), "not an attnprof summary");
  expect_error(json{{"kind", "compare"}}, "not an attnprof summary");
  expect_error(json{{"schema", "attnprof.summary/1"}}, "no \"rows\" array");
  json nameless = naive_summary();
  nameless["rows"] = json::array({{{"calls", 1}}});
  expect_error(nameless, "without a \"name\"");
  json bad = naive_summary();
  bad["rows"][2]["self_ns"] = "fast";
  expect_error(bad, "'self_ns' is not a number");
  // Numbers no attnprof file holds: beyond 2^53, or a negative count, time or byte figure.
  bad = naive_summary();
  bad["rows"][2]["self_mem_bytes"] = 1.8446744073709552e19;
  expect_error(bad, "field 'self_mem_bytes' is 1.8446744073709552e+19, out of range (expected a number up to 2^53)");
  bad = naive_summary();
  bad["rows"][3]["calls"] = -2;
  expect_error(bad, "field 'calls' is -2, out of range (expected a non-negative number up to 2^53)");
  // What no attnprof summary holds: another schema, a fractional or missing count, a row without its time,
  // a name with a control character (a NUL would cut the printed table short).
  bad = naive_summary();
  bad["schema"] = "attnprof.summary/2";
  expect_error(bad, "schema 'attnprof.summary/2' is not one this attnprof reads");
  bad = naive_summary();
  bad["rows"][3]["calls"] = 1.5;
  expect_error(bad, "field 'calls' is 1.5, not a whole number of at least 1");
  // A row twice (same name, category, shapes and types): summing them would double the op's calls and time.
  bad = naive_summary();
  bad["rows"].push_back(bad["rows"][3]);
  expect_error(bad, "the row '" + bad["rows"][3]["name"].get<std::string>() + "' appears twice");
  // Rows of one name grouped by input shape are one op each: summed, not refused.
  json grouped = naive_summary();
  grouped["rows"].push_back(grouped["rows"][3]);
  grouped["rows"].back()["input_shapes"] = "[[1, 2, 3, 4]]";
  EXPECT_NO_THROW(report::diff_summaries(grouped, naive_summary(), "a.summary.json"));
  bad = naive_summary();
  bad["rows"][3].erase("calls");
  expect_error(bad, "field 'calls' is missing");
  bad = naive_summary();
  bad["rows"][3].erase("self_ns");
  expect_error(bad, "field 'self_ns' is missing");
  bad = naive_summary();
  bad["rows"][3]["name"] = std::string("mat\0mul", 7);
  expect_error(bad, "holds a control character (byte 0x00)");
  bad = naive_summary();
  bad["rows"][3]["name"] = "soft\x1b[2Jmax";
  expect_error(bad, "holds a control character (byte 0x1b)");
  // A right-to-left override (U+202E) would print the rest of its line reversed; a C1 control (U+009B, the
  // one-byte CSI) would start an escape sequence.
  bad = naive_summary();
  bad["rows"][3]["name"] = "soft\u202Exam";
  expect_error(bad, "the name 'soft...' holds a control character (U+202E)");
  bad = naive_summary();
  bad["rows"][3]["name"] = "soft\u009B2Jmax";
  expect_error(bad, "holds a control character (U+009B)");
  bad = naive_summary();
  bad["rows"][3]["name"] = "softmax \u00e9\u2014\u4e2d";  // other text is printed as it is
  EXPECT_NO_THROW(report::diff_summaries(bad, naive_summary()));
  bad = naive_summary();
  bad["rows"][3]["self_mem_bytes"] = -200;  // an op may free more than it allocates: accepted
  EXPECT_NO_THROW(report::diff_summaries(bad, naive_summary()));
  // Every per-forward figure is divided by the annotation's calls: an annotation with no row would leave the
  // figures twice too large here, so the file is refused, whether the row or the name was changed.
  bad = naive_summary();
  bad["rows"].erase(1);
  expect_error(bad, "its annotation 'attn_fwd' has no row");
  bad = naive_summary();
  bad["run"]["annotation"] = "zzz";
  expect_error(bad, "its annotation 'zzz' has no row");
  // An error or a time no measurement gives: a negative max error, a positive time under the clock's 1 ns.
  bad = naive_summary();
  bad["run"]["max_abs_err"] = -1;
  expect_error(bad, "field 'max_abs_err' is -1, not a non-negative number");
  // An error of any finite size is one a run writes: the data sets its scale (values of 1e24, errors of 1e17).
  json big = naive_summary();
  big["run"]["max_abs_err"] = 2.16e17;
  EXPECT_EQ(report::diff_summaries(big, naive_summary(), "a.summary.json").base.max_abs_err, 2.16e17);
  bad = naive_summary();
  bad["run"]["ms_per_forward"] = 1e-300;
  expect_error(bad, "field 'ms_per_forward' is 1e-300 ms, under the profiler's 1 ns resolution");
  // A median or a forward of 0 ms dropped the time line and the Noisy lines with it.
  bad = naive_summary();
  bad["run"]["ms_per_forward"] = 0;
  expect_error(bad, "field 'ms_per_forward' is 0, which no timed run has");
  bad = naive_summary();
  bad["run"]["forward_ms"] = {0.0, 6.26, 6.46};
  expect_error(bad, "field 'forward_ms' holds 0 ms, which no forward takes");
  // An op without a name would print as a blank row and a dangling comma in the removed list; timed forwards
  // that are not there would leave the Noisy judgement nothing to judge.
  bad = naive_summary();
  bad["rows"][3]["name"] = "";
  expect_error(bad, "a row whose \"name\" is empty");
  bad = naive_summary();
  bad["run"]["forward_ms"] = json::array();
  expect_error(bad, "field 'forward_ms' is empty");
  // A cost model that is not an object (or is missing: every row has one) would read as an op that moved no
  // bytes: "0 b moved", or "changed" against the other side's real figure.
  for (const char* key : {"self_cost", "cost"}) {
    for (const json& not_an_object : {json("x"), json::array(), json(nullptr), json(5)}) {
      bad = naive_summary();
      bad["rows"][2][key] = not_an_object;
      expect_error(bad, fmt::format("base summary 'a.summary.json' row 'matmul': field '{}' is {}, not an object", key,
                                    not_an_object.dump()));
    }
    bad = naive_summary();
    bad["rows"][2].erase(key);
    expect_error(bad, fmt::format("row 'matmul': field '{}' is missing", key));
  }
}


json compare_run(const std::string& problem, std::vector<json> variants) {
  return {{"kind", "compare"}, {"problem", problem}, {"machine", {{"cpu", "Test CPU"}}}, {"threads", 2},
          {"variants", variants}};
}
json variant(const std::string& name, const std::string& status, double ms, double peak, double ops, double err) {
  auto n = [](double x) { return x >= 0 ? json(x) : json(); };
  return {{"name", name}, {"status", status}, {"ms", n(ms)}, {"peak_bytes", n(peak)}, {"ops", n(ops)},
          {"max_abs_err", n(err)}};
}

// Two runs on different teams: their speed-up is the thread count's as much as the code's, and the diff says so
// (both kinds of diff); a summary without a team, or a GPU run, says nothing.
TEST(Diff, DifferentThreadCountsAreNoted) {
  const std::string note = "note: the runs used different thread counts (base 2, new 1); the ratios compare the teams "
                           "as well as the code.\n";
  json two = naive_summary(), one = naive_summary();
  two["run"]["threads"] = 2;
  one["run"]["threads"] = 1;
  const report::ProfileDiff d = report::diff_summaries(two, one);
  EXPECT_NE(report::diff_table(d).find(note), std::string::npos) << report::diff_table(d);
  EXPECT_EQ(report::diff_json(d)["base"]["threads"], 2);
  EXPECT_EQ(report::diff_json(d)["new"]["threads"], 1);
  EXPECT_EQ(report::diff_table(report::diff_summaries(two, two)).find("thread counts"), std::string::npos);
  EXPECT_EQ(report::diff_table(report::diff_summaries(two, naive_summary())).find("thread counts"), std::string::npos);
  EXPECT_TRUE(report::diff_json(report::diff_summaries(naive_summary(), naive_summary()))["base"]["threads"].is_null());
  one["run"]["threads"] = 1.5;
  EXPECT_THROW(report::diff_summaries(two, one), Error);

  const json a = compare_run("P", {variant("naive", "ok", 10, -1, -1, -1)});
  json b = compare_run("P", {variant("naive", "ok", 12, -1, -1, -1)});
  b["threads"] = 1;
  const report::RunDiff r = report::diff_compare_runs(a, b);
  EXPECT_NE(report::diff_table(r).find(note), std::string::npos) << report::diff_table(r);
  EXPECT_EQ(report::diff_json(r)["threads"], json({{"base", 2}, {"new", 1}}));
  b["gpu"] = "Test GPU";  // a GPU run's host threads do not run its kernels
  EXPECT_EQ(report::diff_table(report::diff_compare_runs(a, b)).find("thread counts"), std::string::npos);
  // An 84x slowdown reads as one, not as 0.01x.
  const json slow = compare_run("P", {variant("naive", "ok", 840, -1, -1, -1)});
  EXPECT_NE(report::diff_table(report::diff_compare_runs(a, slow)).find(" 0.012x"), std::string::npos)
      << report::diff_table(report::diff_compare_runs(a, slow));
}

TEST(Diff, EqualTimesAreTheSameAndHugeRatiosStayShort) {
  const std::string same = report::diff_table(report::diff_summaries(naive_summary(), naive_summary()));
  EXPECT_NE(same.find("time per forward (median): 10.000 ms -> 10.000 ms (same)"), std::string::npos) << same;
  json fast = naive_summary();
  fast["run"]["ms_per_forward"] = 1e-6;  // 1 ns, the clock's resolution
  const std::string big = report::diff_table(report::diff_summaries(naive_summary(), fast));
  EXPECT_NE(big.find("(1e+07x faster)"), std::string::npos) << big;
  const json a = compare_run("P", {variant("naive", "ok", 9e15, -1, -1, -1)});
  const json b = compare_run("P", {variant("naive", "ok", 1e-6, -1, -1, -1)});
  const std::string t = report::diff_table(report::diff_compare_runs(a, b));
  EXPECT_NE(t.find(" 9e+21x"), std::string::npos) << "a ratio printed in full, 22 digits: " << t;
}

TEST(Diff, CompareRunsVariantByVariant) {
  const json base = compare_run("P", {variant("naive", "ok", 100, 1000, 8, 0.01), variant("flash", "ok", 50, 10, 1, 0.008),
                                      variant("sdpa-math", "skipped", -1, -1, -1, -1)});
  json next = compare_run("P", {variant("naive", "ok", 50, 1000, 8, 0.01), variant("flash", "ok", 40, 10, 1, 0.008),
                                variant("sdpa-cudnn", "ok", 10, 5, 1, 0.004)});
  next["gpu"] = "Test GPU";
  const report::RunDiff d = report::diff_compare_runs(base, next);
  EXPECT_TRUE(d.same_problem);
  EXPECT_EQ(d.base_label, "P on Test CPU, 2 threads");
  EXPECT_EQ(d.new_label, "P on Test GPU");
  {  // one CPU run as itself and under ATTNPROF_ISA=scalar are two runs: the label names the SIMD target
    json scalar = base, avx2 = base;
    scalar["machine"]["isa"] = "scalar";
    avx2["machine"]["isa"] = "avx2";
    const report::RunDiff s = report::diff_compare_runs(avx2, scalar);
    EXPECT_EQ(s.base_label, "P on Test CPU, avx2, 2 threads");
    EXPECT_EQ(s.new_label, "P on Test CPU, scalar, 2 threads");
  }
  ASSERT_EQ(d.rows.size(), 4u);
  EXPECT_EQ(d.rows[0].variant, "naive");
  EXPECT_DOUBLE_EQ(d.rows[0].base_ms, 100.0);
  EXPECT_DOUBLE_EQ(d.rows[0].new_ms, 50.0);
  EXPECT_EQ(d.rows[2].variant, "sdpa-math");
  EXPECT_EQ(d.rows[2].base_status, "skipped");
  EXPECT_EQ(d.rows[2].new_status, "");
  EXPECT_EQ(d.rows[3].variant, "sdpa-cudnn");  // only in the new run: after the base's variants
  EXPECT_EQ(d.rows[3].base_status, "");
  const std::string t = report::diff_table(d);
  for (const char* s : {"2.00x", "1.25x", "base only", "new only", "1.00e-02"})
    EXPECT_NE(t.find(s), std::string::npos) << s << "\n" << t;
  const json j = report::diff_json(d);
  EXPECT_EQ(j["kind"], "diff-compare");
  EXPECT_DOUBLE_EQ(j["rows"][0]["speedup"].get<double>(), 2.0);
  EXPECT_TRUE(j["rows"][2]["speedup"].is_null());

  EXPECT_TRUE(j["bf16_matmul"].is_null());
  // Two bf16 runs whose unfused matmuls ran on different GEMMs (an AVX-512 machine and an AVX2 one) say so;
  // fp32 runs, or a run that does not record it, do not.
  json b16 = base, n16 = next;
  b16["dtype"] = n16["dtype"] = "bf16";
  b16["machine"]["bf16_matmul"] = "onednn";
  n16["machine"] = {{"cpu", "Other CPU"}, {"bf16_matmul", "fp32-widened-sgemm"}};
  const report::RunDiff g = report::diff_compare_runs(b16, n16);
  EXPECT_EQ(g.base_bf16_matmul, "onednn");
  EXPECT_EQ(g.new_bf16_matmul, "fp32-widened-sgemm");
  EXPECT_NE(report::diff_table(g).find("note: naive's bf16 matmul ran on different GEMMs (base: onednn, new: "
                                       "fp32-widened-sgemm); its speed-up includes that change."),
            std::string::npos)
      << report::diff_table(g);  // the unfused variant both runs ran: no inplace here
  EXPECT_EQ(report::diff_json(g)["bf16_matmul"]["new"], "fp32-widened-sgemm");
  n16["machine"]["bf16_matmul"] = "onednn";
  EXPECT_TRUE(report::diff_compare_runs(b16, n16).base_bf16_matmul.empty());
  b16["dtype"] = n16["dtype"] = "fp32";
  n16["machine"]["bf16_matmul"] = "fp32-widened-sgemm";
  EXPECT_EQ(report::diff_table(report::diff_compare_runs(b16, n16)).find("different GEMMs"), std::string::npos);
  n16["dtype"] = b16["dtype"] = "bf16";
  n16["machine"].erase("bf16_matmul");
  EXPECT_TRUE(report::diff_compare_runs(b16, n16).base_bf16_matmul.empty());

  json other = next;
  other["problem"] = "Q";
  EXPECT_FALSE(report::diff_compare_runs(base, other).same_problem);
  EXPECT_NE(report::diff_table(report::diff_compare_runs(base, other)).find("different problems"), std::string::npos);
  try {
    report::diff_compare_runs(base, naive_summary());
    ADD_FAILURE() << "a summary was taken for a compare.json";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("new: not a compare.json"), std::string::npos) << e.what();
  }
  json bad = base;
  bad["variants"][0]["ms"] = "slow";
  EXPECT_THROW(report::diff_compare_runs(bad, next), Error);
  bad = base;
  bad["variants"][1]["peak_bytes"] = -1e308;
  try {
    report::diff_compare_runs(base, bad);
    ADD_FAILURE() << "a negative peak was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("new variant 'flash': field 'peak_bytes' is -1e+308, out of range"),
              std::string::npos)
        << e.what();
  }
  // One variant twice in one run, or a status no compare writes: a crafted file, not a result.
  auto refused = [&](const json& b, const std::string& needle) {
    try {
      report::diff_compare_runs(b, next);
      ADD_FAILURE() << "accepted: " << b.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  bad = base;
  bad["variants"][1]["name"] = bad["variants"][0]["name"];
  refused(bad, "appears twice in one compare.json");
  bad = base;
  bad["variants"][0]["status"] = "bogus";
  refused(bad, "status 'bogus' is none of ok, failed, skipped");
  // A row that did not run with a time would be printed as a speed-up; a problem that is no string as "?".
  for (const char* status : {"failed", "skipped"}) {
    bad = base;
    bad["variants"][0]["status"] = status;
    ASSERT_TRUE(bad["variants"][0]["ms"].is_number());
    refused(bad, fmt::format("status '{}' with a time ('ms') of ", status));
  }
  bad = base;
  bad["problem"] = 5;
  refused(bad, "field 'problem' is number, not a string");
  bad = base;
  bad["variants"][0]["name"] = "na\nive";
  refused(bad, "holds a control character (byte 0x0a)");
  bad = base;
  bad["threads"] = 1e300;  // not a thread count: refused (CompareRunsRefuseSettingsNoRunWrites), never converted
  refused(bad, "field 'threads' is 1e+300, not a whole number from 1 to 65536");
}

// A speed-up between runs whose forwards spread is marked: the difference may be the machine's.
TEST(Diff, CompareRunsMarkSpeedUpsFromNoisyForwards) {
  json base = compare_run("P", {variant("naive", "ok", 100, 1000, 8, 0.01), variant("flash", "ok", 50, 10, 1, 0.008)});
  json next = compare_run("P", {variant("naive", "ok", 50, 1000, 8, 0.01), variant("flash", "ok", 40, 10, 1, 0.008)});
  base["variants"][0]["forward_ms"] = {100.0, 101.0, 99.0};
  next["variants"][0]["forward_ms"] = {50.0, 51.0, 49.5};  // each 'ms' the median of its forwards
  base["variants"][1]["forward_ms"] = {50.0, 48.0, 51.0};
  next["variants"][1]["forward_ms"] = {40.0, 80.0, 39.0};  // spread 2.05
  const report::RunDiff d = report::diff_compare_runs(base, next);
  EXPECT_EQ(d.rows[1].new_forward_ms, (std::vector<double>{40.0, 80.0, 39.0}));
  const std::string t = report::diff_table(d);
  EXPECT_NE(t.find("2.00x "), std::string::npos) << t;  // naive: steady on both sides, unmarked
  EXPECT_NE(t.find("1.25x*"), std::string::npos) << t;
  EXPECT_NE(t.find("*: the forwards of one side spread by more than 15 %"), std::string::npos) << t;
  EXPECT_NE(t.find("Noisy: flash (new) took 40.000ms / 80.000ms / 39.000ms per forward (slowest 2.05x"),
            std::string::npos) << t;
  EXPECT_EQ(t.find("Noisy: naive"), std::string::npos) << t;
  const json j = report::diff_json(d);
  EXPECT_NEAR(j["rows"][1]["new_spread"].get<double>(), 80.0 / 39.0, 1e-12);
  EXPECT_NEAR(j["rows"][0]["base_spread"].get<double>(), 101.0 / 99.0, 1e-12);
  // The text's marks, in the JSON: naive steady, flash disturbed; and each side's CPU sharing as recorded.
  EXPECT_EQ(j["rows"][0]["disturbed"], false);
  EXPECT_EQ(j["rows"][1]["disturbed"], true);
  EXPECT_TRUE(j["rows"][0]["base_cpu_sharing"].is_null());
  json busy = base;
  busy["variants"][0]["cpu_sharing"] = {{"other_cpus", 2.0}, {"cpus", 2}, {"threads", 2}};
  const json jb = report::diff_json(report::diff_compare_runs(busy, next));
  EXPECT_EQ(jb["rows"][0]["disturbed"], true) << "a side that shared the CPUs";
  EXPECT_EQ(jb["rows"][0]["base_cpu_sharing"]["other_cpus"], 2.0);
  EXPECT_NE(report::diff_table(report::diff_compare_runs(busy, next)).find("2.00x*"), std::string::npos);

  // Files from before forwards were recorded: no marks, no notes.
  const std::string old = report::diff_table(report::diff_compare_runs(
      compare_run("P", {variant("flash", "ok", 50, 10, 1, 0.008)}), compare_run("P", {variant("flash", "ok", 40, 10, 1, 0.008)})));
  EXPECT_EQ(old.find('*'), std::string::npos) << old;
  EXPECT_TRUE(report::diff_json(report::diff_compare_runs(base, base))["rows"][1]["base_spread"].is_number());

  // A corrupt list of forwards is refused with the field named.
  json bad = next;
  bad["variants"][1]["forward_ms"] = {40.0, "slow"};
  try {
    report::diff_compare_runs(base, bad);
    ADD_FAILURE() << "a string among the forwards was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("new variant 'flash': field 'forward_ms' holds something that is not a number"),
              std::string::npos) << e.what();
  }
  bad["variants"][1]["forward_ms"] = {40.0, -3.0};
  EXPECT_THROW(report::diff_compare_runs(base, bad), Error);
  bad["variants"][1]["forward_ms"] = 40.0;
  EXPECT_THROW(report::diff_compare_runs(base, bad), Error);
}

// What the checks say of `c` as the new side of a diff against `good` ("accepted" when nothing).
std::string compare_error(const json& good, const json& c) {
  try {
    report::check_compare_json(c, "b/compare.json");
    report::diff_compare_runs(good, c);
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

// A spread is slowest / fastest forward (null with fewer than two), and a run's device is cpu or cuda: any other
// value is a corrupt compare.json, refused naming the field and the value rather than ignored.
TEST(Diff, CompareRunsRefuseABadSpreadOrDevice) {
  const json good = compare_run("P", {variant("naive", "ok", 100, 1000, 8, 0.01)});
  auto error_of = [&](const json& c) { return compare_error(good, c); };
  json c = good;
  c["variants"][0]["spread"] = "x";
  EXPECT_EQ(error_of(c), "b/compare.json variant 'naive': field 'spread' is \"x\", not a number");
  c["variants"][0]["spread"] = -2;
  EXPECT_EQ(error_of(c), "b/compare.json variant 'naive': field 'spread' is -2, not a ratio of the slowest to the "
                         "fastest forward (at least 1)");
  c["variants"][0]["spread"] = 0.5;
  EXPECT_NE(error_of(c).find("field 'spread' is 0.5"), std::string::npos);
  for (const json ok : {json(nullptr), json(1.0), json(1.37), json(0.0)}) {
    c["variants"][0]["spread"] = ok;
    EXPECT_EQ(error_of(c), "accepted") << ok.dump();
  }
  c = good;
  c["device"] = "tpu";
  EXPECT_EQ(error_of(c), "b/compare.json: field 'device' is 'tpu', none of cpu, cuda");
  c["device"] = 3;
  EXPECT_EQ(error_of(c), "b/compare.json: field 'device' is 3, not a string (cpu or cuda)");
  for (const char* ok : {"cpu", "cuda"}) {
    c["device"] = ok;
    EXPECT_EQ(error_of(c), "accepted") << ok;
  }
  // diff_compare_runs applies the same checks itself.
  c["device"] = "tpu";
  EXPECT_THROW(report::diff_compare_runs(good, c), Error);
}

// The figures a row computes from others (its median time, its rate and that over the peak) agree with them, and
// its op count is whole: a hand-edited one would be printed and drawn beside the figures that contradict it.
TEST(Diff, CompareRunsRefuseFiguresTheirOwnFiguresContradict) {
  json good = compare_run("P", {variant("naive", "ok", 100, 1000, 6, 0.01)});
  good["attention_flops"] = 1e9;
  good["peak_gflops"] = 40.0;
  good["variants"][0]["forward_ms"] = {90.0, 100.0, 130.0};
  good["variants"][0]["gflops"] = 10.0;    // 1e9 FLOPs in 100 ms
  good["variants"][0]["pct_peak"] = 25.0;  // of 40
  auto error_of = [&](const json& c) { return compare_error(good, c); };
  EXPECT_EQ(error_of(good), "accepted");
  json c = good;
  c["variants"][0]["ms"] = 1e-3;
  EXPECT_EQ(error_of(c), "b/compare.json variant 'naive': field 'ms' is 0.001, not the median of its 'forward_ms' "
                         "(100), which attnprof writes");
  // An even count's median is the mean of its two middle forwards; an older GPU run wrote the upper one, so a time
  // between them is read.
  c = good;
  c["variants"][0]["forward_ms"] = {90.0, 100.0, 110.0, 130.0};
  c["variants"][0]["ms"] = 110.0;
  c["variants"][0]["gflops"] = 1e9 / 110e6;
  c["variants"][0]["pct_peak"] = 100.0 * (1e9 / 110e6) / 40.0;
  EXPECT_EQ(error_of(c), "accepted");
  c["variants"][0]["ms"] = 120.0;
  c["variants"][0]["gflops"] = 1e9 / 120e6;
  c["variants"][0]["pct_peak"] = 100.0 * (1e9 / 120e6) / 40.0;
  EXPECT_EQ(error_of(c), "b/compare.json variant 'naive': field 'ms' is 120, not the median of its 'forward_ms' "
                         "(105, or between 100 and 110), which attnprof writes");
  for (const auto& [key, value, says] :
       std::vector<std::tuple<std::string, double, std::string>>{
           {"ops", 2.5, "field 'ops' is 2.5, not a whole number of ops per forward"},
           {"peak_bytes", 4096.25, "field 'peak_bytes' is 4096.25, not a whole number of bytes"},
           {"gflops", 1e9, "field 'gflops' is 1000000000, not the run's attention_flops over its time (10), which "
                           "attnprof writes"},
           {"pct_peak", 5000, "field 'pct_peak' is 5000, not its gflops over the run's peak_gflops (25 %), which "
                              "attnprof writes"}}) {
    c = good;
    c["variants"][0][key] = value;
    EXPECT_EQ(error_of(c), "b/compare.json variant 'naive': " + says);
  }
  // Without the run's FLOPs or peak (an older file) there is nothing to set them against.
  c.erase("peak_gflops");
  EXPECT_EQ(error_of(c), "accepted");
  // Each forward's share on a CPU: one per forward, from 0 to 1 or null.
  c = good;
  c["variants"][0]["forward_on_cpu"] = {0.9, 0.5};
  EXPECT_EQ(error_of(c), "b/compare.json variant 'naive': field 'forward_on_cpu' is not an array of one share per "
                         "timed forward (3 of them)");
  c["variants"][0]["forward_on_cpu"] = {0.9, 1.5, nullptr};
  EXPECT_EQ(error_of(c), "b/compare.json variant 'naive': field 'forward_on_cpu' holds 1.5, not a share of a "
                         "forward's wall time (0 to 1) or null");
  // A side whose forward ran off the CPU marks the speed-up, and is named under the table.
  c["variants"][0]["forward_on_cpu"] = {0.9, 0.5, nullptr};
  EXPECT_EQ(error_of(c), "accepted");
  const report::RunDiff d = report::diff_compare_runs(good, c);
  EXPECT_EQ(d.rows[0].new_on_cpu, (std::vector<double>{0.9, 0.5, -1.0}));
  const std::string t = report::diff_table(d);
  EXPECT_NE(t.find("1.00x*"), std::string::npos) << t;
  EXPECT_NE(t.find("Off the CPU: naive (new)'s calling thread ran on a CPU for 50 % of forward 2's 100.000ms"),
            std::string::npos)
      << t;
}

// The row's other figures (report draws them: GFLOP/s, % of peak, bytes moved, the floor) are numbers, not
// negative, or null; and a variant that ran took time, in every forward. Anything else is refused, naming the
// field, rather than drawn or printed as "0.000 ... ok/ok".
TEST(Diff, CompareRunsRefuseFiguresNoRunWrites) {
  const json good = compare_run("P", {variant("naive", "ok", 100, 1000, 8, 0.01)});
  auto error_of = [&](const json& c) { return compare_error(good, c); };
  for (const char* key : {"gflops", "pct_peak", "peak_total_bytes", "bytes", "bound_ms", "floor_ms",
                          "floor_memory_share", "nmse", "tolerance_used", "warmup_forwards", "max_abs_err"}) {
    // Errors against the reference are as large as the data makes them: any finite size, not negative.
    const bool error_figure = std::string(key) == "nmse" || std::string(key) == "tolerance_used" ||
                              std::string(key) == "max_abs_err";
    json c = good;
    c["variants"][0][key] = -5;
    EXPECT_EQ(error_of(c), error_figure
                               ? fmt::format("b/compare.json variant 'naive': field '{}' is -5, not a non-negative "
                                             "number", key)
                               : fmt::format("b/compare.json variant 'naive': field '{}' is -5, out of range (expected "
                                             "a non-negative number up to 2^53)", key));
    c["variants"][0][key] = "x";
    EXPECT_EQ(error_of(c), fmt::format("b/compare.json variant 'naive': field '{}' is not a number", key));
    c["variants"][0][key] = 1e300;
    if (error_figure)
      EXPECT_EQ(error_of(c), "accepted") << key;
    else
      EXPECT_NE(error_of(c).find(fmt::format("field '{}' is 1e+300, out of range", key)), std::string::npos);
    for (const json ok : {json(nullptr), json(0.0), json(0.5)}) {
      c["variants"][0][key] = ok;
      EXPECT_EQ(error_of(c), "accepted") << key << " " << ok.dump();
    }
  }
  json c = good;
  c["variants"][0]["floor_memory_share"] = 1.5;
  EXPECT_EQ(error_of(c), "b/compare.json variant 'naive': field 'floor_memory_share' is 1.5, not a share of the "
                         "floor (0 to 1)");
  c = good;
  c["variants"][0]["ms"] = 0;
  EXPECT_EQ(error_of(c), "b/compare.json variant 'naive': status 'ok' with a time ('ms') of 0; attnprof writes the "
                         "median of forwards it timed, and none takes no time");
  c = good;
  c["variants"][0]["forward_ms"] = {100.0, 0.0};
  EXPECT_EQ(error_of(c), "b/compare.json variant 'naive': status 'ok' with a forward of 0 ms in 'forward_ms'; "
                         "attnprof writes the time of each forward it timed, and none takes no time");
  // Rows that did not run hold no time and the zeros compare writes for them.
  c = compare_run("P", {variant("naive", "skipped", -1, -1, -1, -1)});
  c["variants"][0]["bytes"] = 0;
  c["variants"][0]["bound_ms"] = 0;
  c["variants"][0]["forward_ms"] = json::array();
  EXPECT_EQ(error_of(c), "accepted");
}

// Every text diff prints from a compare.json (its problem, the machine's CPU) is refused with a control
// character in it, naming the field, as row names are: an escape sequence would reach the terminal.
TEST(Diff, CompareRunsRefuseControlCharactersInWhatDiffPrints) {
  const json good = compare_run("P", {variant("naive", "ok", 100, 1000, 8, 0.01)});
  json c = good;
  c["problem"] = "P\x1b[2J";
  EXPECT_THROW(report::diff_compare_runs(good, c), Error);
  try {
    report::check_compare_json(c, "b/compare.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "b/compare.json: field 'problem' holds a control character (byte 0x1b), which attnprof never writes");
  }
  c = good;
  c["machine"] = {{"cpu", "Xeon\x1b]0;owned\x07"}};
  EXPECT_THROW(report::check_compare_json(c, "b/compare.json"), Error);
  // Every machine text roofline --from and the report print, the peaks' date and the VM's memory note among them.
  for (const char* key : {"measured_at", "memory_reclaim", "library_isa", "isa", "bf16_matmul"}) {
    c["machine"] = {{"cpu", "Xeon"}, {key, "x\x1b[2J"}};
    EXPECT_THROW(report::check_compare_json(c, "b/compare.json"), Error) << key;
  }
  c["machine"] = {{"cpu", "Xeon"}};
  EXPECT_NO_THROW(report::check_compare_json(c, "b/compare.json"));
}

// The run's settings are whole counts in range and a dtype attnprof runs: roofline --from copies them into
// roofline.json, and the readers print them ("1e300 recorded forwards each").
TEST(Diff, CompareRunsRefuseSettingsNoRunWrites) {
  const json good = compare_run("P", {variant("naive", "ok", 100, 1000, 8, 0.01)});
  EXPECT_NO_THROW(report::check_compare_json(good, "b/compare.json"));
  for (const auto& [key, value, message] :
       {std::tuple<const char*, json, const char*>{"threads", -1, "field 'threads' is -1, not a whole number from 1 to 65536"},
        {"threads", 2.5, "field 'threads' is 2.5, not a whole number from 1 to 65536"},
        {"iters", 1e300, "field 'iters' is 1e+300, not a whole number from 1 to 1e+09"},
        {"warmup", "x", "field 'warmup' is \"x\", not a whole number from 0 to 1e+09"},
        {"dtype", "x", "field 'dtype' is \"x\", none of fp32, bf16, fp16"},
        {"dtype", 3, "field 'dtype' is 3, none of fp32, bf16, fp16"}}) {
    json c = good;
    c[key] = value;
    try {
      report::check_compare_json(c, "b/compare.json");
      ADD_FAILURE() << key << " " << value.dump() << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), std::string("b/compare.json: ") + message);
    }
  }
  json c = good;
  c.update({{"threads", 2}, {"iters", 3}, {"warmup", 0}, {"dtype", "fp16"}});
  EXPECT_NO_THROW(report::check_compare_json(c, "b/compare.json"));
}

TEST(Diff, SummariesRefuseControlCharactersInTheVariantOrProblem) {
  for (const char* field : {"variant", "problem"}) {
    json bad = inplace_summary();
    bad["run"][field] = "x\x1b[31m";
    try {
      report::check_summary(bad, "b.summary.json", /*run_figures=*/true);
      ADD_FAILURE() << field << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), fmt::format("b.summary.json: field '{}' holds a control character (byte "
                                                   "0x1b), which attnprof never writes", field));
    }
    EXPECT_THROW(report::diff_summaries(naive_summary(), bad), Error);
  }
}

// What decides a side's Busy line and `*` (cpu_sharing) and what its forwards are counted by (the annotation) is
// refused when malformed, naming the field: read as "not measured" or "missing", a side's Busy line would vanish
// and its figures would be counted over the wrong forwards, without a word. A compare.json without variants is
// refused by every reader (diff, report, roofline --from), as nothing in it was measured.
TEST(Diff, MalformedSharingAnnotationsAndEmptyRunsAreRefused) {
  for (const json bad : {json(5), json("busy"), json{{"other_cpus", "x"}, {"cpus", -1}, {"threads", 1e300}},
                         json{{"other_cpus", 1e308}, {"cpus", 0}}, json{{"other_cpus", 4}, {"cpus", 2}, {"threads", 1}}}) {  // past a tick over every CPU
    json s = inplace_summary();
    s["run"]["cpu_sharing"] = bad;
    try {
      report::check_summary(s, "b.summary.json", /*run_figures=*/true);
      ADD_FAILURE() << bad.dump() << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("b.summary.json run: field 'cpu_sharing' is " + bad.dump(), 0), 0u)
          << e.what();
    }
    json c = compare_run("P", {variant("naive", "ok", 100, 1000, 8, 0.01)});
    c["variants"][0]["cpu_sharing"] = bad;
    EXPECT_THROW(report::check_compare_json(c, "b/compare.json"), Error) << bad.dump();
  }
  json s = inplace_summary();
  s["run"]["cpu_sharing"] = {{"other_cpus", 1.0}, {"cpus", 2}, {"threads", 2}};
  EXPECT_NO_THROW(report::check_summary(s, "b.summary.json", true));
  s["run"]["cpu_sharing"] = nullptr;  // not measured
  EXPECT_NO_THROW(report::check_summary(s, "b.summary.json", true));
  for (const char* section : {"run", "metadata"}) {
    json a = inplace_summary();
    a[section]["annotation"] = 5;
    try {
      report::check_summary(a, "b.summary.json", true);
      ADD_FAILURE() << section << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), fmt::format("b.summary.json: field '{}.annotation' is 5, not a string", section));
    }
  }
  json empty = compare_run("P", {variant("naive", "ok", 100, 1000, 8, 0.01)});
  empty["variants"] = json::array();
  try {
    report::check_compare_json(empty, "b/compare.json");
    ADD_FAILURE() << "an empty run accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "b/compare.json: field 'variants' is empty (attnprof writes a row for every variant compare ran)");
  }
  EXPECT_THROW(report::diff_compare_runs(empty, empty), Error);
}

// "status" is a string; files from before it existed have none (and "ok"/"skipped" instead). A "status" of
// another type is neither, and is refused rather than read as the older format.
TEST(Diff, CompareRunsRefuseAStatusThatIsNotAString) {
  for (const json bad : {json(5), json::object(), json(nullptr), json(true), json("")}) {
    json c = compare_run("P", {variant("naive", "ok", 100, 1000, 8, 0.01)});
    c["variants"][0]["status"] = bad;
    c["variants"][0]["ok"] = false;
    try {
      report::check_compare_json(c, "b/compare.json");
      ADD_FAILURE() << bad.dump() << " accepted";
    } catch (const Error& e) {
      const std::string want = bad.is_string() ? "b/compare.json variant 'naive': status '' is none of ok, failed, skipped"
                                               : "b/compare.json variant 'naive': field 'status' is " + bad.dump() +
                                                     ", not a string (ok, failed or skipped)";
      EXPECT_EQ(std::string(e.what()), want);
    }
  }
  json old = compare_run("P", {variant("naive", "ok", 100, 1000, 8, 0.01)});
  old["variants"][0].erase("status");
  old["variants"][0]["ok"] = true;
  EXPECT_NO_THROW(report::check_compare_json(old, "b/compare.json"));
}

// report reads each variant's files by its name beside compare.json: a name that is not a plain file name
// would lead it outside the run's directory, so it is refused (and report leaves compare.json out).
TEST(Diff, CompareRunsRefuseAVariantNameThatIsNotAFileName) {
  for (const std::string name : {"../../etc/x", "a/b", "a\\b", "..", ".hidden"}) {
    const json c = compare_run("P", {variant(name, "ok", 100, 1000, 8, 0.01)});
    try {
      report::check_compare_json(c, "b/compare.json");
      ADD_FAILURE() << name << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "b/compare.json: field 'name' of a variant is '" + name +
                                           "', not a plain file name (attnprof writes names like naive, sdpa-flash)");
    }
    EXPECT_THROW(report::diff_compare_runs(c, c), Error);
  }
  EXPECT_NO_THROW(report::check_compare_json(compare_run("P", {variant("sdpa-flash", "ok", 100, 1000, 8, 0.01)}), "c"));
}

}  // namespace

// The JSON fuzz corpus (fuzz/corpus/json, written by fuzz/make_json_corpus.py from the report fixtures),
// replayed through the fuzz target's body in every build: the readers of `attnprof diff` and `attnprof report`
// accept the valid files, refuse each corruption with an Error, and never crash or throw anything else.
#include <filesystem>
#include <fstream>

#include "../fuzz/fuzz_json_body.h"

// A document nested past kMaxJsonDepth is refused before it is parsed (a file of brackets took ~30 bytes of
// memory per byte to parse); brackets inside strings, escaped quotes included, do not count.
TEST(Diff, JsonNestedPastTheDepthLimitIsRefusedUnparsed) {
  const auto nested = [](int n) { return std::string(size_t(n), '[') + std::string(size_t(n), ']'); };
  EXPECT_EQ(report::json_depth_error(nested(report::kMaxJsonDepth)), "");
  EXPECT_EQ(report::json_depth_error(nested(report::kMaxJsonDepth + 1)),
            "it nests arrays and objects over 64 deep, at byte 64: no file attnprof writes does");
  EXPECT_EQ(report::json_depth_error(R"({"a": "[[[[\"{{{{", "b": [1, {"c": "]]]"}]})"), "");
  std::string in_string = "{\"s\": \"" + std::string(200, '{') + "\"}";
  EXPECT_EQ(report::json_depth_error(in_string), "");
  // The summaries and compare.json attnprof writes pass.
  EXPECT_EQ(report::json_depth_error(naive_summary().dump()), "");
}

// A key given twice in one object (the parser would keep the last without a word) is refused, naming it; the same
// key in two objects, or in nested ones, is not a duplicate.
TEST(Diff, JsonWithAKeyTwiceInOneObjectIsRefused) {
  EXPECT_EQ(report::json_parse_error(R"({"rows": [], "ms": 1, "ms": 2})"),
            "it gives the key \"ms\" twice in one object: no file attnprof writes does, and which of the two counts "
            "would be a guess");
  EXPECT_NE(report::json_parse_error(R"([{"a": 1}, {"b": {"c": 1, "c": 2}}])").find("the key \"c\" twice"),
            std::string::npos);
  EXPECT_EQ(report::json_parse_error(R"([{"a": 1}, {"a": 2, "b": {"a": 3}}])"), "");
  EXPECT_EQ(report::json_parse_error(naive_summary().dump()), "");
  // An empty file is said to be empty, not "unexpected end of input".
  EXPECT_EQ(report::json_parse_error(""), "it is empty (0 bytes): attnprof never writes an empty file");
  EXPECT_EQ(report::json_parse_error(" \n\t"), "it holds only white space (3 bytes): attnprof never writes such a file");
}

// The memory a parse takes, estimated by a pass that builds nothing (nlohmann::json's layout): the document, its
// arrays' values at twice their size (a vector's capacity), objects' members as map nodes, long strings.
TEST(Diff, JsonParseCostFollowsTheLibrarysLayout) {
  EXPECT_DOUBLE_EQ(report::json_parse_bytes("1"), 16.0);
  EXPECT_DOUBLE_EQ(report::json_parse_bytes("[1, 2, 3]"), 16.0 + (24 + 16) + 3 * 32);
  // An object of one short key and a 20-character string: the map, its node, the string and its characters.
  EXPECT_DOUBLE_EQ(report::json_parse_bytes(R"({"a": "01234567890123456789"})"), 16.0 + (48 + 16) + (96 + 16) + (32 + 16) + (21 + 16));
  // It grows with the document: each of 100,000 small objects in an array takes over 200 bytes.
  std::string many = "[";
  for (int i = 0; i < 100000; ++i) many += (i ? "," : "") + std::string(R"({"a":1})");
  many += "]";
  EXPECT_GT(report::json_parse_bytes(many), 100000.0 * 200);
  EXPECT_EQ(report::json_memory_error("[1, 2, 3]"), "");  // a small document fits anywhere
}

TEST(JsonFuzzCorpus, ReplaysEverySeedWithTheExpectedOutcome) {
  namespace fs = std::filesystem;
  using attnprof::fuzz::JsonOutcome;
  const fs::path dir = fs::path(ATTNPROF_SOURCE_DIR) / "fuzz" / "corpus" / "json";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  const fs::path scratch = fs::path(ATTNPROF_BINARY_DIR) / "json-fuzz-replay";
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  const std::map<std::string, JsonOutcome> expected = {
      {"diff_naive_inplace", JsonOutcome::Diffed},    {"diff_naive_flash", JsonOutcome::Diffed},
      {"diff_naive_sdpa_math", JsonOutcome::Diffed},  {"diff_cuda_naive_flash", JsonOutcome::Diffed},
      {"diff_zero_calls", JsonOutcome::Refused},      {"diff_odd_names", JsonOutcome::Diffed},
      {"diff_huge_number", JsonOutcome::Refused},     {"report_huge_numbers", JsonOutcome::Rendered},
      {"diff_no_run", JsonOutcome::Refused},          {"runs_bad_spread", JsonOutcome::Refused},
      {"diff_flash_tiles", JsonOutcome::Diffed},      {"diff_bad_tiles", JsonOutcome::Refused},
      {"runs_bad_device", JsonOutcome::Refused},
      {"diff_cpu_vs_cuda", JsonOutcome::Refused},     {"diff_not_a_summary", JsonOutcome::Refused},
      {"diff_string_time", JsonOutcome::Refused},     {"diff_rows_object", JsonOutcome::Refused},
      {"runs_cpu_cpu", JsonOutcome::Diffed},          {"runs_cpu_cuda", JsonOutcome::Diffed},
      {"runs_bad_fields", JsonOutcome::Refused},      {"runs_not_compare", JsonOutcome::Refused},
      {"runs_noisy_forwards", JsonOutcome::Diffed},   {"runs_bad_forwards", JsonOutcome::Refused},
      {"report_noisy_forwards", JsonOutcome::Rendered},
      {"report_cpu", JsonOutcome::Rendered},          {"report_cuda", JsonOutcome::Rendered},
      {"report_truncated", JsonOutcome::Rendered},    {"report_wrong_types", JsonOutcome::Rendered},
      {"report_invalid_utf8", JsonOutcome::Rendered}};
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(name);
    const JsonOutcome got =
        attnprof::fuzz::json_outcome(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), scratch.string());
    const auto want = expected.find(name);
    ASSERT_NE(want, expected.end()) << "a seed without an expected outcome: add it to this test";
    EXPECT_EQ(int(got), int(want->second));
    ++files;
  }
  EXPECT_EQ(files, int(expected.size())) << "a seed is missing: run fuzz/make_json_corpus.py";
}

// The steps a kernel timed (op_phases) diff step by step, per forward: naive (2 forwards) with a kernel's
// steps against in-place (3 forwards), a step only one side has shown as --; a corrupt op_phases is refused
// naming the field.
TEST(Diff, TheKernelsStepsPerForwardSideBySide) {
  json a = naive_summary(), b = inplace_summary();
  auto phases = [](double load_ns, double dot_ns, double dot_flops, bool extra) {
    json steps = json::array({{{"name", "load"}, {"thread_ns", load_ns}, {"flops", 0.0}},
                              {{"name", "Q·Kᵀ"}, {"thread_ns", dot_ns}, {"flops", dot_flops}}});
    if (extra) steps.push_back({{"name", "mask"}, {"thread_ns", 300.0}, {"flops", 0.0}});
    return json::array({{{"name", "kernel"}, {"regions", 2}, {"threads", 2}, {"share_ns", 1e4}, {"steps", steps}}});
  };
  a["op_phases"] = phases(2000, 6000, 60000, false);  // per forward: 1000 ns, 3000 ns at 10 GFLOP/s
  b["op_phases"] = phases(1500, 3000, 90000, true);   // per forward: 500 ns, 1000 ns at 30 GFLOP/s; mask 100 ns
  const report::ProfileDiff d = report::diff_summaries(a, b);
  ASSERT_EQ(d.steps.size(), 3u);
  EXPECT_EQ(d.steps[1].step, "Q·Kᵀ");
  EXPECT_DOUBLE_EQ(d.steps[1].base_ns, 3000);
  EXPECT_DOUBLE_EQ(d.steps[1].new_ns, 1000);
  EXPECT_DOUBLE_EQ(d.steps[2].base_ns, -1);  // the mask step: the new side's only
  EXPECT_DOUBLE_EQ(d.steps[2].new_ns, 100);
  const std::string t = report::diff_table(d);
  EXPECT_NE(t.find("Inside kernel, the kernel's steps (each thread's time per forward, summed over the threads):"),
            std::string::npos) << t;
  EXPECT_NE(t.find("  Q·Kᵀ      3.000us      1.000us     -2.000us  10.0 -> 30.0"), std::string::npos) << t;
  EXPECT_NE(t.find("  mask           --      0.100us           --\n"), std::string::npos) << t;
  const json j = report::diff_json(d);
  ASSERT_EQ(j["steps"].size(), 3u);
  EXPECT_EQ(j["steps"][2]["base_thread_ns"], json());
  EXPECT_DOUBLE_EQ(j["steps"][1]["new_flops"].get<double>(), 30000);
  // Without op_phases on either side: no steps, no block.
  EXPECT_EQ(report::diff_table(report::diff_summaries(naive_summary(), inplace_summary())).find("Inside "),
            std::string::npos);
  for (const auto& [bad, why] : std::vector<std::pair<json, std::string>>{
           {json("x"), "field 'op_phases' is string, not an array"},
           {json::array({{{"name", "k"}}}), "an op_phases entry without a \"name\" and a \"steps\" array"},
           {json::array({{{"name", "k"}, {"steps", json::array({{{"name", "s"}}})}}}), "field 'thread_ns' is missing"},
           {json::array({{{"name", "k"}, {"steps", json::array({{{"name", "s"}, {"thread_ns", -1}}})}}}), "thread_ns"}}) {
    json c = inplace_summary();
    c["op_phases"] = bad;
    try {
      report::diff_summaries(naive_summary(), c);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

namespace {

// An op's tasks as summary_json writes its op_items entry: three groups (4, 8 and 12 inner blocks) of `per` tasks
// each, per forward over `forwards` forwards; a task of the group of k inner blocks does k / 4 MFLOP and takes
// `ns` times 1, 2 or 3 at the median (the mean 10 % over it), and the slowest is one of the 12-block tasks.
json tiles(double forwards, double per, double ns, double mflop = 1.0) {
  json groups = json::array();
  for (int k = 1; k <= 3; ++k)
    groups.push_back({{"inner", 4 * k}, {"count", per * forwards}, {"median_ns", ns * k}, {"mean_ns", 1.1 * ns * k},
                      {"max_ns", k == 3 ? 9 * ns : 1.5 * ns * k}, {"flops", mflop * 1e6 * k * per * forwards}});
  return json::array({{{"name", "flash_attention_fwd"},
                       {"noun", "Q block"},
                       {"inner", "K/V blocks"},
                       {"keys", {"batch", "head", "Q block"}},
                       {"items", 3 * per * forwards},
                       {"regions", forwards},
                       {"groups", groups},
                       {"fit", {{"fixed_ns", 0.0}, {"marginal_gflops", mflop * 1e6 / ns}, {"r2", 1.0}}},
                       {"slowest", {{"label", "Q block 2 (batch 0, head 1)"}, {"keys", {0, 1, 2}}, {"inner", 12},
                                    {"ns", 9 * ns}, {"group_median_ns", 3 * ns}, {"step", "store O"},
                                    {"step_ns", 6 * ns}}}}});
}

}  // namespace

// The tasks an op marked (op_items: the flash kernel's tiles) diff group by group, per forward: naive's 2
// forwards against in-place's 3, a group on both sides when the tasks are the same (the same flash blocks, or
// without them the same FLOPs per task), else a row each; each side's line through the medians and its slowest.
TEST(Diff, TheKernelsTasksGroupByGroup) {
  json a = naive_summary(), b = inplace_summary();
  a["op_items"] = tiles(2, 2, 1000);  // per forward 2 tasks a group; medians 1, 2, 3 us
  b["op_items"] = tiles(3, 2, 500);   // the same tasks at twice the speed
  report::ProfileDiff d = report::diff_summaries(a, b);
  ASSERT_EQ(d.items.size(), 1u);
  ASSERT_EQ(d.items[0].rows.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(d.items[0].rows[size_t(k)].inner, 4 * (k + 1));
    EXPECT_EQ(d.items[0].rows[size_t(k)].base, k);
    EXPECT_EQ(d.items[0].rows[size_t(k)].next, k);
  }
  std::string t = report::diff_table(d);
  EXPECT_NE(t.find("Inside flash_attention_fwd, its Q blocks by the K/V blocks each visited (the median Q block's "
                   "time; Q blocks per forward):\n"
                   "  K/V blocks  MFLOP each  Q blocks         base          new       change  GFLOP/s per thread\n"
                   "           4        1.00    2 -> 2      1.000us      0.500us     -0.500us  909.1 -> 1818.2\n"
                   "           8        2.00    2 -> 2      2.000us      1.000us     -1.000us  909.1 -> 1818.2\n"
                   "          12        3.00    2 -> 2      3.000us      1.500us     -1.500us  909.1 -> 1818.2\n"
                   "  Per Q block: 0.000us + its FLOPs at 1000.0 GFLOP/s (r² 1.000) -> 0.000us + its FLOPs at "
                   "2000.0 GFLOP/s (r² 1.000)\n"
                   "  Slowest Q block (base): Q block 2 (batch 0, head 1) at 9.000us, 3.0x the median of the Q "
                   "blocks with 12 K/V blocks, 67 % of it in store O.\n"
                   "  Slowest Q block (new): Q block 2 (batch 0, head 1) at 4.500us, 3.0x the median of the Q "
                   "blocks with 12 K/V blocks, 67 % of it in store O.\n"),
            std::string::npos)
      << t;
  json j = report::diff_json(d);
  ASSERT_EQ(j["items"].size(), 1u);
  EXPECT_EQ(j["items"][0]["op"], "flash_attention_fwd");
  EXPECT_DOUBLE_EQ(j["items"][0]["base_items_per_forward"].get<double>(), 6);
  EXPECT_DOUBLE_EQ(j["items"][0]["new_items_per_forward"].get<double>(), 6);
  EXPECT_DOUBLE_EQ(j["items"][0]["groups"][2]["base"]["median_ns"].get<double>(), 3000);
  EXPECT_DOUBLE_EQ(j["items"][0]["groups"][2]["new"]["per_forward"].get<double>(), 2);
  EXPECT_DOUBLE_EQ(j["items"][0]["groups"][2]["new"]["flops_each"].get<double>(), 3e6);
  EXPECT_DOUBLE_EQ(j["items"][0]["new_fit"]["marginal_gflops"].get<double>(), 2000);
  EXPECT_EQ(j["items"][0]["base_slowest"]["step"], "store O");

  // Other FLOPs per task and no flash blocks named: other tasks, a row each, and a line saying only the lines
  // per task compare them.
  b["op_items"] = tiles(3, 2, 500, 2.0);
  d = report::diff_summaries(a, b);
  ASSERT_EQ(d.items[0].rows.size(), 6u);
  EXPECT_EQ(d.items[0].rows[0].base, 0);
  EXPECT_EQ(d.items[0].rows[0].next, -1);
  EXPECT_EQ(d.items[0].rows[1].base, -1);
  EXPECT_EQ(d.items[0].rows[1].next, 0);
  t = report::diff_table(d);
  EXPECT_NE(t.find("           4        1.00   2 -> --      1.000us           --           --  909.1 -> --\n"
                   "           4        2.00   -- -> 2           --      0.500us           --  -- -> 3636.4\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("  No group pairs: the two sides' Q blocks are other tasks, of other FLOPs for as many K/V "
                   "blocks; the lines per Q block, against FLOPs, compare them.\n"),
            std::string::npos)
      << t;
  j = report::diff_json(d);
  EXPECT_EQ(j["items"][0]["groups"][0]["new"], json());
  EXPECT_EQ(j["items"][0]["groups"][1]["base"], json());
  // The same flash blocks on the same problem pair the groups however their FLOPs differ (a body that skips
  // more of the diagonal), and MFLOP each shows both; on other flash blocks only the same FLOPs pair them, and
  // where none does the note names the blocks.
  a["run"]["flash_block"] = b["run"]["flash_block"] = json::array({256, 64});
  t = report::diff_table(report::diff_summaries(a, b));
  EXPECT_NE(t.find("           4  1.00 -> 2.00    2 -> 2      1.000us      0.500us     -0.500us  909.1 -> 3636.4\n"),
            std::string::npos)
      << t;
  b["run"]["flash_block"] = json::array({128, 64});
  d = report::diff_summaries(a, b);
  EXPECT_EQ(d.items[0].rows.size(), 6u);
  EXPECT_NE(report::diff_table(d).find("No group pairs: the two sides' Q blocks are other tasks (flash blocks "
                                       "256×64 -> 128×64), of other FLOPs for as many K/V blocks;"),
            std::string::npos);
  b["op_items"] = tiles(3, 2, 500);  // blocks clipped to a short sequence: the same tiles whatever the blocks
  d = report::diff_summaries(a, b);
  EXPECT_EQ(d.items[0].rows.size(), 3u);
  EXPECT_EQ(report::diff_table(d).find("No group pairs"), std::string::npos);
  json other = a;  // the same blocks on another problem (another head dim): only the same FLOPs pair
  other["run"]["problem"] = other["metadata"]["problem"] = "Q";
  other["run"]["flash_block"] = json::array({128, 64});
  b["op_items"] = tiles(3, 2, 500, 2.0);
  EXPECT_EQ(report::diff_summaries(other, b).items[0].rows.size(), 6u);

  // Without a line on one side (under three groups), the note says what compares them instead.
  json two = tiles(3, 2, 500, 2.0);
  two[0]["groups"].erase(0);
  two[0]["items"] = 12;
  two[0].erase("fit");
  b["op_items"] = two;
  b["run"].erase("flash_block");
  a["run"].erase("flash_block");
  t = report::diff_table(report::diff_summaries(a, b));
  EXPECT_NE(t.find("  Per Q block: 0.000us + its FLOPs at 1000.0 GFLOP/s (r² 1.000) -> no line through its medians\n"
                   "  No group pairs: the two sides' Q blocks are other tasks, of other FLOPs for as many K/V blocks; "
                   "with no line through the medians on the new side, the time per forward above compares the "
                   "runs.\n"),
            std::string::npos)
      << t;

  // Twice as many tasks a forward, each with a smaller fixed cost: what the fixed costs add up to per forward.
  a["op_items"][0]["fit"]["fixed_ns"] = 100;  // 6 tasks a forward: 0.6 us
  b["op_items"] = tiles(3, 4, 500);
  b["op_items"][0]["fit"]["fixed_ns"] = 75;   // 12 tasks a forward: 0.9 us
  EXPECT_NE(report::diff_table(report::diff_summaries(a, b))
                .find("  Fixed costs per forward (Q blocks per forward × the fixed cost, thread time): 0.600us -> "
                      "0.900us\n"),
            std::string::npos);

  // The op on one side only: the other side's cells are --, and its line and slowest are absent.
  b.erase("op_items");
  d = report::diff_summaries(a, b);
  ASSERT_EQ(d.items.size(), 1u);
  EXPECT_FALSE(d.items[0].next.has_value());
  t = report::diff_table(d);
  EXPECT_NE(t.find("           4        1.00   2 -> --      1.000us           --           --  909.1 -> --\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("  Per Q block: 0.100us + its FLOPs at 1000.0 GFLOP/s (r² 1.000) -> --\n"), std::string::npos) << t;
  EXPECT_EQ(t.find("Slowest Q block (new)"), std::string::npos) << t;
  EXPECT_EQ(report::diff_json(d)["items"][0]["new_fit"], json());
  // Neither side: no block.
  a.erase("op_items");
  EXPECT_EQ(report::diff_table(report::diff_summaries(a, b)).find("its Q blocks"), std::string::npos);
}

// An op_items entry attnprof would not write is refused, by diff and by every reader that checks a summary
// (the report leaves the summary out), naming the field: each would print a figure no run measured.
TEST(Diff, DamagedTaskEntriesAreRefusedNamingTheField) {
  json good = naive_summary();
  good["op_items"] = tiles(2, 2, 1000);
  EXPECT_NO_THROW(report::check_summary(good, "s"));
  auto damaged = [&](const std::function<void(json&)>& edit) {
    json s = good;
    edit(s["op_items"][0]);
    return s;
  };
  const std::vector<std::tuple<std::string, json, std::string>> cases = {
      {"no groups", damaged([](json& o) { o.erase("groups"); }), "field 'groups' is not an array"},
      {"a negative median", damaged([](json& o) { o["groups"][1]["median_ns"] = -5; }), "'median_ns' is -5"},
      {"a median over a day", damaged([](json& o) { o["groups"][1]["median_ns"] = 1e14; }), "over a day"},
      {"a negative longest", damaged([](json& o) { o["groups"][1]["max_ns"] = -1; }), "'max_ns' is -1"},
      {"a fixed cost of null", damaged([](json& o) { o["fit"]["fixed_ns"] = nullptr; }),
       "field 'fixed_ns' is null, not a number"},
      {"a step time of null", damaged([](json& o) { o["slowest"]["step_ns"] = nullptr; }),
       "field 'step_ns' is not a number"},
      {"negative FLOPs", damaged([](json& o) { o["groups"][0]["flops"] = -1; }), "'flops' is -1"},
      {"a median past its group's longest", damaged([](json& o) { o["groups"][1]["median_ns"] = 1e9; }),
       "its median of 1000000000 ns is past its longest, 3000 ns"},
      {"a count of 0", damaged([](json& o) { o["groups"][0]["count"] = 0; }),
       "group of 4 K/V blocks: field 'count' is 0, not a whole number of at least 1"},
      {"an inner count of 2.5", damaged([](json& o) { o["groups"][0]["inner"] = 2.5; }),
       "field 'inner' is 2.5, not a whole number"},
      {"a group twice", damaged([](json& o) { o["groups"][1]["inner"] = o["groups"][0]["inner"]; }),
       "it follows the group of 4"},
      {"fewer tiles than the groups count", damaged([](json& o) { o["items"] = 7; }),
       "field 'items' is 7, but its groups count more"},
      {"tiles the groups do not count", damaged([](json& o) { o["items"] = 20; }),
       "field 'items' is 20, but its groups count 12"},
      {"a fractional count of tiles", damaged([](json& o) { o["items"] = 1.5; }), "field 'items' is 1.5"},
      {"a noun that is a number", damaged([](json& o) { o["noun"] = 5; }), "field 'noun' is 5, not a string"},
      {"no inner name", damaged([](json& o) { o.erase("inner"); }), "field 'inner' is missing"},
      {"a control character in a name", damaged([](json& o) { o["name"] = "flash\x1b[2J"; }), "control character"},
      {"keys not three", damaged([](json& o) { o["keys"] = json::array({"batch"}); }), "field 'keys' is not an array"},
      {"slowest without keys", damaged([](json& o) { o["slowest"].erase("keys"); }),
       "slowest: field 'keys' is not an array"},
      {"slowest in no group", damaged([](json& o) { o["slowest"]["inner"] = 99; }),
       "field 'inner' is 99, the inner count of no group"},
      {"slowest beside another median", damaged([](json& o) { o["slowest"]["group_median_ns"] = 1e-300; }),
       "not its group's median"},
      {"slowest not the longest", damaged([](json& o) { o["slowest"]["ns"] = 1000; }), "not the longest"},
      {"a rate of 0 GFLOP/s", damaged([](json& o) { o["fit"]["marginal_gflops"] = 0; }),
       "field 'marginal_gflops' is 0, not a rate"},
      {"r² of 1.5", damaged([](json& o) { o["fit"]["r2"] = 1.5; }), "field 'r2' is 1.5, over 1"},
      {"not an object", damaged([](json& o) { o = "tiles"; }), "an op_items entry is \"tiles\", not an object"},
  };
  for (const auto& [what, summary, why] : cases) {
    try {
      report::check_summary(summary, "flash.summary.json");
      ADD_FAILURE() << what << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << what << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("flash.summary.json"), std::string::npos) << what << ": " << e.what();
    }
    EXPECT_THROW(report::diff_summaries(good, summary), Error) << what;
  }
  json twice = good;
  twice["op_items"].push_back(twice["op_items"][0]);
  EXPECT_THROW(report::check_summary(twice, "s"), Error);
  json not_array = good;
  not_array["op_items"] = "tiles";
  EXPECT_THROW(report::check_summary(not_array, "s"), Error);
  // What attnprof's own writer can give passes: a mean over its longest by rounding (3 equal times summed and
  // divided), a tile the clock stepped back across (0 ns), an intercept far below zero where the medians
  // scatter, any rate above 0, a step summed past its tile by laps a clock stepped back across (read as the
  // whole tile), a slowest tile without a step.
  for (const auto& [what, edit] : std::vector<std::pair<std::string, std::function<void(json&)>>>{
           {"a mean past its longest by rounding",
            [](json& o) { o["groups"][0]["mean_ns"] = o["groups"][0]["max_ns"].get<double>() * (1 + 1e-15); }},
           {"a tile of 0 ns", [](json& o) {
              o["groups"][0]["median_ns"] = o["groups"][0]["mean_ns"] = o["groups"][0]["max_ns"] = 0.0;
            }},
           {"an intercept far below zero", [](json& o) { o["fit"]["fixed_ns"] = -1e9; }},
           {"a rate of 1e9 GFLOP/s", [](json& o) { o["fit"]["marginal_gflops"] = 1e9; }},
           {"a rate of 1e-6 GFLOP/s", [](json& o) { o["fit"]["marginal_gflops"] = 1e-6; }},
           {"no step", [](json& o) { o["slowest"]["step"] = nullptr; o["slowest"]["step_ns"] = 0; }}}) {
    EXPECT_NO_THROW(report::check_summary(damaged(edit), "s")) << what;
  }
  json longer = damaged([](json& o) { o["slowest"]["step_ns"] = 9e9; });
  EXPECT_NO_THROW(report::check_summary(longer, "s"));
  EXPECT_NE(report::diff_table(report::diff_summaries(good, longer)).find("at 9.000us, 3.0x the median of the Q "
                                                                          "blocks with 12 K/V blocks, 100 % of it in "
                                                                          "store O"),
            std::string::npos);
  // Absent or null: a summary from before op_items was written.
  json none = good;
  none["op_items"] = nullptr;
  EXPECT_NO_THROW(report::check_summary(none, "s"));
}
