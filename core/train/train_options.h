// What a training run is asked to do, as typed values: TrainOptions (one field per flag or config
// key of `llmcpu train`; a word that names a choice arrives here as its enum, a size in bytes), the
// checks that need no file and no machine, and the micro-batches a step reads. Deliberately not
// here: the flags' words and how they are parsed (tools/llmcpu/train_flags.cpp), the checks that
// need the model (its maxT, its layers: the Trainer's).
#pragma once

#include <cstdint>
#include <string>

#include "core/lora/adapter.h"
#include "core/model/activations.h"
#include "core/model/precision.h"
#include "simd/quant/block_quant.h"
#include "core/train/example_rows.h"
#include "core/train/lr_schedule.h"

namespace llmcpu {

// --zero: with several ranks, ZeRO-1 (the optimizer state sharded over them) or not.
enum class ZeroMode {
  kDefault,  // not given: ZeRO-1 with several ranks
  kOff,      // --zero 0: every rank keeps the whole optimizer state
  kOn,       // --zero 1
};
// --zero's value as the flag writes it: -1 (not given), 0 or 1.
int zero_flag_value(ZeroMode zero);

struct TrainOptions {
  std::string model;       // an llm.c checkpoint file, a preset file (.toml) or a preset name
  std::string train_data;  // a token shard or a glob of shards
  std::string val_data;    // optional, a shard or a glob
  int batch = 4;           // B
  int seq_len = 64;        // T
  int total_batch = 0;     // tokens per optimizer step; 0: B*T (no accumulation)
  int steps = 10;
  double lr = 3e-4;
  double weight_decay = 0.0;
  LrScheduleKind lr_schedule = LrScheduleKind::kConstant;
  int warmup = 0;
  double lr_floor = 0.0;   // cosine decays to lr * lr_floor
  double grad_clip = 0.0;  // 0: off
  uint64_t seed = 1337;
  bool shuffle = true;
  RowOptions rows;  // how shards with .spans sidecars become rows (--pack, --max-len-policy)
  std::string log_path;      // llm.c log lines (s:STEP trl:LOSS, s:STEP tel:LOSS)
  std::string metrics_path;  // a JSON object per line per step (core/report/metrics.h)
  std::string plot_path;     // the loss plot, *.png or *.svg, redrawn at every validation
  int val_every = 0;         // 0: never
  int val_batches = 20;
  int sample_every = 0;  // 0: never
  int sample_tokens = 64;
  // The token samples start from (the tokenizer's document_token()); -1: GPT-2's <|endoftext|>,
  // 50256, or the last id of a smaller vocabulary.
  int sample_start = -1;
  // The ids samples are drawn among (the tokenizer's vocabulary_size()); 0: all V.
  int sample_candidates = 0;
  std::string checkpoint_dir;
  int checkpoint_every = 0;  // 0: only at the end (and on Ctrl-C) when checkpoint_dir is set
  int keep_checkpoints = 0;  // 0: keep all
  std::string resume;        // a checkpoint folder to continue from
  std::string save_path;     // an extra llm.c model file written at the end
  Precision precision = Precision::kFp32;  // mixed precision with bf16 (core/model/model.h)
  Recompute recompute = Recompute::kNone;  // core/model/activations.h
  double memory_limit = 0;  // bytes: plan against this (--memory-limit); 0: the machine's limit
  std::string plugin;       // an offload plugin (core/plugin/offload.h); empty: none
  // With a plugin: "all" or how many of the last blocks, as given. Text until the model is known:
  // which numbers are blocks depends on its layers, and the message of a bad value names them.
  std::string offload_layers = "all";
  size_t device_memory_limit = 0;  // with a plugin: plan against this many bytes; 0: the device's
  int max_bad_steps = 5;      // stop after this many steps in a row with a non-finite loss or norm
  double comm_timeout = 300;  // several ranks: seconds a collective may wait before the job ends
  ZeroMode zero = ZeroMode::kDefault;  // several ranks: ZeRO-1 unless kOff
  // LoRA (core/lora): the base frozen, only the adapter learns. --lora R (0: full fine-tuning),
  // --lora-alpha (0: R), --lora-targets (PEFT's target_modules, a comma list; empty: all-linear),
  // --lora-dropout, --lora-rslora; or --adapter DIR, a PEFT adapter folder to start from, whose
  // adapter_config.json gives the rank, alpha, targets, dropout and scaling.
  int lora_r = 0;
  double lora_alpha = 0;
  std::string lora_targets;
  std::string lora_train;  // --lora-train: PEFT's modules_to_save, a comma list
  double lora_dropout = 0;
  bool lora_rslora = false;
  std::string adapter;
  std::string save_merged;  // LoRA: also the model with the adapter merged, at the end
  // LoRA: the frozen base's layer matmul weights held block-quantized (--base-quant int8|nf4:
  // QLoRA) or as loaded (none; a bf16 run keeps them in bf16 alone).
  QuantFormat base_quant = QuantFormat::kNone;
  bool lora() const { return lora_r > 0 || !adapter.empty(); }
};

// The checks of the options that need no file and no machine (ranges that depend on each other):
// UsageErrors naming the flag. The Trainer runs them first; the command line runs them before
// anything is read.
void check_train_options(const TrainOptions& o);
// The LoRA options alone (check_train_options calls it).
void check_lora_options(const TrainOptions& o);
// The adapter a LoRA run asks for: its flags, or --adapter's adapter_config.json.
LoraOptions lora_options_of(const TrainOptions& o);

// The micro-batches of B x T tokens one optimizer step reads over all `ranks`: --total-batch /
// (B*T), or one per rank without --total-batch.
int micro_batches_per_step(const TrainOptions& options, int ranks);
// The micro-batches each of `ranks` reads per step; UsageError when they do not split evenly.
int micro_batches_per_rank(const TrainOptions& options, int ranks);

}  // namespace llmcpu
