// The executors that run the transformer of core/model/transformer.h: each supplies the ops a layer
// is made of and carries its own context, so the layer is written once and these decide where and
// in what precision each op runs.
//   Fp32Executor     every op on the CPU in fp32 (a KernelTable: scalar, AVX2, AVX-512, NEON).
//   Bf16Executor     mixed precision: the GEMMs read bf16 inputs and a bf16 copy of the weights
//                    (fp32 accumulation and output); the activations only a GEMM reads or that
//                    are recomputed (ln1, qkv, atty, ln2, fch, fch_gelu, lnf) are stored in bf16,
//                    attention runs on bf16 q, k, v; all else is the fp32 executor's.
//   The decode executor (KV cache, one token at a time) is core/model/generate.cpp's.
//   core/bench/step_recorder.h's StepRecorder runs nothing: it records each op as a row of
//   `llmcpu bench`'s table (an op added here needs a method there; the build says so).
// An executor names its GEMM-input type `Act`; the ops are plain member functions, so the
// transformer, a template over the executor, calls them without a lookup. Weights are always
// passed as pointers into the fp32 master array: an executor that keeps its own copy (bf16) finds
// the tensor at the same offset in it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/model/lora_ops.h"
#include "core/model/lora_views.h"
#include "core/model/quantized_base.h"
#include "core/util/aligned_buffer.h"
#include "simd/bf16.h"
#include "simd/error.h"
#include "simd/kernels.h"

namespace llmcpu {

struct Fp32Executor {
  using Act = float;
  const KernelTable& k;
  // A frozen base's quantized matmul weights (Model::freeze_base), found by the weight's pointer;
  // null, or a weight it does not hold: the weight is the fp32 (or bf16 copy's) tensor there.
  const QuantizedBase* quant = nullptr;

  const QuantMatrix* quantized(const float* weight) const {
    return quant ? quant->find(weight) : nullptr;
  }

