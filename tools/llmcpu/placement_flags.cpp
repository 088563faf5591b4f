#include "tools/llmcpu/placement_flags.h"

#include "core/runtime/numa_memory.h"
#include "core/runtime/plan.h"

namespace llmcpu {

void add_placement_flags(ArgParser& p, PlacementOptions* o, bool with_numa) {
  p.option("threads", 0, &o->threads, "N",
           "OpenMP threads (default: one per core of the allowed cpuset, or OMP_NUM_THREADS); at "
           "most one per PU this process may use",
           {0, kMaxThreadsFlag});
  p.option("bind", 0, &o->bind, "POLICY",
           "thread placement: compact (default; fill a NUMA node first), spread (round-robin over "
           "NUMA nodes) or none");
  p.flag("smt", 0, &o->smt, "one thread per PU (hyper-thread) instead of one per physical core");
  p.option("cpus", 0, &o->cpus, "LIST", "use only these PUs (OS indexes), e.g. 0-3,8");
  if (with_numa) {
    p.option("numa", 0, &o->numa, "MODE",
             "memory placement: local (default; first touch by the computing threads), "
             "interleave or off");
  }
}

void check_placement_flags(const PlacementOptions& o, bool with_numa) {
  parse_bind_policy(o.bind);
  if (with_numa) parse_numa_mode(o.numa);
  if (!o.cpus.empty()) parse_cpu_list(o.cpus);
}

Placement apply_placement_flags(const PlacementOptions& o) { return apply_placement(o); }

}  // namespace llmcpu
