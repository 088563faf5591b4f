// `llmcpu topo` and the placement flags of `train` and `verify`, run as a user runs them: the exact
// JSON plan on synthetic and XML machines (expected lists worked out by hand), the plan on this
// machine against the kernel's own CPU topology (/sys), and clear errors that name the flag.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/common/process.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;

using testing::Outcome;
Outcome run(const std::string& args, const std::string& env = "") { return testing::run_llmcpu(args, env); }

std::string json_of(const std::vector<int>& pu, const std::vector<int>& core,
                    const std::vector<int>& numa) {
  std::string s = "{\"threads\":[";
  for (size_t t = 0; t < pu.size(); ++t) {
    if (t) s += ',';
    s += "{\"thread\":" + std::to_string(t);
    s += ",\"pu\":" + std::to_string(pu[t]);
    s += ",\"core\":" + std::to_string(core[t]);
    s += ",\"numa\":" + std::to_string(numa[t]) + "}";
  }
  return s + "]}\n";
}

const std::string kTwoSocket = "--topology 'package:2 numa:2 core:4 pu:2'";
const std::string kAsymmetric =
    std::string("--topology-xml ") + LLMCPU_RUNTIME_TEST_DIR + "/asymmetric.xml";
const std::string kTinyModel = std::string(LLMCPU_FIXTURE_DIR) + "/tiny_model.bin";
const std::string kTinyState = std::string(LLMCPU_FIXTURE_DIR) + "/tiny_state.bin";

TEST(TopoCli, JsonCompactOnTwoSockets) {
  const Outcome r = run("topo " + kTwoSocket + " --json");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, json_of({0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30},
                              {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
                              {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}));
}

TEST(TopoCli, JsonSpreadFiveThreads) {
  const Outcome r = run("topo " + kTwoSocket + " --bind spread --threads 5 --json");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output,
            "{\"threads\":[{\"thread\":0,\"pu\":0,\"core\":0,\"numa\":0},"
            "{\"thread\":1,\"pu\":8,\"core\":4,\"numa\":1},"
            "{\"thread\":2,\"pu\":16,\"core\":8,\"numa\":2},"
            "{\"thread\":3,\"pu\":24,\"core\":12,\"numa\":3},"
            "{\"thread\":4,\"pu\":2,\"core\":1,\"numa\":0}]}\n");
}

// --ranks: the plan of each rank of `mpirun -np N --bind-to none` on the machine.
TEST(TopoCli, RanksEachGetTheirOwnNumaNode) {
  const Outcome r = run("topo --topology \"package:2 numa:2 core:4 pu:2\" --ranks 4");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* line : {"rank 0 of 4: PUs 0-7\n", "rank 1 of 4: PUs 8-15\n",
                           "rank 2 of 4: PUs 16-23\n", "rank 3 of 4: PUs 24-31\n"}) {
    EXPECT_NE(r.output.find(line), std::string::npos) << line << r.output;
  }
  // Each rank's communication thread on its own threads' PUs (one per core), no other rank's.
  for (const char* line : {"communication thread: PUs 0,2,4,6\n",
                           "communication thread: PUs 8,10,12,14\n",
                           "communication thread: PUs 16,18,20,22\n",
                           "communication thread: PUs 24,26,28,30\n"}) {
    EXPECT_NE(r.output.find(line), std::string::npos) << line << r.output;
  }
  const Outcome bad = run("topo --ranks 0");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("--ranks 0 is out of range: expected an integer in 1..4096"),
            std::string::npos)
      << bad.output;
}

TEST(TopoCli, JsonRestrictedCpus) {
  const Outcome r = run("topo " + kTwoSocket + " --bind spread --cpus 0-3,8-11,17 --json");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, json_of({0, 8, 17, 2, 10}, {0, 4, 8, 1, 5}, {0, 1, 2, 0, 1}));
}

TEST(TopoCli, JsonAsymmetricXmlWithSmt) {
  Outcome r = run("topo " + kAsymmetric + " --smt --bind spread --json");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output,
            json_of({0, 3, 1, 7, 2, 4, 5, 6}, {0, 3, 1, 3, 2, 0, 1, 2}, {0, 1, 0, 1, 0, 0, 0, 0}));
  r = run("topo " + kAsymmetric + " --smt --json");
  EXPECT_EQ(r.output,
            json_of({0, 4, 1, 5, 2, 6, 3, 7}, {0, 0, 1, 1, 2, 2, 3, 3}, {0, 0, 0, 0, 0, 0, 1, 1}));
}

