#include "tools/llmcpu/train_flags.h"

#include <cstdio>
#include <filesystem>
#include <memory>

#include "core/io/model_file.h"
#include "core/model/activations.h"
#include "core/model/config.h"
#include "core/model/precision.h"
#include "core/model/preset.h"
#include "core/tokenizer/tokenizer.h"
#include "core/train/lr_schedule.h"
#include "core/train/memory_plan.h"
#include "simd/error.h"
#include "tools/llmcpu/placement_flags.h"
#include "tools/llmcpu/tokenizer_notes.h"

namespace llmcpu {

namespace {

constexpr double kMaxFloat = 3.4028234663852886e38;  // FLT_MAX: the optimizer's arithmetic is fp32
constexpr double kMaxCommTimeout = 365 * 24 * 3600.0;  // a year, in seconds

}  // namespace

std::string resolve_run_config(const std::string& name) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(name, ec)) return name;
  const bool is_path = name.find('/') != std::string::npos || name.ends_with(".toml");
  if (is_path) throw FileError(name, "no such run config file");
  const std::string found = find_conf_file("runs", name);
  if (found.empty()) {
    throw UsageError("--config " + name + ": no such file, and no conf/runs/" + name + ".toml");
  }
  return found;
}

// LoRA's flags (core/lora): the adapter a run trains instead of the model.
void add_lora_flags(ArgParser& p, TrainOptions* o, TrainChoiceFlags* c) {
  p.option("lora", 0, &o->lora_r, "R",
           "train a LoRA adapter of rank R on the frozen model (default 0: full fine-tuning)",
           {0, 65536});
  p.option("lora-alpha", 0, &o->lora_alpha, "A",
           "LoRA's alpha: the update is scaled by A/R (default R)", {0, kMaxFloat});
  p.option("lora-targets", 0, &o->lora_targets, "LIST",
           "the linear maps adapted, as PEFT names them: all-linear (default) or a comma list "
           "(q_proj,v_proj; c_attn; mlp.down_proj; full module names)");
  p.option("lora-train", 0, &o->lora_train, "LIST",
           "LoRA: base modules trained in full beside the adapters, as PEFT's modules_to_save "
           "names them: embed_tokens, lm_head, norm, input_layernorm, ... (GPT-2: wte, wpe, "
           "ln_1, ln_2, ln_f)");
  p.option("lora-dropout", 0, &o->lora_dropout, "P", "dropout on the adapters' input (default 0)",
           {0, 1});
  p.flag("lora-rslora", 0, &o->lora_rslora, "scale by A/sqrt(R) (rank-stabilised LoRA)");
  p.option("adapter", 0, &o->adapter, "DIR",
           "start from this PEFT adapter folder (its adapter_config.json gives R, A and the "
           "targets); --save then writes the trained adapter as a PEFT folder");
  p.option("save-merged", 0, &o->save_merged, "PATH",
           "LoRA: also write the model with the adapter merged into its weights (as --save "
           "writes a model: a Hugging Face folder, or llm.c's .bin for GPT-2)");
  p.option("base-quant", 0, &c->base_quant, "Q",
           "LoRA: hold the frozen base's layer weights as none (default: as loaded), int8 or "
           "nf4 (QLoRA's 4-bit NormalFloat), block-wise with a scale per 64 values");
}

