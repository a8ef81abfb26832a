// The suggestion an unknown name's error carries (attnprof/error.h).
#include <algorithm>
#include <cctype>

#include "attnprof/error.h"

namespace attnprof {
namespace {

// Edits (a letter changed, added or taken away) from a to b, letters compared without their case.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      const size_t next = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = row[j];
      row[j] = next;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string did_you_mean(std::string_view given, const std::vector<std::string>& names) {
  if (given.empty() || given.size() > 64) return "";
  const size_t allowed = std::max<size_t>(1, given.size() / 3);
  const std::string* best = nullptr;
  size_t best_d = allowed + 1;
  bool tie = false;
  for (const std::string& n : names) {
    const size_t d = edit_distance(given, n);
    if (d < best_d) {
      best = &n;
      best_d = d;
      tie = false;
    } else if (d == best_d && best && *best != n) {
      tie = true;
    }
  }
  return best && !tie && *best != given ? fmt::format(" (did you mean '{}'?)", *best) : "";
}

}  // namespace attnprof