TEST(TopoCli, PrintsTheMachine) {
  Outcome r = run("topo " + kAsymmetric);
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* want :
       {"machine: 2 packages, 2 NUMA nodes, 4 cores, 8 PUs", "NUMA node 0 (os 0): 8 GiB, cores 0-2",
        "NUMA node 1 (os 1): 4 GiB, core 3", "core 0: PUs 0,4", "core 3: PUs 3,7",
        "caches: L3 16 MiB x 1, L3 8 MiB x 1", "plan: compact, 4 threads on 4 usable cores"}) {
    EXPECT_NE(r.output.find(want), std::string::npos) << want << " missing in\n" << r.output;
  }
  r = run("topo " + kTwoSocket + " --bind none");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("package 1\n  NUMA node 2 (os 2): 1 GiB, cores 8-11"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("threads are not bound"), std::string::npos) << r.output;
}

// This machine's physical cores among the CPUs this process may use, from the kernel's sysfs: the
// lowest CPU of each (package, core) pair.
std::map<std::pair<int, int>, int> sysfs_cores(const std::vector<int>& cpus) {
  std::map<std::pair<int, int>, int> cores;
  for (int c : cpus) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    int pkg = -1, core = -1;
    std::ifstream(dir + "physical_package_id") >> pkg;
    std::ifstream(dir + "core_id") >> core;
    auto [it, inserted] = cores.emplace(std::make_pair(pkg, core), c);
    if (!inserted) it->second = std::min(it->second, c);
  }
  return cores;
}

std::vector<int> affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

// The PUs of a --json plan, in thread order.
std::vector<int> plan_pus(const std::string& json) {
  std::vector<int> pus;
  for (size_t at = 0; (at = json.find("\"pu\":", at)) != std::string::npos;) {
    at += 5;
    pus.push_back(std::stoi(json.substr(at)));
  }
  return pus;
}

TEST(TopoCli, ThisMachineOneThreadPerPhysicalCore) {
  const std::vector<int> cpus = affinity();
  if (!fs::exists("/sys/devices/system/cpu/cpu" + std::to_string(cpus.front()) +
                  "/topology/core_id")) {
    GTEST_SKIP() << "no CPU topology in /sys";
  }
  const auto cores = sysfs_cores(cpus);
  std::vector<int> want;
  for (const auto& [key, cpu] : cores) want.push_back(cpu);
  std::sort(want.begin(), want.end());
  const Outcome r = run("topo --json", "env -u OMP_NUM_THREADS");
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<int> got = plan_pus(r.output);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want) << r.output;
}

TEST(TopoCli, ThisMachineRespectsTheAffinityMask) {
  const std::vector<int> cpus = affinity();
  const int last = cpus.back();
  cpu_set_t one, saved;
  sched_getaffinity(0, sizeof saved, &saved);
  CPU_ZERO(&one);
  CPU_SET(last, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const Outcome r = run("topo --json", "env -u OMP_NUM_THREADS");  // the child inherits the mask
  const Outcome v =
      run("verify --model " + kTinyModel + " --state " + kTinyState,
          "env -u OMP_NUM_THREADS -u OMP_PROC_BIND -u OMP_PLACES -u GOMP_CPU_AFFINITY");
  sched_setaffinity(0, sizeof saved, &saved);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(plan_pus(r.output), std::vector<int>{last}) << r.output;
  EXPECT_EQ(v.status, 0) << v.output;
  const std::string want = "placement: 1 thread, compact, PUs " + std::to_string(last);
  EXPECT_EQ(v.output.rfind(want, 0), 0u) << v.output;
}

TEST(PlacementCli, VerifyPrintsThePlanFirstAndStillPasses) {
  const std::string clean =
      "env -u OMP_NUM_THREADS -u OMP_PROC_BIND -u OMP_PLACES -u GOMP_CPU_AFFINITY";
  Outcome r = run("verify --model " + kTinyModel + " --state " + kTinyState +
                      " --bind spread --numa interleave",
                  clean);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.rfind("placement: ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find(", spread, PUs "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("; memory interleave\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("verify: OK"), std::string::npos) << r.output;

  r = run("verify --model " + kTinyModel + " --state " + kTinyState + " --bind none --threads 1",
          clean);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("placement: 1 thread, none"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("not pinned: --bind none; memory local"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" kernels, 1 thread\n"), std::string::npos) << r.output;

  r = run("verify --model " + kTinyModel + " --state " + kTinyState,
          clean + " OMP_PROC_BIND=close");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("not pinned: OMP_PROC_BIND=close is set"), std::string::npos) << r.output;

  r = run("verify --model " + kTinyModel + " --state " + kTinyState, clean + " OMP_NUM_THREADS=1");
  EXPECT_NE(r.output.find("placement: 1 thread (OMP_NUM_THREADS), compact"), std::string::npos)
      << r.output;
}

