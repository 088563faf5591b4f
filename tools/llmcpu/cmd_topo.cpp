// `llmcpu topo`: prints the machine (packages, NUMA nodes with their memory, cores, PUs, caches)
// and the thread plan that `train` and `verify` would apply, or only the plan as JSON. It binds
// nothing, and with --topology / --topology-xml it describes a machine that is not this one.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/runtime/placement.h"
#include "core/runtime/plan.h"
#include "core/runtime/topology.h"
#include "simd/error.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"
#include "tools/llmcpu/placement_flags.h"

namespace llmcpu {

namespace {

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

void print_machine(const Topology& topo) {
  const std::vector<int> allowed = topo.allowed_os_indexes();
  std::printf("topology: %s\n", topo.source.c_str());
  std::printf("machine: %s, %s, %s, %s (allowed PUs: %s)\n",
              plural(topo.packages, "package", "packages").c_str(),
              plural(topo.numa_nodes.size(), "NUMA node", "NUMA nodes").c_str(),
              plural(topo.cores.size(), "core", "cores").c_str(),
              plural(topo.pus.size(), "PU", "PUs").c_str(), format_index_list(allowed).c_str());
  auto print_node = [&](const NumaInfo& n) {
    std::vector<int> cores(n.cores.begin(), n.cores.end());
    std::printf(
        "  NUMA node %d (os %d): %s, %s\n", n.logical, n.os_index,
        n.memory ? format_bytes(n.memory).c_str() : "memory size unknown",
        cores.empty()
            ? "memory only"
            : ((cores.size() == 1 ? "core " : "cores ") + format_index_list(cores)).c_str());
    for (int c : n.cores) {
      std::vector<int> pus, disallowed;
      for (int p : topo.cores[c].pus) {
        pus.push_back(topo.pus[p].os_index);
        if (!topo.pus[p].allowed) disallowed.push_back(topo.pus[p].os_index);
      }
      std::printf(
          "    core %d: PU%s %s%s\n", c, pus.size() == 1 ? "" : "s", format_index_list(pus).c_str(),
          disallowed.empty() ? ""
                             : (" (not allowed: " + format_index_list(disallowed) + ")").c_str());
    }
  };
  for (int pkg = 0; pkg < topo.packages; ++pkg) {
    std::printf("package %d\n", pkg);
    for (const NumaInfo& n : topo.numa_nodes) {
      if (n.package == pkg) print_node(n);
    }
  }
  for (const NumaInfo& n : topo.numa_nodes) {
    if (n.package < 0) print_node(n);
  }
  std::string caches;
  for (const CacheLevel& c : topo.caches) {
    if (!caches.empty()) caches += ", ";
    caches += c.name + " " + format_bytes(c.size) + " x " + std::to_string(c.count);
  }
  std::printf("caches: %s\n", caches.empty() ? "not reported" : caches.c_str());
}

void print_plan(const Plan& plan, const std::string& threads_origin) {
  std::printf("plan: %s%s, %s%s on %s\n", bind_policy_name(plan.policy), plan.smt ? " smt" : "",
              plural(plan.num_threads(), "thread", "threads").c_str(),
              threads_origin.empty() ? "" : (" (" + threads_origin + ")").c_str(),
              plural(plan.slots, plan.smt ? "usable PU" : "usable core",
                     plan.smt ? "usable PUs" : "usable cores")
                  .c_str());
  if (plan.policy == BindPolicy::kNone) {
    std::printf("threads are not bound (--bind none)\n");
    return;
  }
  std::printf("%6s %5s %5s %5s\n", "thread", "pu", "core", "numa");
  for (const ThreadPlace& t : plan.threads) {
    std::printf("%6d %5d %5d %5d\n", t.thread, t.pu, t.core, t.numa);
  }
}

// The most ranks `topo --ranks` plans (ranks of one job on one machine).
constexpr int kMaxRanks = 4096;

class TopoCommand : public Command {
 public:
  void add_flags(ArgParser& p) override {
    p.option("topology", 0, &synthetic_, "DESC",
             "a synthetic machine in hwloc's syntax, e.g. \"package:2 numa:2 core:4 pu:2\" (at "
             "most 65536 PUs)");
    p.option("topology-xml", 0, &xml_, "FILE", "a machine saved by hwloc (lstopo FILE.xml)");
    add_placement_flags(p, &o_, /*with_numa=*/false);
    p.option("ranks", 0, &ranks_, "N",
             "the plan of each of N ranks on this machine (mpirun -np N --bind-to none): the cores "
             "each one gets and its threads",
             {1, kMaxRanks});
    p.flag(
        "json", 0, &json_,
        "print only the plan: {\"threads\":[{\"thread\":0,\"pu\":P,\"core\":C,\"numa\":N},...]}");
  }
  void check(const ArgParser& p) override {
    check_placement_flags(o_, /*with_numa=*/false);
    if (ranks_ > 1 && !o_.cpus.empty()) {
      throw UsageError(
          "topo: --ranks splits the machine among the ranks; --cpus would restrict all of them");
    }
    if (p.given("topology") && p.given("topology-xml")) {
      throw UsageError("topo: --topology and --topology-xml both name a machine; give one");
    }
  }
  const PlacementOptions* placement() const override { return &o_; }
  int run(const ArgParser& p) override;

 private:
  PlacementOptions o_;
  std::string synthetic_, xml_;
  bool json_ = false;
  int ranks_ = 1;
};

int TopoCommand::run(const ArgParser& p) {
  PlanRequest req;
  req.policy = parse_bind_policy(o_.bind);
  req.threads = o_.threads;
  req.smt = o_.smt;
  req.cpus = o_.cpus;
  const Topology topo = p.given("topology")       ? synthetic_topology(synthetic_)
                        : p.given("topology-xml") ? xml_topology(xml_)
                                                  : this_machine_topology();
  std::string origin;
  if (req.threads == 0 && topo.this_system) {  // as train and verify would count them
    req.threads = omp_num_threads_from_environment();
    if (req.threads > 0) origin = req.threads_origin = "OMP_NUM_THREADS";
  }
  if (ranks_ > 1) {
    // As `llmcpu train` under mpirun without binding: each rank plans inside its share.
    if (!json_) print_machine(topo);
    for (int r = 0; r < ranks_; ++r) {
      req.cpus = rank_cpu_share(topo, r, ranks_);
      const Plan plan = make_plan(topo, req);
      if (json_) {
        std::printf("%s\n", plan_json(plan).c_str());
        continue;
      }
      std::printf("rank %d of %d: PUs %s\n", r, ranks_, req.cpus.c_str());
      print_plan(plan, origin);
      // The data-parallel communication thread may run on any of its rank's threads' PUs.
      std::vector<int> pus;
      for (const ThreadPlace& t : plan.threads) pus.push_back(t.pu);
      std::sort(pus.begin(), pus.end());
      pus.erase(std::unique(pus.begin(), pus.end()), pus.end());
      std::printf("communication thread: PUs %s\n", format_index_list(pus).c_str());
    }
    return 0;
  }
  const Plan plan = make_plan(topo, req);
  if (json_) {
    std::printf("%s\n", plan_json(plan).c_str());
    return 0;
  }
  print_machine(topo);
  print_plan(plan, origin);
  if (topo.this_system) {
    if (const std::string env = openmp_placement_environment(); !env.empty()) {
      std::printf(
          "note: %s is set; train and verify leave thread placement to the OpenMP runtime\n",
          env.c_str());
    }
  }
  return 0;
}

}  // namespace

std::unique_ptr<Command> make_topo_command() { return std::make_unique<TopoCommand>(); }

}  // namespace llmcpu
