#include "core/runtime/plan.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

#include "core/util/shard.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

// PU indexes (into Topology::pus) a core offers: every usable PU with smt, else the first one.
std::vector<int> usable_pus_of(const CoreInfo& core, const std::vector<bool>& usable) {
  std::vector<int> out;
  for (int p : core.pus) {
    if (usable[p]) out.push_back(p);
  }
  return out;
}

}  // namespace

BindPolicy parse_bind_policy(const std::string& word, const std::string& flag) {
  if (word == "compact") return BindPolicy::kCompact;
  if (word == "spread") return BindPolicy::kSpread;
  if (word == "none") return BindPolicy::kNone;
  throw UsageError(flag + " '" + word +
                   "' is not a placement policy; expected compact, spread or none");
}

const char* bind_policy_name(BindPolicy policy) {
  switch (policy) {
    case BindPolicy::kCompact:
      return "compact";
    case BindPolicy::kSpread:
      return "spread";
    case BindPolicy::kNone:
      return "none";
  }
  return "?";
}

std::vector<int> parse_cpu_list(const std::string& list, const std::string& flag) {
  constexpr long kMaxIndex = 1 << 20;  // far beyond any machine; keeps a typo from allocating GiBs
  auto bad = [&](const std::string& why) {
    return UsageError(flag + " '" + list + "': " + why +
                      "; expected PU OS indexes and ranges such as \"0-3,8\"");
  };
  if (list.empty()) throw bad("the list is empty");
  // Ranges first, expanded once merged: a list that repeats a wide range
  // ("0-1048576,0-1048576,...") costs no more than one.
  std::vector<std::pair<long, long>> ranges;
  size_t i = 0;
  auto number = [&]() -> long {
    if (i >= list.size() || !std::isdigit(static_cast<unsigned char>(list[i]))) {
      throw bad(i >= list.size() ? "a number is missing at the end"
                                 : std::string("unexpected '") + list[i] + "'");
    }
    long v = 0;
    while (i < list.size() && std::isdigit(static_cast<unsigned char>(list[i]))) {
      v = v * 10 + (list[i++] - '0');
      if (v > kMaxIndex) throw bad("index too large");
    }
    return v;
  };
  while (true) {
    const long first = number();
    long last = first;
    if (i < list.size() && list[i] == '-') {
      ++i;
      last = number();
      if (last < first) {
        throw bad("the range " + std::to_string(first) + "-" + std::to_string(last) +
                  " runs backwards");
      }
    }
    ranges.emplace_back(first, last);
    if (i == list.size()) break;
    if (list[i] != ',') throw bad(std::string("unexpected '") + list[i] + "'");
    ++i;
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<int> out;  // ascending, no duplicates: at most kMaxIndex + 1 indexes
  long next = 0;         // the smallest index not yet in out
  for (const auto& [first, last] : ranges) {
    for (long v = std::max(first, next); v <= last; ++v) out.push_back(int(v));
    next = std::max(next, last + 1);
  }
  return out;
}

namespace {

// The lists one after the other.
std::vector<int> concatenate(const std::vector<std::vector<int>>& lists) {
  std::vector<int> out;
  for (const auto& list : lists) out.insert(out.end(), list.begin(), list.end());
  return out;
}

// Every list's first entry, then every list's second one, and so on.
std::vector<int> round_robin(const std::vector<std::vector<int>>& lists) {
  std::vector<int> out;
  for (size_t k = 0;; ++k) {
    bool any = false;
    for (const auto& list : lists) {
      if (k < list.size()) out.push_back(list[k]), any = true;
    }
    if (!any) return out;
  }
}

// Whether each PU (index into Topology::pus) may run a thread: allowed to the process and, with
// --cpus, listed there.
std::vector<bool> find_usable_pus(const Topology& topo, const PlanRequest& req) {
  std::vector<bool> usable(topo.pus.size());
  for (size_t i = 0; i < topo.pus.size(); ++i) usable[i] = topo.pus[i].allowed;
  if (!req.cpus.empty()) {
    const std::vector<int> allowed = topo.allowed_os_indexes();
    std::vector<bool> listed(topo.pus.size(), false);
    for (int os : parse_cpu_list(req.cpus)) {
      const int p = topo.find_pu(os);
      if (p < 0 || !topo.pus[p].allowed) {
        throw UsageError(
            "--cpus '" + req.cpus + "': PU " + std::to_string(os) +
            (p < 0 ? " is not on this machine" : " is outside the process's allowed cpuset") +
            " (allowed PUs: " + format_index_list(allowed) + ")");
      }
      listed[p] = true;
    }
    for (size_t i = 0; i < usable.size(); ++i) usable[i] = usable[i] && listed[i];
  }
  return usable;
}

// The plan's slot order (indexes into topo.pus): slots per NUMA node, each node's cores in logical
// order (one PU per core, or with smt all of them: core by core, or for spread every core's k-th
// PU before the (k+1)-th); then node after node, or for spread round-robin over the nodes.
std::vector<int> slot_order(const Topology& topo, const std::vector<bool>& usable,
                            const PlanRequest& req) {
  const bool spread = req.policy == BindPolicy::kSpread;
  std::vector<std::vector<int>> node_slots(topo.numa_nodes.size());
  for (size_t n = 0; n < topo.numa_nodes.size(); ++n) {
    std::vector<std::vector<int>> per_core;
    for (int c : topo.numa_nodes[n].cores) {
      std::vector<int> pus = usable_pus_of(topo.cores[c], usable);
      if (!pus.empty()) per_core.push_back(std::move(pus));
    }
    if (!req.smt) {
      for (const auto& pus : per_core) node_slots[n].push_back(pus.front());
    } else {
      node_slots[n] = spread ? round_robin(per_core) : concatenate(per_core);
    }
  }
  return spread ? round_robin(node_slots) : concatenate(node_slots);
}

}  // namespace

Plan make_plan(const Topology& topo, const PlanRequest& req) {
  if (req.threads < 0) {
    throw UsageError(req.threads_origin + " " + std::to_string(req.threads) +
                     ": must not be negative (0: one per core)");
  }
  const std::vector<bool> usable = find_usable_pus(topo, req);
  const std::vector<int> order = slot_order(topo, usable, req);
  if (order.empty()) {
    throw UsageError("no usable " + std::string(req.smt ? "PU" : "core") + " on " + topo.source +
                     (req.cpus.empty() ? "" : " with --cpus '" + req.cpus + "'"));
  }

  const long usable_pus = std::count(usable.begin(), usable.end(), true);
  if (req.threads > usable_pus) {
    throw UsageError(req.threads_origin + " " + std::to_string(req.threads) +
                     ": more threads than the " + std::to_string(usable_pus) +
                     " PUs this process may use on " + topo.source +
                     (req.cpus.empty() ? "" : " with --cpus '" + req.cpus + "'") +
                     " (threads beyond one per PU would only take turns)");
  }
  Plan plan;
  plan.policy = req.policy;
  plan.smt = req.smt;
  plan.slots = int(order.size());
  const int n = req.threads > 0 ? req.threads : plan.slots;
  for (int t = 0; t < n; ++t) {
    ThreadPlace tp;
    tp.thread = t;
    if (req.policy != BindPolicy::kNone) {
      const PuInfo& p = topo.pus[order[t % order.size()]];
      tp.pu = p.os_index;
      tp.core = p.core;
      tp.numa = p.numa;
    }
    plan.threads.push_back(tp);
  }
  return plan;
}

std::string plan_json(const Plan& plan) {
  std::string out = "{\"threads\":[";
  for (const ThreadPlace& t : plan.threads) {
    if (t.thread > 0) out += ',';
    out += "{\"thread\":" + std::to_string(t.thread) + ",\"pu\":" + std::to_string(t.pu) +
           ",\"core\":" + std::to_string(t.core) + ",\"numa\":" + std::to_string(t.numa) + "}";
  }
  return out + "]}";
}

std::string rank_cpu_share(const Topology& t, int local_rank, int local_size) {
  if (local_size <= 1) return "";
  std::vector<int> cores;  // logical indexes of the cores with an allowed PU
  size_t allowed_pus = 0;
  for (const CoreInfo& c : t.cores) {
    bool any = false;
    for (int pu : c.pus) {
      any = any || t.pus[pu].allowed;
      allowed_pus += t.pus[pu].allowed;
    }
    if (any) cores.push_back(c.logical);
  }
  if (allowed_pus < t.pus.size() || cores.empty()) return "";  // bound by the launcher: keep it
  std::vector<int> mine;                                       // this rank's cores
  const int nodes = int(t.numa_nodes.size()), n = int(cores.size());
  if (nodes >= local_size && nodes % local_size == 0) {
    const int per = nodes / local_size;
    for (int c : cores) {
      if (t.cores[c].numa / per == local_rank) mine.push_back(c);
    }
  } else if (n >= local_size) {
    const Shard s = shard_of(cores.size(), local_rank, local_size);
    mine.assign(cores.begin() + s.begin, cores.begin() + s.begin + s.count);
  } else {
    mine.push_back(cores[local_rank % n]);
  }
  std::vector<int> pus;
  for (int c : mine) {
    for (int pu : t.cores[c].pus) pus.push_back(t.pus[pu].os_index);
  }
  std::sort(pus.begin(), pus.end());
  return format_index_list(pus);
}

}  // namespace llmcpu
