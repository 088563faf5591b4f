#include "core/train/lr_schedule.h"

#include <cmath>
#include <cstdio>

#include "simd/error.h"

namespace llmcpu {
namespace {

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

}  // namespace

LrScheduleKind parse_lr_schedule(const std::string& name, const std::string& flag) {
  if (name == "constant") return LrScheduleKind::kConstant;
  if (name == "cosine") return LrScheduleKind::kCosine;
  throw UsageError(flag + ": unknown schedule '" + name + "', expected constant or cosine");
}

const char* lr_schedule_name(LrScheduleKind kind) {
  return kind == LrScheduleKind::kCosine ? "cosine" : "constant";
}

LrSchedule::LrSchedule(LrScheduleKind kind, double lr, int warmup_steps, int total_steps,
                       double floor_fraction)
    : kind_(kind),
      lr_(lr),
      warmup_(warmup_steps),
      total_(total_steps),
      floor_fraction_(floor_fraction) {
  const std::string what = "learning-rate schedule: ";
  if (!(lr >= 0) || !std::isfinite(lr)) {
    throw UsageError(what + "rate " + number(lr) + ", expected a finite number >= 0");
  }
  if (warmup_steps < 0) {
    throw UsageError(what + "warmup of " + std::to_string(warmup_steps) + " steps, expected >= 0");
  }
  if (total_steps < 0) {
    throw UsageError(what + "total of " + std::to_string(total_steps) + " steps, expected >= 0");
  }
  if (!(floor_fraction >= 0 && floor_fraction <= 1)) {
    throw UsageError(what + "floor fraction " + number(floor_fraction) +
                     ", expected a fraction in 0..1");
  }
}

double LrSchedule::at(int step) const {
  if (step < 0 || step > total_) {
    throw Error("learning-rate schedule: step " + std::to_string(step) + " outside 0.." +
                std::to_string(total_));
  }
  if (step < warmup_) return lr_ * double(step + 1) / double(warmup_);
  if (kind_ == LrScheduleKind::kConstant || total_ <= warmup_) return lr_;
  const double ratio = double(step - warmup_) / double(total_ - warmup_);
  const double floor = lr_ * floor_fraction_;
  return floor + (lr_ - floor) * 0.5 * (1.0 + std::cos(M_PI * ratio));
}

}  // namespace llmcpu
