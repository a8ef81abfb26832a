// Internal: how the reporters word an op's tasks (analysis::OpItems: the flash kernel's tiles), so profile's
// table, compare's line and diff's block say the same thing the same way.
#pragma once

#include <cstdint>
#include <string>

#include "attnprof/analysis.h"

namespace attnprof::report::detail {

// "16.1us + its FLOPs at 263.4 GFLOP/s"; a line that meets zero FLOPs below zero time shows no fixed cost.
std::string item_fit_text(const analysis::OpItems& op);
// "Q block" or "Q blocks" for n of them.
std::string item_nouns(const analysis::OpItems& op, int64_t n);
// The inner count's name ("K/V blocks"), or "inner blocks" where the op gave none; as a column's header,
// "Inner" there.
std::string inner_name(const analysis::OpItems& op);
std::string inner_header(const analysis::OpItems& op);
// "Q block 3 (batch 0, head 1) at 4.203ms, 18.3x the median of the Q blocks with 16 K/V blocks, 94 % of it in
// store O".
std::string item_slowest_text(const analysis::OpItems& op);

}  // namespace attnprof::report::detail
