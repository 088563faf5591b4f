// The flag table of `llmcpu train` (long names, llm.c's short flags where llm.c has them), shared
// by the command and its tests, and the decoder that turns sampled token ids into text.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/runtime/placement.h"
#include "core/tokenizer/tokenizer.h"
#include "core/train/trainer.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/plugin_flags.h"

namespace llmcpu {

// The flags whose words name a choice or a size, as given (on the command line or in a config):
// apply_train_flags parses them into TrainOptions' typed values.
struct TrainChoiceFlags {
  std::string lr_schedule = "constant";  // --lr-schedule
  std::string precision = "fp32";        // --precision
  std::string recompute = "none";        // --recompute
  std::string memory_limit;              // --memory-limit; empty: the machine's
  std::string base_quant = "none";       // --base-quant
  std::string pack = "on";               // --pack on|off
  std::string max_len_policy = "truncate";  // --max-len-policy truncate|refuse
  int zero = -1;                         // --zero 0|1; -1: not given
};

struct TrainCliExtras {
  TrainChoiceFlags choices;
  bool no_shuffle = false;
  PlacementOptions placement;  // --threads, --bind, --smt, --cpus, --numa
  PluginFlags plugin;          // --plugin, --offload-report
  std::string tokenizer;       // for samples; default: the cache's tokenizer folder
};

void add_train_flags(ArgParser& p, TrainOptions* o, TrainCliExtras* extra);

// The flags the table binds elsewhere than to TrainOptions, into it: --no-shuffle, the plugin's
// flags, and the choices' words parsed (UsageError naming the flag and the choices, or for a size
// that is not one).
void apply_train_flags(const TrainCliExtras& extra, TrainOptions* o);

// A run config named on the command line: an existing file, or conf/runs/NAME.toml.
std::string resolve_run_config(const std::string& name);

// The tokenizer of --sample-every's samples when `needed`: --tokenizer, else the one beside the
// model (a tokenizer.json, or encoder.json and vocab.bpe, in --model's folder, or a tokenizer.json
// in the --resume folder, where a Llama-family run's checkpoints copy it), else GPT-2's default
// folder. Null when not needed, or (with a warning) when the default cannot be loaded; a
// --tokenizer given explicitly that cannot be loaded is an error.
std::shared_ptr<const Tokenizer> load_sample_tokenizer(const TrainCliExtras& extra,
                                                       const TrainOptions& options, bool needed);

using SampleDecoder = std::function<std::string(const std::vector<int>&)>;
// Decodes with `tok` (up to its end-of-text token), or prints ids without one. Samples are drawn
// among the ids `tok` knows (TrainOptions::sample_candidates), so all of them decode.
SampleDecoder make_sample_decoder(std::shared_ptr<const Tokenizer> tok);

}  // namespace llmcpu
