// A Llama-family model's folder as llmcpu writes it (train's --save and checkpoints, convert's
// OUT): the weights as safetensors (F32, F16, or BF16, taken from a bf16 model's working copy where
// that is current, as write_checkpoint does for llm.c's version 5), config.json built over the
// config.json of the folder the model came from (so that its token ids and the keys llmcpu knows
// nothing of carry over), and that folder's tokenizer files copied beside. Every file is written
// and synced under a temporary name (StagedFiles) and renamed into place only once all of them
// are: a failure leaves what was there before. Deliberately not here: reading a folder
// (core/io/hf_llama.h), the names and order of a checkpoint's files
// (core/train/checkpoint_store.h).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/io/safetensors.h"
#include "core/model/config.h"
#include "core/model/model.h"
#include "core/util/file.h"

namespace llmcpu {

// The tokenizer's files a model folder may hold, which a written folder copies:
// tokenizer.json, tokenizer_config.json, special_tokens_map.json, SentencePiece's tokenizer.model,
// and what chatting with the model reads beside them: a chat_template.jinja and the
// generation_config.json (its end-of-reply tokens).
const std::vector<std::string>& tokenizer_file_names();

// Where a Llama-family model came from, as far as the folders written from it carry it over.
struct LlamaOrigin {
  nlohmann::json config = nlohmann::json::object();  // its config.json; {}: none (a preset)
  std::vector<std::string> tokenizer_files;          // the tokenizer files found beside it
};

// The origin of a model whose config.json is `config_path` ("": none) and whose tokenizer files
// are in `folder` ("": none). FileError when config.json cannot be read.
LlamaOrigin llama_origin(const std::string& config_path, const std::string& folder);

// Files written under temporary names, renamed into place together.
class StagedFiles {
 public:
  // A new file at `path` (its temporary made now), for the caller to write and finish.
  AtomicFileWriter& add(const std::string& path, const char* fault_point = "");
  // Renames every file into place, in the order they were added.
  void publish();

 private:
  std::vector<std::unique_ptr<AtomicFileWriter>> files_;
};

// The weights to write: the fp32 master, and for a BF16 file the same rounded to bf16 where a
// model holds them so already.
struct LlamaWeights {
  const ModelConfig& config;
  const float* params;                // flat, ParameterLayout(config)
  const uint16_t* rounded = nullptr;  // bf16(params), or null: rounded while writing
};
// `model`'s weights for a file of `dtype`: its bf16 copy for BF16 where the copy is current (the
// only whole copy once ZeRO-1 released the master's other parts); Error for F32 or F16 once the
// master is released (a bf16 run's files are BF16).
LlamaWeights llama_weights_of(const Model& model, TensorDtype dtype);

// Stages into `folder` (which must exist): config.json (llama_config_json over origin.config,
// with torch_dtype `dtype`), copies of origin's tokenizer files that are not in `folder` already,
// then `weights_name` (the safetensors file; `weights_fault` its fault point, core/util/fault.h),
// each written and finished, for the caller to publish in that order.
void stage_llama_folder(StagedFiles& files, const std::string& folder,
                        const std::string& weights_name, const LlamaWeights& weights,
                        TensorDtype dtype, const LlamaOrigin& origin,
                        const char* weights_fault = "");

// `folder`/model.safetensors, config.json and the tokenizer files, published together; the folder
// is made when missing (and removed again if writing fails). FileError when `folder` is a file.
void save_llama_folder(const std::string& folder, const LlamaWeights& weights, TensorDtype dtype,
                       const LlamaOrigin& origin);

}  // namespace llmcpu
