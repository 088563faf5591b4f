// The shape of a GPT-2-family model, as an llm.c checkpoint header states it.
#pragma once

#include <cstddef>
#include <string>

namespace llmcpu {

struct ModelConfig {
  int max_seq_len = 0;        // maxT: positions in wpe
  int vocab_size = 0;         // V: real tokens
  int padded_vocab_size = 0;  // Vp: rows of wte, V rounded up (llm.c: to a multiple of 128)
  int num_layers = 0;         // L
  int num_heads = 0;          // NH
  int channels = 0;           // C

  int head_size() const { return channels / num_heads; }
  bool operator==(const ModelConfig&) const = default;
};

inline constexpr int kVocabPadding = 128;
// The largest maxT and V (and Vp) a model may have (validate()); the flags that count positions or
// tokens are bounded by them before any model is read.
inline constexpr int kMaxSeqLen = 1 << 24;
inline constexpr int kMaxVocabSize = 1 << 24;
// The most sequences in a micro-batch (--batch); a memory plan refuses what does not fit long
// before, but B*T*C and the like stay far inside 64 bits.
inline constexpr int kMaxBatch = 1 << 20;

// V rounded up to a multiple of kVocabPadding.
inline int padded_vocab(int V) { return (V + kVocabPadding - 1) / kVocabPadding * kVocabPadding; }

// Throws ShapeError naming `source` and the field when the shape is impossible or too large to index
// (every dimension positive, C % NH == 0, Vp >= V, parameter count within 2^40).
void validate(const ModelConfig& config, const std::string& source);

// "L=2 NH=3 C=48 V=311 Vp=384 maxT=32"
std::string describe(const ModelConfig& config);

}  // namespace llmcpu
