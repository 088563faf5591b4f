// Loss curves drawn by gnuplot (Debian gnuplot-nox): a script with the data inline (gnuplot 5
// datablocks) goes through a pipe to a gnuplot process, which writes a PNG (pngcairo) or an SVG
// (svg terminal), chosen by the output's extension, to a temporary file that is renamed over the
// output only once gnuplot has finished without error. One colour per run: its training loss a thin
// line, its validation loss a thicker dashed line with points.
// Deliberately not here: reading logs (core/report/loss_log.h) and deciding what a failed plot
// means for a training run (the trainer warns and goes on).
#pragma once

#include <string>
#include <vector>

#include "core/report/loss_log.h"

namespace llmcpu {

enum class PlotFormat { kPng, kSvg };

// The sizes an image may have, in pixels, each way.
inline constexpr int kMinPixels = 100, kMaxPixels = 10000;

struct PlotOptions {
  std::string output{};    // *.png or *.svg
  std::string title{};     // empty: none
  bool log_scale = false;  // logarithmic loss axis
  int width = 800;         // pixels
  int height = 500;
};

// The format named by the output's extension (.png, .svg, any case); UsageError naming `flag` and
// the expected extensions otherwise.
PlotFormat plot_format_of(const std::string& output, const std::string& flag);

// Refuses (UsageError naming `flag` or the option) options a plot cannot be drawn with: another
// extension, a size outside 100..10000 pixels, control characters in the title or the output path.
void check_plot_options(const PlotOptions& options, const std::string& flag);

// The gnuplot program on PATH; Error saying how to install it if there is none.
std::string find_gnuplot();

// The gnuplot script that draws `runs` into `output_path` (the plot's temporary file). Series with
// no finite point are left out. Strings are quoted with gnuplot_quote and drawn without enhanced
// text, so ^, _ and @ in file names show as themselves.
std::string gnuplot_script(const std::vector<LossCurves>& runs, const PlotOptions& options,
                           const std::string& output_path);

// `text` as a single-quoted gnuplot string: ' doubled; control characters (which would end the
// command) become '?'.
std::string gnuplot_quote(const std::string& text);

// Draws `runs` (at least one finite point among them) into options.output. Error with gnuplot's own
// message if it fails, is missing or is killed; options.output is then untouched.
void plot_losses(const std::vector<LossCurves>& runs, const PlotOptions& options);

}  // namespace llmcpu
