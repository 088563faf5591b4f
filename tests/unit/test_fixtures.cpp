// The model against PyTorch: forward and backward on each committed fixture (logits rel. error
// <= 1e-5, every gradient <= 1e-4), and 10 AdamW steps on sequential batches (losses within 2e-4).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/io/debug_state.h"
#include "core/optim/adamw.h"
#include "core/train/trainer.h"
#include "core/verify/verify.h"
#include "simd/error.h"
#include "tests/unit/fixture_paths.h"

namespace llmcpu {
namespace {

using testing::fixture;
using testing::FixtureShape;

class PyTorchFixture : public ::testing::TestWithParam<FixtureShape> {};

TEST_P(PyTorchFixture, ForwardAndBackwardMatch) {
  const std::string name = GetParam().name;
  const CheckpointInfo info = read_checkpoint_header(fixture(name, "model.bin"));
  Model model(info.config);
  load_checkpoint(fixture(name, "model.bin"), model);
  const DebugState ref = load_debug_state(fixture(name, "state.bin"), info.config);
  EXPECT_EQ(ref.B, GetParam().B);
  EXPECT_EQ(ref.T, GetParam().T);
  const VerifyReport report = verify_against_state(model, ref, VerifyTolerances{});
  ASSERT_EQ(report.rows.size(), 2u + kLlmcTensors.size());
  for (const TensorComparison& c : report.rows) {
    EXPECT_TRUE(c.ok) << name << " " << c.name << ": rel. error " << c.rel_error << " > "
                      << c.tolerance;
  }
  EXPECT_TRUE(report.ok);
}

TEST_P(PyTorchFixture, TenAdamWStepsFollowPyTorch) {
  const std::string name = GetParam().name;
  const std::vector<double> expected = testing::reference_losses(name);
  ASSERT_EQ(expected.size(), 10u);
  Trainer trainer(testing::reference_run_options(GetParam()));
  std::vector<float> losses;
  TrainObserver obs;
  obs.on_step = [&](const StepReport& r) { losses.push_back(r.loss); };
  ASSERT_TRUE(trainer.run(obs));
  ASSERT_EQ(losses.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_NEAR(losses[i], expected[i], 2e-4) << name << " step " << i;
  }
  // The data is learnable: the reference loss falls, so a silent no-op optimizer would fail above.
  EXPECT_LT(expected[9], expected[0]);
}

INSTANTIATE_TEST_SUITE_P(Committed, PyTorchFixture, ::testing::ValuesIn(testing::kFixtures),
                         [](const auto& info) { return std::string(info.param.name); });

// Same thread count, same bits; and the backward pass is free of races: 1 and 2 threads agree
// exactly, since every reduction has one owner and a fixed order.
TEST(Determinism, GradientsIdenticalAcrossThreadCounts) {
  const std::string name = "small";
  const CheckpointInfo info = read_checkpoint_header(fixture(name, "model.bin"));
  const DebugState ref = load_debug_state(fixture(name, "state.bin"), info.config);
  std::vector<std::vector<float>> grads;
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 2}) {
    omp_set_num_threads(threads);
    Model model(info.config);
    load_checkpoint(fixture(name, "model.bin"), model);
    model.plan_batch(ref.B, ref.T);
    model.zero_grad();
    model.forward_backward(ref.inputs.data(), ref.targets.data(), ref.B, ref.T);
    grads.emplace_back(model.grads_flat(), model.grads_flat() + model.num_parameters());
  }
  omp_set_num_threads(saved);
  EXPECT_TRUE(grads[0] == grads[1]);
  EXPECT_TRUE(grads[1] == grads[2]);
}

