// The 16 parameter tensors of GPT-2 in llm.c's order, as named views into one flat arena. The same
// layout serves the parameters, their gradients and the AdamW moments, so the optimizer, checkpoint
// writer and gradient clipping each see one flat span.
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
  static const char* name(int i);
  // Tensors 2..13 (ln1w ... fcprojb) are (L, ...): one slice per layer.
  static bool per_layer(int i) { return i >= 2 && i <= 13; }
  // The layers' matmul weights (qkvw, attprojw, fcw, fcprojw): a bf16 model reads them only through
  // its bf16 copy, every other tensor (wte too, for the embedding) also in fp32.
  static bool matmul_weight(int i) { return i == 4 || i == 6 || i == 10 || i == 12; }
  // "(L, 3*C, C) = (2, 144, 48)"
  std::string shape(int i) const;
  const std::vector<size_t>& dims(int i) const { return dims_[i]; }
  // Every tensor cut at its layer boundaries, in flat order (so they tile [0, total())): the units
  // data-parallel training reduces gradients in (layer l's spans are final once its backward is
  // done) and ZeRO-1 shards over ranks.
  std::vector<ParameterSpan> spans() const;

 private:
  std::array<size_t, kNumParameterTensors> sizes_{};
  std::array<size_t, kNumParameterTensors> offsets_{};
  std::array<std::vector<size_t>, kNumParameterTensors> dims_;
  size_t total_ = 0;
};

// Where a flat arena laid out by ParameterLayout first holds a NaN or an infinity (tensor -1:
// nowhere).
struct NonFinite {
  int tensor = -1;
  int layer = -1;    // for the per-layer tensors (ln1w ... fcprojb); -1 for the others
  size_t index = 0;  // element index within the tensor
  float value = 0;
  explicit operator bool() const { return tensor >= 0; }
  std::string describe() const;  // "fcw (layer 3)" or "wte"
};
NonFinite find_non_finite(const float* flat, const ParameterLayout& layout);

// One layer's slice of the per-layer tensors, llm.c's l_* pointers.
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

// Named views into a flat arena laid out by ParameterLayout.
template <typename F>
struct ParameterViews {
  F* wte;       // (Vp, C)
  F* wpe;       // (maxT, C)
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
  size_t C;     // channels: the stride of the per-layer tensors is a multiple of it

  // The tensors of layer l (0 <= l < L). This is the one place the per-layer offsets are written.
  LayerParams<F> layer(int l) const {
    const size_t i = l;
    return {.ln1w = ln1w + i * C,
            .ln1b = ln1b + i * C,
            .qkvw = qkvw + i * 3 * C * C,
            .qkvb = qkvb + i * 3 * C,
            .attprojw = attprojw + i * C * C,
            .attprojb = attprojb + i * C,
            .ln2w = ln2w + i * C,
            .ln2b = ln2b + i * C,
            .fcw = fcw + i * 4 * C * C,
            .fcb = fcb + i * 4 * C,
            .fcprojw = fcprojw + i * 4 * C * C,
            .fcprojb = fcprojb + i * C};
  }

  static ParameterViews carve(F* base, const ParameterLayout& layout) {
    ParameterViews v;
    F** slots[kNumParameterTensors] = {&v.wte,      &v.wpe,      &v.ln1w, &v.ln1b, &v.qkvw, &v.qkvb,
                                       &v.attprojw, &v.attprojb, &v.ln2w, &v.ln2b, &v.fcw,  &v.fcb,
                                       &v.fcprojw,  &v.fcprojb,  &v.lnfw, &v.lnfb};
    for (int i = 0; i < kNumParameterTensors; ++i) *slots[i] = base + layout.offset(i);
    v.C = layout.size(kNumParameterTensors - 1);  // lnfb: (C)
    return v;
  }
};

}  // namespace llmcpu
