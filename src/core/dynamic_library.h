// Internal: a vendor library opened with dlopen on first use (OpenBLAS for the CPU GEMMs, cuBLAS and cuDNN
// for the CUDA backend), so that no binary needs it to start and commands that never touch it do not pay its
// start-up; its functions are looked up by name.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

namespace attnprof::detail {

struct DynamicLibrary {
  void* handle = nullptr;  // stays open for the life of the process
  std::string file;        // the candidate that opened
  std::string error;       // when none did: "<what> could not be loaded (set <env> to its path): <file>: <why>; ...",
                           // or "<env>='<file>' could not be loaded (<why>)..." when the variable named it
  std::string missing;     // the names symbol() could not find, comma-separated

  // Opens the first of `candidates` that dlopen accepts. A file the environment variable `env` names (the
  // callers put it first) is the user's explicit choice: when it cannot be opened that is the error, not a
  // silent fall back to the library found by name, which would time another library than the one asked for.
  DynamicLibrary(const std::vector<std::string>& candidates, std::string_view what, std::string_view env) {
    const char* chosen = std::getenv(std::string(env).c_str());
    std::string tried;
    for (const std::string& f : candidates) {
      handle = dlopen(f.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) {
        file = f;
        return;
      }
      const char* e = dlerror();
      if (chosen && *chosen && f == chosen && tried.empty()) {
        error = fmt::format("{}='{}' could not be loaded ({}): point it at a {} file or unset it to load the one "
                            "found by name",
                            env, f, e ? e : "not loadable", what);
        return;
      }
      tried += fmt::format("{}  {}: {}", tried.empty() ? "" : ";", f, e ? e : "not loadable");
    }
    error = fmt::format("{} could not be loaded (set {} to its path):{}", what, env, tried);
  }

  // `fn` = the function `name`, or nullptr with `name` added to `missing`.
  template <class F>
  void symbol(F& fn, const char* name) {
    fn = handle ? reinterpret_cast<F>(dlsym(handle, name)) : nullptr;
    if (!fn) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", name);
  }
};

}  // namespace attnprof::detail
