// See isa_cap.h.
#include "simd/isa_cap.h"

#include <cstdlib>
#include <string>
#include <string_view>

#include "hwy/targets.h"
#include "simd/error.h"

namespace llmcpu {
namespace {

struct Cap {
  IsaCap level = IsaCap::kNone;
  std::string setting;
};

const Cap& cap() {
  static const Cap c = [] {
    Cap r;
    const char* v = std::getenv("LLMCPU_MAX_ISA");
    if (!v || !*v) return r;
    const std::string_view value(v);
    if (value == "avx2") {
      r.level = IsaCap::kAvx2;
    } else if (value == "avx512") {
      r.level = IsaCap::kAvx512;
    } else if (value == "avx512bf16") {
      r.level = IsaCap::kAvx512Bf16;
    } else {
      throw UsageError("LLMCPU_MAX_ISA=" + std::string(value) +
                       ": unknown instruction-set cap; valid: avx2, avx512, avx512bf16");
    }
#if !(defined(__x86_64__) || defined(_M_X64))
    r.level = IsaCap::kNone;  // x86 instruction sets: nothing to take away on this CPU
    return r;
#endif
    r.setting = "LLMCPU_MAX_ISA=" + std::string(value);
    // Highway's targets above AVX2 have the bits below its bit (lower is better).
    if (r.level < IsaCap::kAvx512) hwy::DisableTargets(HWY_AVX2 - 1);
    return r;
  }();
  return c;
}

}  // namespace

IsaCap isa_cap() { return cap().level; }

const char* isa_cap_setting() { return cap().setting.c_str(); }

}  // namespace llmcpu
