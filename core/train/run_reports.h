// What rank 0 writes about a run as it goes: the llm.c log (--log: s:STEP trl:LOSS and
// s:STEP tel:LOSS lines, appended to on --resume) and the metrics and plot (--metrics, --plot:
// core/report/train_reports.h). The other ranks write nothing. Deliberately not here: the
// console's lines (the observer's, tools/llmcpu/cmd_train.cpp), the figures themselves.
#pragma once

#include <cstdio>
#include <memory>

#include "core/report/train_reports.h"
#include "core/train/train_options.h"

namespace llmcpu {

class RunReports {
 public:
  // `rank0`: this rank writes; `step`: where a resumed run goes on. Throws FileError for a log or
  // metrics file that cannot be opened.
  RunReports(const TrainOptions& o, bool rank0, int step);
  ~RunReports();
  RunReports(const RunReports&) = delete;
  RunReports& operator=(const RunReports&) = delete;

  // The validation loss after `step` steps: the log line, the metrics and the plot.
  void validation(int step, float loss, const TrainReports::Warn& warn);
  // Training step `step`'s loss line in the log.
  void train_loss(int step, float loss);
  // Its metrics line.
  void step(const StepMetrics& m);
  // The end of the run (also an interrupted one).
  void finish(const TrainReports::Warn& warn);

 private:
  void log_line(const char* fmt, int step, float value);

  std::FILE* log_ = nullptr;
  std::unique_ptr<TrainReports> reports_;  // with --metrics or --plot
};

}  // namespace llmcpu
