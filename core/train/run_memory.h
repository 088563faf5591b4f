// The memory plan of one training run: the request its options, model shape and ranks make of the
// planner (core/train/memory_plan.h), the plan, and the limit it must fit (--memory-limit, or the
// machine's share of this rank). Made before the model is allocated, and made again when the run
// turns out other than planned (a device that keeps no layers, ranks that cannot share weights).
// Deliberately not here: the planner's arithmetic (memory_plan.h).
#pragma once

#include "core/comm/communicator.h"
#include "core/io/model_file.h"
#include "core/model/config.h"
#include "core/train/memory_plan.h"
#include "core/train/train_options.h"

namespace llmcpu {

struct RunMemory {
  MemoryRequest request;
  MemoryPlan plan;
  MemoryLimit limit;
  // The plan of `request` as it is now, checked against the limit again (UsageError if over).
  void replan();
};

// Plans a run of `o` for a model of `config` over `world` and refuses (UsageError) a model shape
// that is not one, a --seq-len past its maxT, or a plan that does not fit: called before the model
// is allocated. The kernel tables are chosen first (what they take is part of the program planned).
// `weights`: where the model's weights come from (what a frozen base holds while it loads).
RunMemory plan_run_memory(const TrainOptions& o, const ModelConfig& config,
                          const Communicator& world,
                          WeightsOrigin weights = WeightsOrigin::kFileWhole);

}  // namespace llmcpu
