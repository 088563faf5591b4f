// Plans applied to this machine: each OpenMP thread runs on (and only on) the PU the plan gives it,
// the thread count is the plan's, the OpenMP environment and --bind none are respected, nothing is
// bound twice; and the arenas' first-touch zeroing (every --numa mode) leaves zeros, with pages on
// the NUMA node of the thread that touched them (asked of the kernel through hwloc).
#include <gtest/gtest.h>
#include <hwloc.h>
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/model/model.h"
#include "core/runtime/numa_memory.h"
#include "core/runtime/pinning.h"
#include "core/runtime/plan.h"
#include "core/runtime/topology.h"
#include "core/util/aligned_buffer.h"
#include "simd/error.h"

namespace llmcpu {
namespace {

// The CPUs the calling thread may run on, from the kernel.
std::vector<int> my_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

struct Observed {
  int team = 0;
  std::vector<int> cpu;                 // sched_getcpu() per thread
  std::vector<std::vector<int>> masks;  // affinity per thread
};

Observed observe(int n) {
  Observed o;
  o.cpu.assign(n, -1);
  o.masks.assign(n, {});
#pragma omp parallel
  {
    const int t = omp_get_thread_num();
#pragma omp single
    o.team = omp_get_num_threads();
    if (t < n) {
      o.cpu[t] = sched_getcpu();
      o.masks[t] = my_affinity();
    }
  }
  return o;
}

Plan real_plan(BindPolicy policy, const std::string& cpus = "") {
  PlanRequest r;
  r.policy = policy;
  r.cpus = cpus;
  return make_plan(this_machine_topology(), r);
}

TEST(RuntimePinning, ThreadsRunWhereThePlanSays) {
  if (!openmp_placement_environment().empty()) {
    GTEST_SKIP() << openmp_placement_environment() << " is set: the OpenMP runtime places threads";
  }
  const Topology topo = this_machine_topology();
  ASSERT_TRUE(topo.this_system);
  const Plan plan = make_plan(topo, PlanRequest{});
  const int n = plan.num_threads();
  // One thread per physical core the process may use; each core's PUs are in its affinity mask.
  EXPECT_GE(n, 1);
  const std::vector<int> mask = my_affinity();
  for (const ThreadPlace& t : plan.threads) {
    EXPECT_NE(std::find(mask.begin(), mask.end(), t.pu), mask.end())
        << "PU " << t.pu << " not allowed";
  }
  const PinReport r = apply_plan(plan, topo);
  if (r.outcome == PinOutcome::kFailed) GTEST_SKIP() << "this system refuses binding: " << r.text();
  ASSERT_EQ(r.outcome, PinOutcome::kPinned) << r.text();
  EXPECT_EQ(omp_get_max_threads(), n);
  for (int region = 0; region < 3; ++region) {  // the binding outlives the first region
    const Observed o = observe(n);
    ASSERT_EQ(o.team, n);
    for (int t = 0; t < n; ++t) {
      EXPECT_EQ(o.cpu[t], plan.threads[t].pu) << "thread " << t << " in region " << region;
      EXPECT_EQ(o.masks[t], std::vector<int>{plan.threads[t].pu}) << "thread " << t;
    }
  }
  // A helper thread (data parallelism's communication thread) may run on every PU of the plan,
  // and on no other.
  std::vector<int> plan_pus;
  for (const ThreadPlace& t : plan.threads) plan_pus.push_back(t.pu);
  std::sort(plan_pus.begin(), plan_pus.end());
  bool bound = false;
  std::vector<int> helper_mask;
  std::thread([&] {
    bound = bind_helper_thread();
    helper_mask = my_affinity();
  }).join();
  EXPECT_TRUE(bound);
  EXPECT_EQ(helper_mask, plan_pus);
}

TEST(RuntimePinning, NeverBindsTwice) {
  if (!openmp_placement_environment().empty()) GTEST_SKIP() << openmp_placement_environment();
  const Topology topo = this_machine_topology();
  const Plan first = make_plan(topo, PlanRequest{});
  const std::vector<int> allowed = topo.allowed_os_indexes();
  const Plan other = real_plan(BindPolicy::kCompact, std::to_string(allowed.back()));
  if (other.threads.size() == first.threads.size() && other.threads[0].pu == first.threads[0].pu) {
    GTEST_SKIP() << "a one-PU process has no second plan to try";
  }
  const PinReport r1 = apply_plan(first, topo);
  if (r1.outcome == PinOutcome::kFailed)
    GTEST_SKIP() << "this system refuses binding: " << r1.text();
  EXPECT_EQ(apply_plan(first, topo).outcome, PinOutcome::kPinned);  // the same plan: still in force
  const PinReport r2 = apply_plan(other, topo);
  EXPECT_EQ(r2.outcome, PinOutcome::kSkipped);
  EXPECT_NE(r2.detail.find("already bound"), std::string::npos) << r2.text();
  // The thread count follows the newest plan, but thread 0 stays where the first plan put it.
  EXPECT_EQ(omp_get_max_threads(), other.num_threads());
  EXPECT_EQ(observe(1).cpu[0], first.threads[0].pu);
}

TEST(RuntimePinning, BindNoneSetsTheCountOnly) {
  const std::vector<int> before = my_affinity();
  PlanRequest req;
  req.policy = BindPolicy::kNone;
  req.threads = 1;
  const Topology topo = this_machine_topology();
  const PinReport r = apply_plan(make_plan(topo, req), topo);
  EXPECT_EQ(r.outcome, PinOutcome::kSkipped);
  EXPECT_EQ(r.text(), "not pinned: --bind none");
  EXPECT_EQ(omp_get_max_threads(), 1);
  EXPECT_EQ(omp_get_dynamic(), 0);
  EXPECT_EQ(observe(1).team, 1);
  EXPECT_EQ(my_affinity(), before);
}

TEST(RuntimePinning, SyntheticPlansAreNotBound) {
  const std::vector<int> before = my_affinity();
  const Topology topo = synthetic_topology("package:2 numa:2 core:4 pu:2");
  PlanRequest req;
  req.threads = 2;
  const PinReport r = apply_plan(make_plan(topo, req), topo);
  EXPECT_EQ(r.outcome, PinOutcome::kSkipped);
  EXPECT_NE(r.detail.find("not this machine"), std::string::npos) << r.text();
  EXPECT_EQ(my_affinity(), before);
}

TEST(RuntimePinning, OpenMpEnvironmentWins) {
  const char* saved = std::getenv("OMP_PROC_BIND");
  const std::string saved_value = saved ? saved : "";
  setenv("OMP_PROC_BIND", "spread", 1);
  const std::vector<int> before = my_affinity();
  const Topology topo = this_machine_topology();
  const PinReport r = apply_plan(make_plan(topo, PlanRequest{}), topo);
  if (saved)
    setenv("OMP_PROC_BIND", saved_value.c_str(), 1);
  else
    unsetenv("OMP_PROC_BIND");
  EXPECT_EQ(r.outcome, PinOutcome::kSkipped);
  EXPECT_NE(r.detail.find("OMP_PROC_BIND=spread is set"), std::string::npos) << r.text();
  EXPECT_NE(r.detail.find("wins over --bind compact"), std::string::npos) << r.text();
  if (!saved) {
    EXPECT_EQ(my_affinity(), before);
  }
}

// The NUMA node (OS index) holding each page of [p, p + bytes), asked of the kernel; empty if the
// system cannot tell.
std::vector<int> page_nodes(const void* p, size_t bytes) {
  std::vector<int> out;
  hwloc_topology_t t;
  hwloc_topology_init(&t);
  hwloc_topology_load(t);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  const auto base = reinterpret_cast<uintptr_t>(p);
  for (uintptr_t a = (base + page - 1) / page * page; a + page <= base + bytes; a += page) {
    if (hwloc_get_area_memlocation(t, reinterpret_cast<void*>(a), page, set,
                                   HWLOC_MEMBIND_BYNODESET) != 0 ||
        hwloc_bitmap_weight(set) != 1) {
      out.clear();
      break;
    }
    out.push_back(hwloc_bitmap_first(set));
  }
  hwloc_bitmap_free(set);
  hwloc_topology_destroy(t);
  return out;
}

TEST(RuntimeNuma, FirstTouchPutsEachThreadsRangeOnItsNode) {
  if (!openmp_placement_environment().empty()) GTEST_SKIP() << openmp_placement_environment();
  const Topology topo = this_machine_topology();
  const Plan plan = make_plan(topo, PlanRequest{});
  const PinReport r = apply_plan(plan, topo);
  if (r.outcome != PinOutcome::kPinned) GTEST_SKIP() << r.text();
  set_numa_mode(NumaMode::kLocal);
  const size_t n = size_t(plan.num_threads()) * (1 << 20);  // 4 MiB per thread
  AlignedBuffer<float> buf(n);
  first_touch_zero(buf.data(), n);
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(buf[i], 0.0f) << i;
  // schedule(static) without a chunk: thread t gets one contiguous range, the first n % T threads
  // one element more than the rest.
  const size_t T = plan.num_threads(), q = n / T, rem = n % T;
  for (size_t t = 0; t < T; ++t) {
    const size_t lo = t * q + std::min(t, rem), len = q + (t < rem);
    const std::vector<int> nodes = page_nodes(buf.data() + lo, len * sizeof(float));
    if (nodes.empty()) GTEST_SKIP() << "the kernel does not say where pages are";
    const int want = topo.numa_nodes[plan.threads[t].numa].os_index;
    for (size_t k = 0; k < nodes.size(); ++k) {
      ASSERT_EQ(nodes[k], want) << "thread " << t << " page " << k;
    }
  }
}

TEST(RuntimeNuma, EveryModeZeroesTheArenas) {
  const ModelConfig c{16, 50, 128, 2, 2, 8};  // maxT V Vp L NH C
  for (NumaMode mode : {NumaMode::kOff, NumaMode::kInterleave, NumaMode::kLocal}) {
    set_numa_mode(mode);
    EXPECT_EQ(numa_mode(), mode);
    AlignedBuffer<float> buf(100003);
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = NAN;
    first_touch_zero(buf.data(), buf.size());
    size_t nonzero = 0;
    for (size_t i = 0; i < buf.size(); ++i) nonzero += buf[i] != 0.0f;
    EXPECT_EQ(nonzero, 0u) << numa_mode_name(mode);
    place_arena(buf.data(), buf.size() * sizeof(float));  // interleave binding or nothing: no harm
    Model model(c);
    size_t params_nonzero = 0;
    for (size_t i = 0; i < model.num_parameters(); ++i) {
      params_nonzero += model.params_flat()[i] != 0.0f || model.grads_flat()[i] != 0.0f;
    }
    EXPECT_EQ(params_nonzero, 0u) << numa_mode_name(mode);
  }
}

// The VmFlags line of the mapping in /proc/self/smaps that holds `p` ("" if none does).
std::string mapping_flags(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t at = uintptr_t(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2) {
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line + " ";
    }
  }
  return "";
}

// An arena of 2 MiB or more starts on a 2 MiB boundary and is advised as transparent huge pages
// (VmFlags "hg"), so that Linux can back it with 2 MiB pages in its default madvise mode.
TEST(RuntimeNuma, LargeArenasAskForHugePages) {
  AlignedBuffer<float> small(1000);
  EXPECT_EQ(uintptr_t(small.data()) % 64, 0u);
  const size_t huge = size_t(2) << 20;
  AlignedBuffer<float> big((5 * huge + 12) / sizeof(float));  // 5 MiB and a few floats
  ASSERT_EQ(uintptr_t(big.data()) % huge, 0u);
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage")) {
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  }
  const std::string flags = mapping_flags(big.data());
  ASSERT_FALSE(flags.empty()) << "no mapping in /proc/self/smaps holds the array";
  EXPECT_NE(flags.find(" hg "), std::string::npos) << flags;
  // The advice covers the array's last byte too (6 MiB: whole huge pages).
  EXPECT_NE(mapping_flags(reinterpret_cast<const char*>(big.data()) + 5 * huge + 11).find(" hg "),
            std::string::npos);
}

TEST(RuntimeNuma, InterleaveRefusalWarnsAtMostOnce) {
  set_numa_mode(NumaMode::kInterleave);
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) {
    AlignedBuffer<float> buf(1 << 18);
    first_touch_zero(buf.data(), buf.size());
    place_arena(buf.data(), buf.size() * sizeof(float));
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  set_numa_mode(NumaMode::kLocal);
  size_t warnings = 0;
  for (size_t at = 0; (at = err.find("warning", at)) != std::string::npos; ++at) ++warnings;
  EXPECT_LE(warnings, 1u) << err;
}

TEST(RuntimeNuma, ParsesModes) {
  EXPECT_EQ(parse_numa_mode("local"), NumaMode::kLocal);
  EXPECT_EQ(parse_numa_mode("interleave"), NumaMode::kInterleave);
  EXPECT_EQ(parse_numa_mode("off"), NumaMode::kOff);
  try {
    parse_numa_mode("remote");
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--numa 'remote'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("local, interleave or off"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace llmcpu
