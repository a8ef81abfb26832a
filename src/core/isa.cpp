#include "attnprof/isa.h"

#include <cpuid.h>

#include <atomic>
#include <cstdlib>

#include "attnprof/error.h"

namespace attnprof {
namespace {

struct CpuFeatures {
  bool avx2 = false, avx512 = false, avx512bf16 = false;
  CpuFeatures() {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(1, 0, &a, &b, &c, &d)) return;
    const bool osxsave = (c >> 27) & 1, has_fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!osxsave) return;
    unsigned xcr0_lo, xcr0_hi;
    __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    const bool ymm_os = (xcr0_lo & 0x6) == 0x6, zmm_os = (xcr0_lo & 0xe6) == 0xe6;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    // The avx2 target is compiled with fma, f16c (the fp16 loads and stores) and bmi2: all are required.
    avx2 = ymm_os && ((b >> 5) & 1) && has_fma && f16c && ((b >> 8) & 1);
    const bool f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
    avx512 = zmm_os && avx2 && f && dq && bw && vl;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) avx512bf16 = avx512 && ((a >> 5) & 1);
  }
};

const CpuFeatures& features() {
  static const CpuFeatures f;
  return f;
}

// -1: no override; else the Isa value.
std::atomic<int> g_override{-1};

}  // namespace

std::string_view isa_name(Isa i) {
  switch (i) {
    case Isa::Scalar: return "scalar";
    case Isa::AVX2: return "avx2";
    case Isa::AVX512: return "avx512";
  }
  return "?";
}

Isa parse_isa(std::string_view s) {
  if (s == "scalar") return Isa::Scalar;
  if (s == "avx2") return Isa::AVX2;
  if (s == "avx512") return Isa::AVX512;
  ATTNPROF_FAIL("unknown ISA '{}': expected scalar, avx2 or avx512", s);
}

bool cpu_supports(Isa i) {
  switch (i) {
    case Isa::Scalar: return true;
    case Isa::AVX2: return features().avx2;
    case Isa::AVX512: return features().avx512;
  }
  return false;
}

bool cpu_has_avx512_bf16() { return features().avx512bf16; }

std::vector<Isa> available_isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::Scalar, Isa::AVX2, Isa::AVX512})
    if (cpu_supports(i)) v.push_back(i);
  return v;
}

Isa best_isa() {
  const int o = g_override.load(std::memory_order_relaxed);
  if (o >= 0) return Isa(o);
  static const Isa env_or_best = [] {
    if (const char* e = std::getenv("ATTNPROF_ISA"); e && *e) {
      Isa want = parse_isa(e);
      ATTNPROF_CHECK(cpu_supports(want), "ATTNPROF_ISA={} but this CPU does not support it", e);
      return want;
    }
    return cpu_supports(Isa::AVX512) ? Isa::AVX512 : cpu_supports(Isa::AVX2) ? Isa::AVX2 : Isa::Scalar;
  }();
  return env_or_best;
}

IsaOverride::IsaOverride(Isa i) {
  ATTNPROF_CHECK(cpu_supports(i), "this CPU does not support {}", isa_name(i));
  const int prev = g_override.exchange(int(i));
  if (prev >= 0) prev_ = Isa(prev);
}

IsaOverride::~IsaOverride() { g_override.store(prev_ ? int(*prev_) : -1); }

}  // namespace attnprof
