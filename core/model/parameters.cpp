#include "core/model/parameters.h"

#include <cmath>
#include <cstdint>

namespace llmcpu {

namespace {

// Each role's name (llm.c's where it has one), and its shape in GPT-2's letters (the llm.c
// header's; "" where GPT-2 has no such tensor) and in the others'.
struct RoleText {
  const char* name;
  const char* llmc_shape;
  const char* shape;
};
// size: table
constexpr RoleText kRoles[kNumTensorRoles] = {
    {"wte", "Vp, C", "Vp, C"},
    {"lm_head", "", "Vp, C"},
    {"wpe", "maxT, C", "maxT, C"},
    {"ln1w", "L, C", "L, C"},
    {"ln1b", "L, C", "L, C"},
    {"q_norm", "", "L, D"},
    {"k_norm", "", "L, D"},
    {"qkvw", "L, 3*C, C", "L, (NH+2*NKV)*D, C"},
    {"qkvb", "L, 3*C", "L, (NH+2*NKV)*D"},
    {"attprojw", "L, C, C", "L, C, NH*D"},
    {"attprojb", "L, C", "L, C"},
    {"attn_post_norm", "", "L, C"},
    {"ln2w", "L, C", "L, C"},
    {"ln2b", "L, C", "L, C"},
    {"fcw", "L, 4*C, C", "L, F, C"},
    {"fcb", "L, 4*C", "L, F"},
    {"fcprojw", "L, C, 4*C", "L, C, H"},
    {"fcprojb", "L, C", "L, C"},
    {"mlp_post_norm", "", "L, C"},
    {"lnfw", "C", "C"},
    {"lnfb", "C", "C"},
};

}  // namespace

ParameterLayout::ParameterLayout(const ModelConfig& c) : llmc_(c.family().llmc_files) {
  const Family& f = c.family();
  const size_t L = c.num_layers, C = c.channels, Vp = c.padded_vocab_size;
  const size_t QKV = c.qkv_width(), A = c.attn_width(), F = c.fc_width(), H = c.hidden_size();
  const bool layernorm = f.norm == NormKind::kLayerNorm;
  const auto when = [](bool present, size_t n) { return present ? n : 0; };
  dims_[kWte] = {Vp, C};
  dims_[kLmHead] = {when(!c.tied_head, Vp), C};
  dims_[kWpe] = {when(f.positions == PositionKind::kLearned, size_t(c.max_seq_len)), C};
  dims_[kLn1w] = {L, C};
  dims_[kLn1b] = {L, when(layernorm, C)};
  dims_[kQNorm] = {L, when(f.qk_norm, size_t(c.head_size()))};
  dims_[kKNorm] = {L, when(f.qk_norm, size_t(c.head_size()))};
  dims_[kQkvw] = {L, QKV, C};
  dims_[kQkvb] = {L, when(c.qkv_bias, QKV)};
  dims_[kAttprojw] = {L, C, A};
  dims_[kAttprojb] = {L, when(c.attn_proj_bias, C)};
  dims_[kAttnPostNorm] = {L, when(f.post_norms, C)};
  dims_[kLn2w] = {L, C};
  dims_[kLn2b] = {L, when(layernorm, C)};
  dims_[kFcw] = {L, F, C};
  dims_[kFcb] = {L, when(c.mlp_bias, F)};
  dims_[kFcprojw] = {L, C, H};
  dims_[kFcprojb] = {L, when(c.mlp_bias, C)};
  dims_[kMlpPostNorm] = {L, when(f.post_norms, C)};
  dims_[kLnfw] = {C};
  dims_[kLnfb] = {when(layernorm, C)};
  for (int i = 0; i < kNumTensorRoles; ++i) {
    size_t n = 1;
    for (size_t d : dims_[i]) n *= d;
    sizes_[i] = n;
    offsets_[i] = total_;
    total_ += n;
  }
}

const char* ParameterLayout::name(int i) { return kRoles[i].name; }

size_t packed_size(std::span<const ParameterSpan> runs) {
  size_t n = 0;
  for (const ParameterSpan& r : runs) n += r.count;
  return n;
}

std::vector<ParameterSpan> ParameterLayout::spans() const {
  std::vector<ParameterSpan> out;
  for (int i = 0; i < kNumTensorRoles; ++i) {
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
  std::string s = std::string("(") + (llmc_ ? kRoles[i].llmc_shape : kRoles[i].shape) + ") = (";
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
  for (int t = 0; t < kNumTensorRoles; ++t) {
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
