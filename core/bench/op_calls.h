// One call of each kernel a training step makes, on random inputs of the step's shapes, as
// `llmcpu bench` times it: each function returns a Prepare that allocates and fills the inputs
// (valid for the op) and hands back the call on them. The calls are the ones the executors make
// (core/model/executors.h): fp32, or in bf16 the bf16 table's GEMMs, layernorm, GELU, attention and
// AdamW on bf16 activations, the rest in fp32.
// Not here: which ops a step makes, how often and at what cost (core/bench/step_recorder.h), the
// timing (core/bench/run.h).
#pragma once

#include <cstddef>
#include <functional>

#include "simd/bf16.h"
#include "simd/kernels.h"

namespace llmcpu::bench {

// Allocates and fills an op's inputs and returns the call on them; the buffers live as long as the
// returned function.
using Prepare = std::function<std::function<void()>()>;

// The tables the calls go to (which must outlive the Prepares) and whether the step is bf16.
struct OpKernels {
  const KernelTable& k;
  const Bf16Kernels& h;
  bool bf16;
};

// out (N, OC) = inp (N, IC) w^T (+ bias); `round`: bf16 only, the output is stored in bf16
// (rounded from the fp32 result, as the executor does for qkv and fch).
Prepare matmul_forward_call(const OpKernels& x, size_t N, int IC, int OC, bool bias, bool round);
// dinp (N, IC), dw (OC, IC) and (with bias) db (OC) from dout (N, OC); without `dinp` or
// `dweight` (a frozen weight, LoRA's dA) that product is not computed.
Prepare matmul_backward_call(const OpKernels& x, size_t N, int IC, int OC, bool bias,
                             bool dinp = true, bool dweight = true);
// LoRA's: out (N, cols) += scale u (N, r) w (r, cols), out in bf16 where `bf16_out` (the bf16
// table's); gB (N, r) = scale d (N, cols) b (cols, r) and db (cols, r) += scale d^T u, the two
// products of its up projection's backward.
Prepare lora_rank_update_call(const OpKernels& x, size_t N, int r, int cols, bool bf16_out);
Prepare lora_up_backward_call(const OpKernels& x, size_t N, int cols, int r);
// `positions`: with GPT-2's position table (the Llama family has none).
Prepare encoder_forward_call(const OpKernels& x, int B, int T, int C, int V, int Vp,
                             bool positions);
Prepare encoder_backward_call(const OpKernels& x, int B, int T, int C, int V, int Vp,
                              bool positions);
Prepare layernorm_forward_call(const OpKernels& x, size_t N, int C);
// The layernorm's output again from saved statistics (what a recomputing backward pass runs).
Prepare layernorm_apply_call(const OpKernels& x, size_t N, int C);
Prepare layernorm_backward_call(const OpKernels& x, size_t N, int C);
// NH query heads over NKV key/value heads of D.
Prepare attention_forward_call(const OpKernels& x, int B, int T, int NH, int NKV, int D,
                               const AttentionOptions& opt);
Prepare attention_backward_call(const OpKernels& x, int B, int T, int NH, int NKV, int D,
                                const AttentionOptions& opt);
Prepare residual_call(const OpKernels& x, size_t N);
Prepare gelu_forward_call(const OpKernels& x, size_t N);
Prepare gelu_backward_call(const OpKernels& x, size_t N);
// One chunk of the head's rows (rows, Vp), the loss over the first V columns.
Prepare softmax_xent_forward_call(const OpKernels& x, size_t rows, int V, int Vp);
Prepare softmax_xent_backward_call(const OpKernels& x, size_t rows, int V, int Vp);
// The Llama family's (op_calls_llama.cpp): RMSNorm over N rows of C, the rotation of `heads`
// heads of D at the start of N rows of row_stride (T positions), SwiGLU of N rows of [gate | up]
// (2H) into H.
Prepare rmsnorm_forward_call(const OpKernels& x, size_t N, int C);
Prepare rmsnorm_apply_call(const OpKernels& x, size_t N, int C);
Prepare rmsnorm_backward_call(const OpKernels& x, size_t N, int C);
Prepare rope_forward_call(const OpKernels& x, size_t N, int T, int heads, int D, size_t row_stride);
Prepare rope_backward_call(const OpKernels& x, size_t N, int T, int heads, int D,
                           size_t row_stride);
// SwiGLU, or with `gelu` GeGLU (Gemma's MLP).
Prepare gated_forward_call(const OpKernels& x, size_t N, int H, bool gelu);
Prepare gated_backward_call(const OpKernels& x, size_t N, int H, bool gelu);
// Later families' (op_calls_families.cpp): the per-head RMSNorm of the NH + NKV q and k heads of D
// at the start of N rows of row_stride; x *= factor over N values.
Prepare head_rmsnorm_forward_call(const OpKernels& x, size_t N, int NH, int NKV, int D,
                                  size_t row_stride);
Prepare head_rmsnorm_backward_call(const OpKernels& x, size_t N, int NH, int NKV, int D,
                                   size_t row_stride);
Prepare scale_call(const OpKernels& x, size_t N);
// Gemma 2's logit soft-cap over N values, forward or (backward) its gradient through it.
Prepare softcap_call(const OpKernels& x, size_t N, bool backward);
// The optimizer's passes over P gradients: their sum of squares for the norm the update clips by,
// then AdamW, which scales them by the clipping factor and zeroes them for the next step (bf16:
// also writes the bf16 copy of the weights).
Prepare gradient_norm_call(const OpKernels& x, size_t P);
Prepare adamw_call(const OpKernels& x, size_t P);

}  // namespace llmcpu::bench
