// Hugging Face GPT-2 files (model.safetensors + config.json, as transformers' GPT2Model and
// GPT2LMHeadModel save them and as huggingface.co/openai-community/gpt2 ships them) to and from the
// flat parameter array of llm.c's layout (core/model/parameters.h).
//
// The mapping: wte.weight (V, C) -> wte (Vp, C) with zero padding rows; wpe.weight -> wpe;
// h.N.ln_1 / attn.c_attn / attn.c_proj / ln_2 / mlp.c_fc / mlp.c_proj weights and biases -> layer
// N's ln1w ... fcprojb; ln_f -> lnfw, lnfb. transformers' Conv1D stores its weight as (in, out),
// llm.c as (out, in): the four matmul weights are transposed. Names may carry GPT2LMHeadModel's
// "transformer." prefix; lm_head.weight, where stored, must equal wte.weight (llm.c ties them); the
// causal-mask buffers h.N.attn.bias and h.N.attn.masked_bias are skipped. Anything else is refused.
// Deliberately not here: the container itself (core/io/safetensors.h), llm.c files (checkpoint.h).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/io/safetensors.h"
#include "core/model/config.h"
#include "core/model/parameters.h"

namespace llmcpu {

// Where a Hugging Face model's two files are: IN is a folder holding model.safetensors (or the
// model.safetensors.index.json of its shards) and config.json, or such a file with config.json
// beside it. `config` is empty when there is no config.json (a GPT-2's shape is then inferred from
// the tensors).
struct HfModelPaths {
  std::string weights;
  std::string config;
};
// `config_override` (a --config flag; may be empty) names config.json explicitly.
HfModelPaths hf_model_paths(const std::string& in, const std::string& config_override = "");

// Whether `path` looks like a Hugging Face model: a folder with model.safetensors or
// model.safetensors.index.json, a file of either name or named *.safetensors, or a file that starts
// like one (a header length, then '{'). An llm.c file's magic says otherwise.
bool is_hf_model(const std::string& path);

// A GPT-2 safetensors file, opened and checked against its config: every tensor present once with
// the shape the config implies, no unknown names.
class HfGpt2File {
 public:
  explicit HfGpt2File(const HfModelPaths& paths);

  const ModelConfig& config() const { return config_; }
  // "safetensors F32, GPT2LMHeadModel names, config.json" (what the file held, for messages).
  const std::string& description() const { return description_; }
  // Fills a flat fp32 array laid out by ParameterLayout(config()) (F16 and BF16 widened exactly).
  void load(float* params) const;

 private:
  SafetensorsFile file_;
  ModelConfig config_;
  // Tensor i of ParameterLayout, one per layer for the per-layer ones.
  std::array<std::vector<const SafeTensor*>, kLlmcTensors.size()> tensors_;  // llm.c's order
  const SafeTensor* lm_head_ = nullptr;  // a stored head, checked equal to wte by load()
  std::string description_;
};

// What save_hf_gpt2 wrote beside the tensors.
struct HfSaveReport {
  size_t nonzero_padding_rows = 0;  // rows V..Vp-1 of wte that were not zero (and were dropped)
};

// Writes the flat fp32 parameters (ParameterLayout(config)) as a safetensors file of GPT2Model
// names in `dtype`, lm_head tied (not stored), and a config.json transformers' GPT2LMHeadModel
// loads. Both through temporary files, renamed into place only once both are written.
HfSaveReport save_hf_gpt2(const std::string& weights_path, const std::string& config_path,
                          const ModelConfig& config, const float* params, TensorDtype dtype);

}  // namespace llmcpu
