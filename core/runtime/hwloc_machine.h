// Internal to core/runtime: the one hwloc topology of this machine the process loads (used to read
// the machine, bind threads and bind memory), and the affinity mask the process started with.
#pragma once

#include <hwloc.h>

#include <vector>

namespace llmcpu::detail {

// Loaded on first use and kept for the life of the process; throws Error if hwloc cannot load it.
hwloc_topology_t this_machine_hwloc();

// OS indexes of the PUs in the process's affinity mask at the first call (made before anything is
// bound, so a pinned main thread does not shrink later plans).
const std::vector<int>& initial_affinity();

}  // namespace llmcpu::detail
