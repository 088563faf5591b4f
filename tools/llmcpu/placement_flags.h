// The thread and memory placement flags every compute command shares (--threads, --bind, --smt,
// --cpus, --numa), their checks, and the step that turns them into an applied plan. The plan itself
// is computed in core/runtime; this only binds flags to PlacementOptions.
#pragma once

#include "core/runtime/placement.h"
#include "tools/llmcpu/args.h"

namespace llmcpu {

// The most threads --threads takes before the machine is known (hwloc's limit on PUs); the plan
// then refuses more than the PUs this process may use.
inline constexpr int kMaxThreadsFlag = 1 << 20;

// Registers --threads, --bind, --smt, --cpus and (with with_numa) --numa on p, bound to *o.
void add_placement_flags(ArgParser& p, PlacementOptions* o, bool with_numa = true);

// The checks that need no machine: the policy and mode words and the --cpus list's syntax.
// UsageErrors name the flag.
void check_placement_flags(const PlacementOptions& o, bool with_numa = true);

// Makes the plan for this machine, applies it (OpenMP thread count, binding, NUMA mode) and returns
// it; print placement.summary once at start. Bad flag values are UsageErrors naming the flag.
Placement apply_placement_flags(const PlacementOptions& o);

}  // namespace llmcpu
