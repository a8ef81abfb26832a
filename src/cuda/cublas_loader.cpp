// cuBLAS, loaded with dlopen on first use rather than linked. libcublas pulls in libcublasLt (over 500 MB),
// whose static initialisers cost every process that links it about half a second of CPU before main; linked,
// that was paid by every attnprof command, CPU-only runs and --version included. Loaded here, only the first
// device GEMM pays it.
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/cublas_loader.h"

#include "cuda/backend.h"
#include "core/dynamic_library.h"

namespace attnprof::cuda::detail {
namespace {

struct Loaded {
  CublasApi api;
  std::string error;
};

// Candidate files, in order: ATTNPROF_CUBLAS_LIBRARY, the soname through the loader's search path
// (LD_LIBRARY_PATH, then the binary's run path: where a linked libcublas would have been found), the library
// CMake found.
std::vector<std::string> candidates() {
  std::vector<std::string> c;
  if (const char* env = std::getenv("ATTNPROF_CUBLAS_LIBRARY"); env && *env) c.emplace_back(env);
  c.emplace_back(fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR));
#ifdef ATTNPROF_CUBLAS_LIBRARY_FILE
  c.emplace_back(ATTNPROF_CUBLAS_LIBRARY_FILE);
#endif
  return c;
}

Loaded load() {
  Loaded l;
  attnprof::detail::DynamicLibrary lib(candidates(), fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR),
                                       "ATTNPROF_CUBLAS_LIBRARY");
  if (!lib.handle) {
    l.error = lib.error;
    return l;
  }
  l.api.file = lib.file;
  auto sym = [&](auto& fn, const char* name) { lib.symbol(fn, name); };
  // cublas_v2.h maps cublasCreate and cublasSetStream onto their _v2 symbols.
  sym(l.api.cublasCreate_v2, "cublasCreate_v2");
  sym(l.api.cublasSetStream_v2, "cublasSetStream_v2");
  sym(l.api.cublasGemmStridedBatchedEx, "cublasGemmStridedBatchedEx");
  sym(l.api.cublasGetStatusString, "cublasGetStatusString");
  if (!lib.missing.empty()) l.error = fmt::format("{} lacks {}", l.api.file, lib.missing);
  return l;  // the library stays loaded for the life of the process
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const CublasApi& cublas_api() {
  const Loaded& l = loaded();
  if (!l.error.empty()) ATTNPROF_FAIL("cuBLAS unavailable: {}", l.error);
  return l.api;
}

std::string cublas_library_file() { return cublas_api().file; }

const char* cublas_status_text(cublasStatus_t s) {
  const Loaded& l = loaded();
  return l.api.cublasGetStatusString ? l.api.cublasGetStatusString(s) : "cuBLAS status";
}

}  // namespace attnprof::cuda::detail
