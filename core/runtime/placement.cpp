#include "core/runtime/placement.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/runtime/topology.h"
#include "simd/error.h"

namespace llmcpu {

int omp_num_threads_from_environment() {
  const char* s = std::getenv("OMP_NUM_THREADS");
  if (!s || !*s) return 0;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || (*end && *end != ',') || v <= 0 || v > 1 << 20) return 0;
  return int(v);
}

std::string placement_summary(const Plan& plan, const PinReport& pin, NumaMode numa,
                              const std::string& threads_origin) {
  std::string s = "placement: " + std::to_string(plan.num_threads()) +
                  (plan.num_threads() == 1 ? " thread" : " threads");
  if (!threads_origin.empty()) s += " (" + threads_origin + ")";
  s += std::string(", ") + bind_policy_name(plan.policy) + (plan.smt ? " smt" : "");
  if (plan.policy != BindPolicy::kNone) {
    std::vector<int> pus, numas;
    for (const ThreadPlace& t : plan.threads) {
      pus.push_back(t.pu);
      numas.push_back(t.numa);
    }
    std::sort(numas.begin(), numas.end());
    numas.erase(std::unique(numas.begin(), numas.end()), numas.end());
    s += ", PUs " + format_index_list(pus) + " (NUMA " + format_index_list(numas) + ")";
  }
  if (plan.oversubscribed()) {
    s += ", oversubscribed: " + std::to_string(plan.slots) + (plan.smt ? " PUs" : " cores") +
         " usable";
  }
  return s + ", " + pin.text() + "; memory " + numa_mode_name(numa);
}

Placement apply_placement(const PlacementOptions& o) {
  PlanRequest req;
  req.policy = parse_bind_policy(o.bind);
  const NumaMode numa = parse_numa_mode(o.numa);
  if (o.threads < 0) {
    throw UsageError("--threads " + std::to_string(o.threads) +
                     ": must not be negative (0: one per core)");
  }
  req.threads = o.threads;
  std::string origin;
  if (req.threads == 0) {
    req.threads = omp_num_threads_from_environment();
    if (req.threads > 0) origin = req.threads_origin = "OMP_NUM_THREADS";
  }
  req.smt = o.smt;
  req.cpus = o.cpus;

  const Topology topo = this_machine_topology();
  Placement p;
  p.plan = make_plan(topo, req);
  p.pin = apply_plan(p.plan, topo);
  p.numa = numa;
  set_numa_mode(numa);
  p.summary = placement_summary(p.plan, p.pin, numa, origin);
  return p;
}

}  // namespace llmcpu
