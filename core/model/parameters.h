// The 16 parameter tensors of a model in llm.c's order, as named views into one flat arena. The same
// layout serves the parameters, their gradients and the AdamW moments, so the optimizer, checkpoint
// writer and gradient clipping each see one flat span.
//
// GPT-2 fills all 16 as llm.c does. The Llama family (core/model/config.h) uses the same slots for
// its tensors, and the slots it has no tensor for hold none (size 0, a null view):
//   wte      embed_tokens (Vp, C)            wpe      lm_head (Vp, C) when untied ("lm_head")
//   ln1w     input_layernorm (L, C)          ln1b     none
//   qkvw     q_proj|k_proj|v_proj rows (L, (NH + 2 NKV) D, C)   qkvb  their biases, or none
//   attprojw o_proj (L, C, NH D)             attprojb o_proj's bias, or none
//   ln2w     post_attention_layernorm (L, C) ln2b     none
//   fcw      gate_proj|up_proj rows (L, 2H, C)                  fcb   their biases, or none
//   fcprojw  down_proj (L, C, H)             fcprojb  down_proj's bias, or none
//   lnfw     norm (C)                        lnfb     none
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "core/model/config.h"

namespace llmcpu {

inline constexpr int kNumParameterTensors = 16;

// A run of the flat arena: a whole tensor, or one layer's slice of a per-layer tensor.
struct ParameterSpan {
  size_t offset;
  size_t count;
  int tensor;  // 0..15, ParameterLayout order; -1 for a run that is not one tensor's
  int layer;   // -1 for the tensors outside the layers (wte, wpe, lnfw, lnfb)
};

// How many elements the runs hold together (the length of their packed array, ZeRO-1's).
size_t packed_size(std::span<const ParameterSpan> runs);

// Sizes (in elements), names and shapes of the 16 tensors, with their offsets in the flat arena.
class ParameterLayout {
 public:
  explicit ParameterLayout(const ModelConfig& config);

  size_t total() const { return total_; }
  size_t size(int i) const { return sizes_[i]; }
  size_t offset(int i) const { return offsets_[i]; }
  // One layer's slice of a per-layer tensor (its size for the others).
  size_t layer_size(int i) const { return per_layer(i) ? sizes_[i] / dims_[i][0] : sizes_[i]; }
  // llm.c's names; slot 1 is "lm_head" in the Llama family.
  const char* name(int i) const;
  // Tensors 2..13 (ln1w ... fcprojb) are (L, ...): one slice per layer.
  static bool per_layer(int i) { return i >= 2 && i <= 13; }
  // The layers' matmul weights (qkvw, attprojw, fcw, fcprojw): a bf16 model reads them only through
  // its bf16 copy, every other tensor (wte too, for the embedding) also in fp32.
  static bool matmul_weight(int i) { return i == 4 || i == 6 || i == 10 || i == 12; }
  // Slot 1 holds a Llama model's untied lm_head.
  bool untied_head() const { return llama_ && sizes_[1] > 0; }
  // "(L, 3*C, C) = (2, 144, 48)"
  std::string shape(int i) const;
  const std::vector<size_t>& dims(int i) const { return dims_[i]; }
  // Every tensor cut at its layer boundaries, in flat order (so they tile [0, total()); tensors of
  // size 0 give no spans): the units
  // data-parallel training reduces gradients in (layer l's spans are final once its backward is
  // done) and ZeRO-1 shards over ranks.
  std::vector<ParameterSpan> spans() const;