  void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T,
                       int C) {
    k.encoder_forward(out, inp, wte, wpe, B, T, C);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, size_t N, int C) {
    k.layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  }
  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                      size_t N, int C, int OC) {
    if (const QuantMatrix* q = quantized(weight)) return quant_matmul_forward(k, out, inp, *q, bias, N);
    k.matmul_forward(out, inp, weight, bias, N, C, OC);
  }
  // The layernorm's output again from its saved statistics (the forward's bits).
  void layernorm_apply(float* out, const float* inp, const float* mean, const float* rstd,
                       const float* weight, const float* bias, size_t N, int C) {
    k.layernorm_apply(out, inp, mean, rstd, weight, bias, N, C);
  }
  // Layer l's causal self-attention (l matters to an executor with a per-layer cache): the flash
  // kernel, keeping the rows' log-sum-exp. qkv rows hold NH query, NKV key and NKV value heads of
  // D; out rows NH heads. opt: the layer's scale, window and soft-cap.
  void attention_forward(int /*l*/, float* out, float* lse, const float* qkv, int B, int T, int NH,
                         int NKV, int D, const AttentionOptions& opt) {
    k.flash_attention_forward(out, lse, qkv, B, T, NH, NKV, D, opt);
  }
  // The Llama family's ops. RMSNorm; its output again from the saved rstd (the forward's bits).
  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, size_t N,
                       int C, float eps) {
    k.rmsnorm_forward(out, rstd, inp, weight, N, C, eps);
  }
  void rmsnorm_apply(float* out, const float* inp, const float* rstd, const float* weight, size_t N,
                     int C) {
    k.rmsnorm_apply(out, inp, rstd, weight, N, C);
  }
  // Rotary positions on `heads` heads of D at the start of each of N rows (row_stride apart), the
  // rows of a batch of sequences of T from position 0 (a decoding executor: from its position).
  void rope_forward(float* x, const float* cos, const float* sin, size_t N, int T, int heads, int D,
                    size_t row_stride) {
    k.rope_forward(x, cos, sin, N, T, 0, heads, D, row_stride);
  }
  void swiglu_forward(float* out, const float* inp, size_t N, int H) {
    k.swiglu_forward(out, inp, N, H);
  }
  void geglu_forward(float* out, const float* inp, size_t N, int H) {
    k.geglu_forward(out, inp, N, H);
  }
  // Per-head RMSNorm of the NH q and NKV k heads of each qkv row, in place (Qwen3, Gemma 3),
  // keeping the input and each head's rstd for the backward.
  void head_rmsnorm_forward(float* qkv, float* saved, float* rstd, const float* wq,
                            const float* wk, size_t N, int NH, int NKV, int D, size_t row_stride,
                            float eps, float weight_offset) {
    k.head_rmsnorm_forward(qkv, saved, rstd, wq, wk, N, NH, NKV, D, row_stride, eps,
                           weight_offset);
  }
  // x *= factor over N values (the embedding's scale, and its gradient's).
  void scale(float* x, float factor, size_t N) { k.scale(x, factor, N); }
  // RMSNorm of a sublayer's output before its residual add (Gemma 2, 3): fp32 in every executor
  // (the residual stream's precision).
  void post_norm_forward(float* out, float* rstd, const float* inp, const float* weight, size_t N,
                         int C, float eps) {
    k.rmsnorm_forward(out, rstd, inp, weight, N, C, eps);
  }
  // x = 0 over N values (a buffer an accumulating backward adds into); dst = src over N values.
  void zero(float* x, size_t N) { std::fill_n(x, N, 0.0f); }
  void copy_floats(float* dst, const float* src, size_t N) { std::copy_n(src, N, dst); }
  // The head's logits capped in place, c tanh(x / c), and their gradient through the cap.
  void softcap_forward(float* x, size_t N, float cap) { k.softcap_forward(x, N, cap); }
  void softcap_backward(float* dx, const float* capped, size_t N, float cap) {
    k.softcap_backward(dx, capped, N, cap);
  }
  void gelu_forward(float* out, const float* inp, size_t N) { k.gelu_forward(out, inp, N); }
  void residual_forward(float* out, const float* a, const float* b, size_t N) {
    k.residual_forward(out, a, b, N);
  }

  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T,
                        int C) {
    k.encoder_backward(dwte, dwpe, dout, inp, B, T, C);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, const float* mean,
                          const float* rstd, size_t N, int C) {
    k.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }
  // A quantized weight is frozen: its backward gives dinp alone (a frozen base has no dweight
  // and no dbias).
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, size_t N, int C, int OC) {
    if (const QuantMatrix* q = frozen_quantized(weight, dweight, dbias)) {
      if (dinp) quant_matmul_backward(k, dinp, dout, inp, *q, N);
      return;
    }
    k.matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  }
  const QuantMatrix* frozen_quantized(const float* weight, const float* dweight,
                                      const float* dbias) const {
    const QuantMatrix* q = quantized(weight);
    if (q && (dweight || dbias))
      throw Error("a quantized base weight has no gradient: only its input's is computed");
    return q;
  }
  // dqkv overwritten; out is the forward's output, lse its rows' log-sum-exp.
  void attention_backward(int /*l*/, float* dqkv, const float* dout, const float* out,
                          const float* qkv, const float* lse, int B, int T, int NH, int NKV, int D,
                          const AttentionOptions& opt) {
    k.flash_attention_backward(dqkv, dout, out, qkv, lse, B, T, NH, NKV, D, opt);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N) {
    k.gelu_backward(dinp, inp, dout, N);
  }
  // The Llama family's: the backward passes read fp32 inputs or gradients in both executors,
  // except SwiGLU's (the saved fch, Act).
  void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                        const float* weight, const float* rstd, size_t N, int C) {
    k.rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
  }
  void rope_backward(float* dx, const float* cos, const float* sin, size_t N, int T, int heads,
                     int D, size_t row_stride) {
    k.rope_backward(dx, cos, sin, N, T, 0, heads, D, row_stride);
  }
  void swiglu_backward(float* dinp, const float* dout, const float* inp, size_t N, int H) {
    k.swiglu_backward(dinp, dout, inp, N, H);
  }
  void geglu_backward(float* dinp, const float* dout, const float* inp, size_t N, int H) {
    k.geglu_backward(dinp, dout, inp, N, H);
  }
  void head_rmsnorm_backward(float* dqkv, float* dwq, float* dwk, const float* saved,
                             const float* rstd, const float* wq, const float* wk, size_t N, int NH,
                             int NKV, int D, size_t row_stride, float weight_offset) {
    k.head_rmsnorm_backward(dqkv, dwq, dwk, saved, rstd, wq, wk, N, NH, NKV, D, row_stride,
                            weight_offset);
  }

  // LoRA (core/model/lora_views.h), a module m on N rows of rank r. u = inp A^T.
  void lora_down(float* u, const float* inp, const LoraModuleView& m, size_t N, int r) {
    k.matmul_forward(u, inp, m.p.A, nullptr, N, int(m.p.in), r);
  }
  // out[:, m's columns] += scale u B^T, in place (B^T: m.Bt); fp32 u and B in both executors.
  void lora_up(float* out, size_t ld, const LoraModuleView& m, size_t N, int r, float scale) {
    k.lora_rank_update(out + m.p.col0, ld, m.u, m.ldu, m.Bt, N, r, int(m.p.rows), scale);
  }
  // gB = scale dout[:, m's columns] B (N, r; rows m.ldu apart, a stack's columns of its gB);
  // dB += scale dout[:, m's columns]^T u; dout read in place.
  void lora_up_backward(float* gB, const float* dout, size_t ld, const LoraModuleView& m,
                        size_t N, int r, float scale) {
    const float* d = dout + m.p.col0;
    k.lora_project(gB, m.ldu, d, ld, m.p.B, N, int(m.p.rows), r, scale);
    if (m.p.dB) k.lora_outer_accumulate(m.p.dB, d, ld, m.u, m.ldu, N, int(m.p.rows), r, scale);
  }
  // dA += gB^T inp (inp: the module's input, dropped); dinp += gB A, in place, or with dropout p
  // through dx (N, in) and the mask of `seed`.
  void lora_down_backward(float* dinp, float* dx, const float* gB, const float* inp,
                          const LoraModuleView& m, size_t N, int r, float p, uint64_t seed) {
    if (m.p.dA) k.matmul_backward(nullptr, m.p.dA, nullptr, gB, inp, m.p.A, N, int(m.p.in), r);
    lora_input_gradient(dinp, dx, gB, m, N, r, p, seed);
  }
  void lora_input_gradient(float* dinp, float* dx, const float* gB, const LoraModuleView& m,
                           size_t N, int r, float p, uint64_t seed) {
    const size_t in = m.p.in;
    if (p == 0) return k.lora_rank_update(dinp, in, gB, size_t(r), m.p.A, N, r, int(in), 1.0f);
    std::fill_n(dx, N * in, 0.0f);
    k.lora_rank_update(dx, in, gB, size_t(r), m.p.A, N, r, int(in), 1.0f);
    dropout_backward(dx, N * in, p, seed);
    add_into(dinp, dx, N * in);
  }
  // out = inp through dropout's mask of `seed` (N values; fp32 or bf16).
  template <class G>
  void lora_dropout(G* out, const G* inp, size_t N, float p, uint64_t seed) {
    dropout_apply(out, inp, N, p, seed);
  }

  // The head's loss over N rows of fp32 logits (Vp columns, the first V real), in both executors:
  // loss_t = lse_t - logits[t, target_t], keeping each row's log-sum-exp.
  void softmax_xent_forward(float* losses, float* lse, const float* logits, const int* targets,
                            size_t N, int V, int Vp) {
    k.softmax_xent_forward(losses, lse, logits, targets, N, V, Vp);
  }
  // dlogits (holding the logits, overwritten) = dloss (softmax - onehot(target)), 0 in the padding.
  void softmax_xent_backward(float* dlogits, const float* lse, const int* targets, float dloss,
                             size_t N, int V, int Vp) {
    k.softmax_xent_backward(dlogits, lse, targets, dloss, N, V, Vp);
  }
};

