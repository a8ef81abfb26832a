// Test helper: whether a shared object is in this process, for the tests that check a library is loaded on
// first use (OpenBLAS, cuBLAS) rather than at start-up.
#pragma once

#include <link.h>

#include <string_view>

namespace attnprof::testing {

// Whether a shared object whose file name contains `stem` is mapped into the process.
inline bool library_loaded(const char* stem) {
  struct Find {
    const char* stem;
    bool found = false;
  } f{stem};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* find = static_cast<Find*>(data);
        if (info->dlpi_name && std::string_view(info->dlpi_name).find(find->stem) != std::string_view::npos)
          find->found = true;
        return 0;
      },
      &f);
  return f.found;
}

}  // namespace attnprof::testing
