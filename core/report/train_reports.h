// What `train --metrics FILE.jsonl` and `train --plot FILE` write while a run goes: a metrics line
// per step (core/report/metrics.h) and the loss plot (core/report/plot.h) redrawn at every
// validation and at the end, from the losses kept here in memory (with --resume and a --log, from
// the log's earlier lines too, so the plot shows the whole run).
// A plot that fails mid-run is a warning, once, and the run goes on: a training run is worth more
// than its picture, the losses stay in the log and the metrics file, and `llmcpu plot` can redraw
// it. What can be checked up front (the extension, gnuplot installed) is, before training starts.
// A metrics line that cannot be written is an error: the file would otherwise have silent holes.
// Deliberately not here: which rank reports (the trainer makes one on rank 0 only).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/report/loss_log.h"
#include "core/report/metrics.h"
#include "core/report/plot.h"

namespace llmcpu {

class TrainReports {
 public:
  using Warn = std::function<void(const std::string&)>;

  // `metrics_path` or `plot.output` may be empty (not asked for). `resumed_steps` >= 0: a resumed
  // run after that many steps (the metrics file is continued, core/report/metrics.h says how; the
  // plot starts from `log_path`'s earlier lines, if it names a readable log). The plot's options
  // and gnuplot are the caller's to check before any work (check_plot_options, find_gnuplot;
  // plot_losses checks the options again at every draw). Throws FileError if the metrics file
  // cannot be opened.
  TrainReports(const std::string& metrics_path, const PlotOptions& plot, int64_t resumed_steps,
               const std::string& log_path);

  // The validation loss measured after `step` steps: kept for that step's metrics line; the plot
  // is redrawn.
  void validation(int64_t step, double loss, const Warn& warn);
  // A training step's figures (val_loss is filled in here).
  void step(StepMetrics m);
  // At the end of the run (also an interrupted one): a last validation's own line, the plot.
  void finish(const Warn& warn);

 private:
  void write_pending_validation();
  void redraw(const Warn& warn, bool last);

  std::unique_ptr<MetricsWriter> metrics_;
  PlotOptions plot_;
  LossCurves curves_;
  int64_t pending_step_ = -1;  // a validation not yet written to the metrics file
  double pending_loss_ = 0;
  bool warned_ = false;
};

}  // namespace llmcpu
