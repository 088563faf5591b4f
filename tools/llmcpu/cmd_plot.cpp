// `llmcpu plot`: the training and validation losses of one or more llm.c log files (train --log, or
// llm.c's own) against the step, drawn by gnuplot into a PNG or an SVG: one colour per log, named
// after its file.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/report/loss_log.h"
#include "core/report/plot.h"
#include "simd/error.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"

namespace llmcpu {

namespace {

class PlotCommand : public Command {
 public:
  void add_flags(ArgParser& p) override {
    p.option("output", 'o', &o_.output, "FILE",
             "the image: *.png or *.svg (the format follows it)");
    p.flag("log-scale", 0, &o_.log_scale, "logarithmic loss axis");
    p.option("width", 0, &o_.width, "W", "width in pixels (default 800)", {kMinPixels, kMaxPixels});
    p.option("height", 0, &o_.height, "H", "height in pixels (default 500)",
             {kMinPixels, kMaxPixels});
    p.option("title", 0, &o_.title, "TEXT", "the chart's title (default: none)");
    p.positionals(&logs_);
  }
  void check(const ArgParser&) override {
    if (logs_.empty()) throw UsageError("plot: no log file given (see llmcpu plot --help)");
    check_plot_options(o_, "--output");
  }
  int run(const ArgParser& p) override;

 private:
  PlotOptions o_;
  std::vector<std::string> logs_;
};

int PlotCommand::run(const ArgParser&) {
  find_gnuplot();  // before the logs are read: a missing gnuplot is the first thing to fix
  // Each run is named after its log's file name, or its path as given where two file names are
  // the same (runs/a/log.txt and runs/b/log.txt).
  std::vector<std::string> names;
  for (const std::string& log : logs_) {
    names.push_back(std::filesystem::path(log).filename().string());
  }
  const std::set<std::string> distinct(names.begin(), names.end());
  const bool by_path = distinct.size() < names.size() || distinct.count("");
  std::vector<LossCurves> runs;
  size_t points = 0;
  for (size_t i = 0; i < logs_.size(); ++i) {
    runs.push_back(read_loss_log(logs_[i], by_path ? logs_[i] : names[i]));
    points += runs.back().train.size() + runs.back().val.size();
  }
  plot_losses(runs, o_);
  std::printf("plot: %s (%zu log%s, %zu points)\n", o_.output.c_str(), runs.size(),
              runs.size() == 1 ? "" : "s", points);
  return 0;
}

}  // namespace

std::unique_ptr<Command> make_plot_command() { return std::make_unique<PlotCommand>(); }

}  // namespace llmcpu
