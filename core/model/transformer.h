// The computation of a decoder-only transformer, written once: the embedding, one transformer
// block, the head, and the passes over all layers, forward and backward, over an executor X
// (core/model/executors.h) that runs each op: fp32, bf16 mixed precision, or decoding through a KV
// cache (a plugin that owns blocks runs them itself; Model calls the passes below for the CPU's
// part). The architecture (core/model/config.h) picks each op's variant, never a second loop. Per
// block, with residual the layer's input:
//   ln1 = norm(residual)      qkv = ln1 qkvw^T + qkvb        (Llama: q, k rotated in place)
//   atty = attention(qkv)     (Llama: grouped-query, NKV key/value heads)
//   residual2 = residual + atty attprojw^T + attprojb
//   ln2 = norm(residual2)     fch = ln2 fcw^T + fcb          fch_gelu = act(fch)
//   residual3 = residual2 + fch_gelu fcprojw^T + fcprojb
// norm is LayerNorm (GPT-2) or RMSNorm (Llama); act is GELU (GPT-2) or SwiGLU of fch = [gate | up]
// (Llama); a bias the model lacks is null. The embedding is wte[token] (+ wpe[position], GPT-2);
// the head is lnf = norm(last residual3), logits = lnf head^T (wte, or Llama's untied lm_head).
// In packed rows (a.starts, a.positions: core/model/packing.h) attention stays inside each example
// and positions (rotary or learned) restart with each.
// The backward pass runs the same ops in reverse; the residual stream's gradient (dresidual) flows
// unchanged into both branches of each sum. The head's matmul, the loss and its gradient run fused
// over chunks of rows (model_head). Deliberately not here: the mean of the losses and the loss
// scale (Model), what each executor stores in which precision, the positions of a decoding step
// (the executor's).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <span>

#include "core/model/activations.h"
#include "core/model/config.h"
#include "core/model/lora_ops.h"
#include "core/model/lora_views.h"
#include "core/model/packing.h"
#include "core/model/parameters.h"

namespace llmcpu {

// The shape of a block's ops for a batch of B x T tokens.
struct BlockShape {
  int B, T, C, NH, NKV, D, H;  // H: the MLP's width (GPT-2 4C)
  size_t BT, QKV, A, F;        // rows, and the widths of qkv, atty, fch (ModelConfig's *_width())
  NormKind norm;
  MlpKind mlp;
  bool rope;     // q and k rotated (else positions are the embedding's)
  bool qk_norm;  // q and k normalised per head before the rotation
  bool post_norms;  // the sublayers' outputs normalised before the residual adds
  float eps;     // RMSNorm's
  float norm_offset;  // the norms scale by w + norm_offset (the q/k norms' kernel adds it)
  const ModelConfig* config;

  // Layer l's attention: its scale, sliding window and soft-cap.
  AttentionOptions attention(int l) const { return config->attention(l); }

