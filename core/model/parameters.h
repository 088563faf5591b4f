// The parameter tensors of a model, by role, as named views into one flat arena. The same layout
// serves the parameters, their gradients and the AdamW moments, so the optimizer, checkpoint
// writer and gradient clipping each see one flat span.
//
// Every family uses the same roles in the same flat order; a role the model has no tensor for
// (GPT-2's lm_head, a Llama model's wpe and biases) holds none (size 0, a null view). GPT-2's
// tensors come in llm.c's order, so its arena is an llm.c checkpoint's parameters as they are.
//   wte      token embedding (Vp, C)          lm_head  the head (Vp, C), when not tied to wte
//   wpe      learned positions (maxT, C)
//   per layer (L, ...):
//   ln1w     the attention's norm (C)         ln1b     its bias (LayerNorm)
//   q_norm   q's per-head norm (D)            k_norm   k's (Qwen3)
//   qkvw     q|k|v rows (QKV, C)              qkvb     their biases
//   attprojw the attention's output (C, A)    attprojb its bias
//   attn_post_norm  the norm of the attention's output, before the residual add (C) (Gemma 2, 3)
//   ln2w     the MLP's norm (C)               ln2b     its bias (LayerNorm)
//   fcw      fc, or gate|up rows (F, C)       fcb      its biases
//   fcprojw  the MLP's output (C, H)          fcprojb  its bias
//   mlp_post_norm   the norm of the MLP's output, before the residual add (C) (Gemma 2, 3)
//   lnfw     the final norm (C)               lnfb     its bias (LayerNorm)
// with QKV = (NH + 2 NKV) D, A = NH D, F = 4C (GPT-2) or 2H (a gated MLP), H = 4C or the MLP's
// width (ModelConfig's *_width()).
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "core/model/config.h"

namespace llmcpu {

// The roles, in flat order. Per-layer roles are contiguous (kLn1w ... kFcprojb).
enum TensorRole : int {
  kWte,
  kLmHead,
  kWpe,
  kLn1w,
  kLn1b,
  kQNorm,
  kKNorm,
  kQkvw,
  kQkvb,
  kAttprojw,
  kAttprojb,
  kAttnPostNorm,
  kLn2w,
  kLn2b,
  kFcw,
  kFcb,
  kFcprojw,
  kFcprojb,
  kMlpPostNorm,
  kLnfw,
  kLnfb,
  kNumTensorRoles
};
inline constexpr int kFirstLayerRole = kLn1w, kLastLayerRole = kMlpPostNorm;
inline constexpr int kNumLayerRoles = kLastLayerRole - kFirstLayerRole + 1;
// llm.c's 16 tensors (GPT-2's checkpoint order, the plugin ABI's tensor_offset[]) by role.
inline constexpr std::array<TensorRole, 16> kLlmcTensors = {
    kWte,  kWpe,  kLn1w, kLn1b, kQkvw,    kQkvb,    kAttprojw, kAttprojb,
    kLn2w, kLn2b, kFcw,  kFcb,  kFcprojw, kFcprojb, kLnfw,     kLnfb};

// A run of the flat arena: a whole tensor, or one layer's slice of a per-layer tensor.
struct ParameterSpan {
  size_t offset;
  size_t count;
  int tensor;  // its TensorRole; -1 for a run that is not one tensor's
  int layer;   // -1 for the tensors outside the layers (wte, lm_head, wpe, lnfw, lnfb)
};

// How many elements the runs hold together (the length of their packed array, ZeRO-1's).
size_t packed_size(std::span<const ParameterSpan> runs);

// Sizes (in elements), names and shapes of the tensors by role (TensorRole), with their offsets in
// the flat arena.
class ParameterLayout {
 public:
  explicit ParameterLayout(const ModelConfig& config);

  size_t total() const { return total_; }
  size_t size(int i) const { return sizes_[i]; }
  size_t offset(int i) const { return offsets_[i]; }
  // One layer's slice of a per-layer tensor (its size for the others).
  size_t layer_size(int i) const { return per_layer(i) ? sizes_[i] / dims_[i][0] : sizes_[i]; }
  // llm.c's names, and "lm_head".
  static const char* name(int i);
  // ln1w ... fcprojb are (L, ...): one slice per layer.
  static bool per_layer(int i) { return i >= kFirstLayerRole && i <= kLastLayerRole; }
  // The layers' matmul weights (qkvw, attprojw, fcw, fcprojw): a bf16 model reads them only through
  // its bf16 copy, every other tensor (wte too, for the embedding) also in fp32.
  static bool matmul_weight(int i) {
    return i == kQkvw || i == kAttprojw || i == kFcw || i == kFcprojw;
  }
  // The head is a tensor of its own, not wte.
  bool untied_head() const { return sizes_[kLmHead] > 0; }
  // "(L, 3*C, C) = (2, 144, 48)"
  std::string shape(int i) const;
  const std::vector<size_t>& dims(int i) const { return dims_[i]; }
  // Every tensor cut at its layer boundaries, in flat order (so they tile [0, total()); tensors of
  // size 0 give no spans): the units
  // data-parallel training reduces gradients in (layer l's spans are final once its backward is
  // done) and ZeRO-1 shards over ranks.
  std::vector<ParameterSpan> spans() const;

