// Test helpers for what must run in a process of its own: a limit set there (RLIMIT_AS) stays there.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
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

// Runs `body` in a forked child and returns the string it returned (an exception's message, prefixed
// "exception: ", if it threw). A child that dies of a signal, or hangs past 20 s (SIGALRM), fails the test.
inline std::string said_in_child(const std::function<std::string()>& body) {
  int fds[2];
  if (pipe(fds) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return "";
  }
  const pid_t pid = fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return "";
  }
  if (pid == 0) {
    close(fds[0]);
    alarm(20);  // a hang ends the child, not the suite
    std::string said;
    try {
      said = body();
    } catch (const std::exception& e) {
      said = std::string("exception: ") + e.what();
    }
    (void)!write(fds[1], said.data(), said.size());
    _exit(0);
  }
  close(fds[1]);
  std::string said;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) said.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << "the child died of signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return said;
}

}  // namespace attnprof::testing
