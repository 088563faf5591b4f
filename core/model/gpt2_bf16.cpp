// The bf16 (mixed-precision) wiring of Gpt2's forward and backward passes; the dataflow is written
// out in gpt2.h. The GEMMs go through Bf16Kernels (bf16 operands, fp32 accumulation), every other
// op through the fp32 KernelTable, as in the fp32 path (gpt2.cpp), which this file mirrors line by
// line. Deliberately not here: the token checks, the loss and its gradient
// (Gpt2::forward/backward).
#include <algorithm>

#include "core/model/gpt2.h"

namespace llmcpu {

void Gpt2::forward_bf16(int B, int T) {
  if (bf16_stale_) refresh_bf16_weights();
  const KernelTable& k = kernels_;
  const Bf16Kernels& h = *bf16k_;
  const ParameterViews<float>& p = p_;  // fp32 master: encoder, layernorms, biases
  const ParameterViews<bf16>& w = pb_;  // bf16 copy: the matmul weights
  const ActivationViews& a = arena_.acts;
  const Bf16ActivationViews& ah = arena_.acts_bf16;
  const int L = config_.num_layers, NH = config_.num_heads, C = config_.channels;
  const int Vp = config_.padded_vocab_size;
  const size_t BT = (size_t)B * T;

  k.encoder_forward(a.encoded, inputs_.data(), p.wte, p.wpe, B, T, C);
  for (int l = 0; l < L; ++l) {
    const float* residual = l == 0 ? a.encoded : a.residual3 + (l - 1) * BT * C;
    bf16* ln1 = ah.ln1 + l * BT * C;
    float* qkv = a.qkv + l * BT * 3 * C;
    bf16* atty = ah.atty + l * BT * C;
    float* att = a.att + (size_t)l * B * NH * T * T;
    float* residual2 = a.residual2 + l * BT * C;
    bf16* ln2 = ah.ln2 + l * BT * C;
    float* fch = a.fch + l * BT * 4 * C;
    bf16* fch_gelu = ah.fch_gelu + l * BT * 4 * C;
    float* residual3 = a.residual3 + l * BT * C;

    h.layernorm_forward(ln1, a.ln1_mean + l * BT, a.ln1_rstd + l * BT, residual, p.ln1w + l * C,
                        p.ln1b + l * C, BT, C);
    h.matmul_forward(qkv, ln1, w.qkvw + (size_t)l * 3 * C * C, p.qkvb + l * 3 * C, BT, C, 3 * C);
    k.attention_forward(a.atty, att, qkv, B, T, C, NH);  // fp32, into one layer of scratch
    h.to_bf16(atty, a.atty, BT * C);
    h.matmul_forward(residual2, atty, w.attprojw + (size_t)l * C * C, p.attprojb + l * C, BT, C, C);
    k.residual_forward(residual2, residual2, residual, BT * C);
    h.layernorm_forward(ln2, a.ln2_mean + l * BT, a.ln2_rstd + l * BT, residual2, p.ln2w + l * C,
                        p.ln2b + l * C, BT, C);
    h.matmul_forward(fch, ln2, w.fcw + (size_t)l * 4 * C * C, p.fcb + l * 4 * C, BT, C, 4 * C);
    h.gelu_forward(fch_gelu, fch, BT * 4 * C);
    h.matmul_forward(residual3, fch_gelu, w.fcprojw + (size_t)l * C * 4 * C, p.fcprojb + l * C, BT,
                     4 * C, C);
    k.residual_forward(residual3, residual3, residual2, BT * C);
  }
  const float* last = a.residual3 + (L - 1) * BT * C;
  h.layernorm_forward(ah.lnf, a.lnf_mean, a.lnf_rstd, last, p.lnfw, p.lnfb, BT, C);
  h.matmul_forward(a.logits, ah.lnf, w.wte, nullptr, BT, C, Vp);
}

void Gpt2::backward_bf16() {
  const KernelTable& k = kernels_;
  const Bf16Kernels& h = *bf16k_;
  const ParameterViews<float>& p = p_;
  const ParameterViews<bf16>& w = pb_;
  const ParameterViews<float>& g = g_;
  const ActivationViews& a = arena_.acts;
  const Bf16ActivationViews& ah = arena_.acts_bf16;
  const ActivationGradViews& d = arena_.grads;
  const int B = arena_.batch(), T = arena_.seq_len();
  const int L = config_.num_layers, NH = config_.num_heads, C = config_.channels;
  const int Vp = config_.padded_vocab_size;
  const size_t BT = (size_t)B * T;

  // a.logits holds dlogits (fp32) here.
  h.matmul_backward(d.dln, g.wte, nullptr, a.logits, ah.lnf, w.wte, BT, C, Vp);
  std::fill_n(d.dresidual, BT * C, 0.0f);
  const float* last = a.residual3 + (L - 1) * BT * C;
  k.layernorm_backward(d.dresidual, g.lnfw, g.lnfb, d.dln, last, p.lnfw, a.lnf_mean, a.lnf_rstd, BT,
                       C);

  for (int l = L - 1; l >= 0; --l) {
    const float* residual = l == 0 ? a.encoded : a.residual3 + (l - 1) * BT * C;
    h.matmul_backward(d.dfch, g.fcprojw + (size_t)l * C * 4 * C, g.fcprojb + l * C, d.dresidual,
                      ah.fch_gelu + l * BT * 4 * C, w.fcprojw + (size_t)l * C * 4 * C, BT, 4 * C,
                      C);
    k.gelu_backward(d.dfch, a.fch + l * BT * 4 * C, d.dfch, BT * 4 * C);
    h.matmul_backward(d.dln, g.fcw + (size_t)l * 4 * C * C, g.fcb + l * 4 * C, d.dfch,
                      ah.ln2 + l * BT * C, w.fcw + (size_t)l * 4 * C * C, BT, C, 4 * C);
    k.layernorm_backward(d.dresidual, g.ln2w + l * C, g.ln2b + l * C, d.dln,
                         a.residual2 + l * BT * C, p.ln2w + l * C, a.ln2_mean + l * BT,
                         a.ln2_rstd + l * BT, BT, C);
    h.matmul_backward(d.datty, g.attprojw + (size_t)l * C * C, g.attprojb + l * C, d.dresidual,
                      ah.atty + l * BT * C, w.attprojw + (size_t)l * C * C, BT, C, C);
    k.attention_backward(d.dqkv, d.dscores, d.datty, a.qkv + l * BT * 3 * C,
                         a.att + (size_t)l * B * NH * T * T, B, T, C, NH);
    h.matmul_backward(d.dln, g.qkvw + (size_t)l * 3 * C * C, g.qkvb + l * 3 * C, d.dqkv,
                      ah.ln1 + l * BT * C, w.qkvw + (size_t)l * 3 * C * C, BT, C, 3 * C);
    k.layernorm_backward(d.dresidual, g.ln1w + l * C, g.ln1b + l * C, d.dln, residual,
                         p.ln1w + l * C, a.ln1_mean + l * BT, a.ln1_rstd + l * BT, BT, C);
  }
  k.encoder_backward(g.wte, g.wpe, d.dresidual, inputs_.data(), B, T, C);
}

}  // namespace llmcpu
