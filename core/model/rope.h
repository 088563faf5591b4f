// Rotary position embedding's tables, as Hugging Face's transformers computes them for the Llama
// family (modeling_rope_utils: the default, "linear" and "llama3" rope types; LlamaRotaryEmbedding):
// the inverse frequency of each pair of a head, inv_freq[j] = theta^(-2j/D) for j < D/2, scaled
// as the type says, and at each position p the cosine and sine of the angle p * inv_freq[j]. The
// kernels (simd/scalar/rope.h) take the tables; this file knows nothing of them. Computed in
// double and rounded once to float, so that position 100,000 is as exact as position 1
// (transformers computes the angles in float32).
#pragma once

#include <string>
#include <vector>

namespace llmcpu {

enum class RopeType { kDefault, kLinear, kLlama3 };

struct RopeConfig {
  int head_dim = 0;       // D, even
  double theta = 10000;   // rope_theta
  RopeType type = RopeType::kDefault;
  double factor = 1;      // linear and llama3: how much longer the context is
  // llama3: wavelengths under original_max_position_embeddings / high_freq_factor keep their
  // frequency, those over original_max_position_embeddings / low_freq_factor are divided by factor,
  // and those between move smoothly from one to the other.
  double low_freq_factor = 1, high_freq_factor = 4;
  int original_max_position_embeddings = 8192;

  bool operator==(const RopeConfig&) const = default;
};

// Throws ShapeError naming `source` and the field when the configuration cannot give tables (an odd
// or non-positive head size, theta <= 0, a factor < 1, llama3's low_freq_factor >= high_freq_factor
// or a non-positive original context).
void validate(const RopeConfig& config, const std::string& source);

// inv_freq, D/2 values.
std::vector<double> rope_inverse_frequencies(const RopeConfig& config);

// cos and sin, each (positions, D/2): cos[p * D/2 + j] = cos(p * inv_freq[j]) rounded to float.
void rope_tables(const RopeConfig& config, int positions, std::vector<float>& cos,
                 std::vector<float>& sin);

}  // namespace llmcpu