// Owns the bf16 working copy of the whole flat parameter array (ParameterLayout order). The
// activations a GEMM reads or the backward pass recomputes are bf16 (the layernorm outputs, qkv,
// attention's output, fch and its GELU); a GEMM whose output is stored in bf16 rounds it in its
// epilogue where the table has one (AVX512-BF16), else writes fp32 into a scratch first (the
// backward arena's dfch, free during the forward pass) and rounds it.
// out[i] = widen(table[inp[i]]) + wpe[i % T] (wpe null: none) for N rows of C: an embedding held
// in bf16 (exact widening, then one fp32 addition as the fp32 encoder's).
inline void gather_rows(const Bf16Kernels& h, float* out, const int* inp, const bf16* table,
                        const float* wpe, size_t N, int T, int C) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < N; ++i) {
    float* y = out + i * size_t(C);
    h.to_f32(y, table + size_t(inp[i]) * C, size_t(C));
    if (!wpe) continue;
    const float* w = wpe + (i % size_t(T)) * C;
    for (int c = 0; c < C; ++c) y[c] += w[c];
  }
}

class Bf16Executor : public Fp32Executor {
 public:
  using Act = bf16;
  // fill: round the master into the copy now (first touch by the converting threads); a frozen
  // base leaves the copy untouched until Model::freeze_base fills the parts it computes with.
  Bf16Executor(const KernelTable& k, const Bf16Kernels& h, const float* master, size_t count,
               bool fill = true);

