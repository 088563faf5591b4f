#include "core/model/parameters.h"

namespace llmcpu {

namespace {
constexpr const char* kNames[kNumParameterTensors] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};
constexpr const char* kSymbolicShapes[kNumParameterTensors] = {
    "Vp, C", "maxT, C", "L, C", "L, C", "L, 3*C, C", "L, 3*C", "L, C, C", "L, C",
    "L, C", "L, C", "L, 4*C, C", "L, 4*C", "L, C, 4*C", "L, C", "C", "C"};
}  // namespace

ParameterLayout::ParameterLayout(const ModelConfig& c) {
  const size_t L = c.num_layers, C = c.channels;
  dims_ = {{{(size_t)c.padded_vocab_size, C}, {(size_t)c.max_seq_len, C}, {L, C}, {L, C},
            {L, 3 * C, C}, {L, 3 * C}, {L, C, C}, {L, C}, {L, C}, {L, C}, {L, 4 * C, C},
            {L, 4 * C}, {L, C, 4 * C}, {L, C}, {C}, {C}}};
  for (int i = 0; i < kNumParameterTensors; ++i) {
    size_t n = 1;
    for (size_t d : dims_[i]) n *= d;
    sizes_[i] = n;
    offsets_[i] = total_;
    total_ += n;
  }
}

const char* ParameterLayout::name(int i) { return kNames[i]; }

std::string ParameterLayout::shape(int i) const {
  std::string s = std::string("(") + kSymbolicShapes[i] + ") = (";
  for (size_t k = 0; k < dims_[i].size(); ++k) s += (k ? ", " : "") + std::to_string(dims_[i][k]);
  return s + ")";
}

}  // namespace llmcpu
