// The ops a transformer block, the embedding, the head and AdamW are made of, as dispatches recorded
// into a compute command buffer: one function per op, each following its CPU reference in simd/scalar/
// (shapes, "=" and "+=" outputs, fp32 accumulation), each operand a buffer with an element offset
// (push constants carry the offsets, so no binding needs more than the buffer's own alignment).
// Every function records its dispatches only: no barrier before or after (the caller puts
// Stream::compute_barrier between dependent ops), no submission, no allocation beyond a descriptor
// set from Kernels' pool. Not here: which buffers a model keeps (model.h), the order of a pass.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugins/vulkan/kernels.h"

namespace llmcpu::vk {

// A tensor inside one device buffer: the binding is the whole buffer (its size within
// maxStorageBufferRange), `off` the index of the tensor's first element (float or int32) in it.
struct Ref {
  VkBuffer buf = VK_NULL_HANDLE;
  size_t bytes = 0;  // the buffer's size: the binding's range
  uint32_t off = 0;  // elements
  Ref at(size_t elements) const { return {buf, bytes, uint32_t(off + elements)}; }
};

// The constants of one AdamW update, computed on the host exactly as simd/scalar/adamw.h does:
//   decay = 1 - lr wd, step_size = lr / (1 - beta1^t), bc2_sqrt = sqrt(1 - beta2^t) (float).
// grad_scale multiplies each gradient first (global-norm clipping; 1 without).
struct AdamWConstants {
  float decay, beta1, beta2, step_size, bc2_sqrt, eps, grad_scale;
};

class BlockOps {
 public:
  explicit BlockOps(Kernels& k) : k_(k) {}

  // C(m,n) (+)= sum_k A(m,k) B(k,n) [+ bias(n)]: shaders/gemm.comp; strides in elements,
  // offsets taken from the Refs. flags: kGemmBias, kGemmAccumulate.
  void gemm(VkCommandBuffer cb, Ref c, Ref a, Ref b, Ref bias, uint32_t M, uint32_t N, uint32_t K,
            uint32_t a_sm, uint32_t a_sk, uint32_t b_sk, uint32_t b_sn, uint32_t c_sm,
            uint32_t flags);
  // The three products of a linear layer (weight (OC,C), row-major):
  //   out (N,OC) = inp (N,C) weight^T [+ bias]
  void matmul_forward(VkCommandBuffer cb, Ref out, Ref inp, Ref weight, Ref bias, bool has_bias,
                      uint32_t N, uint32_t C, uint32_t OC);
  //   dinp (N,C) (+)= dout (N,OC) weight            (accumulate: += instead of =)
  void matmul_backward_input(VkCommandBuffer cb, Ref dinp, Ref dout, Ref weight, uint32_t N,
                             uint32_t C, uint32_t OC, bool accumulate);
  //   dweight (OC,C) += dout^T inp;  dbias (OC) += column sums of dout (has_bias)
  void matmul_backward_weight(VkCommandBuffer cb, Ref dweight, Ref dbias, bool has_bias, Ref dout,
                              Ref inp, uint32_t N, uint32_t C, uint32_t OC);

  // Causal attention over nb batch elements (shaders/attention_*.comp): qkv (nb,T,3C),
  // out (nb,T,C), att (nb,NH,T,T) (zeros above the diagonal); the backward overwrites dqkv
  // (nb,T,3C) and uses ds (nb,NH,T,T) as scratch.
  void attention_forward(VkCommandBuffer cb, Ref out, Ref att, Ref qkv, uint32_t nb, uint32_t T,
                         uint32_t C, uint32_t NH);
  void attention_backward(VkCommandBuffer cb, Ref dqkv, Ref ds, Ref dout, Ref qkv, Ref att,
                          uint32_t nb, uint32_t T, uint32_t C, uint32_t NH);
  // The same attention keeping only the row log-sum-exp lse (nb,NH,T) (fp32) between forward and
  // backward, as simd/scalar/attention.h's flash_attention_* (shaders/flash_attention_*.comp):
  // out (nb,T,C), lse from qkv (nb,T,3C); the backward recomputes the probabilities from lse and
  // overwrites dqkv (nb,T,3C), with D_t = dout_t . out_t. Head size C / NH at most 128.
  void flash_attention_forward(VkCommandBuffer cb, Ref out, Ref lse, Ref qkv, uint32_t nb,
                               uint32_t T, uint32_t C, uint32_t NH);
  void flash_attention_backward(VkCommandBuffer cb, Ref dqkv, Ref dout, Ref out, Ref qkv, Ref lse,
                                uint32_t nb, uint32_t T, uint32_t C, uint32_t NH);