TEST(PlacementCli, TrainPrintsThePlan) {
  const Outcome r =
      run("train --model " + kTinyModel + " --train-data " + LLMCPU_FIXTURE_DIR +
              "/tiny_train.bin --batch 2 --seq-len 8 --steps 1 --bind compact --threads 1",
          "env -u OMP_PROC_BIND -u OMP_PLACES -u GOMP_CPU_AFFINITY");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.rfind("placement: 1 thread, compact, PUs ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("step     1/1"), std::string::npos) << r.output;
}

void expect_usage_error(const std::string& args, const std::vector<std::string>& wants) {
  const Outcome r = run(args);
  EXPECT_EQ(r.status, 2) << args << "\n" << r.output;
  for (const std::string& want : wants) {
    EXPECT_NE(r.output.find(want), std::string::npos) << args << ": '" << want << "' missing in\n"
                                                      << r.output;
  }
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

TEST(PlacementCli, BadFlagsNameTheFlag) {
  expect_usage_error("topo --bind diagonal",
                     {"error: --bind 'diagonal'", "compact, spread or none"});
  expect_usage_error("topo " + kTwoSocket + " --cpus 1-", {"--cpus '1-'", "0-3,8"});
  expect_usage_error("topo " + kTwoSocket + " --cpus x", {"--cpus 'x'"});
  expect_usage_error("topo " + kTwoSocket + " --cpus 4-2", {"--cpus '4-2'", "runs backwards"});
  expect_usage_error("topo " + kTwoSocket + " --cpus 30-40",
                     {"--cpus '30-40'", "PU 32 is not on this machine", "0-31"});
  expect_usage_error("topo --topology 'package:2 bogus:3'",
                     {"--topology 'package:2 bogus:3'", "hwloc"});
  expect_usage_error("topo --topology ''", {"--topology ''"});
  expect_usage_error("topo " + kTwoSocket + " " + kAsymmetric, {"--topology and --topology-xml"});
  expect_usage_error("topo " + kTwoSocket + " --threads -2", {"--threads -2"});
  expect_usage_error("topo --threads two", {"--threads 'two'"});
  expect_usage_error("verify --model " + kTinyModel + " --state " + kTinyState + " --bind diagonal",
                     {"llmcpu verify: error: --bind 'diagonal'"});
  expect_usage_error("verify --model " + kTinyModel + " --state " + kTinyState + " --numa remote",
                     {"--numa 'remote'", "local, interleave or off"});
  expect_usage_error("verify --model " + kTinyModel + " --state " + kTinyState + " --cpus 1-0",
                     {"--cpus '1-0'"});
  expect_usage_error("train --model " + kTinyModel + " --bind diagonal",
                     {"llmcpu train: error: --bind 'diagonal'"});
}

TEST(PlacementCli, MissingOrCorruptXmlNamesTheFile) {
  const fs::path dir = fs::path(::testing::TempDir()) / "llmcpu_topo_cli";
  fs::create_directories(dir);
  const std::string missing = (dir / "missing.xml").string();
  expect_usage_error("topo --topology-xml " + missing, {missing, "--topology-xml", "No such file"});
  const std::string corrupt = (dir / "corrupt.xml").string();
  std::ofstream(corrupt)
      << "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n  <object type=\"Mach";
  expect_usage_error("topo --topology-xml " + corrupt,
                     {corrupt, "--topology-xml", "not an hwloc XML topology"});
  fs::remove_all(dir);
}

TEST(PlacementCli, HandWrittenXmlWithoutLibxml2SaysWhatToInstall) {
  // HWLOC_LIBXML=0 makes hwloc use its built-in reader, as on a machine without libhwloc-plugins;
  // it rejects the hand-written file, and the message says what to install.
  const Outcome r = run("topo " + kAsymmetric, "HWLOC_LIBXML=0");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("asymmetric.xml: hwloc cannot load the --topology-xml file"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("apt-get install libhwloc-plugins"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace llmcpu
