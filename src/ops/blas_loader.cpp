// OpenBLAS, loaded with dlopen on first use rather than linked. Linked, its load-time constructor ran before main
// in every attnprof process and mapped a 128 MiB buffer per thread; when an address-space limit (ulimit -v)
// leaves too little room for its buffers, at start-up or in a call, it retries its failed mmaps forever, so even
// `attnprof --version` hung under ~340 MiB on two cores. Loaded here, only a run that multiplies with it pays for
// it (Variant::prepare calls ops::prepare_matmul, before anything is timed), and the limit is checked first
// against all it will map at the run's thread count, so such a run stops with a message naming the limit.
#include "ops/blas_loader.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "attnprof/allocator.h"
#include "attnprof/error.h"
#include "core/dynamic_library.h"

namespace attnprof::ops::detail {
namespace {

// Candidate files, in order: ATTNPROF_OPENBLAS_LIBRARY, the soname through the loader's search path (where a
// linked libopenblas would have been found: Debian's alternatives choose between the OpenMP and pthread
// builds there), the library CMake found.
std::vector<std::string> candidates() {
  std::vector<std::string> c;
  if (const char* env = std::getenv("ATTNPROF_OPENBLAS_LIBRARY"); env && *env) c.emplace_back(env);
  c.emplace_back("libopenblas.so.0");
#ifdef ATTNPROF_OPENBLAS_LIBRARY_FILE
  c.emplace_back(ATTNPROF_OPENBLAS_LIBRARY_FILE);
#endif
  return c;
}

// The soft address-space limit (RLIMIT_AS, what `ulimit -v` sets) and the address space in use (VmSize), in
// bytes; limit < 0 when there is none.
struct AddressSpace {
  int64_t limit = -1;
  int64_t used = 0;
};

AddressSpace address_space() {
  AddressSpace a;
  a.limit = address_space_limit_bytes();
  if (a.limit < 0) return a;
  a.used = std::max<int64_t>(mapped_bytes(), 0);
  return a;
}

int64_t mib(int64_t bytes) { return bytes >> 20; }
int64_t mib_up(int64_t bytes) { return (bytes + (int64_t(1) << 20) - 1) >> 20; }

// Throws unless the address-space limit leaves room for `need` more bytes of OpenBLAS's (its code and buffers),
// plus the margin, beside what is in use. `fewer` says how to make it need less.
void check_room(int64_t need, const std::string& what, const std::string& fewer) {
  const AddressSpace a = address_space();
  if (a.limit < 0 || a.used + need + kOpenblasMarginBytes <= a.limit) return;
  ATTNPROF_FAIL("the address-space limit (ulimit -v) of {} MiB is too small for OpenBLAS, which reserves up to ~{} MiB "
                "{} beside the {} MiB in use: raise it to at least {} MiB{}{}",
                mib(a.limit), mib_up(need), what, mib_up(a.used), mib_up(a.used + need + kOpenblasMarginBytes),
                fewer.empty() ? "" : ", or ", fewer);
}

std::mutex g_mutex;  // guards loading and g_buffers
std::atomic<const BlasApi*> g_api{nullptr};
int g_buffers = 0;   // the buffers OpenBLAS may have mapped by now (it never unmaps one)

}  // namespace

int openblas_load_threads() {
  const long conf = sysconf(_SC_NPROCESSORS_CONF);
  const int procs = conf > 0 ? int(conf) : 1;
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env && *env) {
    const long n = std::strtol(env, nullptr, 10);  // as OpenBLAS reads it: "4,2" is 4
    if (n > 0) return int(std::min<long>(n, procs));
  }
  return procs;
}

int openblas_buffers(int threads) { return std::max(openblas_load_threads(), 2 * std::max(threads, 1)); }

int64_t openblas_reserve_bytes(int threads) {
  return kOpenblasLibraryBytes + int64_t(openblas_buffers(threads)) * kOpenblasBufferBytes;
}

const BlasApi& blas_api() {
  if (const BlasApi* api = g_api.load(std::memory_order_acquire)) return *api;
  std::lock_guard lock(g_mutex);
  if (const BlasApi* api = g_api.load(std::memory_order_relaxed)) return *api;
  const int starts = openblas_load_threads(), threads = omp_get_max_threads(), buffers = openblas_buffers(threads);
  // Fewer threads help while they set the count; OMP_NUM_THREADS while OpenBLAS's start-up does.
  std::string fewer;
  if (2 * threads >= starts && threads > 1) fewer = "use fewer threads (--threads)";
  if (starts > 2 * threads)
    fewer = fmt::format("set OMP_NUM_THREADS={} (OpenBLAS starts with a buffer for each of {} threads)", threads,
                        starts);
  check_room(openblas_reserve_bytes(threads),
             fmt::format("at {} thread{} (~{} MiB of code and {} buffers of {} MiB: one for each thread it runs and "
                         "for each thread calling it)",
                         threads, threads == 1 ? "" : "s", mib(kOpenblasLibraryBytes), buffers,
                         mib(kOpenblasBufferBytes)),
             fewer);
  attnprof::detail::DynamicLibrary lib(candidates(), "libopenblas.so.0", "ATTNPROF_OPENBLAS_LIBRARY");
  if (!lib.handle) ATTNPROF_FAIL("OpenBLAS unavailable: {}", lib.error);
  auto api = std::make_unique<BlasApi>();
  api->file = lib.file;
  lib.symbol(api->cblas_sgemm, "cblas_sgemm");
  lib.symbol(api->openblas_set_num_threads, "openblas_set_num_threads");
  if (!lib.missing.empty()) ATTNPROF_FAIL("OpenBLAS unavailable: {} lacks {}", api->file, lib.missing);
  api->openblas_set_num_threads(threads);
  g_buffers = buffers;
  const BlasApi* loaded = api.release();  // like the library, kept for the life of the process
  g_api.store(loaded, std::memory_order_release);
  return *loaded;
}

bool blas_loaded() { return g_api.load(std::memory_order_acquire) != nullptr; }

void reserve_blas_threads(int n) {
  std::lock_guard lock(g_mutex);
  const int buffers = openblas_buffers(n);
  if (!g_api.load(std::memory_order_relaxed) || buffers <= g_buffers) return;
  check_room(int64_t(buffers - g_buffers) * kOpenblasBufferBytes,
             fmt::format("more at {} threads ({} more buffers of {} MiB: one for each thread it runs and for each "
                         "thread calling it)",
                         n, buffers - g_buffers, mib(kOpenblasBufferBytes)),
             fmt::format("use at most {} threads", std::max(1, g_buffers / 2)));
  g_buffers = buffers;
}

void set_blas_threads(int n) {
  if (const BlasApi* api = g_api.load(std::memory_order_acquire)) api->openblas_set_num_threads(n);
}

}  // namespace attnprof::ops::detail