  static BlockShape of(const ModelConfig& c, int B, int T) {
    return {B,
            T,
            c.channels,
            c.num_heads,
            c.kv_heads(),
            c.head_size(),
            c.hidden_size(),
            size_t(B) * T,
            size_t(c.qkv_width()),
            size_t(c.attn_width()),
            size_t(c.fc_width()),
            c.family().norm,
            c.family().mlp,
            c.family().positions == PositionKind::kRope,
            c.family().qk_norm,
            c.family().post_norms,
            float(c.norm_eps),
            c.family().norm_offset,
            &c};
  }
};

// Gemma's embedding scale, sqrt(C) rounded to fp32 (transformers' normalizer in the hidden
// states' dtype).
inline float embedding_scale(const ModelConfig& c) { return float(std::sqrt(double(c.channels))); }

// Layer l's attention over the batch: the layer's scale, window and soft-cap, and in packed rows
// (a.starts) each example attending to itself alone.
template <class G>
AttentionOptions layer_attention(const BlockShape& s, int l, const LayerActivations<G>& a) {
  AttentionOptions o = s.attention(l);
  o.starts = a.starts;
  return o;
}

// The rows of a batch's rotary tables: T (position t % T of row r), or in packed rows B*T (one
// row per token, at its position in its example).
template <class G>
int rope_rows(const BlockShape& s, const LayerActivations<G>& a) {
  return a.starts ? int(s.BT) : s.T;
}

// The ops whose variant the architecture picks. norm: LayerNorm or RMSNorm over N rows.
template <class X, class G>
void norm_forward(X& x, const BlockShape& s, G* out, float* mean, float* rstd, const float* inp,
                  const float* w, const float* b, size_t N) {
  if (s.norm == NormKind::kRmsNorm) {
    x.rmsnorm_forward(out, rstd, inp, w, N, s.C, s.eps);
  } else {
    x.layernorm_forward(out, mean, rstd, inp, w, b, N, s.C);
  }
}
template <class X, class G>
void norm_apply(X& x, const BlockShape& s, G* out, const float* inp, const float* mean,
                const float* rstd, const float* w, const float* b) {
  if (s.norm == NormKind::kRmsNorm) {
    x.rmsnorm_apply(out, inp, rstd, w, s.BT, s.C);
  } else {
    x.layernorm_apply(out, inp, mean, rstd, w, b, s.BT, s.C);
  }
}
template <class X>
void norm_backward(X& x, const BlockShape& s, float* dinp, float* dw, float* db, const float* dout,
                   const float* inp, const float* w, const float* mean, const float* rstd) {
  if (s.norm == NormKind::kRmsNorm) {
    x.rmsnorm_backward(dinp, dw, dout, inp, w, rstd, s.BT, s.C);
  } else {
    x.layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, s.BT, s.C);
  }
}
// act: GELU of fch (BT x 4C, in place backward) or SwiGLU of fch = [gate | up] (BT x 2H).
template <class X, class G>
void activation_forward(X& x, const BlockShape& s, G* out, const G* fch) {
  if (s.mlp == MlpKind::kSwiGlu) {
    x.swiglu_forward(out, fch, s.BT, s.H);
  } else if (s.mlp == MlpKind::kGeGlu) {
    x.geglu_forward(out, fch, s.BT, s.H);
  } else {
    x.gelu_forward(out, fch, s.BT * s.F);
  }
}
template <class X, class G>
void activation_backward(X& x, const BlockShape& s, float* dfch, const float* dact, const G* fch) {
  if (s.mlp == MlpKind::kSwiGlu) {
    x.swiglu_backward(dfch, dact, fch, s.BT, s.H);
  } else if (s.mlp == MlpKind::kGeGlu) {
    x.geglu_backward(dfch, dact, fch, s.BT, s.H);
  } else {
    x.gelu_backward(dfch, fch, dact, s.BT * s.F);
  }
}

// The gradient of a sublayer's output from d.dresidual (that of the residual sum it feeds): the
// same without a post-norm, else through the norm into d.dln (free here), dw accumulated.
template <class X>
const float* post_norm_backward(X& x, const BlockShape& s, const ActivationGradViews& d, float* dw,
                                const float* out, const float* w, const float* rstd) {
  if (!s.post_norms) return d.dresidual;
  x.zero(d.dln, s.BT * s.C);
  x.rmsnorm_backward(d.dln, dw, d.dresidual, out, w, rstd, s.BT, s.C);
  return d.dln;
}

