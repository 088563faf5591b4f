// Learning-rate schedules (llm.c's), step counted from 0, W warmup steps, S total steps:
//   warmup (step < W):   lr * (step + 1) / W
//   constant:            lr
//   cosine:              floor + (lr - floor) * 0.5 * (1 + cos(pi * (step - W) / (S - W))),
//                        floor = lr * floor_fraction
// The cosine reaches the floor at step S; the last step trained, S - 1, is one step short of it, as
// in llm.c. Deliberately not here: the flags that choose a schedule (tools/llmcpu/train_flags.cpp).
#pragma once

#include <string>

namespace llmcpu {

enum class LrScheduleKind { kConstant, kCosine };

// Parses "constant" or "cosine"; throws UsageError naming `flag` otherwise.
LrScheduleKind parse_lr_schedule(const std::string& name, const std::string& flag);
// "constant" or "cosine": the word parse_lr_schedule reads.
const char* lr_schedule_name(LrScheduleKind kind);

class LrSchedule {
 public:
  // Throws UsageError for a negative or non-finite lr, negative warmup or total steps, or a floor
  // fraction outside 0..1.
  LrSchedule(LrScheduleKind kind, double lr, int warmup_steps, int total_steps,
             double floor_fraction);
  // The rate at `step`, 0 <= step <= total steps; throws Error for a step outside that range.
  double at(int step) const;

 private:
  LrScheduleKind kind_;
  double lr_;
  int warmup_;
  int total_;
  double floor_fraction_;
};

}  // namespace llmcpu
