// The one placement step a program runs before it builds a model: the plan for this machine from
// the user's options, applied (OpenMP thread count, thread binding, NUMA memory mode), summed up in
// one line for the log. `llmcpu train`, `llmcpu verify` and the benchmarks call it; `llmcpu topo`
// only prints plans (topology.h, plan.h).
#pragma once

#include <string>

#include "core/runtime/numa_memory.h"
#include "core/runtime/pinning.h"
#include "core/runtime/plan.h"

namespace llmcpu {

struct PlacementOptions {
  int threads = 0;               // 0: one per usable core, or OMP_NUM_THREADS when that is set
  std::string bind = "compact";  // compact | spread | none
  bool smt = false;              // one thread per PU rather than per core
  std::string cpus;              // PU OS indexes to restrict to, e.g. "0-3,8"
  std::string numa = "local";    // local | interleave | off
};

struct Placement {
  Plan plan;
  PinReport pin;
  NumaMode numa = NumaMode::kLocal;
  std::string summary;  // one line, no newline
};

// OMP_NUM_THREADS's first entry when it is a positive integer, else 0 (the OpenMP runtime itself
// reports a malformed value).
int omp_num_threads_from_environment();

// Checks the options (UsageErrors name the flag), makes the plan from this machine and applies it.
Placement apply_placement(const PlacementOptions& options);

// "placement: 2 threads, compact, PUs 0-1 (NUMA 0), pinned; memory local"
std::string placement_summary(const Plan& plan, const PinReport& pin, NumaMode numa,
                              const std::string& threads_origin);

}  // namespace llmcpu
