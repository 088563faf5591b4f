// The memory plan's accounting from first principles: the model's arrays from the parameter count
// (fp32 master, bf16 copy, gradients, AdamW's moments, sharded by ZeRO-1 and shared by the ranks
// of a machine), and the kernels' scratch of a training step (step_scratch) against what a real
// step leaves allocated in the scratch of the trainer's thread and its OpenMP team, in fp32 and
// bf16, through the model and through the Trainer.
#include <gtest/gtest.h>
#include <omp.h>

#include <string>
#include <vector>

#include "core/model/kernel_scratch.h"
#include "core/model/model.h"
#include "core/model/parameters.h"
#include "core/train/memory_plan.h"
#include "core/train/trainer.h"
#include "core/util/rng.h"
#include "simd/workspace.h"
#include "tests/common/team_scratch.h"
#include "tests/unit/fixture_paths.h"

namespace llmcpu {
namespace {

using testing::release_team_scratch;
using testing::team_scratch_held;

// A team's widest part stands for all of its parts in the sizing entries (add_column_sums): each
// thread may hold a cache line less than planned.
void expect_planned(const std::string& where, size_t held, size_t planned) {
  const size_t threads = size_t(omp_get_max_threads());
  EXPECT_LE(held, planned) << where;
  if (held <= planned) {
    EXPECT_LE(planned - held, 64 * threads)
        << where << ": held " << held << ", planned " << planned;
  }
}

// Small, but every GEMM spans several panels of every kernel, and the head's OC is not a
// multiple of any tile.
ModelConfig small_config() {
  return {.max_seq_len = 64,
          .vocab_size = 500,
          .padded_vocab_size = 512,
          .num_layers = 2,
          .num_heads = 4,
          .channels = 64};
}

TEST(StepScratch, ATrainingStepHoldsWhatItsPlanSays) {
  const ModelConfig c = small_config();
  const int B = 3, T = 50;
  Rng rng(3);
  std::vector<int> inputs(size_t(B) * T), targets(inputs.size());
  for (int& t : inputs) t = int(rng.below(c.vocab_size));
  for (int& t : targets) t = int(rng.below(c.vocab_size));
  const int saved = omp_get_max_threads();
  for (Precision p : {Precision::kFp32, Precision::kBf16}) {
    for (Recompute r : {Recompute::kNone, Recompute::kAllPointwise}) {
      for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        Model m(c, active_kernels(), p);
        init_model(m, 1);
        m.plan_batch(B, T, {.recompute = r});
        release_team_scratch();
        m.forward_backward(inputs.data(), targets.data(), B, T);
        const ScratchUse planned =
            step_scratch(c, B, T, {p, r, false}, m.kernels(),
                         m.bf16_kernels() ? *m.bf16_kernels() : active_bf16_kernels(), threads);
        expect_planned(std::string(precision_name(p)) + " recompute " + recompute_name(r) + ", " +
                           std::to_string(threads) + " threads",
                       team_scratch_held(), planned.bytes(threads));
        EXPECT_GT(planned.bytes(threads), 0u);  // the vectorized GEMMs pack operands
      }
    }
  }
  omp_set_num_threads(saved);
}

// The weights, gradients and moments from the parameter count: 4 bytes each for the master and
// the gradients, 2 for the bf16 copy, 8 for the two moments (one share per rank under ZeRO-1, and
// in bf16 so is the master of the layers' matmul weights).
TEST(MemoryPlan, CountsTheModelsArraysFromTheParameterCount) {
  const ModelConfig c = small_config();
  const double P = double(ParameterLayout(c).total());
  MemoryRequest r{.config = c, .batch = 2, .seq_len = 16, .total_batch = 32, .threads = 2};
  MemoryPlan fp32 = plan_memory(r);
  EXPECT_EQ(fp32.parameters, 4 * P);
  EXPECT_EQ(fp32.gradients, 4 * P);
  EXPECT_EQ(fp32.optimizer, 8 * P);
  r.precision = Precision::kBf16;
  const MemoryPlan bf16 = plan_memory(r);
  EXPECT_EQ(bf16.parameters, 6 * P);  // the master and its bf16 copy
  EXPECT_EQ(bf16.gradients, 4 * P);
  r.ranks = r.local_ranks = 4;
  r.zero = true;
  EXPECT_EQ(plan_memory(r).optimizer, 2 * P);
  // Each rank its own copy of the weights, and of the layers' matmul weights' fp32 master only
  // its quarter (C = 64: every span splits evenly).
  double matmul = 0;
  for (int i = 0; i < kNumTensorRoles; ++i) {
    if (ParameterLayout::matmul_weight(i)) matmul += double(ParameterLayout(c).size(i));
  }
  EXPECT_EQ(plan_memory(r).parameters, 6 * P - 4 * matmul * 3 / 4);
  r.precision = Precision::kFp32;
  EXPECT_EQ(plan_memory(r).parameters, 4 * P);
}

// Ranks of one machine that share their weights hold one copy between them: each is charged its
// share, so the plans of the machine's ranks add up to one copy, their own gradients and their
// parts of the moments.
TEST(MemoryPlan, SharedWeightsAreChargedOncePerMachine) {
  const ModelConfig c = small_config();
  const double P = double(ParameterLayout(c).total());
  for (Precision p : {Precision::kFp32, Precision::kBf16}) {
    const double copy = P * (p == Precision::kBf16 ? 6 : 4);
    MemoryRequest r{.config = c,
                    .precision = p,
                    .batch = 2,
                    .seq_len = 16,
                    .total_batch = 64,
                    .ranks = 2,
                    .local_ranks = 2,
                    .zero = true,
                    .threads = 1,
                    .program = 0};
    const MemoryPlan own = plan_memory(r);
    r.shared_weights = true;
    const MemoryPlan shared = plan_memory(r);
    EXPECT_EQ(2 * shared.parameters, copy) << precision_name(p);
    if (p == Precision::kFp32) {  // (bf16 ranks of their own keep parts of the master: above)
      EXPECT_EQ(2 * own.parameters, 2 * copy);
      EXPECT_EQ(2 * own.total() - 2 * shared.total(), copy);
    }
    EXPECT_EQ(2 * shared.gradients, 2 * 4 * P);
    EXPECT_EQ(2 * shared.optimizer, 8 * P);
  }
}

// Through the Trainer: after its steps (and a validation), the scratch of its thread and team is
// the plan's kernel scratch, and the plan's scratch is that and the arena's gradient and head
// parts.
TEST(MemoryPlan, TheTrainersStepsHoldThePlannedKernelScratch) {
  for (const char* precision : {"fp32", "bf16"}) {
    TrainOptions o = testing::reference_run_options(testing::kFixtures[1]);
    o.steps = 2;
    o.precision = parse_precision(precision);
    o.val_data = o.train_data;
    o.val_every = 1;
    o.val_batches = 1;
    release_team_scratch();
    Trainer t(o);
    ASSERT_TRUE(t.run({}));
    const MemoryPlan& plan = t.memory_plan();
    expect_planned(precision, team_scratch_held(), size_t(plan.kernel_scratch));
    const ActivationBytes a = t.model().activation_bytes(o.batch, o.seq_len);
    EXPECT_EQ(plan.scratch, double(a.backward + a.head) + plan.kernel_scratch) << precision;
  }
}

}  // namespace
}  // namespace llmcpu