  // `wide` (B*T rows of the widest GEMM output stored in bf16) takes that fp32 output.
  void plan(float* wide) { wide_ = wide; }
  // Rounds the master weights into the copy (after a write the executor did not see).
  void refresh() { h_.to_bf16(copy_data_, master_, count_); }
  // The same for `count` values from `offset`, and the copy's pages there given back (a tensor
  // computed from elsewhere: a quantized base). Returns the bytes given back.
  void refresh(size_t offset, size_t count) {
    h_.to_bf16(copy_data_ + offset, master_ + offset, count);
  }
  size_t release(size_t offset, size_t count) {
    return release_pages(copy_data_ + offset, count * sizeof(bf16));
  }
  bf16* copy() { return copy_data_; }
  const bf16* copy() const { return copy_data_; }
  // From now on the master is at `master` and the copy at `copy`, memory the caller owns (shared
  // by the ranks of a machine: Model::use_shared_memory); the executor's own copy is freed.
  void use_shared_memory(const float* master, bf16* copy) {
    master_ = master, copy_data_ = copy;
    copy_ = AlignedBuffer<bf16>();
  }
  const Bf16Kernels& bf16_kernels() const { return h_; }
  // A weight held outside the master (LoRA's trained copy of the head: Model::attach_lora) whose
  // bf16 copy is at `w16` (n values, the caller's, kept current by the caller); null w16: none
  // any more.
  void map_copy(const float* w, size_t n, const bf16* w16) {
    std::erase_if(outside_, [&](const Outside& o) { return o.w == w; });
    if (w16) outside_.push_back({w, n, w16});
  }
  // From now on the embedding's rows come from the copy, widened (a frozen base keeps its
  // embedding in bf16 alone: Model::freeze_base).
  void gather_embedding_from_copy(bool on = true) { embedding_from_copy_ = on; }
  bool embedding_from_copy() const { return embedding_from_copy_; }

