// Applies a plan to this process's OpenMP threads. The thread count is set once from the plan, with
// dynamic adjustment and nested parallelism off, so no kernel forks more threads than the plan has.
// Then, in the first parallel region, each thread binds itself with hwloc to its PU, and the
// outcome is reported: pinned, failed (with the reason: EPERM in a container, ...) or skipped (with
// why).
//
// Who wins: when OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY or KMP_AFFINITY is set, the OpenMP
// runtime has already placed (or deliberately not placed) the threads by the time this runs, so the
// environment wins and nothing is bound here. Threads are never bound twice in one process.
#pragma once

#include <string>

#include "core/runtime/plan.h"
#include "core/runtime/topology.h"

namespace llmcpu {

enum class PinOutcome { kPinned, kFailed, kSkipped };

struct PinReport {
  PinOutcome outcome = PinOutcome::kSkipped;
  std::string detail;  // why it failed or was skipped; empty when pinned

  // "pinned", "pinning failed: DETAIL" or "not pinned: DETAIL".
  std::string text() const;
};

// The OpenMP placement variables that are set, as "NAME=value" joined by ", "; "" when none is.
std::string openmp_placement_environment();

// Sets OpenMP's thread count to the plan's, then binds each thread to its PU when the plan has a
// policy, was made from this machine, the OpenMP environment does not place threads itself and no
// earlier plan bound them. Never throws for a refused binding: that is reported.
PinReport apply_plan(const Plan& plan, const Topology& topology);

// Binds the calling thread, a helper beside the compute threads (data parallelism's communication
// thread), to all the PUs apply_plan bound this process's threads to: it runs on this process's
// cores, never on another rank's, wherever a compute thread leaves room. Returns false, and does
// nothing, when no plan bound threads (or the system refuses).
bool bind_helper_thread();

}  // namespace llmcpu