// LoRA (core/model/lora_views.h): layer l's adapters on the matmul of `site`, whose input is inp
// (N rows) and output out (N rows of ld): out += scale (inp A^T) B^T on each module's columns.
// A module's input: inp, or in a training pass with dropout inp through the module's mask.
template <class X, class G>
const G* lora_input(X& x, const LoraViews& lora, const LoraModuleView& m, const G* inp, size_t N) {
  if (!lora.dropping()) return inp;
  G* dropped = static_cast<G*>(lora.xd);
  x.lora_dropout(dropped, inp, N * m.p.in, lora.dropout, lora.seed_of(m));
  return dropped;
}
template <class X, class G, class O>
void lora_forward(X& x, const LoraViews* lora, int l, int site, O* out, size_t ld, const G* inp,
                  size_t N) {
  if (!lora) return;
  if (const LoraStack* st = lora->stack(l, site)) {  // every module's u in one product
    x.lora_down(st->view.u, inp, st->view, N, st->R);
    for (const LoraModuleView& m : lora->site(l, site)) x.lora_up(out, ld, m, N, lora->r, lora->scale);
    return;
  }
  for (const LoraModuleView& m : lora->site(l, site)) {
    x.lora_down(m.u, lora_input(x, *lora, m, inp, N), m, N, lora->r);
    x.lora_up(out, ld, m, N, lora->r, lora->scale);
  }
}
// Their backward from dout (N rows of ld, the matmul's output gradient): dA, dB accumulated and
// dinp (the base's input gradient, already written) += each module's.
template <class X, class G>
void lora_backward(X& x, const LoraViews* lora, int l, int site, float* dinp, const float* dout,
                   size_t ld, const G* inp, size_t N) {
  if (!lora) return;
  if (const LoraStack* st = lora->stack(l, site)) {  // every module's gB, then one product each way
    const std::span<const LoraModuleView> mods = lora->site(l, site);
    const size_t r = size_t(lora->r), in = st->view.p.in;
    for (size_t i = 0; i < mods.size(); ++i) {
      x.lora_up_backward(lora->gB + i * r, dout, ld, mods[i], N, lora->r, lora->scale);
    }
    if (st->view.p.dA) std::fill_n(st->view.p.dA, size_t(st->R) * in, 0.0f);
    x.lora_down_backward(dinp, lora->dx, lora->gB, inp, st->view, N, st->R, 0.0f, 0);
    if (!st->view.p.dA) return;
    for (size_t i = 0; i < mods.size(); ++i) add_into(mods[i].p.dA, st->view.p.dA + i * r * in, r * in);
    return;
  }
  for (const LoraModuleView& m : lora->site(l, site)) {
    x.lora_up_backward(lora->gB, dout, ld, m, N, lora->r, lora->scale);
    const G* in = lora_input(x, *lora, m, inp, N);  // the forward's mask again
    const float p = lora->dropping() ? lora->dropout : 0.0f;
    x.lora_down_backward(dinp, lora->dx, lora->gB, in, m, N, lora->r, p, lora->seed_of(m));
  }
}

template <class X>
void block_forward(X& x, int l, const LayerParams<float>& p,
                   const LayerActivations<typename X::Act>& a, const BlockShape& s,
                   const LoraViews* lora = nullptr) {
  const size_t BT = s.BT;
  norm_forward(x, s, a.ln1, a.ln1_mean, a.ln1_rstd, a.residual, p.ln1w, p.ln1b, BT);
  x.matmul_forward(a.qkv, a.ln1, p.qkvw, p.qkvb, BT, s.C, s.QKV);
  lora_forward(x, lora, l, kLoraQkv, a.qkv, s.QKV, a.ln1, BT);
  // q and k heads are contiguous at the start of each row.
  if (s.qk_norm) {
    x.head_rmsnorm_forward(a.qkv, a.qk_saved, a.qk_rstd, p.q_norm, p.k_norm, BT, s.NH, s.NKV, s.D,
                           s.QKV, s.eps, s.norm_offset);
  }
  const bool local = s.config->local_rope(l);  // Gemma 3's sliding layers rotate by their own base
  const float* cos = local ? a.rope_cos_local : a.rope_cos;
  const float* sin = local ? a.rope_sin_local : a.rope_sin;
  if (s.rope) x.rope_forward(a.qkv, cos, sin, BT, rope_rows(s, a), s.NH + s.NKV, s.D, s.QKV);
  x.attention_forward(l, a.atty, a.lse, a.qkv, s.B, s.T, s.NH, s.NKV, s.D,
                      layer_attention(s, l, a));
  if (s.post_norms) {  // residual2 = residual + norm(attn_out)
    x.matmul_forward(a.attn_out, a.atty, p.attprojw, p.attprojb, BT, s.A, s.C);
    lora_forward(x, lora, l, kLoraAttproj, a.attn_out, s.C, a.atty, BT);
    x.post_norm_forward(a.residual2, a.attn_post_rstd, a.attn_out, p.attn_post_norm, BT, s.C,
                        s.eps);
  } else {
    x.matmul_forward(a.residual2, a.atty, p.attprojw, p.attprojb, BT, s.A, s.C);
    lora_forward(x, lora, l, kLoraAttproj, a.residual2, s.C, a.atty, BT);
  }
  x.residual_forward(a.residual2, a.residual2, a.residual, BT * s.C);
  norm_forward(x, s, a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, p.ln2w, p.ln2b, BT);
  x.matmul_forward(a.fch, a.ln2, p.fcw, p.fcb, BT, s.C, s.F);
  lora_forward(x, lora, l, kLoraFc, a.fch, s.F, a.ln2, BT);
  activation_forward(x, s, a.fch_gelu, a.fch);
  if (s.post_norms) {
    x.matmul_forward(a.mlp_out, a.fch_gelu, p.fcprojw, p.fcprojb, BT, s.H, s.C);
    lora_forward(x, lora, l, kLoraFcproj, a.mlp_out, s.C, a.fch_gelu, BT);
    x.post_norm_forward(a.residual3, a.mlp_post_rstd, a.mlp_out, p.mlp_post_norm, BT, s.C, s.eps);
  } else {
    x.matmul_forward(a.residual3, a.fch_gelu, p.fcprojw, p.fcprojb, BT, s.H, s.C);
    lora_forward(x, lora, l, kLoraFcproj, a.residual3, s.C, a.fch_gelu, BT);
  }
  x.residual_forward(a.residual3, a.residual3, a.residual2, BT * s.C);
}

