// The executors that run the transformer of core/model/transformer.h: each supplies the ops a layer
// is made of and carries its own context, so the layer is written once and these decide where and
// in what precision each op runs.
//   Fp32Executor     every op on the CPU in fp32 (a KernelTable: scalar, AVX2, AVX-512, NEON).
//   Bf16Executor     mixed precision: the GEMMs read bf16 inputs and a bf16 copy of the weights
//                    (fp32 accumulation and output); the GEMM inputs (ln1, atty, ln2, fch_gelu,
//                    lnf) are stored in bf16; all else is the fp32 executor's.
//   OffloadExecutor  fp32, with matmul and attention on a plugin's device where it offers them.
//   The decode executor (KV cache, one token at a time) is core/model/generate.cpp's.
// An executor names its GEMM-input type `Act`; the ops are plain member functions, so the
// transformer, a template over the executor, calls them without a lookup. Weights are always
// passed as pointers into the fp32 master array: an executor that keeps its own copy (bf16, a
// device) finds the tensor at the same offset in it.
#pragma once

#include <cstddef>

#include "core/plugin/offload.h"
#include "core/util/aligned_buffer.h"
#include "simd/bf16.h"
#include "simd/kernels.h"

namespace llmcpu {

struct Fp32Executor {
  using Act = float;
  const KernelTable& k;

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
    k.matmul_forward(out, inp, weight, bias, N, C, OC);
  }
  // Layer l's causal self-attention (l matters to an executor with a per-layer cache).
  void attention_forward(int /*l*/, float* out, float* att, const float* qkv, int B, int T, int C,
                         int NH) {
    k.attention_forward(out, att, qkv, B, T, C, NH);
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
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, size_t N, int C, int OC) {
    k.matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  }
  // `scratch` (B, NH, T) is the CPU kernel's row of score gradients.
  void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                          const float* att, int B, int T, int C, int NH) {
    k.attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N) {
    k.gelu_backward(dinp, inp, dout, N);
  }
};

// Owns the bf16 working copy of the whole flat parameter array (ParameterLayout order) and one
// layer of fp32 attention output, which it rounds into the bf16 atty the next GEMM reads.
class Bf16Executor : public Fp32Executor {
 public:
  using Act = bf16;
  Bf16Executor(const KernelTable& k, const Bf16Kernels& h, const float* master, size_t count);

  // Sizes the attention scratch for B x T tokens.
  void plan(int B, int T, int C);
  // Rounds the master weights into the copy (after a write the executor did not see).
  void refresh() { h_.to_bf16(copy_data_, master_, count_); }
  bf16* copy() { return copy_data_; }
  const bf16* copy() const { return copy_data_; }
  // From now on the master is at `master` and the copy at `copy`, memory the caller owns (shared
  // by the ranks of a machine: Gpt2::use_shared_memory); the executor's own copy is freed.
  void use_shared_memory(const float* master, bf16* copy) {
    master_ = master, copy_data_ = copy;
    copy_ = AlignedBuffer<bf16>();
  }
  const Bf16Kernels& bf16_kernels() const { return h_; }

  void layernorm_forward(bf16* out, float* mean, float* rstd, const float* inp, const float* weight,
                         const float* bias, size_t N, int C) {
    h_.layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  }
  void matmul_forward(float* out, const bf16* inp, const float* weight, const float* bias, size_t N,
                      int C, int OC) {
    h_.matmul_forward(out, inp, copy_of(weight), bias, N, C, OC);
  }
  // Attention in fp32 (into the scratch), rounded to bf16 for the projection GEMM and backward.
  void attention_forward(int /*l*/, bf16* out, float* att, const float* qkv, int B, int T, int C,
                         int NH) {
    k.attention_forward(atty_.data(), att, qkv, B, T, C, NH);
    h_.to_bf16(out, atty_.data(), (size_t)B * T * C);
  }
  void gelu_forward(bf16* out, const float* inp, size_t N) { h_.gelu_forward(out, inp, N); }
  // fp32 dout (rounded to bf16 inside), the saved bf16 input and the bf16 weight; fp32 gradients.
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const bf16* inp, const float* weight, size_t N, int C, int OC) {
    h_.matmul_backward(dinp, dweight, dbias, dout, inp, copy_of(weight), N, C, OC);
  }

 private:
  const bf16* copy_of(const float* weight) const { return copy_data_ + (weight - master_); }

  const Bf16Kernels& h_;
  const float* master_;
  AlignedBuffer<bf16> copy_;  // same layout as the master (empty once shared)
  bf16* copy_data_;           // copy_, or the shared copy
  size_t count_;
  AlignedBuffer<float> atty_;  // (B, T, C)
};

// The fp32 executor with the plugin's ops in place of the CPU's where the device offers them.
struct OffloadExecutor : Fp32Executor {
  OffloadDevice& device;

  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                      size_t N, int C, int OC) {
    if (!device.has_matmul()) return Fp32Executor::matmul_forward(out, inp, weight, bias, N, C, OC);
    device.matmul_forward(out, inp, weight, bias, N, C, OC);
  }
  void attention_forward(int l, float* out, float* att, const float* qkv, int B, int T, int C,
                         int NH) {
    if (!device.has_attention())
      return Fp32Executor::attention_forward(l, out, att, qkv, B, T, C, NH);
    device.attention_forward(out, att, qkv, B, T, C, NH);
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, size_t N, int C, int OC) {
    if (!device.has_matmul()) {
      return Fp32Executor::matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    }
    device.matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  }
  // A device keeps its rows of score gradients on the device: `scratch` is the CPU's.
  void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                          const float* att, int B, int T, int C, int NH) {
    if (!device.has_attention()) {
      return Fp32Executor::attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
    }
    device.attention_backward(dqkv, dout, qkv, att, B, T, C, NH);
  }
};

}  // namespace llmcpu
