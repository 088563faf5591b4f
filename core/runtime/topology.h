// The machine as a small value type (packages -> NUMA nodes -> cores -> PUs, plus caches), read by
// hwloc from this machine, from a synthetic description ("package:2 numa:2 core:4 pu:2") or from an
// hwloc XML file. Plans are computed from any of them; only this machine's topology can bind
// anything. Deliberately not here: the plan (plan.h) and binding (pinning.h, numa_memory.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llmcpu {

// Indexes are hwloc logical indexes unless named os_index (the number the kernel uses: taskset,
// /proc).
struct PuInfo {
  int os_index = 0;
  int logical = 0;
  int core = 0;     // logical index of its core (the PU's own index where hwloc reports no cores)
  int numa = 0;     // logical index of the NUMA node whose cpuset holds it
  int package = 0;  // logical index of its package (0 where hwloc reports none)
  bool allowed =
      true;  // in the process's affinity mask (always true for synthetic and XML machines)
};

struct CoreInfo {
  int logical = 0;
  int package = 0;
  int numa = 0;
  std::vector<int> pus;  // indexes into Topology::pus, in logical order
};

struct NumaInfo {
  int logical = 0;
  int os_index = 0;
  uint64_t memory = 0;     // bytes of local memory (0 where hwloc does not know)
  int package = -1;        // package of its first core; -1 for a memory-only node
  std::vector<int> cores;  // logical core indexes, ascending
};

struct CacheLevel {
  std::string name;   // "L1d", "L2", "L3", ...
  uint64_t size = 0;  // bytes of one instance
  int count = 0;      // instances of this size on the machine
};

struct Topology {
  std::string source;        // "this machine", "synthetic \"...\"" or "XML file PATH"
  bool this_system = false;  // true only for the real machine: plans for it can be bound
  int packages = 0;
  std::vector<NumaInfo> numa_nodes;  // by logical index
  std::vector<CoreInfo> cores;       // by logical index
  std::vector<PuInfo> pus;           // by logical index
  std::vector<CacheLevel> caches;    // outermost level first; a level with several sizes repeats

  // Index into pus of the PU with this OS index, or -1.
  int find_pu(int os_index) const;
  // OS indexes of the allowed PUs, ascending.
  std::vector<int> allowed_os_indexes() const;
};

// This machine, as the process may use it: hwloc leaves out what cgroups forbid
// (HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED is off) and PUs outside the affinity mask the process had
// when this was first called are marked not allowed.
Topology this_machine_topology();
// The most PUs a synthetic machine may have (the largest real ones have a few thousand).
inline constexpr int64_t kMaxSyntheticPus = 1 << 16;
// From hwloc's synthetic syntax; throws UsageError naming --topology when hwloc rejects it or it
// describes more than kMaxSyntheticPus PUs.
Topology synthetic_topology(const std::string& description);
// From an hwloc XML file (lstopo's .xml output); throws FileError naming --topology-xml when the
// file is missing, unreadable or not an hwloc topology. Its allowed_cpuset is respected.
Topology xml_topology(const std::string& path);

// "0-3,8" for {0,1,2,3,8}: ascending runs joined; a sequence out of order is listed as it comes.
std::string format_index_list(const std::vector<int>& indexes);
// "1 GiB", "5.9 GiB", "32 KiB", "512 B".
std::string format_bytes(uint64_t bytes);

}  // namespace llmcpu
