// GPT-2: parameters, gradients and activations of one model, with the forward and backward passes.
// The math of each layer lives in simd/ behind the KernelTable (fp32) and Bf16Kernels (bf16); this
// file only wires the layers. Deliberately not here: the optimizer (core/optim), files (core/io),
// data and the training loop.
//
// Precision::kBf16 (mixed precision; gpt2_bf16.cpp) keeps the fp32 master weights and gradients of
// the fp32 path, plus a bf16 working copy of the whole flat parameter array (ParameterLayout order;
// only the matmul weights are read from it). Per layer l, with "mm" a Bf16Kernels GEMM (bf16
// operands, fp32 accumulation and output) and the fp32 KernelTable for everything else:
//   ln1 = LN(residual) -> bf16 (mean, rstd fp32)        qkv = mm(ln1, qkvw) + qkvb -> fp32
//   atty = attention(qkv) in fp32 (one layer of scratch) -> bf16, kept for backward
//   residual2 = residual + mm(atty, attprojw) + attprojb                      (fp32)
//   ln2 = LN(residual2) -> bf16       fch = mm(ln2, fcw) + fcb -> fp32 (kept for GELU backward)
//   fch_gelu = GELU(fch) -> bf16      residual3 = residual2 + mm(fch_gelu, fcprojw) + fcprojb
// then lnf = LN(residual3) -> bf16, logits = mm(lnf, wte) -> fp32, softmax and cross-entropy fp32.
// The encoder gathers wte/wpe rows from the fp32 master (exact). The backward pass mirrors this
// with the fp32 gradient kernels, except the matmuls: Bf16Kernels::matmul_backward takes the fp32
// dout (rounded to bf16 inside), the saved bf16 activation and the bf16 weight, and gives fp32
// dinp, dweight and dbias. The bf16 copy is refreshed by the optimizer in its update pass
// (weights_for_update) or, after any other write through params_flat(), before the next forward.
#pragma once

#include <cstddef>
#include <string>

#include "core/model/activations.h"
#include "core/model/config.h"
#include "core/model/parameters.h"
#include "core/model/precision.h"
#include "core/util/aligned_buffer.h"
#include "simd/bf16.h"
#include "simd/kernels.h"

namespace llmcpu {

class Gpt2 {
 public:
  // Parameters start zeroed; load a checkpoint into params_flat() or call init_gpt2(). A bf16 model
  // uses `bf16_kernels` for its bf16 ops (null: active_bf16_kernels()).
  explicit Gpt2(const ModelConfig& config, const KernelTable& kernels = active_kernels(),
                Precision precision = Precision::kFp32, const Bf16Kernels* bf16_kernels = nullptr);

  const ModelConfig& config() const { return config_; }
  const ParameterLayout& layout() const { return layout_; }
  size_t num_parameters() const { return layout_.total(); }
  const KernelTable& kernels() const { return kernels_; }
  Precision precision() const { return precision_; }
  const Bf16Kernels* bf16_kernels() const { return bf16k_; }  // null in fp32
  // "fp32, avx512+xsmm kernels" or "bf16 (avx512bf16 GEMMs), avx512+xsmm kernels".
  std::string kernels_summary() const;

  // The fp32 master weights. Writing through the non-const pointer marks the bf16 copy stale; it is
  // refreshed before the next forward pass.
  float* params_flat() {
    bf16_stale_ = precision_ == Precision::kBf16;
    return params_.data();
  }
  const float* params_flat() const { return params_.data(); }
  float* grads_flat() { return grads_.data(); }
  const float* grads_flat() const { return grads_.data(); }
  const ParameterViews<float>& params() const { return p_; }
  const ParameterViews<float>& grads() const { return g_; }

  // The bf16 working copy of all parameters (null in fp32), current as of the last refresh.
  const bf16* params_bf16_flat() const { return params_bf16_.data(); }
  void refresh_bf16_weights();
  // For an optimizer that updates the master weights and writes their bf16 copy in the same pass
  // (Bf16Kernels::adamw_update): the copy is taken as current afterwards. `copy` is null in fp32.
  struct UpdateSpans {
    float* master;
    bf16* copy;
  };
  UpdateSpans weights_for_update();

  // Sizes the activation arena for batches of B x T tokens (a no-op when already that size).
  void plan_batch(int B, int T);
  int batch() const { return arena_.batch(); }
  int seq_len() const { return arena_.seq_len(); }

  // Forward pass over inputs (B,T). With targets it also computes the per-token losses and returns
  // their mean; without, it returns NaN. Throws ShapeError if T > maxT or B, T do not match the plan.
  float forward(const int* inputs, const int* targets, int B, int T);
  // Logits of the last forward pass: (B, T, Vp); only the first V of each row are meaningful.
  const float* logits() const { return arena_.acts.logits; }
  const ActivationArena& arena() const { return arena_; }

  void zero_grad();
  // Adds d(loss_scale * mean loss)/d(params) into the gradients. Needs a forward pass with targets
  // just before; it overwrites the logits with their gradient.
  void backward(float loss_scale = 1.0f);

 private:
  // The layers from the checked inputs to the logits, and back from dlogits to the gradients.
  void forward_fp32(int B, int T);
  void forward_bf16(int B, int T);  // gpt2_bf16.cpp
  void backward_bf16();             // gpt2_bf16.cpp

  ModelConfig config_;
  ParameterLayout layout_;
  const KernelTable& kernels_;
  Precision precision_;
  const Bf16Kernels* bf16k_;     // null in fp32
  AlignedBuffer<float> params_;  // flat, ParameterLayout order
  AlignedBuffer<float> grads_;   // flat, same layout
  AlignedBuffer<bf16> params_bf16_;  // bf16: the working copy, same layout; empty in fp32
  bool bf16_stale_ = false;
  ParameterViews<float> p_{};
  ParameterViews<float> g_{};
  ParameterViews<bf16> pb_{};  // views into params_bf16_ (bf16 only)
  ActivationArena arena_;
  AlignedBuffer<int> inputs_;   // (B, T) of the last forward pass, kept for the backward pass
  AlignedBuffer<int> targets_;  // (B, T)
  bool have_targets_ = false;
};

// GPT-2 initialisation: weights N(0, 0.02), the residual projections (attprojw, fcprojw) N(0,
// 0.02/sqrt(2L)), biases 0, layernorm weights 1, padded wte rows 0. Same seed, same weights.
void init_gpt2(Gpt2& model, unsigned long long seed);

}  // namespace llmcpu
