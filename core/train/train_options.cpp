#include "core/train/train_options.h"

#include <cmath>
#include <cstdint>

#include "core/lora/peft_files.h"
#include "core/report/plot.h"
#include "core/train/memory_plan.h"
#include "simd/error.h"

namespace llmcpu {

int zero_flag_value(ZeroMode zero) {
  return zero == ZeroMode::kDefault ? -1 : zero == ZeroMode::kOn ? 1 : 0;
}

void check_train_options(const TrainOptions& o) {
  auto require = [](bool ok, const std::string& message) {
    if (!ok) throw UsageError(message);
  };
  require(!o.train_data.empty(),
          "--train-data: required (an llm.c token shard or a glob of shards)");
  require(!o.model.empty() || !o.resume.empty(),
          "--model: required (a checkpoint file or a preset name), unless --resume is given");
  require(o.batch > 0, "--batch: must be positive, got " + std::to_string(o.batch));
  require(o.seq_len > 0, "--seq-len: must be positive, got " + std::to_string(o.seq_len));
  require(o.total_batch >= 0, "--total-batch: must not be negative");
  // In 64 bits: B and T are each below 2^25, so their product cannot wrap here.
  const int64_t bt = int64_t(o.batch) * o.seq_len;
  require(bt <= INT32_MAX, "--batch " + std::to_string(o.batch) + " x --seq-len " +
                               std::to_string(o.seq_len) + " = " + std::to_string(bt) +
                               " tokens in one micro-batch; at most 2147483647");
  require(o.total_batch == 0 || o.total_batch % bt == 0,
          "--total-batch " + std::to_string(o.total_batch) +
              " must be a multiple of B*T = " + std::to_string(bt));
  require(o.steps >= 0, "--steps: must not be negative, got " + std::to_string(o.steps));
  require(o.lr >= 0, "--lr: must not be negative");
  require(o.weight_decay >= 0, "--weight-decay: must not be negative");
  require(o.warmup >= 0, "--warmup: must not be negative");
  require(o.lr_floor >= 0 && o.lr_floor <= 1, "--lr-floor: must be a fraction in 0..1");
  require(o.grad_clip >= 0, "--grad-clip: must not be negative (0 turns clipping off)");
  require(o.val_every >= 0, "--val-every: must not be negative");
  require(o.val_batches > 0, "--val-batches: must be positive");
  require(o.val_every == 0 || !o.val_data.empty(), "--val-every needs --val-data");
  require(o.sample_every >= 0, "--sample-every: must not be negative");
  require(o.sample_tokens > 0, "--sample-tokens: must be positive");
  require(o.checkpoint_every >= 0, "--checkpoint-every: must not be negative");
  require(
      o.checkpoint_every == 0 || !o.checkpoint_dir.empty() || !o.resume.empty(),
      "--checkpoint-every needs --checkpoint-dir (a resumed run writes into its --resume folder)");
  require(o.keep_checkpoints >= 0, "--keep-checkpoints: must not be negative");
  require(o.comm_timeout > 0 && std::isfinite(o.comm_timeout),
          "--comm-timeout: must be a positive number of seconds");
  require(o.max_bad_steps >= 1,
          "--max-bad-steps: must be at least 1, got " + std::to_string(o.max_bad_steps));
  require(o.memory_limit >= 0 && std::isfinite(o.memory_limit),
          "--memory-limit: must be a positive size");
  if (!o.plot_path.empty()) check_plot_options({.output = o.plot_path}, "--plot");
  check_lora_options(o);
}

void check_lora_options(const TrainOptions& o) {
  auto require = [](bool ok, const std::string& message) {
    if (!ok) throw UsageError(message);
  };
  require(o.lora_r >= 0, "--lora: the rank must not be negative (0: full fine-tuning)");
  require(o.lora_alpha >= 0 && std::isfinite(o.lora_alpha), "--lora-alpha: must be positive");
  require(o.lora_dropout >= 0 && o.lora_dropout < 1, "--lora-dropout: must be in [0, 1)");
  if (!o.adapter.empty()) {
    const char* given = o.lora_r > 0            ? "--lora"
                        : o.lora_alpha > 0      ? "--lora-alpha"
                        : !o.lora_targets.empty() ? "--lora-targets"
                        : !o.lora_train.empty() ? "--lora-train"
                        : o.lora_rslora         ? "--lora-rslora"
                                                : nullptr;
    require(!given, std::string(given ? given : "") + " with --adapter " + o.adapter +
                        ": the adapter's adapter_config.json gives it");
  }
  if (!o.lora()) {
    const char* given = o.lora_alpha > 0          ? "--lora-alpha"
                        : !o.lora_targets.empty()   ? "--lora-targets"
                        : !o.lora_train.empty()     ? "--lora-train"
                        : o.lora_dropout > 0        ? "--lora-dropout"
                        : o.lora_rslora             ? "--lora-rslora"
                        : o.base_quant != QuantFormat::kNone && o.resume.empty() ? "--base-quant"
                        // a resumed run learns whether it trains an adapter from its checkpoint
                        : !o.save_merged.empty() && o.resume.empty() ? "--save-merged"
                                                    : nullptr;
    require(!given, std::string(given ? given : "") +
                        " needs --lora R (the adapters' rank) or --adapter DIR");
    return;
  }
  const std::string lora_flag = o.adapter.empty() ? "--lora " + std::to_string(o.lora_r)
                                                  : "--adapter " + o.adapter;
  require(o.plugin.empty(), lora_flag + " with --plugin " + o.plugin +
                                ": a device runs no LoRA adapters yet; leave --plugin out");
  require(o.resume.empty(), std::string(o.adapter.empty() ? "--lora" : "--adapter") +
                                " with --resume: the checkpoint holds the adapter it goes on "
                                "training (give --model, its base, and no LoRA flags)");
}

LoraOptions lora_options_of(const TrainOptions& o) {
  if (!o.adapter.empty()) return read_adapter_config(o.adapter).options;
  LoraOptions l;
  l.r = o.lora_r;
  l.alpha = o.lora_alpha;
  if (!o.lora_targets.empty()) l.targets = parse_lora_targets(o.lora_targets);
  l.dropout = o.lora_dropout;
  l.rslora = o.lora_rslora;
  l.train = parse_trained_modules(o.lora_train);
  return l;
}

int micro_batches_per_step(const TrainOptions& o, int ranks) {
  return o.total_batch == 0 ? ranks : int(o.total_batch / (int64_t(o.batch) * o.seq_len));
}

int micro_batches_per_rank(const TrainOptions& o, int ranks) {
  const int micro = micro_batches_per_step(o, ranks);
  if (micro % ranks != 0) {
    const int64_t bt = int64_t(o.batch) * o.seq_len;
    throw UsageError("--total-batch " + std::to_string(o.total_batch) + ": " +
                     std::to_string(micro) + " micro-batches of B*T = " + std::to_string(bt) +
                     " tokens per step do not split over " + std::to_string(ranks) +
                     " ranks (make it a multiple of B*T*" + std::to_string(ranks) + " = " +
                     std::to_string(bt * ranks) + ")");
  }
  return micro / ranks;
}

}  // namespace llmcpu
