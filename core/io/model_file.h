// What --model opens when it names a file: an llm.c checkpoint (version 3 or 5) or a Hugging Face
// GPT-2 (model.safetensors with config.json, or their folder), told apart by the file itself
// (llm.c's magic, the .safetensors name, a safetensors header). train, sample and verify load their
// model through here, and resolve_model_spec tells such a file from a preset name for them and for
// bench. Deliberately not here: presets themselves (core/model/preset.h), the formats themselves
// (core/io/checkpoint.h, core/io/hf_gpt2.h).
#pragma once

#include <string>

#include "core/model/config.h"
#include "core/model/gpt2.h"

namespace llmcpu {

struct ModelFileInfo {
  ModelConfig config;
  std::string
      description;  // "llm.c checkpoint version 3" or "safetensors BF16, GPT2Model names, ..."
};

// Whether `path` names a model file (or a Hugging Face model folder) rather than a preset.
bool is_model_file(const std::string& path);

// Reads and checks the file's shape; throws FileError naming the file, the tensor and the problem.
ModelFileInfo read_model_file_header(const std::string& path);

// Loads the file's parameters into `model`, whose config must equal the file's.
void load_model_file(const std::string& path, Gpt2& model);

// What --model names: a model file (returned in `checkpoint`, what it holds in `description`) or a
// preset file or name from conf/models/ (the file in `preset`). Throws UsageError naming the spec
// and the presets when it is neither.
ModelConfig resolve_model_spec(const std::string& spec, std::string* checkpoint,
                               std::string* preset, std::string* description = nullptr);

}  // namespace llmcpu
