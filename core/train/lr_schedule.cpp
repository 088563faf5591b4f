#include "core/train/lr_schedule.h"

#include <cmath>

#include "core/util/error.h"

namespace llmcpu {

LrScheduleKind parse_lr_schedule(const std::string& name, const std::string& flag) {
  if (name == "constant") return LrScheduleKind::kConstant;
  if (name == "cosine") return LrScheduleKind::kCosine;
  throw UsageError(flag + ": unknown schedule '" + name + "', expected constant or cosine");
}

LrSchedule::LrSchedule(LrScheduleKind kind, double lr, int warmup_steps, int total_steps,
                       double floor_fraction)
    : kind_(kind), lr_(lr), warmup_(warmup_steps), total_(total_steps), floor_fraction_(floor_fraction) {}

double LrSchedule::at(int step) const {
  if (step < warmup_) return lr_ * double(step + 1) / double(warmup_);
  if (kind_ == LrScheduleKind::kConstant || total_ <= warmup_) return lr_;
  const double ratio = double(step - warmup_) / double(total_ - warmup_);
  const double floor = lr_ * floor_fraction_;
  return floor + (lr_ - floor) * 0.5 * (1.0 + std::cos(M_PI * ratio));
}

}  // namespace llmcpu
