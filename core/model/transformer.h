// GPT-2's computation, written once: the embedding, one transformer block, the head, and the passes
// over all layers, forward and backward, over an executor X (core/model/executors.h) that runs each
// op: fp32, bf16 mixed precision, or decoding through a KV cache (a plugin that owns blocks runs
// them itself; Gpt2 calls the passes below for the CPU's part). Per block,
// with residual the layer's input:
//   ln1 = LN(residual)        qkv = ln1 qkvw^T + qkvb        atty = attention(qkv)
//   residual2 = residual + atty attprojw^T + attprojb
//   ln2 = LN(residual2)       fch = ln2 fcw^T + fcb          fch_gelu = GELU(fch)
//   residual3 = residual2 + fch_gelu fcprojw^T + fcprojb
// The embedding is wte[token] + wpe[position]; the head is lnf = LN(last residual3), logits =
// lnf wte^T. The backward pass runs the same ops in reverse; the residual stream's gradient
// (dresidual) flows unchanged into both branches of each sum. The head's matmul, the loss and its
// gradient run fused over chunks of rows (model_head). Deliberately not here: the mean of the
// losses and the loss scale (Gpt2), what each executor stores in which precision.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "core/model/activations.h"
#include "core/model/config.h"
#include "core/model/parameters.h"

namespace llmcpu {

template <class X>
void block_forward(X& x, int l, const LayerParams<float>& p,
                   const LayerActivations<typename X::Act>& a, int B, int T, int C, int NH) {
  const size_t BT = (size_t)B * T;
  x.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, a.residual, p.ln1w, p.ln1b, BT, C);
  x.matmul_forward(a.qkv, a.ln1, p.qkvw, p.qkvb, BT, C, 3 * C);
  x.attention_forward(l, a.atty, a.lse, a.qkv, B, T, C, NH);
  x.matmul_forward(a.residual2, a.atty, p.attprojw, p.attprojb, BT, C, C);
  x.residual_forward(a.residual2, a.residual2, a.residual, BT * C);
  x.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, p.ln2w, p.ln2b, BT, C);
  x.matmul_forward(a.fch, a.ln2, p.fcw, p.fcb, BT, C, 4 * C);
  x.gelu_forward(a.fch_gelu, a.fch, BT * 4 * C);
  x.matmul_forward(a.residual3, a.fch_gelu, p.fcprojw, p.fcprojb, BT, 4 * C, C);
  x.residual_forward(a.residual3, a.residual3, a.residual2, BT * C);
}

// d.dresidual holds d(residual3) on entry and d(residual) on return; dp accumulates. What the
// forward pass did not keep (a.recompute_*) is recomputed just before it is read, into the one
// buffer all layers share, with the forward's own kernels: the same bits.
template <class X>
void block_backward(X& x, int l, const LayerParams<float>& p, const LayerParams<float>& dp,
                    const LayerActivations<typename X::Act>& a, const ActivationGradViews& d, int B,
                    int T, int C, int NH) {
  const size_t BT = (size_t)B * T;
  if (a.recompute_gelu) x.gelu_forward(a.fch_gelu, a.fch, BT * 4 * C);
  x.matmul_backward(d.dfch, dp.fcprojw, dp.fcprojb, d.dresidual, a.fch_gelu, p.fcprojw, BT, 4 * C,
                    C);
  x.gelu_backward(d.dfch, a.fch, d.dfch, BT * 4 * C);
  if (a.recompute_layernorm) {
    x.layernorm_apply(a.ln2, a.residual2, a.ln2_mean, a.ln2_rstd, p.ln2w, p.ln2b, BT, C);
  }
  x.matmul_backward(d.dln, dp.fcw, dp.fcb, d.dfch, a.ln2, p.fcw, BT, C, 4 * C);
  // Adds d(residual2) through ln2 to the d(residual3) that flows straight through.
  x.layernorm_backward(d.dresidual, dp.ln2w, dp.ln2b, d.dln, a.residual2, p.ln2w, a.ln2_mean,
                       a.ln2_rstd, BT, C);
  x.matmul_backward(d.datty, dp.attprojw, dp.attprojb, d.dresidual, a.atty, p.attprojw, BT, C, C);
  x.attention_backward(l, d.dqkv, d.datty, a.atty, a.qkv, a.lse, B, T, C, NH);
  if (a.recompute_layernorm) {
    x.layernorm_apply(a.ln1, a.residual, a.ln1_mean, a.ln1_rstd, p.ln1w, p.ln1b, BT, C);
  }
  x.matmul_backward(d.dln, dp.qkvw, dp.qkvb, d.dqkv, a.ln1, p.qkvw, BT, C, 3 * C);
  x.layernorm_backward(d.dresidual, dp.ln1w, dp.ln1b, d.dln, a.residual, p.ln1w, a.ln1_mean,
                       a.ln1_rstd, BT, C);
}

// The embedding and blocks [0, end): inputs (B, T) to the residual stream at block `end`'s input
// (a.layer(end).residual, or a.output() when end = L).
template <class X>
void embed_and_blocks_forward(X& x, const ModelConfig& c, const ParameterViews<float>& p,
                              const ActivationViews<typename X::Act>& a, const int* inputs, int B,
                              int T, int end) {
  x.encoder_forward(a.encoded, inputs, p.wte, p.wpe, B, T, c.channels);
  for (int l = 0; l < end; ++l)
    block_forward(x, l, p.layer(l), a.layer(l), B, T, c.channels, c.num_heads);
}

