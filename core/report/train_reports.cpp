#include "core/report/train_reports.h"

#include <filesystem>

#include "simd/error.h"

namespace llmcpu {

TrainReports::TrainReports(const std::string& metrics_path, const PlotOptions& plot,
                           int64_t resumed_steps, const std::string& log_path)
    : plot_(plot) {
  if (!plot_.output.empty()) {
    std::error_code ec;
    if (resumed_steps >= 0 && !log_path.empty() && std::filesystem::is_regular_file(log_path, ec)) {
      try {
        curves_ = read_loss_log(log_path, "");
        curves_.resume_at(resumed_steps);
      } catch (const FileError&) {
        curves_ = LossCurves{};  // an empty or foreign log: the plot starts with this run
      }
    }
  }
  if (!metrics_path.empty()) {
    metrics_ = std::make_unique<MetricsWriter>(metrics_path, resumed_steps);
    if (metrics_->carried_val_loss()) {  // the resumed step's, for its line (not measured again)
      pending_step_ = resumed_steps;
      pending_loss_ = *metrics_->carried_val_loss();
    }
  }
}

void TrainReports::write_pending_validation() {
  if (pending_step_ < 0) return;
  if (metrics_) metrics_->write({.step = pending_step_, .loss = {}, .val_loss = pending_loss_});
  pending_step_ = -1;
}

void TrainReports::validation(int64_t step, double loss, const Warn& warn) {
  if (pending_step_ != step) write_pending_validation();  // the same step's is replaced
  pending_step_ = step;
  pending_loss_ = loss;
  curves_.add_val(step, loss);
  redraw(warn, false);
}

void TrainReports::step(StepMetrics m) {
  if (pending_step_ == m.step) {
    m.val_loss = pending_loss_;
    pending_step_ = -1;
  }
  write_pending_validation();  // one of an earlier step (not expected: validation precedes its
                               // step)
  if (metrics_) metrics_->write(m);
  if (m.loss) curves_.add_train(m.step, *m.loss);
}

void TrainReports::finish(const Warn& warn) {
  write_pending_validation();
  redraw(warn, true);
}

void TrainReports::redraw(const Warn& warn, bool last) {
  if (plot_.output.empty() || curves_.empty()) return;
  try {
    plot_losses({curves_}, plot_);
  } catch (const Error& e) {
    // Mid-run: once (the same failure would repeat at every validation). The last plot: always,
    // since the file then does not show the whole run.
    if (last || !warned_) {
      if (warn) {
        warn(std::string(last ? "the final loss plot" : "the loss plot") + " was not drawn (" +
             e.what() + ")" +
             (last ? "; with a --log, `llmcpu plot` redraws it from the log"
                   : "; training goes on, later failures are not reported"));
      }
      warned_ = true;
    }
  }
}

}  // namespace llmcpu
