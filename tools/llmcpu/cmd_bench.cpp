// `llmcpu bench`: every kernel of a training step at a model's shapes, and the whole step, per SIMD
// target, with the median, min and max of the repetitions, GFLOP/s, GB/s and the share of this
// machine's roofline, printed as a markdown table (like llama-bench's), CSV or JSON on stdout.
// Progress goes to stderr. The measuring is core/bench/.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/bench/report.h"
#include "core/bench/run.h"
#include "core/io/model_file.h"
#include "simd/error.h"
#include "simd/kernels.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"
#include "tools/llmcpu/placement_flags.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;

// --model: a model file (its shape, and its weights for the step), a preset file or a preset name.
void resolve_model(const std::string& spec, bench::BenchOptions* o) {
  std::string preset;
  o->config = resolve_model_spec(spec, &o->checkpoint, &preset);
  if (!o->checkpoint.empty()) {
    o->model = fs::path(o->checkpoint).filename().string();
  } else {
    o->model = preset == spec ? fs::path(preset).stem().string() : spec;  // a file, or a name
  }
}

}  // namespace

int run_bench(const std::vector<std::string>& args) {
  std::string model = "gpt2-d2", precision = "fp32", targets, format = "table";
  bench::BenchOptions o;
  PlacementOptions placement;
  std::string available;
  for (std::string_view t : available_targets()) {
    if (!available.empty()) available += ',';
    available += t;
  }
  const std::string targets_help =
      "comma-separated kernel targets (default: every one this CPU runs: " + available + ")";
  ArgParser p("bench",
              "Times every kernel of a training step at a model's shapes (forward, backward, AdamW)\n"
              "and a whole step, per SIMD target, against this machine's roofs measured at start.");
  p.option("model", 'e', &model, "M",
           "checkpoint file, preset file (.toml) or preset name (default gpt2-d2)");
  p.option("batch", 'b', &o.batch, "B", "batch size (default 2)");
  p.option("seq-len", 't', &o.seq_len, "T", "sequence length (default 64)");
  p.option("precision", 0, &precision, "P", "fp32 or bf16 (mixed precision; default fp32)");
  p.option("targets", 0, &targets, "LIST", targets_help.c_str());
  p.option("reps", 0, &o.reps, "N", "timed calls of each op and timed steps (default 3)");
  p.option("format", 0, &format, "F", "table (markdown), csv or json (default table)");
  add_placement_flags(p, &placement);
  if (!p.parse(args)) return 0;

  const bench::Format fmt = bench::parse_format(format);
  o.precision = parse_precision(precision);
  if (o.reps < 1) throw UsageError("--reps: expected at least 1, got " + std::to_string(o.reps));
  if (o.batch < 1) throw UsageError("--batch: expected at least 1, got " + std::to_string(o.batch));
  o.targets = bench::resolve_targets(targets);
  resolve_model(model, &o);
  if (o.seq_len < 1 || o.seq_len > o.config.max_seq_len) {
    throw UsageError("--seq-len: expected 1 to " + std::to_string(o.config.max_seq_len) +
                     " (the model's maxT), got " + std::to_string(o.seq_len));
  }
  const Placement placed = apply_placement_flags(placement);
  std::fprintf(stderr, "%s\n", placed.summary.c_str());
  const bench::BenchReport report = bench::run_bench(o, [](const std::string& what) {
    std::fprintf(stderr, "bench: %s\n", what.c_str());
  });
  const std::string text = bench::format_report(report, fmt);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace llmcpu
