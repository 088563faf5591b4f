#include "core/model/family.h"

#include <cstring>
#include <vector>

namespace llmcpu {

namespace {

// GPT-2: LayerNorm with biases, learned positions, GELU. The Llama family: RMSNorm, rope, SwiGLU;
// Qwen2 with q, k, v biases, Mistral and Phi-3 with a sliding window, Phi-3's projections fused in
// its files.
constexpr Family kFamilies[] = {
    {.architecture = Architecture::kGpt2,
     .name = "GPT-2",
     .model_type = "gpt2",
     .hf_class = "GPT2LMHeadModel",
     .norm = NormKind::kLayerNorm,
     .norm_offset = 0,
     .mlp = MlpKind::kGelu,
     .positions = PositionKind::kLearned,
     .biases = Biases::kAll,
     .window_every_layer = false,
     .fused_projections = false,
     .qk_norm = false,
     .embed_scale = false,
     .post_norms = false,
     .default_sliding_pattern = 0,
     .attn_softcap = false,
     .local_rope = false,
     .default_head_dim = 0,
     .default_tied = false,
     .default_pad_token_id = -1,
     .scaled_residual_init = true,
     .llmc_files = true,
     .plugin_block = true},
    {.architecture = Architecture::kLlama,
     .name = "Llama",
     .model_type = "llama",
     .hf_class = "LlamaForCausalLM",
     .norm = NormKind::kRmsNorm,
     .norm_offset = 0,
     .mlp = MlpKind::kSwiGlu,
     .positions = PositionKind::kRope,
     .biases = Biases::kConfigKeys,
     .window_every_layer = false,
     .fused_projections = false,
     .qk_norm = false,
     .embed_scale = false,
     .post_norms = false,
     .default_sliding_pattern = 0,
     .attn_softcap = false,
     .local_rope = false,
     .default_head_dim = 0,
     .default_tied = false,
     .default_pad_token_id = -1,
     .scaled_residual_init = false,
     .llmc_files = false,
     .plugin_block = false},
    {.architecture = Architecture::kQwen2,
     .name = "Qwen2",
     .model_type = "qwen2",
     .hf_class = "Qwen2ForCausalLM",
     .norm = NormKind::kRmsNorm,
     .norm_offset = 0,
     .mlp = MlpKind::kSwiGlu,
     .positions = PositionKind::kRope,
     .biases = Biases::kQkv,
     .window_every_layer = false,
     .fused_projections = false,
     .qk_norm = false,
     .embed_scale = false,
     .post_norms = false,
     .default_sliding_pattern = 0,
     .attn_softcap = false,
     .local_rope = false,
     .default_head_dim = 0,
     .default_tied = false,
     .default_pad_token_id = -1,
     .scaled_residual_init = false,
     .llmc_files = false,
     .plugin_block = false},
    {.architecture = Architecture::kMistral,
     .name = "Mistral",
     .model_type = "mistral",
     .hf_class = "MistralForCausalLM",
     .norm = NormKind::kRmsNorm,
     .norm_offset = 0,
     .mlp = MlpKind::kSwiGlu,
     .positions = PositionKind::kRope,
     .biases = Biases::kNone,
     .window_every_layer = true,
     .fused_projections = false,
     .qk_norm = false,
     .embed_scale = false,
     .post_norms = false,
     .default_sliding_pattern = 0,
     .attn_softcap = false,
     .local_rope = false,
     .default_head_dim = 0,
     .default_tied = false,
     .default_pad_token_id = -1,
     .scaled_residual_init = false,
     .llmc_files = false,
     .plugin_block = false},
    {.architecture = Architecture::kPhi3,
     .name = "Phi-3",
     .model_type = "phi3",
     .hf_class = "Phi3ForCausalLM",
     .norm = NormKind::kRmsNorm,
     .norm_offset = 0,
     .mlp = MlpKind::kSwiGlu,
     .positions = PositionKind::kRope,
     .biases = Biases::kNone,
     .window_every_layer = true,
     .fused_projections = true,
     .qk_norm = false,
     .embed_scale = false,
     .post_norms = false,
     .default_sliding_pattern = 0,
     .attn_softcap = false,
     .local_rope = false,
     .default_head_dim = 0,
     .default_tied = false,
     .default_pad_token_id = -1,
     .scaled_residual_init = false,
     .llmc_files = false,
     .plugin_block = false},
    {.architecture = Architecture::kQwen3,
     .name = "Qwen3",
     .model_type = "qwen3",
     .hf_class = "Qwen3ForCausalLM",
     .norm = NormKind::kRmsNorm,
     .norm_offset = 0,
     .mlp = MlpKind::kSwiGlu,
     .positions = PositionKind::kRope,
     .biases = Biases::kConfigKeys,
     .window_every_layer = false,
     .fused_projections = false,
     .qk_norm = true,
     .embed_scale = false,
     .post_norms = false,
     .default_sliding_pattern = 0,
     .attn_softcap = false,
     .local_rope = false,
     .default_head_dim = 128,
     .default_tied = false,
     .default_pad_token_id = -1,
     .scaled_residual_init = false,
     .llmc_files = false,
     .plugin_block = false},
    {.architecture = Architecture::kGemma,
     .name = "Gemma",
     .model_type = "gemma",
     .hf_class = "GemmaForCausalLM",
     .norm = NormKind::kRmsNorm,
     .norm_offset = 1,
     .mlp = MlpKind::kGeGlu,
     .positions = PositionKind::kRope,
     .biases = Biases::kNone,
     .window_every_layer = false,
     .fused_projections = false,
     .qk_norm = false,
     .embed_scale = true,
     .post_norms = false,
     .default_sliding_pattern = 0,
     .attn_softcap = false,
     .local_rope = false,
     .default_head_dim = 256,
     .default_tied = true,
     .default_pad_token_id = 0,
     .scaled_residual_init = false,
     .llmc_files = false,
     .plugin_block = false},
    {.architecture = Architecture::kGemma2,
     .name = "Gemma 2",
     .model_type = "gemma2",
     .hf_class = "Gemma2ForCausalLM",
     .norm = NormKind::kRmsNorm,
     .norm_offset = 1,
     .mlp = MlpKind::kGeGlu,
     .positions = PositionKind::kRope,
     .biases = Biases::kNone,
     .window_every_layer = false,
     .fused_projections = false,
     .qk_norm = false,
     .embed_scale = true,
     .post_norms = true,
     .default_sliding_pattern = 2,
     .attn_softcap = true,
     .local_rope = false,
     .default_head_dim = 256,
     .default_tied = true,
     .default_pad_token_id = 0,
     .scaled_residual_init = false,
     .llmc_files = false,
     .plugin_block = false},
    {.architecture = Architecture::kGemma3,
     .name = "Gemma 3",
     .model_type = "gemma3_text",
     .hf_class = "Gemma3ForCausalLM",
     .norm = NormKind::kRmsNorm,
     .norm_offset = 1,
     .mlp = MlpKind::kGeGlu,
     .positions = PositionKind::kRope,
     .biases = Biases::kNone,
     .window_every_layer = false,
     .fused_projections = false,
     .qk_norm = true,
     .embed_scale = true,
     .post_norms = true,
     .default_sliding_pattern = 6,
     .attn_softcap = false,
     .local_rope = true,
     .default_head_dim = 256,
     .default_tied = true,
     .default_pad_token_id = 0,
     .scaled_residual_init = false,
     .llmc_files = false,
     .plugin_block = false},
};

}  // namespace

const Family& family_of(Architecture architecture) {
  for (const Family& f : kFamilies) {
    if (f.architecture == architecture) return f;
  }
  return kFamilies[0];  // unreachable: every enumerator has an entry
}

const Family* find_family(const char* model_type) {
  for (const Family& f : kFamilies) {
    if (std::strcmp(f.model_type, model_type) == 0) return &f;
  }
  return nullptr;
}

std::string describe_blocks(const Family& f) {
  std::string s = f.norm == NormKind::kLayerNorm ? "LayerNorm" : "RMSNorm";
  s += f.positions == PositionKind::kLearned ? ", learned positions" : ", rotary positions";
  s += f.mlp == MlpKind::kGelu ? ", GELU" : f.mlp == MlpKind::kSwiGlu ? ", SwiGLU" : ", GeGLU";
  return s;
}

std::string known_model_types(bool llmc_too) {
  std::vector<std::string> names;
  for (const Family& f : kFamilies) {
    if (llmc_too || !f.llmc_files) names.push_back(std::string("\"") + f.model_type + "\"");
  }
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return s;
}

}  // namespace llmcpu