// d.dresidual holds d(residual3) on entry and d(residual) on return; dp accumulates. What the
// forward pass did not keep (a.recompute_*) is recomputed just before it is read, into the one
// buffer all layers share, with the forward's own kernels: the same bits. The rotation of q and k
// is undone on their gradient before the qkv projection's backward.
// With a frozen base (dp's matmul weights and biases null) the matmuls give dinp alone.
template <class X>
void block_backward(X& x, int l, const LayerParams<float>& p, const LayerParams<float>& dp,
                    const LayerActivations<typename X::Act>& a, const ActivationGradViews& d,
                    const BlockShape& s, const LoraViews* lora = nullptr) {
  const size_t BT = s.BT;
  // The block's activations again (the same bits; its output, residual3, is rewritten as it was).
  if (a.recompute_layer) block_forward(x, l, p, a, s, lora);
  if (a.recompute_gelu) activation_forward(x, s, a.fch_gelu, a.fch);
  const float* dmlp = post_norm_backward(x, s, d, dp.mlp_post_norm, a.mlp_out, p.mlp_post_norm,
                                         a.mlp_post_rstd);
  x.matmul_backward(d.dact, dp.fcprojw, dp.fcprojb, dmlp, a.fch_gelu, p.fcprojw, BT, s.H, s.C);
  lora_backward(x, lora, l, kLoraFcproj, d.dact, dmlp, s.C, a.fch_gelu, BT);
  activation_backward(x, s, d.dfch, d.dact, a.fch);
  if (a.recompute_layernorm) {
    norm_apply(x, s, a.ln2, a.residual2, a.ln2_mean, a.ln2_rstd, p.ln2w, p.ln2b);
  }
  x.matmul_backward(d.dln, dp.fcw, dp.fcb, d.dfch, a.ln2, p.fcw, BT, s.C, s.F);
  lora_backward(x, lora, l, kLoraFc, d.dln, d.dfch, s.F, a.ln2, BT);
  // Adds d(residual2) through ln2 to the d(residual3) that flows straight through.
  norm_backward(x, s, d.dresidual, dp.ln2w, dp.ln2b, d.dln, a.residual2, p.ln2w, a.ln2_mean,
                a.ln2_rstd);
  const float* dattn = post_norm_backward(x, s, d, dp.attn_post_norm, a.attn_out,
                                          p.attn_post_norm, a.attn_post_rstd);
  x.matmul_backward(d.datty, dp.attprojw, dp.attprojb, dattn, a.atty, p.attprojw, BT, s.A, s.C);
  lora_backward(x, lora, l, kLoraAttproj, d.datty, dattn, s.C, a.atty, BT);
  x.attention_backward(l, d.dqkv, d.datty, a.atty, a.qkv, a.lse, s.B, s.T, s.NH, s.NKV, s.D,
                       layer_attention(s, l, a));
  const bool local = s.config->local_rope(l);
  const float* cos = local ? a.rope_cos_local : a.rope_cos;
  const float* sin = local ? a.rope_sin_local : a.rope_sin;
  if (s.rope) x.rope_backward(d.dqkv, cos, sin, BT, rope_rows(s, a), s.NH + s.NKV, s.D, s.QKV);
  if (s.qk_norm) {
    x.head_rmsnorm_backward(d.dqkv, dp.q_norm, dp.k_norm, a.qk_saved, a.qk_rstd, p.q_norm,
                            p.k_norm, BT, s.NH, s.NKV, s.D, s.QKV, s.norm_offset);
  }
  if (a.recompute_layernorm) {
    norm_apply(x, s, a.ln1, a.residual, a.ln1_mean, a.ln1_rstd, p.ln1w, p.ln1b);
  }
  x.matmul_backward(d.dln, dp.qkvw, dp.qkvb, d.dqkv, a.ln1, p.qkvw, BT, s.C, s.QKV);
  lora_backward(x, lora, l, kLoraQkv, d.dln, d.dqkv, s.QKV, a.ln1, BT);
  norm_backward(x, s, d.dresidual, dp.ln1w, dp.ln1b, d.dln, a.residual, p.ln1w, a.ln1_mean,
                a.ln1_rstd);
}