 private:
  std::array<size_t, kNumParameterTensors> sizes_{};
  std::array<size_t, kNumParameterTensors> offsets_{};
  std::array<std::vector<size_t>, kNumParameterTensors> dims_;
  size_t total_ = 0;
  bool llama_ = false;
};

// Where a flat arena laid out by ParameterLayout first holds a NaN or an infinity (tensor -1:
// nowhere).
struct NonFinite {
  int tensor = -1;
  const char* name = "";  // the layout's name of the tensor
  int layer = -1;    // for the per-layer tensors (ln1w ... fcprojb); -1 for the others
  size_t index = 0;  // element index within the tensor
  float value = 0;
  explicit operator bool() const { return tensor >= 0; }
  std::string describe() const;  // "fcw (layer 3)" or "wte"
};
NonFinite find_non_finite(const float* flat, const ParameterLayout& layout);

// Sets a flat gradient arena of n values to zero (zero_grad, before a step's first backward pass),
// each thread its static share of [0, n): the pages stay with the threads that touched them first.
void zero_gradients(float* grads, size_t n);

// One layer's slice of the per-layer tensors, llm.c's l_* pointers; null where the model has no
// such tensor (the biases and ln*b of the Llama family). Shapes as GPT-2's; Llama's in the file
// comment.
template <typename F>
struct LayerParams {
  F* ln1w;      // (C)
  F* ln1b;      // (C)
  F* qkvw;      // (3*C, C)
  F* qkvb;      // (3*C)
  F* attprojw;  // (C, C)
  F* attprojb;  // (C)
  F* ln2w;      // (C)
  F* ln2b;      // (C)
  F* fcw;       // (4*C, C)
  F* fcb;       // (4*C)
  F* fcprojw;   // (C, 4*C)
  F* fcprojb;   // (C)
};

// Named views into a flat arena laid out by ParameterLayout; null for a tensor of size 0.
template <typename F>
struct ParameterViews {
  F* wte;       // (Vp, C)
  F* wpe;       // (maxT, C); Llama: the untied lm_head (Vp, C)
  F* ln1w;      // (L, C)
  F* ln1b;      // (L, C)
  F* qkvw;      // (L, 3*C, C)
  F* qkvb;      // (L, 3*C)
  F* attprojw;  // (L, C, C)
  F* attprojb;  // (L, C)
  F* ln2w;      // (L, C)
  F* ln2b;      // (L, C)
  F* fcw;       // (L, 4*C, C)
  F* fcb;       // (L, 4*C)
  F* fcprojw;   // (L, C, 4*C)
  F* fcprojb;   // (L, C)
  F* lnfw;      // (C)
  F* lnfb;      // (C)
  // Elements of one layer's slice of each per-layer tensor (ln1w ... fcprojb, in order).
  std::array<size_t, 12> stride;
  bool untied_head;  // the head reads wpe's slot (a Llama lm_head), not wte

  // The matrix of the head: logits = lnf head()^T.
  F* head() const { return untied_head ? wpe : wte; }

  // The tensors of layer l (0 <= l < L). This is the one place the per-layer offsets are written.
  LayerParams<F> layer(int l) const {
    const size_t i = l;
    const auto at = [&](F* base, int k) { return base ? base + i * stride[k] : nullptr; };
    return {.ln1w = at(ln1w, 0),
            .ln1b = at(ln1b, 1),
            .qkvw = at(qkvw, 2),
            .qkvb = at(qkvb, 3),
            .attprojw = at(attprojw, 4),
            .attprojb = at(attprojb, 5),
            .ln2w = at(ln2w, 6),
            .ln2b = at(ln2b, 7),
            .fcw = at(fcw, 8),
            .fcb = at(fcb, 9),
            .fcprojw = at(fcprojw, 10),
            .fcprojb = at(fcprojb, 11)};
  }

  static ParameterViews carve(F* base, const ParameterLayout& layout) {
    ParameterViews v;
    F** slots[kNumParameterTensors] = {&v.wte,      &v.wpe,      &v.ln1w, &v.ln1b, &v.qkvw, &v.qkvb,
                                       &v.attprojw, &v.attprojb, &v.ln2w, &v.ln2b, &v.fcw,  &v.fcb,
                                       &v.fcprojw,  &v.fcprojb,  &v.lnfw, &v.lnfb};
    for (int i = 0; i < kNumParameterTensors; ++i) {
      *slots[i] = layout.size(i) ? base + layout.offset(i) : nullptr;
    }
    for (int i = 2; i <= 13; ++i) v.stride[i - 2] = layout.layer_size(i);
    v.untied_head = layout.untied_head();
    return v;
  }
};

}  // namespace llmcpu
