#include "core/model/gpt2.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/runtime/numa_memory.h"
#include "core/util/rng.h"
#include "core/util/tokens.h"
#include "simd/error.h"

namespace llmcpu {

Gpt2::Gpt2(const ModelConfig& config, const KernelTable& kernels, Precision precision,
           const Bf16Kernels* bf16_kernels)
    : config_(config),
      layout_(config),
      kernels_(kernels),
      precision_(precision),
      bf16k_(precision == Precision::kBf16 ? (bf16_kernels ? bf16_kernels : &active_bf16_kernels())
                                           : nullptr) {
  validate(config_, "model");
  params_ = AlignedBuffer<float>(layout_.total());
  grads_ = AlignedBuffer<float>(layout_.total());
  first_touch_zero(params_.data(), params_.size());  // NUMA: pages land where the threads use them
  first_touch_zero(grads_.data(), grads_.size());
  p_ = ParameterViews<float>::carve(params_.data(), layout_);
  g_ = ParameterViews<float>::carve(grads_.data(), layout_);
  if (precision_ == Precision::kBf16) {
    params_bf16_ = AlignedBuffer<bf16>(layout_.total());
    pb_ = ParameterViews<bf16>::carve(params_bf16_.data(), layout_);
    refresh_bf16_weights();  // first touch by the converting threads; bf16(0) = 0
  }
}

std::string Gpt2::kernels_summary() const {
  std::string s = precision_name(precision_);
  if (bf16k_) s += " (" + std::string(bf16k_->target) + " GEMMs)";
  return s + ", " + std::string(kernels_.target) + " kernels";
}

void Gpt2::refresh_bf16_weights() {
  if (precision_ != Precision::kBf16) return;
  bf16k_->to_bf16(params_bf16_.data(), params_.data(), params_.size());
  bf16_stale_ = false;
}

Gpt2::UpdateSpans Gpt2::weights_for_update() {
  if (bf16_stale_) refresh_bf16_weights();  // the copy must be current where the update skips
  return {params_.data(), params_bf16_.data()};
}

void Gpt2::plan_batch(int B, int T) {
  if (B <= 0 || T <= 0) {
    throw ShapeError("batch " + std::to_string(B) + " x " + std::to_string(T) +
                     ": batch size and sequence length must be positive");
  }
  if (T > config_.max_seq_len) {
    throw ShapeError("sequence length T=" + std::to_string(T) + " exceeds the model's maxT=" +
                     std::to_string(config_.max_seq_len));
  }
  if (B == arena_.batch() && T == arena_.seq_len()) return;
  arena_ = ActivationArena(config_, B, T, precision_);
  inputs_ = AlignedBuffer<int>((size_t)B * T);
  targets_ = AlignedBuffer<int>((size_t)B * T);
}

float Gpt2::forward(const int* inputs, const int* targets, int B, int T) {
  if (B != arena_.batch() || T != arena_.seq_len()) plan_batch(B, T);
  const KernelTable& k = kernels_;
  const ActivationViews& a = arena_.acts;
  const int V = config_.vocab_size, Vp = config_.padded_vocab_size;
  const size_t BT = (size_t)B * T;
  auto check_tokens = [&](const int* tokens, const char* what) {
    check_tokens_in_vocab(tokens, BT, V, [&](const std::string& problem) {
      throw ShapeError(std::string(what) + " " + problem);
    });
  };
  check_tokens(inputs, "input");
  if (targets) check_tokens(targets, "target");
  std::memcpy(inputs_.data(), inputs, BT * sizeof(int));
  have_targets_ = targets != nullptr;
  if (targets) std::memcpy(targets_.data(), targets, BT * sizeof(int));

  if (precision_ == Precision::kBf16) {
    forward_bf16(B, T);
  } else {
    forward_fp32(B, T);
  }
  if (!targets) return std::numeric_limits<float>::quiet_NaN();
  k.softmax_xent_forward(a.losses, a.lse, a.logits, targets_.data(), BT, V, Vp);
  double total = 0;
  for (size_t i = 0; i < BT; ++i) total += a.losses[i];
  return static_cast<float>(total / double(BT));
}

void Gpt2::forward_fp32(int B, int T) {
  const KernelTable& k = kernels_;
  const ParameterViews<float>& p = p_;
  const ActivationViews& a = arena_.acts;
  const int L = config_.num_layers, NH = config_.num_heads, C = config_.channels;
  const int Vp = config_.padded_vocab_size;
  const size_t BT = (size_t)B * T;
  k.encoder_forward(a.encoded, inputs_.data(), p.wte, p.wpe, B, T, C);
  for (int l = 0; l < L; ++l) {
    const float* residual = l == 0 ? a.encoded : a.residual3 + (l - 1) * BT * C;
    float* ln1 = a.ln1 + l * BT * C;
    float* qkv = a.qkv + l * BT * 3 * C;
    float* atty = a.atty + l * BT * C;
    float* att = a.att + (size_t)l * B * NH * T * T;
    float* residual2 = a.residual2 + l * BT * C;
    float* ln2 = a.ln2 + l * BT * C;
    float* fch = a.fch + l * BT * 4 * C;
    float* fch_gelu = a.fch_gelu + l * BT * 4 * C;
    float* residual3 = a.residual3 + l * BT * C;

    k.layernorm_forward(ln1, a.ln1_mean + l * BT, a.ln1_rstd + l * BT, residual, p.ln1w + l * C,
                        p.ln1b + l * C, BT, C);
    k.matmul_forward(qkv, ln1, p.qkvw + (size_t)l * 3 * C * C, p.qkvb + l * 3 * C, BT, C, 3 * C);
    k.attention_forward(atty, att, qkv, B, T, C, NH);
    k.matmul_forward(residual2, atty, p.attprojw + (size_t)l * C * C, p.attprojb + l * C, BT, C, C);
    k.residual_forward(residual2, residual2, residual, BT * C);
    k.layernorm_forward(ln2, a.ln2_mean + l * BT, a.ln2_rstd + l * BT, residual2, p.ln2w + l * C,
                        p.ln2b + l * C, BT, C);
    k.matmul_forward(fch, ln2, p.fcw + (size_t)l * 4 * C * C, p.fcb + l * 4 * C, BT, C, 4 * C);
    k.gelu_forward(fch_gelu, fch, BT * 4 * C);
    k.matmul_forward(residual3, fch_gelu, p.fcprojw + (size_t)l * C * 4 * C, p.fcprojb + l * C, BT,
                     4 * C, C);
    k.residual_forward(residual3, residual3, residual2, BT * C);
  }
  const float* last = a.residual3 + (L - 1) * BT * C;
  k.layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, last, p.lnfw, p.lnfb, BT, C);
  k.matmul_forward(a.logits, a.lnf, p.wte, nullptr, BT, C, Vp);
}

