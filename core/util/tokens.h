// The one check that token ids lie in a model's vocabulary 0..V-1, for every place that takes
// tokens from outside (token shards: uint16 or uint32; debug states and the forward pass: int). It
// only finds the first bad token and words the problem; each caller throws its own error type
// (FileError naming the file, ShapeError) with its own prefix ("input", "target"). Targets may be
// masked: a negative target is no token, its loss is not counted (PyTorch's ignore_index).
#pragma once

#include <cstddef>
#include <string>

namespace llmcpu {

// "token 50257 at position 2 is outside the model's vocabulary 0..50256".
inline std::string outside_vocab(long long token, size_t position, int vocab_size) {
  return "token " + std::to_string(token) + " at position " + std::to_string(position) +
         " is outside the model's vocabulary 0.." + std::to_string(vocab_size - 1);
}

// Calls fail(outside_vocab(...)) for the first token of tokens[0..n) outside 0..vocab_size-1;
// `fail` must throw.
template <typename Token, typename Fail>
void check_tokens_in_vocab(const Token* tokens, size_t n, int vocab_size, Fail&& fail) {
  for (size_t i = 0; i < n; ++i) {
    const long long t = tokens[i];  // widened: the same test for signed and unsigned ids
    if (t < 0 || t >= vocab_size) fail(outside_vocab(t, i, vocab_size));
  }
}

// As check_tokens_in_vocab for targets, where a negative one is masked and passes; returns how
// many are not masked (count).
template <typename Fail>
size_t check_targets_in_vocab(const int* targets, size_t n, int vocab_size, Fail&& fail) {
  size_t counted = 0;
  for (size_t i = 0; i < n; ++i) {
    if (targets[i] < 0) continue;
    if (targets[i] >= vocab_size) fail(outside_vocab(targets[i], i, vocab_size));
    ++counted;
  }
  return counted;
}

// How many of targets[0..n) count: those not masked (negative).
inline size_t count_targets(const int* targets, size_t n) {
  size_t counted = 0;
  for (size_t i = 0; i < n; ++i) counted += targets[i] >= 0;
  return counted;
}

}  // namespace llmcpu
