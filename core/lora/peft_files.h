// PEFT adapter folders (Hugging Face's peft, LoRA, as PeftModel.save_pretrained writes them in
// PEFT 0.17): adapter_config.json and adapter_model.safetensors. docs/formats.md describes them.
//   adapter_config.json        every key of LoraConfig 0.17 (a reader ignores the ones it does not
//                              know), json.dumps(indent=2, sort_keys=True), no final newline;
//                              target_modules as PEFT saves them (saved_target_modules)
//   adapter_model.safetensors  per module M: base_model.model.M.lora_A.weight (r, in) and
//                              .lora_B.weight (out, r), metadata {"format": "pt"}
//                              and per module modules_to_save selects (core/lora/trained_copies.h)
//                              its tensors base_model.model.M.weight (and .bias), the base's shape
// Reading refuses what llmcpu's LoRA does not do, naming the key: DoRA, rank or alpha patterns,
// layers_to_transform, a regex target_modules, LoRA biases, other peft_types, and modules_to_save
// that select what llmcpu does not train.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/io/safetensors.h"
#include "core/lora/adapter.h"
#include "core/model/config.h"

namespace llmcpu {

// target_modules as PEFT saves them for these targets on this model, sorted (PEFT writes a set):
// "all-linear" becomes the full names of the modules; 20 or more entries are condensed to the
// shortest suffixes that select the same modules and name no other (PEFT's
// _find_minimal_target_modules).
std::vector<std::string> saved_target_modules(const ModelConfig& config,
                                              const std::vector<std::string>& targets);

// What a folder's adapter_config.json says, and what else it keeps that a rewrite repeats.
struct PeftAdapterConfig {
  LoraOptions options;
  std::string base_model_name_or_path;
  bool init_lora_weights = true;
  // The tensors' dtype in adapter_model.safetensors (a PEFT adapter keeps its own: F32 unless
  // made otherwise); a rewrite keeps it.
  TensorDtype dtype = TensorDtype::kF32;
  // The dtype of the copies of base modules (modules_to_save), which PEFT keeps in the base's:
  // as they came; a new adapter's in `dtype`.
  std::optional<TensorDtype> copies_dtype = std::nullopt;
};

// adapter_config.json's text for this adapter on this model.
std::string adapter_config_text(const ModelConfig& config, const PeftAdapterConfig& adapter);

// Reads DIR/adapter_config.json; FileError naming the file and key for what is missing, malformed
// or not supported.
PeftAdapterConfig read_adapter_config(const std::string& dir);
// The same from its text (a LoRA training state keeps it), `where` naming it in errors.
PeftAdapterConfig parse_adapter_config(const std::string& text, const std::string& where);

// Reads DIR's adapter for this model: its config, then every tensor, checked against the modules
// its target_modules select (FileError naming the tensor: missing, unexpected, a shape that does
// not fit the base).
LoraAdapter read_peft_adapter(const std::string& dir, const ModelConfig& config,
                              PeftAdapterConfig* read_config = nullptr);

// Writes DIR/adapter_config.json and DIR/adapter_model.safetensors (tensors in saved.dtype),
// creating DIR; each file is written whole to a temporary name and renamed into place.
// `fault_point`: the tensors' writer's (core/util/fault.h), for the tests of a killed write.
void write_peft_adapter(const std::string& dir, const ModelConfig& config,
                        const LoraAdapter& adapter, const PeftAdapterConfig& saved,
                        const char* fault_point = "");

}  // namespace llmcpu
