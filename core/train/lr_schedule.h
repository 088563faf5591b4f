// Learning-rate schedules, step counted from 0:
//   warmup (step < W):   lr * (step + 1) / W
//   constant:            lr
//   cosine:              floor + (lr - floor) * 0.5 * (1 + cos(pi * (step - W) / (S - W))),
//                        floor = lr * floor_fraction, S = total steps (llm.c's schedule)
#pragma once

#include <string>

namespace llmcpu {

enum class LrScheduleKind { kConstant, kCosine };

// Parses "constant" or "cosine"; throws UsageError naming `flag` otherwise.
LrScheduleKind parse_lr_schedule(const std::string& name, const std::string& flag);

class LrSchedule {
 public:
  LrSchedule(LrScheduleKind kind, double lr, int warmup_steps, int total_steps, double floor_fraction);
  double at(int step) const;

 private:
  LrScheduleKind kind_;
  double lr_;
  int warmup_;
  int total_;
  double floor_fraction_;
};

}  // namespace llmcpu
