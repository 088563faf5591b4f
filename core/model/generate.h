// Text generation: one token at a time through a KV cache, so each new token costs one position
// (not a whole forward pass over the sequence so far), and sampling from the logits with
// temperature and top-k. The layers are the training path's (core/model/transformer.h), run by a
// decode executor whose attention appends the token's key and value to the cache and attends over
// it. Inference only. It computes in fp32 on the CPU from the fp32 master weights, also for a bf16
// or offloading model (samples during training are a preview, not a measurement, and one token's
// matmuls are too small to be worth a device). Everything is allocated at construction: stepping
// and sampling allocate nothing.
#pragma once

#include <vector>

#include "core/model/activations.h"
#include "core/model/model.h"
#include "core/util/aligned_buffer.h"
#include "core/util/rng.h"

namespace llmcpu {

class Generator {
 public:
  // Holds keys and values for up to max_len positions (<= the model's maxT).
  Generator(const Model& model, int max_len);

  // Forgets the sequence so far.
  void reset() { pos_ = 0; }
  // Keeps the first `position` positions of the sequence and forgets the rest: the next step runs
  // at `position` (a conversation whose history was rendered differently goes back to the part
  // both share). The logits of the last step are then stale until the next step. Throws
  // ShapeError unless 0 <= position <= position().
  void rewind(int position);
  // Runs `token` at the next position and returns the logits there: (Vp), the first V meaningful.
  // Throws ShapeError when the cache is full or the token is outside the vocabulary.
  const float* step(int token);
  // Draws a token from the logits of the last step, as sample_token does, among the first
  // `candidates` ids (0 or more than V: all V). A tokenizer may know fewer tokens than the model
  // has rows (Qwen2.5's and Qwen3's 151936 rows hold 151665 and 151669 tokens): the rest, which
  // it could not decode, are never drawn.
  int sample(float temperature, int top_k, Rng& rng, int candidates = 0);
  int position() const { return pos_; }
  int capacity() const { return max_len_; }

 private:
  const Model& model_;
  int max_len_;
  int pos_ = 0;
  ActivationArena acts_;         // one token, fp32
  AlignedBuffer<float> kcache_;  // (L, max_len, NKV*D): the key heads of each position
  AlignedBuffer<float> vcache_;  // (L, max_len, NKV*D)
  AlignedBuffer<float> scores_;  // (max_len) one head's attention scores
  AlignedBuffer<bf16> inp16_;    // (widest GEMM input) a bf16 model's matmul input, rounded
  std::vector<float> rope_cos_;  // Llama: (max_len, D/2) rotary tables
  std::vector<float> rope_sin_;
  std::vector<float> rope_cos_local_, rope_sin_local_;  // Gemma 3's sliding layers
  std::vector<int> ids_;         // (V) sampling scratch
  std::vector<double> weights_;  // (V)
};

// Draws a token from the first V logits: greedy when temperature <= 0, otherwise from
// softmax(logits / temperature) restricted to the top_k largest (top_k <= 0: all of them).
int sample_token(const float* logits, int V, float temperature, int top_k, Rng& rng);

}  // namespace llmcpu
