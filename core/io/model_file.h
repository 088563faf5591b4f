// What --model names, resolved once into a ModelSource: a preset (a file or a name from
// conf/models/), or a model file, an llm.c checkpoint (version 3 or 5) or a Hugging Face model
// (model.safetensors or its shards' index, with config.json, or their folder), told apart by the
// file itself (llm.c's magic, the .safetensors name, a safetensors header). The format is detected,
// the family decided (config.json's model_type) and the shape read once, here; train, sample,
// verify, bench and convert pass the value on and load_model_file reads the weights through it. Deliberately not here: presets themselves (core/model/preset.h), the formats
// themselves (core/io/checkpoint.h, core/io/hf_gpt2.h), tokenizers (core/tokenizer).
#pragma once

#include <functional>
#include <string>

#include "core/io/hf_llama_folder.h"
#include "core/model/config.h"
#include "core/model/model.h"

namespace llmcpu {

enum class ModelFormat {
  kPreset,       // a conf/models/ TOML: a shape, the weights GPT-2's initialisation
  kLlmc,         // an llm.c checkpoint, version 3 (fp32) or 5 (bf16)
  kSafetensors,  // a Hugging Face GPT-2: model.safetensors (+ config.json), or their folder
};

// Where a model's weights come from, for the memory they take while they load.
enum class WeightsOrigin {
  kInitialised,   // a preset's: drawn tensor by tensor
  kFileByTensor,  // a file read a tensor at a time: a Hugging Face Llama-family folder
  kFileWhole,     // a file read whole before anything takes another form
};

// What a weights reader says after each range of the flat parameters it has filled: (offset,
// count) in floats.
using WeightsWritten = std::function<void(size_t offset, size_t count)>;

struct ModelSource {
  std::string spec;  // what --model said
  ModelFormat format = ModelFormat::kPreset;
  std::string path;         // the file or folder read: the model file, or the preset's .toml
  ModelConfig config;       // the architecture
  std::string description;  // "llm.c checkpoint version 3", "safetensors BF16, GPT2Model names,
                            // config.json", or for a preset "preset conf/models/gpt2-d2.toml"
  // Where a tokenizer for this model would be found: the model file's folder when it holds a
  // tokenizer.json, or encoder.json and vocab.bpe, beside the weights; empty: GPT-2's default
  // folder (core/tokenizer's default_tokenizer_dir()).
  std::string tokenizer;
  std::string hf_config;  // safetensors: the config.json named by --config (empty: the one beside)
  // Reads the weights, laid out by ParameterLayout(config), from the file as it was opened when
  // resolved (its tensors found and checked against the config, its files mapped): a file is
  // opened and its family decided once. Empty for a preset. `written` (may be empty) hears of each
  // range of params once it holds its final values, as a reader that goes tensor by tensor fills
  // them (Hugging Face Llama-family files; the others say nothing and are taken whole at the end).
  std::function<void(float* params, const WeightsWritten& written)> read_weights;

  bool is_file() const { return format != ModelFormat::kPreset; }
};

// What --model names: a model file (or a Hugging Face model folder), or a preset file or name from
// conf/models/. Throws UsageError naming the spec and the presets when it is neither, FileError
// naming the file and the problem when a model file's header is unsound.
ModelSource resolve_model(const std::string& spec);

// The format of the model file at `path`, by the file itself: kSafetensors for a folder holding
// model.safetensors, a *.safetensors file or a file that starts like one; else kLlmc.
ModelFormat model_file_format(const std::string& path);

// `path` read as a model file whatever it is (sample and verify take no preset): its format and
// shape. Throws FileError naming the file and the problem.
ModelSource open_model_file(const std::string& path);
// The same for a file whose format is known; `hf_config` names a safetensors model's config.json
// when it is not beside it (convert's --config).
ModelSource open_model_file(const std::string& path, ModelFormat format,
                            const std::string& hf_config = "");

// Where a Llama-family model file came from, for the folders written from it: its config.json and
// the tokenizer files of its folder; empty for anything else (a preset, GPT-2's files).
LlamaOrigin llama_origin_of(const ModelSource& source);

// How `source`'s read_weights fills the parameters: tensor by tensor, saying each to `written` as
// it is done (Hugging Face Llama-family files), or whole.
WeightsOrigin weights_origin(const ModelSource& source);

// Loads a model file's parameters into `model`, whose config must equal the file's.
void load_model_file(const ModelSource& source, Model& model);
// The same into a flat array laid out by ParameterLayout(source.config).
void load_model_parameters(const ModelSource& source, float* params);

}  // namespace llmcpu