 private:
  std::array<size_t, kNumTensorRoles> sizes_{};
  std::array<size_t, kNumTensorRoles> offsets_{};
  std::array<std::vector<size_t>, kNumTensorRoles> dims_;
  size_t total_ = 0;
  bool llmc_ = true;  // GPT-2's symbolic shapes
};

// Where a flat arena laid out by ParameterLayout first holds a NaN or an infinity (tensor -1:
// nowhere).
struct NonFinite {
  int tensor = -1;
  const char* name = "";  // the layout's name of the tensor
  int layer = -1;         // for the per-layer tensors (ln1w ... fcprojb); -1 for the others
  size_t index = 0;       // element index within the tensor
  float value = 0;
  explicit operator bool() const { return tensor >= 0; }
  std::string describe() const;  // "fcw (layer 3)" or "wte"
};
NonFinite find_non_finite(const float* flat, const ParameterLayout& layout);

// Sets a flat gradient arena of n values to zero (zero_grad, before a step's first backward pass),
// each thread its static share of [0, n): the pages stay with the threads that touched them first.
void zero_gradients(float* grads, size_t n);

// One layer's slice of the per-layer tensors, llm.c's l_* pointers; null where the model has no
// such tensor (the biases and ln*b of the Llama family). Shapes as GPT-2's; the others' in the
// file comment.
template <typename F>
struct LayerParams {
  F* ln1w;            // (C)
  F* ln1b;            // (C)
  F* q_norm;          // (D)
  F* k_norm;          // (D)
  F* qkvw;            // (3*C, C)
  F* qkvb;            // (3*C)
  F* attprojw;        // (C, C)
  F* attprojb;        // (C)
  F* attn_post_norm;  // (C)
  F* ln2w;            // (C)
  F* ln2b;            // (C)
  F* fcw;             // (4*C, C)
  F* fcb;             // (4*C)
  F* fcprojw;         // (C, 4*C)
  F* fcprojb;         // (C)
  F* mlp_post_norm;   // (C)
};

// Named views into a flat arena laid out by ParameterLayout; null for a tensor of size 0.
template <typename F>
struct ParameterViews {
  F* wte;             // (Vp, C)
  F* lm_head;         // (Vp, C), or null: the head is wte
  F* wpe;             // (maxT, C)
  F* ln1w;            // (L, C)
  F* ln1b;            // (L, C)
  F* q_norm;          // (L, D)
  F* k_norm;          // (L, D)
  F* qkvw;            // (L, 3*C, C)
  F* qkvb;            // (L, 3*C)
  F* attprojw;        // (L, C, C)
  F* attprojb;        // (L, C)
  F* attn_post_norm;  // (L, C)
  F* ln2w;            // (L, C)
  F* ln2b;            // (L, C)
  F* fcw;             // (L, 4*C, C)
  F* fcb;             // (L, 4*C)
  F* fcprojw;         // (L, C, 4*C)
  F* fcprojb;         // (L, C)
  F* mlp_post_norm;   // (L, C)
  F* lnfw;            // (C)
  F* lnfb;            // (C)
  // Elements of one layer's slice of each per-layer tensor (ln1w ... fcprojb, in order).
  std::array<size_t, kNumLayerRoles> stride;

  // The matrix of the head: logits = lnf head()^T.
  F* head() const { return lm_head ? lm_head : wte; }
  // The gradient of the head's matrix in these gradient views, when `p` are the weights': with a
  // head of its own in p (lm_head, or a tied head the embedding no longer shares: a LoRA run's
  // trained copy of one of them) its lm_head, which may be null (a frozen head), else wte's.
  template <class Weights>
  F* head_gradient(const Weights& p) const {
    return p.lm_head ? lm_head : wte;
  }

  // The tensors of layer l (0 <= l < L). This is the one place the per-layer offsets are written.
  LayerParams<F> layer(int l) const {
    const size_t i = l;
    const auto at = [&](F* base, int role) {
      return base ? base + i * stride[role - kFirstLayerRole] : nullptr;
    };
    return {.ln1w = at(ln1w, kLn1w),
            .ln1b = at(ln1b, kLn1b),
            .q_norm = at(q_norm, kQNorm),
            .k_norm = at(k_norm, kKNorm),
            .qkvw = at(qkvw, kQkvw),
            .qkvb = at(qkvb, kQkvb),
            .attprojw = at(attprojw, kAttprojw),
            .attprojb = at(attprojb, kAttprojb),
            .attn_post_norm = at(attn_post_norm, kAttnPostNorm),
            .ln2w = at(ln2w, kLn2w),
            .ln2b = at(ln2b, kLn2b),
            .fcw = at(fcw, kFcw),
            .fcb = at(fcb, kFcb),
            .fcprojw = at(fcprojw, kFcprojw),
            .fcprojb = at(fcprojb, kFcprojb),
            .mlp_post_norm = at(mlp_post_norm, kMlpPostNorm)};
  }

  // The view of the tensor of TensorRole `role`.
  F*& tensor(int role) {
    F** slots[kNumTensorRoles] = {
        &wte,  &lm_head, &wpe,      &ln1w,     &ln1b,           &q_norm, &k_norm,
        &qkvw, &qkvb,    &attprojw, &attprojb, &attn_post_norm, &ln2w,   &ln2b,
        &fcw,  &fcb,     &fcprojw,  &fcprojb,  &mlp_post_norm,  &lnfw,   &lnfb};
    return *slots[role];
  }

  static ParameterViews carve(F* base, const ParameterLayout& layout) {
    ParameterViews v;
    for (int i = 0; i < kNumTensorRoles; ++i) {
      v.tensor(i) = layout.size(i) ? base + layout.offset(i) : nullptr;
    }
    for (int i = kFirstLayerRole; i <= kLastLayerRole; ++i) {
      v.stride[i - kFirstLayerRole] = layout.layer_size(i);
    }
    return v;
  }
};

}  // namespace llmcpu