// The final layernorm: the last block's output to a.lnf (B, T, C), the head's input.
template <class X>
void final_layernorm_forward(X& x, const ModelConfig& c, const ParameterViews<float>& p,
                             const ActivationViews<typename X::Act>& a, int B, int T) {
  x.layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, a.output(), p.lnfw, p.lnfb, (size_t)B * T,
                      c.channels);
}

// The embedding, every block and the final layernorm: inputs (B, T) to a.lnf (B, T, C), the
// head's input. The head (lnf wte^T, in chunks of rows with the loss) is the caller's.
template <class X>
void model_forward(X& x, const ModelConfig& c, const ParameterViews<float>& p,
                   const ActivationViews<typename X::Act>& a, const int* inputs, int B, int T) {
  embed_and_blocks_forward(x, c, p, a, inputs, B, T, c.num_layers);
  final_layernorm_forward(x, c, p, a, B, T);
}

// The tied head and the loss over chunks of a.head_rows rows (the last one shorter), from a.lnf:
//   logits_r = lnf_r wte^T (Vp columns; the padded ones are zero rows of wte)
//   loss_t = lse_t - logits[t, target_t]                  (into a.losses; without targets: none)
//   dlogits_r = dloss (softmax(logits_r) - onehot(targets_r)) over the first V, 0 in the padding
//   dlnf_r = dlogits_r wte (into d.dln, overwritten);  dwte += dlogits_r^T lnf_r
// dloss NaN: no backward. With a.keep_logits every row's logits stay in a.logits.
template <class X>
void model_head(X& x, const ModelConfig& c, const ParameterViews<float>& p,
                const ParameterViews<float>& g, const ActivationViews<typename X::Act>& a,
                const ActivationGradViews& d, const int* targets, float dloss) {
  const int C = c.channels, V = c.vocab_size, Vp = c.padded_vocab_size;
  const bool grad = targets && !std::isnan(dloss);
  for (size_t r = 0; r < a.BT; r += a.head_rows) {
    const size_t n = std::min(a.head_rows, a.BT - r);
    float* logits = a.keep_logits ? a.logits + r * Vp : a.logits;
    x.matmul_forward(logits, a.lnf + r * C, p.wte, nullptr, n, C, Vp);
    if (!targets) continue;
    x.softmax_xent_forward(a.losses + r, a.lse_head + r, logits, targets + r, n, V, Vp);
    if (!grad) continue;
    if (a.dlogits != logits) std::memcpy(a.dlogits, logits, n * Vp * sizeof(float));
    x.softmax_xent_backward(a.dlogits, a.lse_head + r, targets + r, dloss, n, V, Vp);
    x.matmul_backward(d.dln + r * C, g.wte, nullptr, a.dlogits, a.lnf + r * C, p.wte, n, C, Vp);
  }
}

// From d(lnf) (in d.dln, the head's gradient) to d.dresidual = d(the last block's output) (its
// previous contents dropped), and the gradients of lnfw, lnfb.
template <class X>
void final_layernorm_backward(X& x, const ModelConfig& c, const ParameterViews<float>& p,
                              const ParameterViews<float>& g,
                              const ActivationViews<typename X::Act>& a,
                              const ActivationGradViews& d, int B, int T) {
  const size_t BT = (size_t)B * T;
  std::fill_n(d.dresidual, BT * c.channels, 0.0f);
  x.layernorm_backward(d.dresidual, g.lnfw, g.lnfb, d.dln, a.output(), p.lnfw, a.lnf_mean,
                       a.lnf_rstd, BT, c.channels);
}

// From d.dresidual = d(block `end`'s input) back through blocks end-1 .. 0 and the embedding to
// the parameter gradients g (accumulated). done(l) is called as soon as layer l's gradients are
// complete, and done(-1) once the embedding's (wte, wpe) are.
template <class X, class Done>
void blocks_and_embed_backward(X& x, const ModelConfig& c, const ParameterViews<float>& p,
                               const ParameterViews<float>& g,
                               const ActivationViews<typename X::Act>& a,
                               const ActivationGradViews& d, const int* inputs, int B, int T,
                               int end, Done&& done) {
  for (int l = end - 1; l >= 0; --l) {
    block_backward(x, l, p.layer(l), g.layer(l), a.layer(l), d, B, T, c.channels, c.num_heads);
    done(l);
  }
  x.encoder_backward(g.wte, g.wpe, d.dresidual, inputs, B, T, c.channels);
  done(-1);
}

// From d(lnf) (in d.dln, the head's gradient) back to the parameter gradients g (accumulated).
// done(l) is called as soon as layer l's gradients are complete (l = L-1 down to 0), and done(-1)
// once the rest (wte, wpe, lnfw, lnfb) are: what a data-parallel run starts sending while the
// layers below compute.
template <class X, class Done>
void model_backward(X& x, const ModelConfig& c, const ParameterViews<float>& p,
                    const ParameterViews<float>& g, const ActivationViews<typename X::Act>& a,
                    const ActivationGradViews& d, const int* inputs, int B, int T, Done&& done) {
  final_layernorm_backward(x, c, p, g, a, d, B, T);
  blocks_and_embed_backward(x, c, p, g, a, d, inputs, B, T, c.num_layers, done);
}

}  // namespace llmcpu