// The embedding and blocks [0, end): inputs (B, T) to the residual stream at block `end`'s input
// (a.layer(end).residual, or a.output() when end = L).
template <class X>
void embed_and_blocks_forward(X& x, const ModelConfig& c, const ParameterViews<float>& p,
                              const ActivationViews<typename X::Act>& a, const int* inputs, int B,
                              int T, int end, const LoraViews* lora = nullptr) {
  // p.wpe is null in a model without a position table; in packed rows its rows are the tokens'
  // positions in their examples.
  const bool packed_wpe = p.wpe && a.positions;
  x.encoder_forward(a.encoded, inputs, p.wte, packed_wpe ? nullptr : p.wpe, B, T, c.channels);
  if (packed_wpe) add_position_rows(a.encoded, p.wpe, a.positions, size_t(B) * T, c.channels);
  if (c.family().embed_scale) x.scale(a.encoded, embedding_scale(c), size_t(B) * T * c.channels);
  const BlockShape s = BlockShape::of(c, B, T);
  for (int l = 0; l < end; ++l) block_forward(x, l, p.layer(l), a.layer(l), s, lora);
}

// The final layernorm: the last block's output to a.lnf (B, T, C), the head's input.
template <class X>
void final_layernorm_forward(X& x, const ModelConfig& c, const ParameterViews<float>& p,
                             const ActivationViews<typename X::Act>& a, int B, int T) {
  norm_forward(x, BlockShape::of(c, B, T), a.lnf, a.lnf_mean, a.lnf_rstd, a.output(), p.lnfw,
               p.lnfb, (size_t)B * T);
}

// The embedding, every block and the final layernorm: inputs (B, T) to a.lnf (B, T, C), the
// head's input. The head (lnf wte^T, in chunks of rows with the loss) is the caller's.
template <class X>
void model_forward(X& x, const ModelConfig& c, const ParameterViews<float>& p,
                   const ActivationViews<typename X::Act>& a, const int* inputs, int B, int T,
                   const LoraViews* lora = nullptr) {
  embed_and_blocks_forward(x, c, p, a, inputs, B, T, c.num_layers, lora);
  final_layernorm_forward(x, c, p, a, B, T);
}

