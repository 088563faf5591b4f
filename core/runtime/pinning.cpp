#include "core/runtime/pinning.h"

#include <omp.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "core/runtime/hwloc_machine.h"

namespace llmcpu {

namespace {

std::mutex g_mutex;
bool g_bound = false;          // an earlier apply_plan bound threads (or tried to)
std::vector<int> g_bound_pus;  // the PUs it bound them to, by thread

}  // namespace

std::string PinReport::text() const {
  switch (outcome) {
    case PinOutcome::kPinned:
      return "pinned";
    case PinOutcome::kFailed:
      return "pinning failed: " + detail;
    case PinOutcome::kSkipped:
      return "not pinned: " + detail;
  }
  return detail;
}

std::string openmp_placement_environment() {
  std::string out;
  for (const char* name : {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY"}) {
    const char* value = std::getenv(name);
    if (!value) continue;
    if (!out.empty()) out += ", ";
    out += std::string(name) + "=" + value;
  }
  return out;
}

PinReport apply_plan(const Plan& plan, const Topology& topology) {
  const int n = plan.num_threads();
  omp_set_dynamic(0);
  omp_set_max_active_levels(1);
  omp_set_num_threads(n);

  PinReport r;
  if (plan.policy == BindPolicy::kNone) {
    r.detail = "--bind none";
    return r;
  }
  if (!topology.this_system) {
    r.detail = "the plan is for " + topology.source + ", not this machine";
    return r;
  }
  if (const std::string env = openmp_placement_environment(); !env.empty()) {
    r.detail = env + " is set: the OpenMP runtime's placement wins over --bind " +
               bind_policy_name(plan.policy) + " (unset it to use the plan)";
    return r;
  }

  std::vector<int> pus(n);
  for (int t = 0; t < n; ++t) pus[t] = plan.threads[t].pu;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_bound) {
    if (pus == g_bound_pus) {
      r.outcome = PinOutcome::kPinned;  // the same plan again: already in force
    } else {
      r.detail =
          "threads were already bound by an earlier plan in this process (never bound twice)";
    }
    return r;
  }
  g_bound = true;
  g_bound_pus = pus;

  hwloc_topology_t hw = detail::this_machine_hwloc();
  std::vector<int> error(n, 0);
  int team = 0;
#pragma omp parallel num_threads(n)
  {
    const int t = omp_get_thread_num();
#pragma omp single
    team = omp_get_num_threads();
    hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(hw, unsigned(pus[t]));
    if (!pu) {
      error[t] = ENODEV;
    } else if (hwloc_set_cpubind(hw, pu->cpuset, HWLOC_CPUBIND_THREAD) != 0) {
      error[t] = errno ? errno : EINVAL;
    }
  }
  if (team != n) {
    r.outcome = PinOutcome::kFailed;
    r.detail = "OpenMP started " + std::to_string(team) + " threads, the plan has " +
               std::to_string(n) + " (is OMP_THREAD_LIMIT set?)";
    return r;
  }
  int failed = 0, first = -1;
  for (int t = 0; t < n; ++t) {
    if (error[t] == 0) continue;
    ++failed;
    if (first < 0) first = t;
  }
  if (failed == 0) {
    r.outcome = PinOutcome::kPinned;
    return r;
  }
  r.outcome = PinOutcome::kFailed;
  r.detail = std::to_string(failed) + " of " + std::to_string(n) + " threads, first thread " +
             std::to_string(first) + " on PU " + std::to_string(pus[first]) + ": " +
             std::strerror(error[first]) + "; the threads run where the system puts them";
  return r;
}

bool bind_helper_thread() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_bound || g_bound_pus.empty()) return false;
  hwloc_topology_t hw = detail::this_machine_hwloc();
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (int os_index : g_bound_pus) {
    if (hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(hw, unsigned(os_index))) {
      hwloc_bitmap_or(set, set, pu->cpuset);
    }
  }
  const bool bound =
      !hwloc_bitmap_iszero(set) && hwloc_set_cpubind(hw, set, HWLOC_CPUBIND_THREAD) == 0;
  hwloc_bitmap_free(set);
  return bound;
}

}  // namespace llmcpu
