// Test helpers for what must run in a process of its own: a limit set there (RLIMIT_AS) stays there.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <string>

namespace attnprof::testing {

// The process's address space in use (VmSize), in bytes.
inline int64_t vm_size() {
  int64_t bytes = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::strncmp(line, "VmSize:", 7) == 0) bytes = std::atoll(line + 7) * 1024;
    std::fclose(f);
  }
  return bytes;
}

// The statement of an EXPECT_EXIT in the "threadsafe" death-test style, whose child is a fresh run of the test
// binary up to that statement: a forked copy of this process would inherit the OpenMP and OpenBLAS thread pools
// of the tests before it without their threads, and wait on them forever. Writes what `body` returns (or "exception:
// " and what it threw) to stderr, where EXPECT_EXIT matches its pattern, and exits 0. A hang ends the child with
// SIGALRM after 20 s, which fails the test, not the suite.
[[noreturn]] inline void say_and_exit(const std::function<std::string()>& body) {
  alarm(20);
  std::string said;
  try {
    said = body();
  } catch (const std::exception& e) {
    said = std::string("exception: ") + e.what();
  }
  std::fprintf(stderr, "%s\n", said.c_str());
  std::fflush(stderr);
  std::_Exit(0);
}

}  // namespace attnprof::testing
