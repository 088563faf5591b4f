#include "core/model/parameters.h"

#include <cmath>
#include <cstdint>

namespace llmcpu {

namespace {
constexpr const char* kNames[kNumParameterTensors] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};
constexpr const char* kSymbolicShapes[kNumParameterTensors] = {
    "Vp, C", "maxT, C", "L, C", "L, C", "L, 3*C, C", "L, 3*C", "L, C, C", "L, C",
    "L, C", "L, C", "L, 4*C, C", "L, 4*C", "L, C, 4*C", "L, C", "C", "C"};
// The Llama family's, where a tensor exists (a bias only with its flag).
constexpr const char* kLlamaShapes[kNumParameterTensors] = {
    "Vp, C", "Vp, C", "L, C", "", "L, (NH+2*NKV)*D, C", "L, (NH+2*NKV)*D", "L, C, NH*D", "L, C",
    "L, C", "", "L, 2*H, C", "L, 2*H", "L, C, H", "L, C", "C", ""};

using Dims = std::array<std::vector<size_t>, kNumParameterTensors>;

Dims llama_dims(const ModelConfig& c) {
  const size_t L = c.num_layers, C = c.channels, Vp = c.padded_vocab_size;
  const size_t QKV = c.qkv_width(), A = c.attn_width(), H = c.hidden_size();
  const auto when = [](bool present, size_t n) { return present ? n : 0; };
  return {{{Vp, C}, {when(!c.tied_head, Vp), C}, {L, C}, {L, 0}, {L, QKV, C},
           {L, when(c.qkv_bias, QKV)}, {L, C, A}, {L, when(c.attn_proj_bias, C)}, {L, C}, {L, 0},
           {L, 2 * H, C}, {L, when(c.mlp_bias, 2 * H)}, {L, C, H}, {L, when(c.mlp_bias, C)}, {C},
           {0}}};
}

}  // namespace

ParameterLayout::ParameterLayout(const ModelConfig& c) : llama_(c.llama()) {
  const size_t L = c.num_layers, C = c.channels;
  if (llama_) {
    dims_ = llama_dims(c);
  } else {
    dims_ = {{{(size_t)c.padded_vocab_size, C}, {(size_t)c.max_seq_len, C}, {L, C}, {L, C},
              {L, 3 * C, C}, {L, 3 * C}, {L, C, C}, {L, C}, {L, C}, {L, C}, {L, 4 * C, C},
              {L, 4 * C}, {L, C, 4 * C}, {L, C}, {C}, {C}}};
  }
  for (int i = 0; i < kNumParameterTensors; ++i) {
    size_t n = 1;
    for (size_t d : dims_[i]) n *= d;
    sizes_[i] = n;
    offsets_[i] = total_;
    total_ += n;
  }
}

const char* ParameterLayout::name(int i) const {
  return llama_ && i == 1 ? "lm_head" : kNames[i];
}

size_t packed_size(std::span<const ParameterSpan> runs) {
  size_t n = 0;
  for (const ParameterSpan& r : runs) n += r.count;
  return n;
}

std::vector<ParameterSpan> ParameterLayout::spans() const {
  std::vector<ParameterSpan> out;
  for (int i = 0; i < kNumParameterTensors; ++i) {
    if (sizes_[i] == 0) continue;
    if (!per_layer(i)) {
      out.push_back({offsets_[i], sizes_[i], i, -1});
      continue;
    }
    const size_t L = dims_[i][0], slice = sizes_[i] / L;
    for (size_t l = 0; l < L; ++l) out.push_back({offsets_[i] + l * slice, slice, i, int(l)});
  }
  return out;
}

std::string ParameterLayout::shape(int i) const {
  std::string s = std::string("(") + (llama_ ? kLlamaShapes : kSymbolicShapes)[i] + ") = (";
  for (size_t k = 0; k < dims_[i].size(); ++k) s += (k ? ", " : "") + std::to_string(dims_[i][k]);
  return s + ")";
}

namespace {

// Whether x[0..n) holds a NaN or an infinity: all exponent bits set. Integer compares, so the loop
// vectorizes and no floating-point exception or flag is involved.
bool any_non_finite(const float* x, size_t n) {
  const auto* bits = reinterpret_cast<const uint32_t*>(x);
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad |= uint32_t((bits[i] & 0x7f800000u) == 0x7f800000u);
  return bad != 0;
}

}  // namespace

std::string NonFinite::describe() const {
  if (tensor < 0) return "nothing";
  std::string s = name;
  if (layer >= 0) s += " (layer " + std::to_string(layer) + ")";
  return s;
}

void zero_gradients(float* grads, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) grads[i] = 0.0f;
}

NonFinite find_non_finite(const float* flat, const ParameterLayout& layout) {
  NonFinite at;
  for (int t = 0; t < kNumParameterTensors; ++t) {
    const float* x = flat + layout.offset(t);
    const size_t n = layout.size(t);
    if (!any_non_finite(x, n)) continue;
    size_t i = 0;
    while (std::isfinite(x[i])) ++i;
    at.tensor = t;
    at.name = layout.name(t);
    at.index = i;
    at.value = x[i];
    if (ParameterLayout::per_layer(t)) at.layer = static_cast<int>(i / (n / layout.dims(t)[0]));
    return at;
  }
  return at;
}

}  // namespace llmcpu
