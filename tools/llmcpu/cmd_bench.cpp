// `llmcpu bench`: every kernel of a training step at a model's shapes, and the whole step, per SIMD
// target, with the median, min and max of the repetitions, GFLOP/s, GB/s and the share of this
// machine's roofline, printed as a markdown table (like llama-bench's), CSV or JSON on stdout.
// Progress goes to stderr. The measuring is core/bench/.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/bench/report.h"
#include "core/bench/run.h"
#include "core/io/model_file.h"
#include "core/lora/peft_files.h"
#include "core/model/config.h"
#include "core/model/precision.h"
#include "core/train/memory_plan.h"
#include "simd/error.h"
#include "simd/kernels.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"
#include "tools/llmcpu/placement_flags.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;

// --model: a model file (its shape, and its weights for the step), a preset file or a preset name.
void resolve_bench_model(const std::string& spec, bench::BenchOptions* o) {
  o->source = resolve_model(spec);
  o->config = o->source.config;
  const fs::path path = o->source.path;
  if (o->source.is_file()) {
    o->model = path.filename().string();
  } else {
    o->model = o->source.path == spec ? path.stem().string() : spec;  // a file, or a name
  }
}

// The model and one step at the asked shape must fit in this process's memory: refused with the
// numbers, before anything is allocated.
void check_bench_memory(const bench::BenchOptions& o) {
  MemoryRequest r;
  r.config = o.config;
  r.precision = o.precision;
  r.batch = o.batch;
  r.seq_len = o.seq_len;
  r.total_batch = static_cast<long long>(o.batch) * o.seq_len;
  if (o.lora_step()) {
    const LoraFootprint f = lora_footprint(o.config, o.lora, o.batch, o.seq_len);
    r.lora_parameters = f.parameters;
    r.lora_activation_floats = f.activation_floats;
    r.base_quant = o.base_quant;
  }
  const MemoryPlan plan = plan_memory(r);
  const MemoryLimit limit = memory_limit(1);
  if (limit.source.empty() || plan.total() <= limit.bytes) return;
  char text[160];
  std::snprintf(text, sizeof text, "need about %.0f MiB, but this process may use %.0f MiB (%s)",
                plan.total() / (1024.0 * 1024.0), limit.bytes / (1024.0 * 1024.0),
                limit.source.c_str());
  throw UsageError("--batch " + std::to_string(o.batch) + " --seq-len " +
                   std::to_string(o.seq_len) + ": the model and a step " + text + " (" +
                   describe(plan) + ")");
}

// The most timed repetitions --reps takes: a bench that a user can wait for.
constexpr int kMaxReps = 10000;

class BenchCommand : public Command {
 public:
  void add_flags(ArgParser& p) override {
    std::string available;
    for (std::string_view t : available_targets()) {
      if (!available.empty()) available += ',';
      available += t;
    }
    targets_help_ =
        "comma-separated kernel targets (default: every one this CPU runs: " + available + ")";
    p.option("model", 'e', &model_, "M",
             "checkpoint file, preset file (.toml) or preset name (default gpt2-d2)");
    p.option("batch", 'b', &o_.batch, "B", "batch size (default 2)", {1, kMaxBatch});
    p.option("seq-len", 't', &o_.seq_len, "T",
             "sequence length (default 64; at most the model's maxT)", {1, kMaxSeqLen});
    p.option("precision", 0, &precision_, "P", "fp32 or bf16 (mixed precision; default fp32)");
    p.option("adapter", 0, &o_.adapter, "DIR",
             "time the LoRA step of this PEFT adapter folder on the model (the base frozen)");
    p.option("lora", 0, &o_.lora.r, "R", "time the LoRA step of a new adapter of rank R",
             {0, 65536});
    p.option("lora-targets", 0, &lora_targets_, "LIST",
             "with --lora: the linear maps adapted (default all-linear)");
    p.option("lora-train", 0, &lora_train_, "LIST",
             "with --lora: base modules trained in full too, as train --lora-train");
    p.option("base-quant", 0, &base_quant_, "Q",
             "with --lora or --adapter: the frozen base's layer weights as none (default: as "
             "loaded), int8 or nf4, as train --base-quant holds them");
    p.option("targets", 0, &targets_, "LIST", targets_help_.c_str());
    p.option("reps", 0, &o_.reps, "N", "timed calls of each op and timed steps (default 3)",
             {1, kMaxReps});
    p.option("format", 0, &format_, "F", "table (markdown), csv or json (default table)");
    add_placement_flags(p, &placement_);
  }
  void check(const ArgParser&) override {
    if (!o_.adapter.empty() && o_.lora.r > 0) {
      throw UsageError("--lora with --adapter: the adapter's adapter_config.json gives the rank");
    }
    if (!lora_targets_.empty() && o_.lora.r == 0) throw UsageError("--lora-targets needs --lora R");
    if (!lora_train_.empty() && o_.lora.r == 0) throw UsageError("--lora-train needs --lora R");
    o_.base_quant = parse_base_quant(base_quant_);
    if (o_.base_quant != QuantFormat::kNone && o_.adapter.empty() && o_.lora.r == 0) {
      throw UsageError("--base-quant needs --lora R or --adapter DIR (only a frozen base is "
                       "quantized)");
    }
    bench::parse_format(format_);
    parse_precision(precision_);
    bench::resolve_targets(targets_);
    check_placement_flags(placement_);
  }
  const PlacementOptions* placement() const override { return &placement_; }
  int run(const ArgParser& p) override;

 private:
  std::string model_ = "gpt2-d2", precision_ = "fp32", targets_, format_ = "table";
  std::string lora_targets_, lora_train_, base_quant_ = "none";
  std::string targets_help_;
  bench::BenchOptions o_;
  PlacementOptions placement_;
};

int BenchCommand::run(const ArgParser&) {
  const bench::Format fmt = bench::parse_format(format_);
  o_.precision = parse_precision(precision_);
  o_.targets = bench::resolve_targets(targets_);
  resolve_bench_model(model_, &o_);
  if (!lora_targets_.empty()) o_.lora.targets = parse_lora_targets(lora_targets_);
  o_.lora.train = parse_trained_modules(lora_train_);
  if (!o_.adapter.empty()) o_.lora = read_adapter_config(o_.adapter).options;
  if (o_.lora_step()) {
    select_lora_modules(o_.config, o_.lora.targets);  // refuses unknown ones
    try {
      select_trained_pieces(o_.config, o_.lora.train);
    } catch (const UsageError& e) {
      throw UsageError("--lora-train " + lora_train_ + ": " + e.what());
    }
  }
  if (o_.seq_len > o_.config.max_seq_len) {
    throw UsageError("--seq-len: expected 1 to " + std::to_string(o_.config.max_seq_len) +
                     " (the model's maxT), got " + std::to_string(o_.seq_len));
  }
  check_bench_memory(o_);
  const Placement placed = apply_placement_flags(placement_);
  std::fprintf(stderr, "%s\n", placed.summary.c_str());
  const bench::BenchReport report = bench::run_bench(
      o_, [](const std::string& what) { std::fprintf(stderr, "bench: %s\n", what.c_str()); });
  const std::string text = bench::format_report(report, fmt);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

std::unique_ptr<Command> make_bench_command() { return std::make_unique<BenchCommand>(); }

}  // namespace llmcpu
