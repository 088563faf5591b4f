// What --model opens when it names a file: an llm.c checkpoint (version 3 or 5) or a Hugging Face
// GPT-2 (model.safetensors with config.json, or their folder), told apart by the file itself
// (llm.c's magic, the .safetensors name, a safetensors header). train, sample and verify load their
// model through here. Deliberately not here: presets (core/model/preset.h), the formats themselves
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

}  // namespace llmcpu
