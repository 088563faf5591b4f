// Placement plans on machines described to hwloc (synthetic strings and XML files), against PU,
// core and NUMA lists worked out by hand from the machine's layout, plus the parsers' errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/runtime/plan.h"
#include "core/runtime/topology.h"
#include "simd/error.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;

// "package:2 numa:2 core:4 pu:2": 2 packages x 2 NUMA nodes x 4 cores x 2 PUs. hwloc numbers PUs
// 0..31 in order, so core c holds PUs 2c and 2c+1 and NUMA node k holds cores 4k..4k+3.
constexpr const char* kTwoSocket = "package:2 numa:2 core:4 pu:2";

const std::string kAsymmetricXml = std::string(LLMCPU_RUNTIME_TEST_DIR) + "/asymmetric.xml";

struct Expected {
  std::vector<int> pu, core, numa;
};

void expect_plan(const Plan& plan, const Expected& e) {
  ASSERT_EQ(plan.num_threads(), int(e.pu.size()));
  ASSERT_EQ(e.core.size(), e.pu.size());
  ASSERT_EQ(e.numa.size(), e.pu.size());
  for (int t = 0; t < plan.num_threads(); ++t) {
    EXPECT_EQ(plan.threads[t].thread, t);
    EXPECT_EQ(plan.threads[t].pu, e.pu[t]) << "thread " << t;
    EXPECT_EQ(plan.threads[t].core, e.core[t]) << "thread " << t;
    EXPECT_EQ(plan.threads[t].numa, e.numa[t]) << "thread " << t;
  }
}

Plan plan_for(const Topology& topo, BindPolicy policy, int threads = 0, bool smt = false,
              const std::string& cpus = "") {
  PlanRequest r;
  r.policy = policy;
  r.threads = threads;
  r.smt = smt;
  r.cpus = cpus;
  return make_plan(topo, r);
}

