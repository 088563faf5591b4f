#include "simd/amx.h"

#include "simd/isa_cap.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace llmcpu {

bool cpu_has_amx_bf16() {
#if defined(__x86_64__)
  if (!isa_allows(IsaCap::kNone)) return false;  // LLMCPU_MAX_ISA takes AMX away
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (d & (1u << 24)) && (d & (1u << 22));  // AMX-TILE, AMX-BF16
#else
  return false;
#endif
}

bool request_amx_permission() {
#if defined(__x86_64__) && defined(__linux__) && defined(SYS_arch_prctl)
  if (!cpu_has_amx_bf16()) return false;
  constexpr long kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023, kXtileData = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXtileData) != 0) return false;
  unsigned long granted = 0;
  return syscall(SYS_arch_prctl, kArchGetXcompPerm, &granted) == 0 && (granted >> kXtileData) & 1u;
#else
  return false;
#endif
}

}  // namespace llmcpu
