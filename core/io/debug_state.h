// llm.c debug states (test_gpt2's reference): int32[256] header {20240327, 2, B, T}, then
// x (B*T int32), y (B*T int32), logits (B*T*V fp32, unpadded), loss (fp32), and the gradients of the
// 16 parameter tensors in checkpoint order (fp32, wte padded to Vp rows).
#pragma once

#include <string>
#include <vector>

#include "core/model/config.h"

namespace llmcpu {

inline constexpr int kDebugStateMagic = 20240327;
inline constexpr int kDebugStateVersion = 2;

struct DebugState {
  int B = 0, T = 0;
  std::vector<int> inputs;    // (B, T)
  std::vector<int> targets;   // (B, T)
  std::vector<float> logits;  // (B, T, V)
  float loss = 0;
  std::vector<float> grads;   // flat, ParameterLayout order
  // (B, T) packed rows' example starts (Model::forward's starts); empty: one sequence per row. A
  // Llama-family reference may have them; llm.c's files have none.
  std::vector<int> starts;
};

// Loads a state made for a model of shape `config`. Throws FileError naming the file and the problem:
// magic, version, B or T (T must be <= maxT), the length, or token ids outside 0..V-1. A
// Llama-family model's reference is a safetensors file instead (core/io/hf_llama.h's
// load_llama_reference).
DebugState load_debug_state(const std::string& path, const ModelConfig& config);

// Writes a state atomically.
void save_debug_state(const std::string& path, const ModelConfig& config, const DebugState& state);

}  // namespace llmcpu
