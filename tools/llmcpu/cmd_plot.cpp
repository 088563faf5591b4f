// `llmcpu plot`: the training and validation losses of one or more llm.c log files (train --log, or
// llm.c's own) against the step, drawn by gnuplot into a PNG or an SVG: one colour per log, named
// after its file.
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/report/loss_log.h"
#include "core/report/plot.h"
#include "simd/error.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"
#include "tools/llmcpu/positional_args.h"

namespace llmcpu {

int run_plot(const std::vector<std::string>& args) {
  PlotOptions o;
  ArgParser p(
      "plot",
      "Draws the training loss (s:STEP trl:LOSS lines) and validation loss (s:STEP tel:LOSS)\n"
      "of llm.c log files against the step, several runs on one chart, with gnuplot.\n"
      "usage: llmcpu plot LOG... -o loss.png|loss.svg [--log-scale] [--width W --height H]\n"
      "                  [--title TEXT]");
  p.option("output", 'o', &o.output, "FILE", "the image: *.png or *.svg (the format follows it)");
  p.flag("log-scale", 0, &o.log_scale, "logarithmic loss axis");
  p.option("width", 0, &o.width, "W", "width in pixels (default 800)");
  p.option("height", 0, &o.height, "H", "height in pixels (default 500)");
  p.option("title", 0, &o.title, "TEXT", "the chart's title (default: none)");
  const SplitArgs split = split_args(args, {"--output", "-o", "--width", "--height", "--title"});
  if (!p.parse(split.flags)) return 0;
  if (split.plain.empty()) throw UsageError("plot: no log file given (see llmcpu plot --help)");
  check_plot_options(o, "--output");
  find_gnuplot();  // before the logs are read: a missing gnuplot is the first thing to fix
  // Each run is named after its log's file name, or its path as given where two file names are
  // the same (runs/a/log.txt and runs/b/log.txt).
  std::vector<std::string> names;
  for (const std::string& log : split.plain) {
    names.push_back(std::filesystem::path(log).filename().string());
  }
  const std::set<std::string> distinct(names.begin(), names.end());
  const bool by_path = distinct.size() < names.size() || distinct.count("");
  std::vector<LossCurves> runs;
  size_t points = 0;
  for (size_t i = 0; i < split.plain.size(); ++i) {
    runs.push_back(read_loss_log(split.plain[i], by_path ? split.plain[i] : names[i]));
    points += runs.back().train.size() + runs.back().val.size();
  }
  plot_losses(runs, o);
  std::printf("plot: %s (%zu log%s, %zu points)\n", o.output.c_str(), runs.size(),
              runs.size() == 1 ? "" : "s", points);
  return 0;
}

}  // namespace llmcpu
