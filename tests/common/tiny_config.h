// A tiny, ragged GPT-2 shape for tests that need a model but not a trained one: L=2 NH=3 C=12
// (head size 4), V=11 padded to Vp=16, maxT=8.
#pragma once

#include "core/model/config.h"

namespace llmcpu::testing {

inline ModelConfig tiny_config() {
  ModelConfig c;
  c.max_seq_len = 8;
  c.vocab_size = 11;
  c.padded_vocab_size = 16;
  c.num_layers = 2;
  c.num_heads = 3;
  c.channels = 12;
  return c;
}

}  // namespace llmcpu::testing
