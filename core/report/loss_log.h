// Training and validation losses against the step: what an llm.c log file holds (lines
// `s:STEP trl:LOSS` and `s:STEP tel:LOSS`, as core/train/run_reports.cpp and llm.c write them), read
// from such a file or collected while a run goes, for plotting (core/report/plot.h).
// Deliberately not here: drawing, and the log's writing (the trainer writes its lines itself).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llmcpu {

struct LossPoint {
  int64_t step;
  double loss;  // may be NaN or infinite (a diverged step); the plot leaves such points out
};

// One run's curves. A resumed run appends to its log, so a step may come again: a point whose step
// is not after the series' last one replaces the points from that step on (the resumed run redid
// them), which keeps each series ascending.
struct LossCurves {
  std::string name{};  // the run's name in a chart's key (e.g. the log's file name)
  std::vector<LossPoint> train{};
  std::vector<LossPoint> val{};

  void add_train(int64_t step, double loss) { add(train, step, loss); }
  void add_val(int64_t step, double loss) { add(val, step, loss); }
  // A run resumed after `steps_done` steps redoes training steps steps_done, steps_done + 1, ...
  // and validations after steps_done (not the one at steps_done itself): drops those points.
  void resume_at(int64_t steps_done);
  bool empty() const { return train.empty() && val.empty(); }

 private:
  static void add(std::vector<LossPoint>& series, int64_t step, double loss);
};

// Reads an llm.c log file. Every non-empty line must be `s:STEP` followed by KEY:VALUE fields; trl
// and tel are kept, other keys (llm.c's lr:, norm:, eval:) are skipped. A last line without its
// newline (a log still being written) is ignored if it does not parse. FileError naming the file
// (and line) for an unreadable file, a malformed line, or a file without any trl or tel line.
LossCurves read_loss_log(const std::string& path, const std::string& name);

}  // namespace llmcpu
