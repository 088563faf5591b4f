#include "core/train/run_reports.h"

#include <cerrno>

#include "core/util/file.h"
#include "simd/error.h"

namespace llmcpu {

RunReports::RunReports(const TrainOptions& o, bool rank0, int step) {
  if (!rank0) return;
  if (!o.metrics_path.empty() || !o.plot_path.empty()) {
    // Before the log is opened: a resumed run's plot starts from the log's earlier lines.
    const std::string run = o.model.empty() ? o.resume : o.model;
    const PlotOptions plot{.output = o.plot_path, .title = "llmcpu train " + run};
    reports_ = std::make_unique<TrainReports>(o.metrics_path, plot, o.resume.empty() ? -1 : step,
                                              o.log_path);
  }
  if (!o.log_path.empty()) {
    log_ = std::fopen(o.log_path.c_str(), o.resume.empty() ? "w" : "a");
    if (!log_) throw FileError(o.log_path, "cannot open log: " + errno_message(errno));
  }
}

RunReports::~RunReports() {
  if (log_) std::fclose(log_);
}

void RunReports::log_line(const char* fmt, int step, float value) {
  if (!log_) return;
  std::fprintf(log_, fmt, step, value);
  std::fflush(log_);
}

void RunReports::validation(int step, float loss, const TrainReports::Warn& warn) {
  log_line("s:%d tel:%f\n", step, loss);
  if (reports_) reports_->validation(step, loss, warn);
}

void RunReports::train_loss(int step, float loss) { log_line("s:%d trl:%f\n", step, loss); }

void RunReports::step(const StepMetrics& m) {
  if (reports_) reports_->step(m);
}

void RunReports::finish(const TrainReports::Warn& warn) {
  if (reports_) reports_->finish(warn);
}

}  // namespace llmcpu
