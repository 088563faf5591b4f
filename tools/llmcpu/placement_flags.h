// The thread and memory placement flags every compute command shares (--threads, --bind, --smt,
// --cpus, --numa), and the step that turns them into an applied plan. The plan itself is computed
// in core/runtime; this only binds flags to PlacementOptions.
#pragma once

#include "core/runtime/placement.h"
#include "tools/llmcpu/args.h"

namespace llmcpu {

// Registers --threads, --bind, --smt, --cpus and (with with_numa) --numa on p, bound to *o.
void add_placement_flags(ArgParser& p, PlacementOptions* o, bool with_numa = true);

// Makes the plan for this machine, applies it (OpenMP thread count, binding, NUMA mode) and returns
// it; print placement.summary once at start. Bad flag values are UsageErrors naming the flag.
Placement apply_placement_flags(const PlacementOptions& o);

}  // namespace llmcpu
