// attnprof/isa.h: SIMD targets and run-time dispatch.
//
//   for (Isa t : available_isas()) { IsaOverride use(t); run_kernel(); }   // test every target
//   Isa best = best_isa();                                                 // what dispatch picks
//
// Kernels are written once per target (files named *_avx512.cpp, *_avx2.cpp compile their bodies for that
// target through the pragmas of src/core/isa_target.h) and chosen at run time from CPUID, so a binary built
// here runs on CPUs without AVX-512.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace attnprof {

enum class Isa { Scalar, AVX2, AVX512 };

std::string_view isa_name(Isa i);
Isa parse_isa(std::string_view s);        // scalar|avx2|avx512, else Error
bool cpu_supports(Isa i);
bool cpu_has_avx512_bf16();
std::vector<Isa> available_isas();        // Scalar first, best last
Isa best_isa();                           // honours an active IsaOverride / ATTNPROF_ISA env var

// Forces dispatch to `i` on every thread while alive (tests iterate targets with it). Throws if the CPU
// lacks `i`.
class IsaOverride {
 public:
  explicit IsaOverride(Isa i);
  ~IsaOverride();
  IsaOverride(const IsaOverride&) = delete;
  IsaOverride& operator=(const IsaOverride&) = delete;

 private:
  std::optional<Isa> prev_;
};

}  // namespace attnprof
