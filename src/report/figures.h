// Internal: numbers read back from attnprof's JSON files (`attnprof diff`, `attnprof report`). A figure
// attnprof writes (a count, ns, bytes, FLOPs) is finite and far below 2^53, where doubles stop holding
// integers exactly; a number beyond that is a corrupt or foreign file, and converting it to an integer for
// printing would be undefined. Readers refuse such a file with a message instead of printing nonsense.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace attnprof::report::detail {

inline constexpr double kMaxFigure = 9007199254740992.0;  // 2^53

inline bool figure_in_range(double v) { return std::fabs(v) <= kMaxFigure; }  // false for NaN and inf

// Figures of any finite size that attnprof writes and readers print only in floating point: the errors against
// the fp64 reference (the user's data sets their scale: values of 1e24 give errors of 1e17 that are well within
// tolerance) and attention's FLOPs of a problem (a shape too large to run still has them).
inline bool real_valued_key(std::string_view key) {
  return key == "max_abs_err" || key == "max_rel_err" || key == "nmse" || key == "tolerance_used" ||
         key == "attention_flops";
}

// A row of compare.json or sweep.json that did not run ("status" other than "ok"): it keeps its cost model's
// figures for a shape that may be far past 2^53 bytes, and readers print none of them.
inline bool row_that_did_not_run(const nlohmann::json& j) {
  const auto it = j.find("status");
  return it != j.end() && it->is_string() && it->get_ref<const std::string&>() != "ok";
}

// "'key' = value" for the first number anywhere in `j` outside ±2^53, "" when there is none, leaving out the
// real-valued keys and rows that did not run (above). Iterative, so a deeply nested hostile file cannot exhaust
// the stack.
inline std::string first_number_out_of_range(const nlohmann::json& j) {
  std::vector<std::pair<const nlohmann::json*, std::string>> todo{{&j, ""}};
  while (!todo.empty()) {
    auto [node, key] = std::move(todo.back());
    todo.pop_back();
    if (real_valued_key(key)) continue;
    if (node->is_object()) {
      if (node != &j && row_that_did_not_run(*node)) continue;
      for (auto it = node->begin(); it != node->end(); ++it) todo.emplace_back(&*it, it.key());
    } else if (node->is_array()) {
      for (const auto& child : *node) todo.emplace_back(&child, key);
    } else if (node->is_number() && !figure_in_range(node->get<double>())) {
      return (key.empty() ? std::string("a number") : "'" + key + "'") + " = " + node->dump();
    }
  }
  return {};
}

}  // namespace attnprof::report::detail
