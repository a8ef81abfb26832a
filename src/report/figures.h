// Internal: numbers read back from attnprof's JSON files (`attnprof diff`, `attnprof report`). A figure
// attnprof writes (a count, ns, bytes, FLOPs) is finite and far below 2^53, where doubles stop holding
// integers exactly; a number beyond that is a corrupt or foreign file, and converting it to an integer for
// printing would be undefined. Readers refuse such a file with a message instead of printing nonsense.
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace attnprof::report::detail {

inline constexpr double kMaxFigure = 9007199254740992.0;  // 2^53

inline bool figure_in_range(double v) { return std::fabs(v) <= kMaxFigure; }  // false for NaN and inf

// "'key' = value" for the first number anywhere in `j` outside ±2^53, "" when there is none. Iterative, so a
// deeply nested hostile file cannot exhaust the stack.
inline std::string first_number_out_of_range(const nlohmann::json& j) {
  std::vector<std::pair<const nlohmann::json*, std::string>> todo{{&j, ""}};
  while (!todo.empty()) {
    auto [node, key] = std::move(todo.back());
    todo.pop_back();
    if (node->is_object()) {
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
