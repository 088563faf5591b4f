#include "core/runtime/numa_memory.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/runtime/hwloc_machine.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

std::atomic<NumaMode> g_mode{NumaMode::kLocal};
std::atomic<bool> g_warned{false};

// Binds [p, p + bytes) interleaved over every NUMA node of this machine; warns once if refused.
void interleave(void* p, size_t bytes) {
  if (!p || bytes == 0) return;
  int err = 0;
  try {
    hwloc_topology_t hw = detail::this_machine_hwloc();
    if (hwloc_set_area_membind(hw, p, bytes, hwloc_topology_get_topology_nodeset(hw),
                               HWLOC_MEMBIND_INTERLEAVE, HWLOC_MEMBIND_BYNODESET) != 0) {
      err = errno ? errno : EINVAL;
    }
  } catch (const Error&) {
    err = ENOSYS;
  }
  if (err && !g_warned.exchange(true)) {
    std::fprintf(stderr,
                 "llmcpu: warning: --numa interleave: binding memory was refused (%s); pages are "
                 "placed by first touch instead\n",
                 std::strerror(err));
  }
}

}  // namespace

NumaMode parse_numa_mode(const std::string& word, const std::string& flag) {
  if (word == "local") return NumaMode::kLocal;
  if (word == "interleave") return NumaMode::kInterleave;
  if (word == "off") return NumaMode::kOff;
  throw UsageError(flag + " '" + word +
                   "' is not a memory policy; expected local, interleave or off");
}

const char* numa_mode_name(NumaMode mode) {
  switch (mode) {
    case NumaMode::kLocal:
      return "local";
    case NumaMode::kInterleave:
      return "interleave";
    case NumaMode::kOff:
      return "off";
  }
  return "?";
}

void set_numa_mode(NumaMode mode) { g_mode.store(mode); }
NumaMode numa_mode() { return g_mode.load(); }

void first_touch_zero(float* p, size_t n) {
  const NumaMode mode = numa_mode();
  if (mode == NumaMode::kOff) {
    std::fill_n(p, n, 0.0f);
    return;
  }
  if (mode == NumaMode::kInterleave) interleave(p, n * sizeof(float));
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) p[i] = 0.0f;
}

void place_arena(void* p, size_t bytes) {
  if (numa_mode() == NumaMode::kInterleave) interleave(p, bytes);
}

}  // namespace llmcpu