// size: table (the flags, one declaration each)
void add_train_flags(ArgParser& p, TrainOptions* o, TrainCliExtras* x) {
  p.config_flag("config", 0, resolve_run_config,
                "TOML file (or conf/runs/ name) of these flags' keys");
  p.option("model", 'e', &o->model, "M",
           "checkpoint file (llm.c .bin, or model.safetensors or its folder, GPT-2 or Llama "
           "family), preset file (.toml) or preset name (gpt2-d2, llama-d2 ...)");
  p.option("train-data", 'i', &o->train_data, "GLOB", "llm.c token shard(s) to train on");
  p.option("val-data", 'j', &o->val_data, "GLOB", "llm.c token shard(s) for the validation loss");
  p.option("batch", 'b', &o->batch, "B", "sequences per micro-batch (default 4)", {1, kMaxBatch});
  p.option("seq-len", 't', &o->seq_len, "T",
           "tokens per sequence (default 64; at most the model's maxT)", {1, kMaxSeqLen});
  p.option("total-batch", 'd', &o->total_batch, "TOKENS",
           "tokens per step, by gradient accumulation: a multiple of B*T (default B*T)",
           {0, INT32_MAX});
  p.option("steps", 'x', &o->steps, "N", "optimizer steps (default 10)", {0, INT32_MAX});
  p.option("lr", 'l', &o->lr, "LR",
           "peak learning rate (default 3e-4; the update is computed in fp32, hence the bound)",
           {0, kMaxFloat});
  p.option("lr-schedule", 'k', &x->choices.lr_schedule, "S", "constant (default) or cosine");
  p.option("warmup", 'u', &o->warmup, "N", "linear warmup steps (default 0)", {0, INT32_MAX});
  p.option("lr-floor", 'q', &o->lr_floor, "F", "cosine decays to F * lr (default 0)", {0, 1});
  p.option("weight-decay", 'c', &o->weight_decay, "WD", "AdamW decoupled weight decay (default 0)",
           {0, kMaxFloat});
  p.option("grad-clip", 0, &o->grad_clip, "X",
           "clip the global gradient norm to X (default 0: off)", {0, kMaxFloat});
  p.option("zero", 'z', &x->choices.zero, "0|1",
           "under mpirun: 1 shards the AdamW state over the ranks (ZeRO-1: each rank updates its "
           "part, then sends it to the others), 0 keeps it whole on every rank (default 1 with "
           "several ranks)",
           {0, 1});
  p.option("comm-timeout", 0, &o->comm_timeout, "SECONDS",
           "under mpirun: a collective that waits longer than this for the other ranks (one hung "
           "or lost) ends the whole job, naming the rank that gave up (default 300; positive)",
           {0, kMaxCommTimeout});
  p.option("max-bad-steps", 0, &o->max_bad_steps, "N",
           "skip a step whose loss or gradient norm is NaN or infinite; stop after N in a row "
           "(default 5)",
           {1, INT32_MAX});
  p.option("seed", 0, &o->seed, "S", "initialisation and shuffling seed (default 1337)",
           kAnyUint64);
  p.flag("no-shuffle", 0, &x->no_shuffle, "read batches in order: batch k starts at token k*B*T");
  p.option("pack", 0, &x->choices.pack, "on|off",
           "data with .spans sidecars (prepare --format chat ...): on (default) packs whole "
           "examples into each row, attention and positions restarting at each; off gives each "
           "example a row of its own, padded");
  p.option("max-len-policy", 0, &x->choices.max_len_policy, "P",
           "an example longer than --seq-len: truncate (default) keeps its first T tokens, "
           "refuse stops with its shard and index");
  p.option("val-every", 'v', &o->val_every, "N", "validation loss every N steps (default 0: never)",
           {0, INT32_MAX});
  p.option("val-batches", 'm', &o->val_batches, "N", "batches per validation (default 20)",
           {1, INT32_MAX});
  p.option("sample-every", 's', &o->sample_every, "N",
           "print a sample every N steps (default 0: never)", {0, INT32_MAX});
  p.option("sample-tokens", 'g', &o->sample_tokens, "N",
           "tokens per sample (default 64; at most the model's maxT)", {1, kMaxSeqLen});
  p.option("tokenizer", 0, &x->tokenizer, "PATH",
           "tokenizer for samples (a tokenizer.json or its folder, a folder with encoder.json, or "
           "gpt2_tokenizer.bin)");
  p.option("checkpoint-dir", 'o', &o->checkpoint_dir, "DIR",
           "write checkpoints here (model + training state)");
  p.option("checkpoint-every", 'n', &o->checkpoint_every, "N",
           "checkpoint every N steps (default 0: at the end)", {0, INT32_MAX});
  p.option("keep-checkpoints", 0, &o->keep_checkpoints, "N",
           "keep only the newest N checkpoints (default 0: all)", {0, INT32_MAX});
  p.option("resume", 0, &o->resume, "DIR", "continue exactly from the newest checkpoint in DIR");
  p.option("log", 0, &o->log_path, "FILE", "write llm.c log lines (s:N trl:X, s:N tel:X)");
  p.option("metrics", 0, &o->metrics_path, "FILE.jsonl",
           "write a JSON object per step (step, loss, lr, grad_norm, ms, tokens_per_s, val_loss), "
           "flushed per line");
  p.option("plot", 0, &o->plot_path, "FILE.png|svg",
           "draw the loss plot (gnuplot) at every validation and at the end");
  p.option("save", 0, &o->save_path, "PATH",
           "also write the final model here (atomically): an llm.c .bin for GPT-2, a Hugging Face "
           "folder (model.safetensors, config.json, the tokenizer's files) for the Llama family");
  p.option("precision", 0, &x->choices.precision, "P",
           "fp32 (default) or bf16: bf16 weights' copy and activations, fp32 master weights");
  p.option(
      "recompute", 'r', &x->choices.recompute, "R",
      "none (default), gelu or all-pointwise (llm.c's 0, 1, 2): recompute GELU (and layernorm) "
      "outputs in the backward pass instead of keeping them; layers: keep only each block's "
      "output and run the block's forward again in the backward pass (less memory, the same "
      "numbers)");
  p.option("memory-limit", 0, &x->choices.memory_limit, "SIZE",
           "refuse a run planned to need more than SIZE (e.g. 12G; default: the cgroup limit or "
           "MemAvailable)");
  add_lora_flags(p, o, &x->choices);
  add_placement_flags(p, &x->placement);
  add_plugin_flags(p, &x->plugin);
}