void Gpt2::zero_grad() {
  float* g = grads_.data();
  const size_t n = grads_.size();
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) g[i] = 0.0f;
}

void Gpt2::backward(float loss_scale) {
  if (!have_targets_) throw Error("backward() needs a forward pass with targets just before it");
  have_targets_ = false;  // the logits become dlogits below: a second backward would be wrong
  const KernelTable& k = kernels_;
  const ParameterViews<float>& p = p_;
  const ParameterViews<float>& g = g_;
  const ActivationViews& a = arena_.acts;
  const ActivationGradViews& d = arena_.grads;
  const int B = arena_.batch(), T = arena_.seq_len();
  const int L = config_.num_layers, NH = config_.num_heads, C = config_.channels;
  const int V = config_.vocab_size, Vp = config_.padded_vocab_size;
  const size_t BT = (size_t)B * T;

  // loss = (1/BT) sum of per-token losses, so each token's loss has gradient loss_scale / BT.
  k.softmax_xent_backward(a.logits, a.lse, targets_.data(), loss_scale / float(BT), BT, V, Vp);
  if (precision_ == Precision::kBf16) {
    backward_bf16();
    return;
  }
  k.matmul_backward(d.dln, g.wte, nullptr, a.logits, a.lnf, p.wte, BT, C, Vp);
  std::fill_n(d.dresidual, BT * C, 0.0f);
  const float* last = a.residual3 + (L - 1) * BT * C;
  k.layernorm_backward(d.dresidual, g.lnfw, g.lnfb, d.dln, last, p.lnfw, a.lnf_mean, a.lnf_rstd, BT,
                       C);

  for (int l = L - 1; l >= 0; --l) {
    const float* residual = l == 0 ? a.encoded : a.residual3 + (l - 1) * BT * C;
    // residual3 = residual2 + fcproj(gelu(fc(ln2(residual2)))): d.dresidual is d(residual3) and
    // flows unchanged into both branches.
    k.matmul_backward(d.dfch, g.fcprojw + (size_t)l * C * 4 * C, g.fcprojb + l * C, d.dresidual,
                      a.fch_gelu + l * BT * 4 * C, p.fcprojw + (size_t)l * C * 4 * C, BT, 4 * C, C);
    k.gelu_backward(d.dfch, a.fch + l * BT * 4 * C, d.dfch, BT * 4 * C);
    k.matmul_backward(d.dln, g.fcw + (size_t)l * 4 * C * C, g.fcb + l * 4 * C, d.dfch,
                      a.ln2 + l * BT * C, p.fcw + (size_t)l * 4 * C * C, BT, C, 4 * C);
    k.layernorm_backward(d.dresidual, g.ln2w + l * C, g.ln2b + l * C, d.dln,
                         a.residual2 + l * BT * C, p.ln2w + l * C, a.ln2_mean + l * BT,
                         a.ln2_rstd + l * BT, BT, C);
    // residual2 = residual + attproj(attention(qkv(ln1(residual)))): now d.dresidual is
    // d(residual2).
    k.matmul_backward(d.datty, g.attprojw + (size_t)l * C * C, g.attprojb + l * C, d.dresidual,
                      a.atty + l * BT * C, p.attprojw + (size_t)l * C * C, BT, C, C);
    k.attention_backward(d.dqkv, d.dscores, d.datty, a.qkv + l * BT * 3 * C,
                         a.att + (size_t)l * B * NH * T * T, B, T, C, NH);
    k.matmul_backward(d.dln, g.qkvw + (size_t)l * 3 * C * C, g.qkvb + l * 3 * C, d.dqkv,
                      a.ln1 + l * BT * C, p.qkvw + (size_t)l * 3 * C * C, BT, C, 3 * C);
    k.layernorm_backward(d.dresidual, g.ln1w + l * C, g.ln1b + l * C, d.dln, residual,
                         p.ln1w + l * C, a.ln1_mean + l * BT, a.ln1_rstd + l * BT, BT, C);
  }
  k.encoder_backward(g.wte, g.wpe, d.dresidual, inputs_.data(), B, T, C);
}

