// What the command-line fuzz targets (fuzz_cli, fuzz_run_config) check after a parse: the
// validation a subcommand does of its options before it reads any file or starts any work,
// short of the command itself. Placement is planned on a fixed synthetic machine (2 packages,
// 2 NUMA nodes each, 4 cores with 2 PUs each), never applied to this one.
#pragma once

#include <cmath>
#include <string>

#include "core/model/precision.h"
#include "core/runtime/numa_memory.h"
#include "core/runtime/placement.h"
#include "core/runtime/plan.h"
#include "core/runtime/topology.h"
#include "core/train/lr_schedule.h"
#include "core/train/trainer.h"
#include "tests/fuzz/fuzz_util.h"

namespace llmcpu::fuzz {

inline const Topology& synthetic_machine() {
  static const Topology* topo = new Topology(synthetic_topology("package:2 numa:2 core:4 pu:2"));
  return *topo;
}

// --threads, --bind, --smt, --cpus and (with_numa) --numa, as apply_placement checks them.
inline void check_placement(const char* target, const PlacementOptions& o, bool with_numa) {
  PlanRequest req;
  req.policy = parse_bind_policy(o.bind);
  if (with_numa) parse_numa_mode(o.numa);
  if (o.threads < 0) throw UsageError("--threads must not be negative");
  req.threads = o.threads;
  req.smt = o.smt;
  req.cpus = o.cpus;
  const Plan plan = make_plan(synthetic_machine(), req);
  LLMCPU_FUZZ_CHECK(target, plan.num_threads() > 0 && plan.slots > 0, "an empty plan");
  LLMCPU_FUZZ_CHECK(target, o.threads == 0 || plan.num_threads() == o.threads,
                    "the plan does not have the threads asked for");
}

// A number option that parsed must be finite ("nan" and "inf" are not values of any of them).
inline void check_finite(const char* target, double value, const char* flag) {
  LLMCPU_FUZZ_CHECK(target, std::isfinite(value),
                    std::string(flag) + " accepted the non-finite value " + std::to_string(value));
}

// The learning-rate schedule of options whose words were parsed (apply_train_flags): one that is
// accepted must give finite, non-negative rates from its first step to its last.
inline void check_train_options(const char* target, const TrainOptions& o) {
  check_finite(target, o.lr, "--lr");
  check_finite(target, o.weight_decay, "--weight-decay");
  check_finite(target, o.lr_floor, "--lr-floor");
  check_finite(target, o.grad_clip, "--grad-clip");
  const LrSchedule schedule(o.lr_schedule, o.lr, o.warmup, o.steps, o.lr_floor);
  for (int step : {0, o.warmup / 2, o.warmup, o.steps / 2, o.steps}) {
    if (step < 0 || step > o.steps) continue;
    const double lr = schedule.at(step);
    LLMCPU_FUZZ_CHECK(target, std::isfinite(lr) && lr >= 0,
                      "learning rate " + std::to_string(lr) + " at step " + std::to_string(step));
  }
}

}  // namespace llmcpu::fuzz
