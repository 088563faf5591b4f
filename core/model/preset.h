// Model presets: TOML files in conf/models/ that give a shape to build and initialise from scratch.
//   layers = 2
//   heads = 2
//   channels = 128
//   max_seq_len = 1024
//   vocab_size = 50257      # Vp is V rounded up to a multiple of 128
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