// The head and the loss over chunks of a.head_rows rows (the last one shorter), from a.lnf, with W
// the head's matrix (p.head(): wte, or an untied lm_head):
//   logits_r = lnf_r W^T (Vp columns; the padded ones are zero rows of W), then with a final
//              soft-cap c (Gemma 2, 3) c tanh(logits_r / c), whose derivative dlogits_r takes too
//   loss_t = lse_t - logits[t, target_t]                  (into a.losses; without targets: none)
//   dlogits_r = dloss (softmax(logits_r) - onehot(targets_r)) over the first V, 0 in the padding
//   dlnf_r = dlogits_r W (into d.dln, overwritten);  dW += dlogits_r^T lnf_r
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
    x.matmul_forward(logits, a.lnf + r * C, p.head(), nullptr, n, C, Vp);
    if (c.final_softcap > 0) x.softcap_forward(logits, n * Vp, float(c.final_softcap));
    if (!targets) continue;
    x.softmax_xent_forward(a.losses + r, a.lse_head + r, logits, targets + r, n, V, Vp);
    if (!grad) continue;
    if (a.dlogits != logits) x.copy_floats(a.dlogits, logits, n * Vp);
    x.softmax_xent_backward(a.dlogits, a.lse_head + r, targets + r, dloss, n, V, Vp);
    if (c.final_softcap > 0) x.softcap_backward(a.dlogits, logits, n * Vp, float(c.final_softcap));
    x.matmul_backward(d.dln + r * C, g.head_gradient(p), nullptr, a.dlogits, a.lnf + r * C,
                      p.head(), n, C, Vp);
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
  norm_backward(x, BlockShape::of(c, B, T), d.dresidual, g.lnfw, g.lnfb, d.dln, a.output(), p.lnfw,
                a.lnf_mean, a.lnf_rstd);
}

// From d.dresidual = d(block `end`'s input) back through blocks end-1 .. 0 and the embedding to
// the parameter gradients g (accumulated). done(l) is called as soon as layer l's gradients are
// complete, and done(-1) once the embedding's (wte, wpe) are.
template <class X, class Done>
void blocks_and_embed_backward(X& x, const ModelConfig& c, const ParameterViews<float>& p,
                               const ParameterViews<float>& g,
                               const ActivationViews<typename X::Act>& a,
                               const ActivationGradViews& d, const int* inputs, int B, int T,
                               int end, Done&& done, const LoraViews* lora = nullptr) {
  const BlockShape s = BlockShape::of(c, B, T);
  for (int l = end - 1; l >= 0; --l) {
    block_backward(x, l, p.layer(l), g.layer(l), a.layer(l), d, s, lora);
    done(l);
  }
  if (!g.wte && !g.wpe) return done(-1);  // a frozen embedding
  const size_t C = c.channels, pad = size_t(c.pad_token_id);
  if (c.family().embed_scale) x.scale(d.dresidual, embedding_scale(c), size_t(B) * T * C);
  // nn.Embedding(padding_idx): the pad row keeps what the head gave it, nothing from the lookup.
  const bool pad_row = g.wte && c.pad_token_id >= 0;
  if (pad_row) x.copy_floats(d.pad_row, g.wte + pad * C, C);
  const bool packed_wpe = g.wpe && a.positions;
  x.encoder_backward(g.wte, packed_wpe ? nullptr : g.wpe, d.dresidual, inputs, B, T, c.channels);
  if (packed_wpe) position_rows_backward(g.wpe, d.dresidual, a.positions, size_t(B) * T, C);
  if (pad_row) x.copy_floats(g.wte + pad * C, d.pad_row, C);
  done(-1);
}

// From d(lnf) (in d.dln, the head's gradient) back to the parameter gradients g (accumulated).
// done(l) is called as soon as layer l's gradients are complete (l = L-1 down to 0), and done(-1)
// once the rest (wte, wpe, lnfw, lnfb) are: what a data-parallel run starts sending while the
// layers below compute.
template <class X, class Done>
void model_backward(X& x, const ModelConfig& c, const ParameterViews<float>& p,
                    const ParameterViews<float>& g, const ActivationViews<typename X::Act>& a,
                    const ActivationGradViews& d, const int* inputs, int B, int T, Done&& done,
                    const LoraViews* lora = nullptr) {
  final_layernorm_backward(x, c, p, g, a, d, B, T);
  blocks_and_embed_backward(x, c, p, g, a, d, inputs, B, T, c.num_layers, done, lora);
}

}  // namespace llmcpu