  // out (B, T, C) = wte[inp] + wpe[t] (wpe null: none), wte's rows the copy's widened exactly
  // when gathered from the copy, else the fp32 table's encoder.
  void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T,
                       int C) {
    if (!embedding_from_copy_) return Fp32Executor::encoder_forward(out, inp, wte, wpe, B, T, C);
    gather_rows(h_, out, inp, copy_of(wte), wpe, size_t(B) * T, T, C);
  }

  void layernorm_forward(bf16* out, float* mean, float* rstd, const float* inp, const float* weight,
                         const float* bias, size_t N, int C) {
    h_.layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  }
  void layernorm_apply(bf16* out, const float* inp, const float* mean, const float* rstd,
                       const float* weight, const float* bias, size_t N, int C) {
    h_.layernorm_apply(out, inp, mean, rstd, weight, bias, N, C);
  }
  void matmul_forward(float* out, const bf16* inp, const float* weight, const float* bias, size_t N,
                      int C, int OC) {
    if (const QuantMatrix* q = quantized(weight)) {
      return quant_matmul_forward(h_, out, inp, *q, bias, N);
    }
    h_.matmul_forward(out, inp, copy_of(weight), bias, N, C, OC);
  }
  // A GEMM output stored in bf16 (qkv, fch): rounded in the GEMM's epilogue, or (a table without
  // one) fp32 into the scratch, then rounded.
  void matmul_forward(bf16* out, const bf16* inp, const float* weight, const float* bias, size_t N,
                      int C, int OC) {
    if (const QuantMatrix* q = quantized(weight)) {
      return quant_matmul_forward(h_, out, inp, *q, bias, N);
    }
    if (h_.matmul_forward_bf16) {
      return h_.matmul_forward_bf16(out, inp, copy_of(weight), bias, N, C, OC);
    }
    h_.matmul_forward(wide_, inp, copy_of(weight), bias, N, C, OC);
    h_.to_bf16(out, wide_, N * size_t(OC));
  }
  // Flash attention on the bf16 q, k, v; the output rounded to bf16 (the projection's input).
  void attention_forward(int /*l*/, bf16* out, float* lse, const bf16* qkv, int B, int T, int NH,
                         int NKV, int D, const AttentionOptions& opt) {
    h_.flash_attention_forward(out, lse, qkv, B, T, NH, NKV, D, opt);
  }
  void attention_backward(int /*l*/, float* dqkv, const float* dout, const bf16* out,
                          const bf16* qkv, const float* lse, int B, int T, int NH, int NKV, int D,
                          const AttentionOptions& opt) {
    h_.flash_attention_backward(dqkv, dout, out, qkv, lse, B, T, NH, NKV, D, opt);
  }
  // The Llama family's storage ops: RMSNorm written in bf16, rotation of the bf16 q and k in
  // place, SwiGLU of the bf16 fch (forward and recomputed alike) and its backward from it.
  void rmsnorm_forward(bf16* out, float* rstd, const float* inp, const float* weight, size_t N,
                       int C, float eps) {
    h_.rmsnorm_forward(out, rstd, inp, weight, N, C, eps);
  }
  void rmsnorm_apply(bf16* out, const float* inp, const float* rstd, const float* weight, size_t N,
                     int C) {
    h_.rmsnorm_apply(out, inp, rstd, weight, N, C);
  }
  void rope_forward(bf16* x, const float* cos, const float* sin, size_t N, int T, int heads, int D,
                    size_t row_stride) {
    h_.rope_forward(x, cos, sin, N, T, 0, heads, D, row_stride);
  }
  void swiglu_forward(bf16* out, const bf16* inp, size_t N, int H) {
    h_.swiglu_forward(out, inp, N, H);
  }
  void swiglu_backward(float* dinp, const float* dout, const bf16* inp, size_t N, int H) {
    h_.swiglu_backward(dinp, dout, inp, N, H);
  }
  void geglu_forward(bf16* out, const bf16* inp, size_t N, int H) {
    h_.geglu_forward(out, inp, N, H);
  }
  void geglu_backward(float* dinp, const float* dout, const bf16* inp, size_t N, int H) {
    h_.geglu_backward(dinp, dout, inp, N, H);
  }
  // The bf16 q and k normalised in place (the input widened, the output rounded).
  void head_rmsnorm_forward(bf16* qkv, float* saved, float* rstd, const float* wq, const float* wk,
                            size_t N, int NH, int NKV, int D, size_t row_stride, float eps,
                            float weight_offset) {
    h_.head_rmsnorm_forward(qkv, saved, rstd, wq, wk, N, NH, NKV, D, row_stride, eps,
                            weight_offset);
  }
  // GELU of the bf16 fch, forward and recomputed alike (the same bits).
  void gelu_forward(bf16* out, const bf16* inp, size_t N) { h_.gelu_forward_bf16(out, inp, N); }
  void gelu_backward(float* dinp, const bf16* inp, const float* dout, size_t N) {
    h_.gelu_backward(dinp, inp, dout, N);
  }
  // fp32 dout (rounded to bf16 inside), the saved bf16 input and the bf16 weight; fp32 gradients.
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const bf16* inp, const float* weight, size_t N, int C, int OC) {
    if (const QuantMatrix* q = frozen_quantized(weight, dweight, dbias)) {
      if (dinp) quant_matmul_backward(h_, dinp, dout, inp, *q, N);
      return;
    }
    h_.matmul_backward(dinp, dweight, dbias, dout, inp, copy_of(weight), N, C, OC);
  }
  // LoRA's products with the bf16 input: with A's bf16 copy (the up products stay fp32, u is).
  // (dA's product rounds gB and reads the bf16 input; dinp's takes the fp32 gB and A.)
  using Fp32Executor::lora_down;
  using Fp32Executor::lora_down_backward;
  using Fp32Executor::lora_up;
  void lora_down(float* u, const bf16* inp, const LoraModuleView& m, size_t N, int r) {
    h_.matmul_forward(u, inp, m.A16, nullptr, N, int(m.p.in), r);
  }
  // A bf16 output (qkv, fch): widened, updated in fp32, rounded once.
  void lora_up(bf16* out, size_t ld, const LoraModuleView& m, size_t N, int r, float scale) {
    h_.lora_rank_update(out + m.p.col0, ld, m.u, m.ldu, m.Bt, N, r, int(m.p.rows), scale);
  }
  void lora_down_backward(float* dinp, float* dx, const float* gB, const bf16* inp,
                          const LoraModuleView& m, size_t N, int r, float p, uint64_t seed) {
    if (m.p.dA) h_.matmul_backward(nullptr, m.p.dA, nullptr, gB, inp, m.A16, N, int(m.p.in), r);
    lora_input_gradient(dinp, dx, gB, m, N, r, p, seed);
  }

 private:
  const bf16* copy_of(const float* weight) const {
    if (weight >= master_ && weight < master_ + count_) return copy_data_ + (weight - master_);
    for (const Outside& o : outside_) {
      if (weight >= o.w && weight < o.w + o.n) return o.w16 + (weight - o.w);
    }
    throw Error("a bf16 GEMM's weight is neither in the master nor a mapped copy");
  }
  struct Outside {
    const float* w;
    size_t n;
    const bf16* w16;
  };
  std::vector<Outside> outside_;  // map_copy's

  const Bf16Kernels& h_;
  bool embedding_from_copy_ = false;
  const float* master_;
  AlignedBuffer<bf16> copy_;  // same layout as the master (empty once shared)
  bf16* copy_data_;           // copy_, or the shared copy
  size_t count_;
  float* wide_ = nullptr;  // (B, T, max(F, QKV)) fp32 GEMM output before rounding (plan)
};

}  // namespace llmcpu
