// attnprof/error.h: how the library reports errors to its caller.
//
//   ATTNPROF_CHECK(q.shape(3) == k.shape(3), "head dims differ: q has D={}, k has D={}", q.shape(3), k.shape(3));
//
// Checked errors at API boundaries throw attnprof::Error with a message that names the problem in the
// user's terms (the flag, the file, the shape), not the source line. Only the command line decides to exit. Hot loops use ATTNPROF_DASSERT,
// which compiles away in release builds.
#pragma once

#include <cassert>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace attnprof {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message) : std::runtime_error(std::move(message)) {}
};

// Thrown when an operation would need more memory than the configured budget.
class OutOfBudget : public Error {
 public:
  using Error::Error;
};

// For an unknown name: " (did you mean 'naive'?)" naming the one of `names` nearest `given` (its case ignored,
// at most a third of its letters changed, added or taken away, and at least one), or "" when none is that near
// or two are.
std::string did_you_mean(std::string_view given, const std::vector<std::string>& names);

}  // namespace attnprof

#define ATTNPROF_CHECK(cond, ...)                                                   \
  do {                                                                              \
    if (!(cond)) [[unlikely]]                                                       \
      throw ::attnprof::Error(::fmt::format(__VA_ARGS__));                          \
  } while (0)

#define ATTNPROF_FAIL(...) throw ::attnprof::Error(::fmt::format(__VA_ARGS__))

#ifdef NDEBUG
#define ATTNPROF_DASSERT(cond) ((void)0)
#else
#define ATTNPROF_DASSERT(cond) assert(cond)
#endif