// Gradients accumulate across training passes until zero_grad, as gradient accumulation needs.
TEST(Model, BackwardAccumulatesUntilZeroGrad) {
  const CheckpointInfo info = read_checkpoint_header(fixture("tiny", "model.bin"));
  const DebugState ref = load_debug_state(fixture("tiny", "state.bin"), info.config);
  Model model(info.config);
  load_checkpoint(fixture("tiny", "model.bin"), model);
  model.plan_batch(ref.B, ref.T);
  model.zero_grad();
  model.forward_backward(ref.inputs.data(), ref.targets.data(), ref.B, ref.T, 0.5f);
  // An evaluation pass in between adds nothing.
  model.forward(ref.inputs.data(), ref.targets.data(), ref.B, ref.T);
  model.forward_backward(ref.inputs.data(), ref.targets.data(), ref.B, ref.T, 0.5f);
  const ParameterLayout& layout = model.layout();
  for (int i = 0; i < kNumTensorRoles; ++i) {
    if (layout.size(i) == 0) continue;
    const TensorComparison c =
        compare_tensors(layout.name(i), model.grads_flat() + layout.offset(i),
                        ref.grads.data() + layout.offset(i), layout.size(i), 1e-4);
    EXPECT_TRUE(c.ok) << c.name << " " << c.rel_error;
  }
  // A training pass without targets is refused: there is no loss to differentiate.
  EXPECT_THROW(model.forward_backward(ref.inputs.data(), nullptr, ref.B, ref.T), Error);
}

// An AdamW pass that clears the gradients (as the trainer's in one process) stands for the next
// zero_grad: the step after it computes the same gradients, bit for bit, as the step after an
// update that only read them and a zero_grad that zeroed them. A write through grads_flat() since
// takes the promise back.
TEST(Model, UpdateThatClearsTheGradientsStandsForTheNextZeroGrad) {
  const CheckpointInfo info = read_checkpoint_header(fixture("tiny", "model.bin"));
  const DebugState ref = load_debug_state(fixture("tiny", "state.bin"), info.config);
  std::vector<std::vector<float>> grads;
  for (const bool clear : {false, true}) {
    Model model(info.config);
    load_checkpoint(fixture("tiny", "model.bin"), model);
    model.plan_batch(ref.B, ref.T);
    AdamW opt(model.num_parameters(), AdamWConfig{}, model.kernels());
    const size_t P = model.num_parameters();
    for (int step = 0; step < 2; ++step) {
      model.zero_grad();
      model.forward_backward(ref.inputs.data(), ref.targets.data(), ref.B, ref.T);
      const Model::UpdateSpans w = model.weights_for_update();
      opt.step(w.master, model.grads_flat(), 1e-3, w.copy, {}, {0.5f, clear});
      if (!clear) continue;
      const float* g = std::as_const(model).grads_flat();
      ASSERT_EQ(std::count(g, g + P, 0.0f), std::ptrdiff_t(P)) << "step " << step;
      model.mark_gradients_zero();
    }
    model.zero_grad();
    model.forward_backward(ref.inputs.data(), ref.targets.data(), ref.B, ref.T);
    grads.emplace_back(model.grads_flat(), model.grads_flat() + P);
    if (clear) {  // a false promise, taken back by the write access
      model.mark_gradients_zero();
      model.grads_flat()[P / 2] = 3.0f;
      model.zero_grad();
      const float* g = std::as_const(model).grads_flat();
      EXPECT_EQ(std::count(g, g + P, 0.0f), std::ptrdiff_t(P));
    }
  }
  EXPECT_TRUE(grads[0] == grads[1]);
  // And they are a real step's gradients, not zeros.
  EXPECT_GT(std::count_if(grads[1].begin(), grads[1].end(), [](float x) { return x != 0.0f; }),
            std::ptrdiff_t(grads[1].size() / 2));
}

TEST(Model, RejectsBatchesThatDoNotFit) {
  const CheckpointInfo info = read_checkpoint_header(fixture("edge", "model.bin"));
  Model model(info.config);
  std::vector<int> tokens(64, 1);
  EXPECT_THROW(model.plan_batch(1, info.config.max_seq_len + 1), ShapeError);
  EXPECT_THROW(model.plan_batch(0, 4), ShapeError);
  EXPECT_THROW(model.forward(tokens.data(), tokens.data(), 1, 4), ShapeError);  // nothing planned
  model.plan_batch(1, 4);
  EXPECT_TRUE(std::isfinite(model.forward(tokens.data(), tokens.data(), 1, 4)));
  // Another shape than the planned one is refused, not quietly re-planned.
  EXPECT_THROW(model.forward(tokens.data(), tokens.data(), 2, 4), ShapeError);
  EXPECT_THROW(model.forward(tokens.data(), tokens.data(), 1, 3), ShapeError);
  tokens[3] = info.config.vocab_size;  // one past the vocabulary
  EXPECT_THROW(model.forward(tokens.data(), tokens.data(), 1, 4), ShapeError);
}

}  // namespace
}  // namespace llmcpu
