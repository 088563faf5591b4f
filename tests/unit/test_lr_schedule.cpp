// The learning-rate schedules (core/train/lr_schedule.h): values worked out by hand from their
// definition at the points that pin it down (the first step, the end of warmup, the start, quarter
// points, middle and end of the cosine, the last step trained), every step against the definition
// evaluated independently in long double, the rates the trainer actually applies, and the values
// refused, by the class and by `llmcpu train`.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/train/lr_schedule.h"
#include "core/train/trainer.h"
#include "simd/error.h"
#include "tests/common/process.h"
#include "tests/unit/fixture_paths.h"

namespace llmcpu {
namespace {

using testing::fixture;
using testing::run_llmcpu;

// The schedule computes in double: the ratio, pi * ratio (M_PI itself is within 2^-53 of pi), cos
// (within an ulp), 1 + cos, the two products and the sum, each rounding at most 2^-53 of a quantity
// no larger than 2 lr (the argument errors reach the result through cos' slope, at most 1, and
// (lr - floor) / 2 <= lr). Under 16 such roundings: the results are within 16 * 2^-53 * lr of the
// exact values, here given in closed form or in long double (2^-64).
double limit(double lr) { return 16 * 0x1p-53 * lr; }

// The definition, evaluated in long double with its own pi.
long double definition(LrScheduleKind kind, double lr, int W, int S, double floor_fraction,
                       int step) {
  const long double pi = std::acos(-1.0L), rate = lr;
  if (step < W) return rate * (step + 1) / W;
  if (kind == LrScheduleKind::kConstant || S <= W) return rate;
  const long double floor = rate * floor_fraction;
  const long double progress = static_cast<long double>(step - W) / (S - W);
  return floor + (rate - floor) * (1 + std::cos(pi * progress)) / 2;
}

TEST(LrSchedule, ConstantWithoutWarmupIsTheRateThroughout) {
  const LrSchedule s(LrScheduleKind::kConstant, 3e-4, 0, 50, 0.1);
  for (int step = 0; step <= 50; ++step) EXPECT_EQ(s.at(step), 3e-4) << "step " << step;
}

TEST(LrSchedule, WarmupRisesLinearlyToTheRate) {
  const double lr = 6e-4;
  for (LrScheduleKind kind : {LrScheduleKind::kConstant, LrScheduleKind::kCosine}) {
    const LrSchedule s(kind, lr, 8, 100, 0.0);
    EXPECT_NEAR(s.at(0), lr / 8, limit(lr)) << "the first step takes 1/W of the rate";
    EXPECT_NEAR(s.at(3), lr / 2, limit(lr));
    EXPECT_NEAR(s.at(7), lr, limit(lr)) << "the last warmup step reaches the rate";
    EXPECT_NEAR(s.at(8), lr, limit(lr)) << "the first step after warmup";
    for (int step = 1; step < 8; ++step) {
      EXPECT_NEAR(s.at(step) - s.at(step - 1), lr / 8, limit(lr)) << "step " << step;
    }
  }
  // A constant schedule stays at the rate after warmup.
  const LrSchedule c(LrScheduleKind::kConstant, lr, 8, 100, 0.5);
  for (int step = 8; step <= 100; ++step) EXPECT_EQ(c.at(step), lr) << "step " << step;
}

TEST(LrSchedule, CosineFallsFromTheRateToTheFloor) {
  // Warmup W = 10, S = 110: the cosine runs over 100 steps, so its quarter points are steps.
  const double lr = 6e-4, fraction = 0.1, floor = lr * fraction;
  const LrSchedule s(LrScheduleKind::kCosine, lr, 10, 110, fraction);
  EXPECT_NEAR(s.at(10), lr, limit(lr)) << "starts at the rate";
  EXPECT_NEAR(s.at(35), floor + (lr - floor) * (2 + std::sqrt(2.0)) / 4, limit(lr));
  EXPECT_NEAR(s.at(60), (lr + floor) / 2, limit(lr)) << "half way down in the middle";
  EXPECT_NEAR(s.at(85), floor + (lr - floor) * (2 - std::sqrt(2.0)) / 4, limit(lr));
  EXPECT_NEAR(s.at(110), floor, limit(lr)) << "the floor at the end";
  // The last step trained is 109, one step short of the floor (llm.c's schedule):
  // floor + (lr - floor) (1 + cos(pi 99/100)) / 2 = floor + (lr - floor) sin^2(pi / 200).
  const double last = floor + (lr - floor) * std::pow(std::sin(M_PI / 200), 2);
  EXPECT_NEAR(s.at(109), last, limit(lr));
  EXPECT_GT(s.at(109), floor);
  for (int step = 11; step <= 110; ++step) {
    EXPECT_LT(s.at(step), s.at(step - 1)) << "falls at every step, step " << step;
    // Symmetric about the middle: cos(pi x) + cos(pi (1 - x)) = 0.
    EXPECT_NEAR(s.at(step) + s.at(120 - step), lr + floor, 2 * limit(lr)) << "step " << step;
  }
}

TEST(LrSchedule, EveryStepFollowsTheDefinition) {
  struct Case {
    LrScheduleKind kind;
    double lr;
    int W, S;
    double floor_fraction;
  };
  const Case cases[] = {{LrScheduleKind::kCosine, 3e-3, 20, 2000, 0.1},
                        {LrScheduleKind::kCosine, 1e-3, 0, 7, 0.0},
                        {LrScheduleKind::kCosine, 1e-3, 0, 1, 0.5},
                        {LrScheduleKind::kCosine, 2.5e-4, 9, 9, 0.1},   // all warmup
                        {LrScheduleKind::kCosine, 2.5e-4, 12, 9, 0.1},  // longer than the run
                        {LrScheduleKind::kCosine, 1e-2, 3, 13, 1.0},    // floor = rate
                        {LrScheduleKind::kConstant, 5e-4, 5, 30, 0.3}};
  for (const Case& c : cases) {
    const LrSchedule s(c.kind, c.lr, c.W, c.S, c.floor_fraction);
    for (int step = 0; step <= c.S; ++step) {
      const long double ref = definition(c.kind, c.lr, c.W, c.S, c.floor_fraction, step);
      EXPECT_NEAR(s.at(step), static_cast<double>(ref), limit(c.lr))
          << "lr " << c.lr << " W " << c.W << " S " << c.S << " step " << step;
    }
  }
}

// The trainer takes each step's rate from the schedule: the rates it reports are the definition's.
TEST(LrSchedule, TheTrainerAppliesItAtEveryStep) {
  TrainOptions o = testing::reference_run_options(testing::kFixtures[2]);  // edge: B=1, T=7
  o.steps = 7;
  o.lr_schedule = LrScheduleKind::kCosine;
  o.warmup = 2;
  o.lr_floor = 0.25;
  Trainer trainer(o);
  std::vector<double> rates;
  TrainObserver obs;
  obs.on_step = [&](const StepReport& r) {
    EXPECT_EQ(r.step, int(rates.size()));
    rates.push_back(r.lr);
  };
  ASSERT_TRUE(trainer.run(obs));
  ASSERT_EQ(rates.size(), 7u);
  for (int step = 0; step < 7; ++step) {
    const long double ref = definition(LrScheduleKind::kCosine, o.lr, 2, 7, 0.25, step);
    EXPECT_NEAR(rates[step], static_cast<double>(ref), limit(o.lr)) << "step " << step;
  }
}

TEST(LrSchedule, BadValuesAreRefused) {
  auto refused = [](auto make, const std::string& what) {
    try {
      make();
      ADD_FAILURE() << "accepted: " << what;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  using K = LrScheduleKind;
  refused([] { LrSchedule(K::kCosine, -1e-3, 0, 10, 0.1); }, "rate -0.001, expected a finite");
  refused([] { LrSchedule(K::kCosine, NAN, 0, 10, 0.1); }, "rate nan, expected a finite");
  refused([] { LrSchedule(K::kCosine, INFINITY, 0, 10, 0.1); }, "rate inf, expected a finite");
  refused([] { LrSchedule(K::kConstant, 1e-3, -1, 10, 0.1); }, "warmup of -1 steps");
  refused([] { LrSchedule(K::kConstant, 1e-3, 0, -2, 0.1); }, "total of -2 steps");
  refused([] { LrSchedule(K::kCosine, 1e-3, 0, 10, 1.5); }, "floor fraction 1.5, expected");
  refused([] { LrSchedule(K::kCosine, 1e-3, 0, 10, -0.1); }, "floor fraction -0.1, expected");
  refused([] { parse_lr_schedule("linear", "--lr-schedule"); },
          "--lr-schedule: unknown schedule 'linear', expected constant or cosine");
  // Steps outside the schedule.
  const LrSchedule s(K::kCosine, 1e-3, 2, 10, 0.1);
  EXPECT_THROW(s.at(-1), Error);
  EXPECT_THROW(s.at(11), Error);
  EXPECT_NO_THROW(s.at(10));
}

TEST(LrSchedule, TrainRefusesBadScheduleFlagsByName) {
  const std::string run = "train --model " + fixture("edge", "model.bin") + " --train-data " +
                          fixture("edge", "train.bin") + " -b 1 -t 7 --steps 2 ";
  const struct {
    const char* flags;
    const char* message;
  } cases[] = {{"--warmup -1", "--warmup -1 is out of range: expected an integer in 0..2147483647"},
               {"--lr-floor 1.5", "--lr-floor 1.5 is out of range: expected a number in 0..1"},
               {"--lr-floor -0.5", "--lr-floor -0.5 is out of range: expected a number in 0..1"},
               {"--lr -1e-3", "--lr -1e-3 is out of range: expected a number in 0..3.40282e+38"},
               {"--lr-schedule cosin", "--lr-schedule: unknown schedule 'cosin'"}};
  for (const auto& c : cases) {
    const testing::Outcome r = run_llmcpu(run + c.flags);
    EXPECT_EQ(r.status, 2) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.flags << "\n" << r.output;
  }
}

}  // namespace
}  // namespace llmcpu
