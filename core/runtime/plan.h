// A placement plan: which PU, core and NUMA node each OpenMP thread runs on, computed from a
// Topology for a policy. Pure computation: nothing is bound here (pinning.h applies a plan to this
// machine).
//
//   compact  consecutive physical cores, filling a NUMA node before the next
//   spread   round-robin over NUMA nodes: thread t goes to the next node that still has a free core
//   none     no placement: the threads float; their pu, core and numa are -1
//
// One thread per physical core (its first usable PU) unless smt is asked for; with smt every usable
// PU is a slot, siblings next to each other for compact, a core's second PUs after every core's
// first for spread. More threads than slots wrap around (thread t takes slot t mod slots).
#pragma once

#include <string>
#include <vector>

#include "core/runtime/topology.h"

namespace llmcpu {

enum class BindPolicy { kCompact, kSpread, kNone };

// "compact", "spread" or "none"; anything else is a UsageError naming `flag`.
BindPolicy parse_bind_policy(const std::string& word, const std::string& flag = "--bind");
const char* bind_policy_name(BindPolicy policy);

// OS indexes from a list such as "0-3,8" (ascending, no duplicates); a UsageError naming `flag`
// when the list is empty or malformed.
std::vector<int> parse_cpu_list(const std::string& list, const std::string& flag = "--cpus");

struct PlanRequest {
  BindPolicy policy = BindPolicy::kCompact;
  int threads = 0;   // 0: one per slot; at most one per usable PU
  std::string threads_origin = "--threads";  // what asked for them, for messages
  bool smt = false;  // use every PU of a core, not only the first
  std::string
      cpus;  // "" or a list of PU OS indexes (parse_cpu_list) to restrict the allowed ones to
};

struct ThreadPlace {
  int thread = 0;
  int pu = -1;    // OS index
  int core = -1;  // logical index
  int numa = -1;  // logical index
};

struct Plan {
  BindPolicy policy = BindPolicy::kCompact;
  bool smt = false;
  std::vector<ThreadPlace> threads;  // threads[t].thread == t
  int slots = 0;                     // usable cores (usable PUs with smt)

  int num_threads() const { return int(threads.size()); }
  bool oversubscribed() const { return num_threads() > slots; }
};

// Throws UsageError for a negative thread count, for more threads than usable PUs (more would only
// take turns on them: oversubscribing cores is allowed up to the PUs, for SMT machines run without
// --smt), and for a --cpus list that names a PU the machine
// does not have or the process may not use.
Plan make_plan(const Topology& topology, const PlanRequest& request);

// Data parallelism: the PUs (a --cpus list of OS indexes) that rank `local_rank` of the
// `local_size` ranks on this machine may use, so that no two ranks' threads share a core. When the
// process is already bound to part of the machine (mpirun's --bind-to), or runs alone, "" (keep
// it). Otherwise whole NUMA nodes per rank where they divide evenly, else the allowed cores split
// into contiguous groups (a core's PUs stay together), else (more ranks than cores) one core per
// rank, round robin.
std::string rank_cpu_share(const Topology& topology, int local_rank, int local_size);

// {"threads":[{"thread":0,"pu":P,"core":C,"numa":N}, ...]} on one line, no spaces.
std::string plan_json(const Plan& plan);

}  // namespace llmcpu
