#include "core/model/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "simd/error.h"

namespace llmcpu {

Generator::Generator(const Gpt2& model, int max_len) : model_(model), max_len_(max_len) {
  const ModelConfig& c = model.config();
  if (max_len <= 0 || max_len > c.max_seq_len) {
    throw ShapeError("generation length " + std::to_string(max_len) + " must be in 1..maxT=" +
                     std::to_string(c.max_seq_len));
  }
  const size_t L = c.num_layers, C = c.channels;
  kcache_ = AlignedBuffer<float>(L * max_len * C);
  vcache_ = AlignedBuffer<float>(L * max_len * C);
  const size_t sizes[] = {C, C, 3 * C, C, 4 * C, 4 * C, C, (size_t)max_len, (size_t)c.padded_vocab_size, 2};
  size_t total = 0;
  for (size_t n : sizes) total += (n + 15) / 16 * 16;
  scratch_ = AlignedBuffer<float>(total);
  float** views[] = {&x_, &ln_, &qkv_, &atty_, &fch_, &fch_gelu_, &tmp_, &scores_, &logits_, &stats_};
  float* p = scratch_.data();
  for (size_t i = 0; i < std::size(views); ++i) {
    *views[i] = p;
    p += (sizes[i] + 15) / 16 * 16;
  }
}

const float* Generator::step(int token) {
  const ModelConfig& c = model_.config();
  if (pos_ >= max_len_) {
    throw ShapeError("generation reached its length limit of " + std::to_string(max_len_) + " tokens");
  }
  if (token < 0 || token >= c.vocab_size) {
    throw ShapeError("token " + std::to_string(token) + " is outside the vocabulary 0.." +
                     std::to_string(c.vocab_size - 1));
  }
  const KernelTable& k = model_.kernels();
  const ParameterViews<float>& p = model_.params();
  const int C = c.channels, NH = c.num_heads, L = c.num_layers;
  const size_t LC = (size_t)max_len_ * C;
  k.encoder_forward(x_, &token, p.wte, p.wpe + (size_t)pos_ * C, 1, 1, C);
  float* mean = stats_;
  float* rstd = stats_ + 1;
  for (int l = 0; l < L; ++l) {
    float* kc = kcache_.data() + l * LC;
    float* vc = vcache_.data() + l * LC;
    k.layernorm_forward(ln_, mean, rstd, x_, p.ln1w + l * C, p.ln1b + l * C, 1, C);
    k.matmul_forward(qkv_, ln_, p.qkvw + (size_t)l * 3 * C * C, p.qkvb + l * 3 * C, 1, C, 3 * C);
    std::copy_n(qkv_ + C, C, kc + (size_t)pos_ * C);
    std::copy_n(qkv_ + 2 * C, C, vc + (size_t)pos_ * C);
    k.attention_decode(atty_, scores_, qkv_, kc, vc, pos_, C, NH);
    k.matmul_forward(tmp_, atty_, p.attprojw + (size_t)l * C * C, p.attprojb + l * C, 1, C, C);
    k.residual_forward(x_, x_, tmp_, C);
    k.layernorm_forward(ln_, mean, rstd, x_, p.ln2w + l * C, p.ln2b + l * C, 1, C);
    k.matmul_forward(fch_, ln_, p.fcw + (size_t)l * 4 * C * C, p.fcb + l * 4 * C, 1, C, 4 * C);
    k.gelu_forward(fch_gelu_, fch_, 4 * C);
    k.matmul_forward(tmp_, fch_gelu_, p.fcprojw + (size_t)l * C * 4 * C, p.fcprojb + l * C, 1,
                     4 * C, C);
    k.residual_forward(x_, x_, tmp_, C);
  }
  k.layernorm_forward(ln_, mean, rstd, x_, p.lnfw, p.lnfb, 1, C);
  k.matmul_forward(logits_, ln_, p.wte, nullptr, 1, C, c.padded_vocab_size);
  ++pos_;
  return logits_;
}

int sample_token(const float* logits, int V, float temperature, int top_k, Rng& rng) {
  if (temperature <= 0) return int(std::max_element(logits, logits + V) - logits);
  std::vector<int> ids(V);
  std::iota(ids.begin(), ids.end(), 0);
  int k = (top_k <= 0 || top_k > V) ? V : top_k;
  if (k < V) {
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&](int a, int b) { return logits[a] > logits[b]; });
    ids.resize(k);
  }
  float maxval = -INFINITY;
  for (int id : ids) maxval = std::max(maxval, logits[id]);
  std::vector<double> weights(ids.size());
  double total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    weights[i] = std::exp(double(logits[ids[i]] - maxval) / temperature);
    total += weights[i];
  }
  double u = rng.uniform() * total;
  for (size_t i = 0; i < ids.size(); ++i) {
    u -= weights[i];
    if (u < 0) return ids[i];
  }
  return ids.back();
}

}  // namespace llmcpu