void init_gpt2(Gpt2& model, unsigned long long seed) {
  const ModelConfig& c = model.config();
  const ParameterLayout& layout = model.layout();
  float* base = model.params_flat();
  Rng rng(seed);
  const double residual_std = 0.02 / std::sqrt(2.0 * c.num_layers);
  for (int i = 0; i < kNumParameterTensors; ++i) {
    const std::string name = ParameterLayout::name(i);
    float* t = base + layout.offset(i);
    const size_t n = layout.size(i);
    if (name == "ln1w" || name == "ln2w" || name == "lnfw") {
      std::fill_n(t, n, 1.0f);
    } else if (layout.dims(i).size() == 1 || name.back() == 'b') {
      std::fill_n(t, n, 0.0f);  // biases and layernorm biases
    } else {
      const double std_dev = (name == "attprojw" || name == "fcprojw") ? residual_std : 0.02;
      for (size_t j = 0; j < n; ++j) t[j] = static_cast<float>(std_dev * rng.normal());
    }
  }
  // The padding rows of wte are never looked up and get no gradient: keep them zero like llm.c.
  std::fill(model.params_flat() + (size_t)c.vocab_size * c.channels,
            model.params_flat() + (size_t)c.padded_vocab_size * c.channels, 0.0f);
}

}  // namespace llmcpu