void apply_train_flags(const TrainCliExtras& x, TrainOptions* o) {
  o->shuffle = !x.no_shuffle;
  o->plugin = x.plugin.path;
  o->offload_layers = x.plugin.layers;
  const TrainChoiceFlags& c = x.choices;
  o->precision = parse_precision(c.precision, "--precision");
  o->recompute = parse_recompute(c.recompute, "--recompute");
  parse_row_flags(c.pack, c.max_len_policy, &o->rows);
  o->base_quant = parse_base_quant(c.base_quant);
  o->lr_schedule = parse_lr_schedule(c.lr_schedule, "--lr-schedule");
  o->zero = c.zero < 0 ? ZeroMode::kDefault : c.zero == 0 ? ZeroMode::kOff : ZeroMode::kOn;
  o->memory_limit =
      c.memory_limit.empty() ? 0 : parse_memory_size(c.memory_limit, "--memory-limit");
  o->device_memory_limit = device_memory_limit(x.plugin);
}

namespace {

// The folder of the tokenizer beside the run's model ("": none).
std::string model_tokenizer(const TrainOptions& o) {
  std::error_code ec;
  if (!o.resume.empty()) {
    const bool found =
        std::filesystem::is_regular_file(std::filesystem::path(o.resume) / "tokenizer.json", ec);
    return found ? o.resume : "";
  }
  return o.model.empty() ? "" : resolve_model(o.model).tokenizer;
}

}  // namespace

std::shared_ptr<const Tokenizer> load_sample_tokenizer(const TrainCliExtras& extra,
                                                       const TrainOptions& options, bool needed) {
  if (!needed) return nullptr;
  std::string path = extra.tokenizer.empty() ? model_tokenizer(options) : extra.tokenizer;
  if (path.empty()) path = default_tokenizer_dir();
  try {
    auto tok = std::make_shared<const Tokenizer>(Tokenizer::load(path));
    print_tokenizer_notes(*tok, "train");
    return tok;
  } catch (const Error& e) {
    if (!extra.tokenizer.empty()) throw;  // asked for explicitly: a real error
    std::fprintf(stderr, "train: samples are shown as token ids (no tokenizer: %s)\n", e.what());
    return nullptr;
  }
}

SampleDecoder make_sample_decoder(std::shared_ptr<const Tokenizer> tok) {
  auto ids = [](const std::vector<int>& tokens) {
    std::string out;
    for (int t : tokens) out += std::to_string(t) + " ";
    return out;
  };
  if (!tok) return ids;
  return [tok](const std::vector<int>& tokens) {
    std::vector<int> text;  // stop at the first end-of-text token, like llm.c's sampler
    for (int t : tokens) {
      if (t == tok->eot_token()) break;
      text.push_back(t);
    }
    return tok->decode(text.data(), text.size());
  };
}

}  // namespace llmcpu