  // out (N,C) = wte[tokens[i]] + wpe[pos0 + i % T] for the rows whose token lies in
  // [vocab_lo, vocab_hi); wte is the piece of rows vocab_lo.. (other rows are left untouched).
  void encoder_forward(VkCommandBuffer cb, Ref out, Ref tokens, Ref wte, Ref wpe, uint32_t N,
                       uint32_t T, uint32_t C, uint32_t vocab_lo, uint32_t vocab_hi);
  // dwte[tokens[i] - vocab_lo] += dout[i] for tokens in [vocab_lo, vocab_hi), rows in order;
  // with_wpe: dwpe[i % T] += dout[i] (rows of each position in order). Deterministic, no atomics.
  void encoder_backward(VkCommandBuffer cb, Ref dwte, Ref dwpe, bool with_wpe, Ref dout,
                        Ref tokens, uint32_t N, uint32_t T, uint32_t C, uint32_t vocab_lo,
                        uint32_t vocab_hi);

  // simd/scalar/layernorm.h: out (N,C), mean and rstd (N); eps 1e-5, biased variance.
  void layernorm_forward(VkCommandBuffer cb, Ref out, Ref mean, Ref rstd, Ref inp, Ref weight,
                         Ref bias, uint32_t N, uint32_t C);
  // dinp (N,C) += ...; dweight, dbias (C) += ... (each column's rows summed in order).
  void layernorm_backward(VkCommandBuffer cb, Ref dinp, Ref dweight, Ref dbias, Ref dout, Ref inp,
                          Ref weight, Ref mean, Ref rstd, uint32_t N, uint32_t C);

  // GELU, tanh form (simd/scalar/gelu.h); the backward writes dinp = dout * gelu'(inp), and may
  // run in place (dinp and dout the same elements).
  void gelu_forward(VkCommandBuffer cb, Ref out, Ref inp, uint32_t n);
  void gelu_backward(VkCommandBuffer cb, Ref dinp, Ref inp, Ref dout, uint32_t n);
  // out = a + b (out may be a).
  void residual_forward(VkCommandBuffer cb, Ref out, Ref a, Ref b, uint32_t n);

  // simd/scalar/softmax_xent.h over rows of Vp logits, the first V real: losses, lse (N).
  void softmax_xent_forward(VkCommandBuffer cb, Ref losses, Ref lse, Ref logits, Ref targets,
                            uint32_t N, uint32_t V, uint32_t Vp);
  // logits (N,Vp) become dlogits in place: (softmax - onehot) * dloss, 0 in the padding.
  void softmax_xent_backward(VkCommandBuffer cb, Ref logits, Ref lse, Ref targets, float dloss,
                             uint32_t N, uint32_t V, uint32_t Vp);

