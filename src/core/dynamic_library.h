// Internal: a vendor library opened with dlopen on first use (OpenBLAS for the CPU GEMMs, cuBLAS and cuDNN
// for the CUDA backend), so that no binary needs it to start and commands that never touch it do not pay its
// start-up; its functions are looked up by name.
#pragma once

#include <dlfcn.h>

#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

namespace attnprof::detail {

struct DynamicLibrary {
  void* handle = nullptr;  // stays open for the life of the process
  std::string file;        // the candidate that opened
  std::string error;       // when none did: "<what> could not be loaded (set <env> to its path): <file>: <why>; ..."
  std::string missing;     // the names symbol() could not find, comma-separated

  // Opens the first of `candidates` that dlopen accepts.
  DynamicLibrary(const std::vector<std::string>& candidates, std::string_view what, std::string_view env) {
    std::string tried;
    for (const std::string& f : candidates) {
      handle = dlopen(f.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) {
        file = f;
        return;
      }
      const char* e = dlerror();
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