template <typename F>
std::string usage_error_of(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

TEST(RuntimeTopology, SyntheticTwoSocketShape) {
  const Topology t = synthetic_topology(kTwoSocket);
  EXPECT_FALSE(t.this_system);
  EXPECT_EQ(t.packages, 2);
  ASSERT_EQ(t.numa_nodes.size(), 4u);
  EXPECT_EQ(t.cores.size(), 16u);
  EXPECT_EQ(t.pus.size(), 32u);
  EXPECT_EQ(t.numa_nodes[2].cores, (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ(t.numa_nodes[2].package, 1);
  EXPECT_EQ(t.pus[t.find_pu(13)].core, 6);
  EXPECT_EQ(t.pus[t.find_pu(13)].numa, 1);
}

TEST(RuntimePlan, CompactFillsNodesInOrderOneThreadPerCore) {
  const Plan p = plan_for(synthetic_topology(kTwoSocket), BindPolicy::kCompact);
  EXPECT_EQ(p.slots, 16);
  EXPECT_FALSE(p.oversubscribed());
  expect_plan(p, {{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30},
                  {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
                  {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}});
}

TEST(RuntimePlan, SpreadRoundRobinsOverNumaNodes) {
  const Plan p = plan_for(synthetic_topology(kTwoSocket), BindPolicy::kSpread);
  expect_plan(p, {{0, 8, 16, 24, 2, 10, 18, 26, 4, 12, 20, 28, 6, 14, 22, 30},
                  {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15},
                  {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}});
}

TEST(RuntimePlan, CompactSmtPutsSiblingsTogether) {
  const Plan p = plan_for(synthetic_topology(kTwoSocket), BindPolicy::kCompact, 0, true);
  EXPECT_EQ(p.slots, 32);
  std::vector<int> pu, core, numa;
  for (int i = 0; i < 32; ++i) pu.push_back(i);
  core = {0, 0, 1, 1, 2,  2,  3,  3,  4,  4,  5,  5,  6,  6,  7,  7,
          8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15};
  numa = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  expect_plan(p, {pu, core, numa});
}

TEST(RuntimePlan, SpreadSmtUsesEveryCoreBeforeASibling) {
  const Plan p = plan_for(synthetic_topology(kTwoSocket), BindPolicy::kSpread, 0, true);
  expect_plan(p, {{0, 8, 16, 24, 2, 10, 18, 26, 4, 12, 20, 28, 6, 14, 22, 30,
                   1, 9, 17, 25, 3, 11, 19, 27, 5, 13, 21, 29, 7, 15, 23, 31},
                  {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                   0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15},
                  {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3,
                   0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}});
}

TEST(RuntimePlan, FewerThreadsTakeTheFirstSlots) {
  const Topology t = synthetic_topology(kTwoSocket);
  expect_plan(plan_for(t, BindPolicy::kCompact, 6),
              {{0, 2, 4, 6, 8, 10}, {0, 1, 2, 3, 4, 5}, {0, 0, 0, 0, 1, 1}});
  expect_plan(plan_for(t, BindPolicy::kSpread, 6),
              {{0, 8, 16, 24, 2, 10}, {0, 4, 8, 12, 1, 5}, {0, 1, 2, 3, 0, 1}});
}

TEST(RuntimePlan, MoreThreadsThanCoresWrapAround) {
  // Up to one thread per PU without --smt: the cores' first PUs take turns.
  const Plan p = plan_for(synthetic_topology("package:1 core:2 pu:2"), BindPolicy::kCompact, 3);
  EXPECT_EQ(p.slots, 2);
  EXPECT_TRUE(p.oversubscribed());
  expect_plan(p, {{0, 2, 0}, {0, 1, 0}, {0, 0, 0}});
}

TEST(RuntimePlan, MoreThreadsThanPusAreRefused) {
  for (const char* machine : {"package:1 core:2 pu:1", "package:1 core:2 pu:2"}) {
    SCOPED_TRACE(machine);
    const Topology t = synthetic_topology(machine);
    const int pus = int(t.pus.size());
    EXPECT_EQ(plan_for(t, BindPolicy::kCompact, pus).num_threads(), pus);
    try {
      plan_for(t, BindPolicy::kCompact, pus + 1);
      ADD_FAILURE() << pus + 1 << " threads on " << pus << " PUs were planned";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()),
                "--threads " + std::to_string(pus + 1) + ": more threads than the " +
                    std::to_string(pus) + " PUs this process may use on synthetic \"" + machine +
                    "\" (threads beyond one per PU would only take turns)");
    }
  }
}

TEST(RuntimePlan, NoSmtMachineIgnoresTheSmtFlag) {
  const Topology t = synthetic_topology("package:2 core:3 pu:1");
  const Expected all = {{0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}, {0, 0, 0, 0, 0, 0}};
  expect_plan(plan_for(t, BindPolicy::kCompact), all);
  expect_plan(plan_for(t, BindPolicy::kCompact, 0, true), all);
  expect_plan(plan_for(t, BindPolicy::kSpread, 0, true),
              all);  // one NUMA node: nothing to spread over
}

TEST(RuntimePlan, NoneLeavesThreadsUnplaced) {
  const Plan p = plan_for(synthetic_topology(kTwoSocket), BindPolicy::kNone);
  EXPECT_EQ(p.num_threads(), 16);
  expect_plan(p, {std::vector<int>(16, -1), std::vector<int>(16, -1), std::vector<int>(16, -1)});
  EXPECT_EQ(plan_for(synthetic_topology(kTwoSocket), BindPolicy::kNone, 3).num_threads(), 3);
}

// tests/runtime/asymmetric.xml: package 0 = NUMA node 0 with cores 0-2 (PUs {0,4} {1,5} {2,6}),
// package 1 = NUMA node 1 with core 3 (PUs {3,7}).
TEST(RuntimeTopology, AsymmetricXmlShape) {
  const Topology t = xml_topology(kAsymmetricXml);
  EXPECT_FALSE(t.this_system);
  EXPECT_EQ(t.packages, 2);
  ASSERT_EQ(t.numa_nodes.size(), 2u);
  EXPECT_EQ(t.numa_nodes[0].memory, 8ull << 30);
  EXPECT_EQ(t.numa_nodes[1].memory, 4ull << 30);
  EXPECT_EQ(t.numa_nodes[0].cores, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(t.numa_nodes[1].cores, (std::vector<int>{3}));
  ASSERT_EQ(t.caches.size(), 2u);
  EXPECT_EQ(t.caches[0].name, "L3");
  EXPECT_EQ(t.caches[0].size, 16u << 20);
  EXPECT_EQ(t.caches[1].size, 8u << 20);
}

TEST(RuntimePlan, AsymmetricMachine) {
  const Topology t = xml_topology(kAsymmetricXml);
  expect_plan(plan_for(t, BindPolicy::kCompact), {{0, 1, 2, 3}, {0, 1, 2, 3}, {0, 0, 0, 1}});
  expect_plan(plan_for(t, BindPolicy::kSpread), {{0, 3, 1, 2}, {0, 3, 1, 2}, {0, 1, 0, 0}});
  expect_plan(plan_for(t, BindPolicy::kCompact, 0, true),
              {{0, 4, 1, 5, 2, 6, 3, 7}, {0, 0, 1, 1, 2, 2, 3, 3}, {0, 0, 0, 0, 0, 0, 1, 1}});
  expect_plan(plan_for(t, BindPolicy::kSpread, 0, true),
              {{0, 3, 1, 7, 2, 4, 5, 6}, {0, 3, 1, 3, 2, 0, 1, 2}, {0, 1, 0, 1, 0, 0, 0, 0}});
}

TEST(RuntimePlan, CpusListRestrictsTheMachine) {
  // PUs 0-3 (cores 0, 1), 8-11 (cores 4, 5), 17 (second PU of core 8); NUMA node 3 keeps nothing.
  const Topology t = synthetic_topology(kTwoSocket);
  const std::string cpus = "0-3,8-11,17";
  expect_plan(plan_for(t, BindPolicy::kCompact, 0, false, cpus),
              {{0, 2, 8, 10, 17}, {0, 1, 4, 5, 8}, {0, 0, 1, 1, 2}});
  expect_plan(plan_for(t, BindPolicy::kSpread, 0, false, cpus),
              {{0, 8, 17, 2, 10}, {0, 4, 8, 1, 5}, {0, 1, 2, 0, 1}});
  expect_plan(
      plan_for(t, BindPolicy::kCompact, 0, true, cpus),
      {{0, 1, 2, 3, 8, 9, 10, 11, 17}, {0, 0, 1, 1, 4, 4, 5, 5, 8}, {0, 0, 0, 0, 1, 1, 1, 1, 2}});
}

TEST(RuntimePlan, AllowedCpusetOfTheXmlIsRespected) {
  // The same machine with allowed_cpuset 0x33 (PUs 0, 1, 4, 5): hwloc drops the rest, so only
  // cores 0 and 1 of NUMA node 0 remain.
  std::ifstream in(kAsymmetricXml);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string xml = ss.str();
  const std::string from = "allowed_cpuset=\"0x000000ff\"";
  ASSERT_NE(xml.find(from), std::string::npos);
  xml.replace(xml.find(from), from.size(), "allowed_cpuset=\"0x00000033\"");
  const fs::path path = fs::path(::testing::TempDir()) / "llmcpu_restricted.xml";
  std::ofstream(path) << xml;
  const Topology t = xml_topology(path.string());
  fs::remove(path);
  EXPECT_EQ(t.pus.size(), 4u);
  EXPECT_EQ(t.allowed_os_indexes(), (std::vector<int>{0, 1, 4, 5}));
  expect_plan(plan_for(t, BindPolicy::kCompact), {{0, 1}, {0, 1}, {0, 0}});
  expect_plan(plan_for(t, BindPolicy::kSpread, 0, true),
              {{0, 1, 4, 5}, {0, 1, 0, 1}, {0, 0, 0, 0}});
  const std::string e = usage_error_of([&] { plan_for(t, BindPolicy::kCompact, 0, false, "2"); });
  EXPECT_NE(e.find("--cpus '2'"), std::string::npos) << e;
}

TEST(RuntimePlan, JsonIsExact) {
  // One NUMA node, cores 0 (PUs 0, 1) and 1 (PUs 2, 3); three threads wrap onto core 0 again.
  const Plan p = plan_for(synthetic_topology("package:1 core:2 pu:2"), BindPolicy::kSpread, 3);
  EXPECT_EQ(plan_json(p),
            "{\"threads\":[{\"thread\":0,\"pu\":0,\"core\":0,\"numa\":0},"
            "{\"thread\":1,\"pu\":2,\"core\":1,\"numa\":0},"
            "{\"thread\":2,\"pu\":0,\"core\":0,\"numa\":0}]}");
}

TEST(RuntimeCpuList, Parses) {
  EXPECT_EQ(parse_cpu_list("0-3,8"), (std::vector<int>{0, 1, 2, 3, 8}));
  EXPECT_EQ(parse_cpu_list("5,1,1,2-2"), (std::vector<int>{1, 2, 5}));
  EXPECT_EQ(parse_cpu_list("17"), (std::vector<int>{17}));
}

TEST(RuntimeCpuList, RejectsMalformedLists) {
  for (const char* bad :
       {"", "a", "1-", "-1", "3-1", "1,,2", "1;2", " 1", "1,", "0x3", "99999999"}) {
    const std::string e = usage_error_of([&] { parse_cpu_list(bad); });
    EXPECT_NE(e.find(std::string("--cpus '") + bad + "'"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("0-3,8"), std::string::npos) << e;  // says what was expected
  }
}

TEST(RuntimePlan, RejectsCpusOutsideTheMachineAndNegativeThreads) {
  const Topology t = synthetic_topology("package:1 core:2 pu:2");
  std::string e = usage_error_of([&] { plan_for(t, BindPolicy::kCompact, 0, false, "0,9"); });
  EXPECT_NE(e.find("PU 9 is not on this machine"), std::string::npos) << e;
  EXPECT_NE(e.find("0-3"), std::string::npos) << e;
  e = usage_error_of([&] { plan_for(t, BindPolicy::kCompact, -2); });
  EXPECT_NE(e.find("--threads -2"), std::string::npos) << e;
}

TEST(RuntimePlan, RejectsUnknownPolicyAndBadTopologies) {
  std::string e = usage_error_of([] { parse_bind_policy("diagonal"); });
  EXPECT_NE(e.find("--bind 'diagonal'"), std::string::npos) << e;
  EXPECT_NE(e.find("compact, spread or none"), std::string::npos) << e;
  for (const char* bad : {"package:2 bogus:3", "pu:0", "", "core:2 package:2"}) {
    e = usage_error_of([&] { synthetic_topology(bad); });
    EXPECT_NE(e.find(std::string("--topology '") + bad + "'"), std::string::npos)
        << bad << ": " << e;
  }
}

TEST(RuntimeTopology, MissingOrCorruptXmlIsAFileError) {
  const fs::path dir = fs::path(::testing::TempDir());
  const std::string missing = (dir / "llmcpu_no_such_topology.xml").string();
  try {
    xml_topology(missing);
    ADD_FAILURE() << "no error for a missing file";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("--topology-xml"), std::string::npos) << e.what();
    EXPECT_EQ(e.path(), missing);
  }
  for (const char* text :
       {"not xml at all\n", "<?xml version=\"1.0\"?><topology version=\"2.0\"><object", ""}) {
    const fs::path bad = dir / "llmcpu_corrupt_topology.xml";
    std::ofstream(bad) << text;
    try {
      xml_topology(bad.string());
      ADD_FAILURE() << "no error for '" << text << "'";
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find("--topology-xml"), std::string::npos) << e.what();
      EXPECT_EQ(e.path(), bad.string());
    }
    fs::remove(bad);
  }
}

TEST(RuntimeTopology, FormatsIndexListsAndSizes) {
  EXPECT_EQ(format_index_list({0, 1, 2, 3, 8}), "0-3,8");
  EXPECT_EQ(format_index_list({0, 8, 1, 9}), "0,8,1,9");
  EXPECT_EQ(format_index_list({4, 5, 6, 0, 1}), "4-6,0-1");
  EXPECT_EQ(format_index_list({}), "");
  EXPECT_EQ(format_bytes(8ull << 30), "8 GiB");
  EXPECT_EQ(format_bytes(32 << 10), "32 KiB");
  EXPECT_EQ(format_bytes(3 << 29), "1.5 GiB");
  EXPECT_EQ(format_bytes(100), "100 B");
}

// Ranks on one machine (mpirun --bind-to none) get cores of their own: whole NUMA nodes where they
// divide evenly, else contiguous core groups; every allowed core goes to some rank; a core's PUs
// stay with one rank; more ranks than cores share round robin.
TEST(RankShare, SplitsTheSyntheticMachineWithoutSharingACore) {
  const Topology t = synthetic_topology("package:2 numa:2 core:4 pu:2");  // 32 PUs, 16 cores
  EXPECT_EQ(rank_cpu_share(t, 0, 1), "");                                  // alone: keep it all
  EXPECT_EQ(rank_cpu_share(t, 0, 2), "0-15");  // one package (two NUMA nodes) each
  EXPECT_EQ(rank_cpu_share(t, 1, 2), "16-31");
  EXPECT_EQ(rank_cpu_share(t, 2, 4), "16-23");  // one NUMA node each
  for (int ranks = 1; ranks <= 16; ++ranks) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    std::vector<int> owner(t.pus.size(), -1);
    for (int r = 0; r < ranks; ++r) {
      const std::string share = rank_cpu_share(t, r, ranks);
      if (ranks == 1) continue;
      ASSERT_FALSE(share.empty());
      for (int pu : parse_cpu_list(share)) {
        EXPECT_EQ(owner[t.find_pu(pu)], -1) << "PU " << pu << " given to two ranks";
        owner[t.find_pu(pu)] = r;
      }
    }
    if (ranks == 1) continue;
    for (const CoreInfo& c : t.cores) {
      for (int pu : c.pus) {
        EXPECT_EQ(owner[pu], owner[c.pus[0]]) << "core " << c.logical << " split between ranks";
        EXPECT_GE(owner[pu], 0) << "core " << c.logical << " given to no rank";
      }
    }
  }
  // More ranks than cores: each rank one core, round robin.
  EXPECT_EQ(rank_cpu_share(t, 17, 32), "2-3");
}

TEST(RankShare, KeepsTheBindingMpirunGave) {
  Topology t = synthetic_topology("package:1 core:4 pu:1");
  t.pus[2].allowed = t.pus[3].allowed = false;  // the process was bound to cores 0-1
  EXPECT_EQ(rank_cpu_share(t, 1, 2), "");
}

}  // namespace
}  // namespace llmcpu
