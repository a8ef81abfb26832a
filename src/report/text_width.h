// Internal: the width of text that may hold UTF-8 (the flash kernel's step names: "Q·Kᵀ"), one column per code
// point, for the reporters that line text up in columns or cut it to fit (the tables, diff, the flame labels).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace attnprof::report::detail {

inline bool starts_code_point(char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }

// Code points in `s`: its columns.
inline size_t display_width(std::string_view s) { return size_t(std::count_if(s.begin(), s.end(), starts_code_point)); }

// `s` followed by spaces to `w` columns.
inline std::string pad_right(std::string_view s, size_t w) {
  const size_t n = display_width(s);
  return std::string(s) + std::string(n < w ? w - n : 0, ' ');
}

// Spaces to `w` columns followed by `s`.
inline std::string pad_left(std::string_view s, size_t w) {
  const size_t n = display_width(s);
  return std::string(n < w ? w - n : 0, ' ') + std::string(s);
}

// `s` when it fits in `w` columns, else its first w − 1 code points and "…"; never cut inside a UTF-8 sequence.
inline std::string fit_width(std::string_view s, size_t w) {
  if (display_width(s) <= w) return std::string(s);
  size_t at = 0;  // just past the code points kept
  for (size_t kept = 0; kept + 1 < w && at < s.size(); ++kept) {
    ++at;
    while (at < s.size() && !starts_code_point(s[at])) ++at;
  }
  return std::string(s.substr(0, at)) + "…";
}

// `s` when it fits in `w` columns, else its first and last code points around "…" (the start one longer):
// names that share a long prefix (GPU kernels') differ at their ends, which a cut at the end would lose.
inline std::string fit_width_middle(std::string_view s, size_t w) {
  const size_t n = display_width(s);
  if (n <= w || w < 3) return w < 3 ? fit_width(s, w) : std::string(s);
  const size_t tail = (w - 1) / 2, head = w - 1 - tail;  // code points kept at each end
  size_t a = 0, b = s.size();
  for (size_t kept = 0; kept < head; ++kept) {
    ++a;
    while (a < s.size() && !starts_code_point(s[a])) ++a;
  }
  for (size_t kept = 0; kept < tail; ++kept) {
    --b;
    while (b > 0 && !starts_code_point(s[b])) --b;
  }
  return std::string(s.substr(0, a)) + "…" + std::string(s.substr(b));
}

}  // namespace attnprof::report::detail
