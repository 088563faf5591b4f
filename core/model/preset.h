// Model presets: TOML files in conf/models/ that give a shape to build and initialise from scratch.
// A GPT-2:
//   layers = 2
//   heads = 2
//   channels = 128
//   max_seq_len = 1024
//   vocab_size = 50257      # Vp is V rounded up to a multiple of 128
// A Llama-family model: model_type ("llama", "qwen2", "mistral") and the keys of its config.json
// (core/model/llama_config.h), e.g. hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, max_position_embeddings, vocab_size, rope_theta,
// rms_norm_eps, tie_word_embeddings; [rope_scaling] as a table.
#pragma once

#include <string>
#include <vector>

#include "core/model/config.h"

namespace llmcpu {

// Parses and validates a preset file; unknown keys, missing keys, wrong types and values out of
// range are UsageErrors naming the file and the key (a file that is not TOML: FileError with the
// line).
ModelConfig load_model_preset(const std::string& path);

// Folders searched for conf/: $LLMCPU_CONF_DIR, then conf/ beside or above the running program,
// then the source tree's conf/ this program was built from.
std::vector<std::string> conf_search_dirs();

// The path of conf/<kind>/<name>.toml in the first search folder that has it, or "" if none does.
std::string find_conf_file(const std::string& kind, const std::string& name);

}  // namespace llmcpu