  // bf16 storage (precision bf16, the CPU's mixed precision: simd/scalar/bf16_table.cpp is the
  // reference): a bf16 tensor is a Ref to a buffer of 16-bit elements (off and sizes counted in
  // them), each the upper half of an fp32 rounded to nearest even. Outputs not named bf16 are fp32.
  //   out (N,OC) = bf16 inp (N,C) . bf16 weight^T [+ fp32 bias]
  void matmul_forward_bf16(VkCommandBuffer cb, Ref out, Ref inp, Ref weight, Ref bias,
                           bool has_bias, uint32_t N, uint32_t C, uint32_t OC);
  //   dinp (N,C) (+)= bf16(dout) (N,OC) . bf16 weight: dout is fp32, rounded to bf16 as it is read
  void matmul_backward_input_bf16(VkCommandBuffer cb, Ref dinp, Ref dout, Ref weight, uint32_t N,
                                  uint32_t C, uint32_t OC, bool accumulate);
  //   dweight (OC,C) += bf16(dout)^T . bf16 inp;  dbias (OC) += column sums of the fp32 dout
  void matmul_backward_weight_bf16(VkCommandBuffer cb, Ref dweight, Ref dbias, bool has_bias,
                                   Ref dout, Ref inp, uint32_t N, uint32_t C, uint32_t OC);
  // The head's products in bf16 with a row stride of the logits (Vp) and a window of vocabulary
  // rows: the general form of the three above. a_type/b_type: how A and B are read.
  enum class Elem { kF32, kF32AsBf16, kBf16 };  // fp32; fp32 rounded to bf16 on load; bf16
  void gemm_bf16(VkCommandBuffer cb, Ref c, Ref a, Elem a_type, Ref b, Elem b_type, uint32_t M,
                 uint32_t N, uint32_t K, uint32_t a_sm, uint32_t a_sk, uint32_t b_sk, uint32_t b_sn,
                 uint32_t c_sm, uint32_t flags);
  // layernorm with fp32 statistics and a bf16 output.
  void layernorm_forward_bf16(VkCommandBuffer cb, Ref out, Ref mean, Ref rstd, Ref inp, Ref weight,
                              Ref bias, uint32_t N, uint32_t C);
  // Attention on bf16 q, k, v (widened exactly), fp32 softmax and att; the output rounded to bf16.
  void attention_forward_bf16(VkCommandBuffer cb, Ref out, Ref att, Ref qkv, uint32_t nb,
                              uint32_t T, uint32_t C, uint32_t NH);
  // dqkv (fp32, overwritten) from the fp32 dout, the bf16 qkv and the fp32 att.
  void attention_backward_bf16(VkCommandBuffer cb, Ref dqkv, Ref ds, Ref dout, Ref qkv, Ref att,
                               uint32_t nb, uint32_t T, uint32_t C, uint32_t NH);
  // Flash attention on bf16 q, k, v (widened exactly): fp32 lse, the output rounded to bf16; the
  // backward from the fp32 dout, the bf16 out (D_t = dout_t . out_t, out widened exactly), the bf16
  // qkv and the fp32 lse into the fp32 dqkv (simd/scalar/bf16_table.cpp's flash_attention_*).
  void flash_attention_forward_bf16(VkCommandBuffer cb, Ref out, Ref lse, Ref qkv, uint32_t nb,
                                    uint32_t T, uint32_t C, uint32_t NH);
  void flash_attention_backward_bf16(VkCommandBuffer cb, Ref dqkv, Ref dout, Ref out, Ref qkv,
                                     Ref lse, uint32_t nb, uint32_t T, uint32_t C, uint32_t NH);
  // GELU of a bf16 input into bf16; its backward from the bf16 input and an fp32 dout into fp32
  // (in place allowed: dinp and dout the same fp32 elements).
  void gelu_forward_bf16(VkCommandBuffer cb, Ref out, Ref inp, uint32_t n);
  void gelu_backward_bf16(VkCommandBuffer cb, Ref dinp, Ref inp, Ref dout, uint32_t n);
  // out (bf16) = round-to-nearest-even of in (fp32), n elements.
  void to_bf16(VkCommandBuffer cb, Ref out, Ref in, uint32_t n);

  // simd/scalar/adamw.h on n elements (g = grad * grad_scale first).
  void adamw(VkCommandBuffer cb, Ref param, Ref m, Ref v, Ref grad, uint32_t n,
             const AdamWConstants& s);
  // Whether adamw runs the variant with correctly rounded sqrt and division (shaderFloat64): then
  // m, v and param are bit for bit those of scalar::adamw_update<float>. Otherwise sqrt and / have
  // Vulkan's precision (m and v still bit for bit, param within a few ulp).
  bool adamw_exact() const;
  // Tests: run the float-only variant even where shaderFloat64 exists.
  void set_adamw_float32_only(bool on) { adamw_float32_only_ = on; }
  // partials[j] = sum of x[i]^2 over the j-th block of sum_squares_block() elements (fp32 within a
  // block); the host adds the partials in double. Writes sum_squares_blocks(n) floats.
  void sum_squares(VkCommandBuffer cb, Ref partials, Ref x, uint32_t n);
  static uint32_t sum_squares_block();
  static uint32_t sum_squares_blocks(uint32_t n) {
    return (n + sum_squares_block() - 1) / sum_squares_block();
  }

 private:
  Kernels& k_;
  bool adamw_float32_only_ = false;
};

}  // namespace llmcpu::vk
