// LoRA adapters as the passes see them: low-rank updates of rows of the layers' matmul weights.
// An adapter module on a linear map with input x (N, in) and output y (N, OC) adds, to the columns
// [col0, col0 + rows) of y (the rows of the weight it adapts: q, k and v are row blocks of qkvw,
// gate and up of fcw),
//   y[:, cols] += scale * (x A^T) B^T          A (r, in), B (rows, r), u = x A^T kept (N, r)
// and its backward, with g = dy[:, cols] and gB = scale * g B (N, r):
//   dB += scale * g^T u        dA += gB^T x        dx += gB A
// With dropout p in training, each module's input is x m / (1 - p) instead of x, a mask of its own
// (core/model/lora_ops.h's dropout_apply), and dx goes back through the same mask.
// The base weight's own gradient is not computed when the base is frozen (Model's
// base_gradients = false). The adapters' files, names and training are core/lora's; the model
// holds only these views (core/model/model.h's attach_lora).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/model/parameters.h"
#include "simd/bf16.h"

namespace llmcpu {

// One adapter module, as Model::attach_lora takes it: memory the caller owns.
struct LoraModuleParams {
  int layer;
  int role;           // the TensorRole of the weight it adapts: kQkvw, kAttprojw, kFcw, kFcprojw
  size_t col0, rows;  // the output columns it adds to (the weight's rows)
  size_t in;          // the input's width
  const float* A;     // (r, in)
  const float* B;     // (rows, r)
  float* dA;          // (r, in) accumulated; null: no gradients (inference)
  float* dB;          // (rows, r) accumulated
};

// A base tensor the adapter holds a trained copy of (PEFT's modules_to_save), which the passes
// use in place of the base's: memory the caller owns, laid out as the base's whole tensor (every
// layer's slice of a per-layer one; an embedding or head with its padded rows).
//   kWte     the input embedding. With a head tied to it the head keeps computing with the base's
//            tensor (PEFT's copy of embed_tokens is not the head's).
//   kLmHead  the head: an untied one's copy, or with a tied head a copy of wte for the head alone.
//   kWpe and the norms' weights and biases (ln1w, ln1b, q_norm, k_norm, attn_post_norm, ln2w,
//            ln2b, mlp_post_norm, lnfw, lnfb): as they are.
struct TrainedTensorParams {
  int role;        // its TensorRole
  const float* w;  // the copy
  float* g;        // its gradient, accumulated; null: none (inference)
};

struct LoraParams {
  int r = 0;
  float scale = 1.0f;  // lora_alpha / r, or lora_alpha / sqrt(r) (rsLoRA)
  float dropout = 0;   // on the adapters' input, in training passes
  std::vector<LoraModuleParams> modules;
  std::vector<TrainedTensorParams> tensors;  // at most one per role
};
// Whether the adapter may hold a copy of the tensor of TensorRole `role`: the embeddings, the head
// and the norms (not the layers' matmul weights and their biases, which adapters adapt).
inline bool trainable_copy_role(int role) {
  switch (role) {
    case kQkvw: case kQkvb: case kAttprojw: case kAttprojb: case kFcw: case kFcb: case kFcprojw:
    case kFcprojb:
      return false;
    default:
      return role >= 0 && role < kNumTensorRoles;
  }
}

// A module with what the passes add: its bf16 copy of A (a bf16 model's GEMM reads it) and its
// saved u.
struct LoraModuleView {
  LoraModuleParams p;
  const bf16* A16;  // (r, in) bf16(A), or null in fp32
  const float* Bt;  // (r, rows) B transposed, as the forward's rank update reads it
  float* u;         // (B*T, r) x A^T of the last forward pass, rows ldu apart
  size_t ldu;       // r, or its site's stacked rank (LoraStack)
};

// The modules of one site that share its input (q, k and v; gate and up), stacked: their A's one
// above the other (R = r x modules rows), so that the site's down products are one GEMM each
// way: U = x As^T (B*T, R) holds every module's u side by side (a module's u is its r columns,
// ldu R), dAs = gBs^T x, and dx += gBs As. Not with dropout (each module drops its own input).
struct LoraStack {
  int R = 0;  // 0: the site's modules go one by one
  // The stack as one module of rank R (its u is U, its dA the scratch dAs, added into each
  // module's dA), for the executors' down products.
  LoraModuleView view{};
};

// The modules of each layer's four matmuls, and the scratch their passes share (sized for B*T
// rows): gB (r, or a stack's R), and with dropout dx (the widest input) and the dropped input.
struct LoraViews {
  int r = 0;
  float scale = 1.0f;
  std::vector<LoraModuleView> modules;  // by layer, then role, then col0
  // [layer][site]: the modules' range in `modules`; site 0..3 = qkvw, attprojw, fcw, fcprojw.
  std::vector<std::array<std::array<size_t, 2>, 4>> sites;
  // [layer][site]: its modules stacked (R > 0), or not.
  std::vector<std::array<LoraStack, 4>> stacks;
  float* gB = nullptr;
  float* dx = nullptr;
  // Dropout: p, whether this pass is a training one, the pass's seed, and the dropped input
  // (B*T rows of the widest input, in the executor's Act type).
  float dropout = 0;
  bool training = false;
  uint64_t seed = 0;
  void* xd = nullptr;

  bool dropping() const { return training && dropout > 0; }
  // Module m's mask seed in this pass.
  uint64_t seed_of(const LoraModuleView& m) const {
    return (seed ^ 0x5A17u) * 0x9E3779B97F4A7C15ull + uint64_t(&m - modules.data());
  }

  std::span<const LoraModuleView> site(int layer, int s) const {
    const auto [begin, end] = sites[size_t(layer)][size_t(s)];
    return {modules.data() + begin, end - begin};
  }
  const LoraStack* stack(int layer, int s) const {
    if (stacks.empty()) return nullptr;
    const LoraStack& st = stacks[size_t(layer)][size_t(s)];
    return st.R > 0 ? &st : nullptr;
  }
};

// The floats Model keeps for the adapters of `modules` (rows, in of each) at rank r over BT rows,
// in the order it lays them out: each module's u, then gB (the scratch their passes share); with
// dropout dx and the dropped input (B*T rows of the widest input), without it the stacks' fp32 A's
// (As) and their dA scratch (dAs), every module counted as stacked (at most kLoraMaxStack a site).
// Model::lora_activation_bytes and the memory plans count total().
inline constexpr int kLoraMaxStack = 3;
struct LoraModuleShape {
  size_t rows, in;
};
struct LoraSizes {
  size_t u = 0, gB = 0, dx = 0, xd = 0, As = 0, dAs = 0;
  size_t total() const { return u + gB + dx + xd + As + dAs; }
};
LoraSizes lora_sizes(int r, std::span<const LoraModuleShape> modules, size_t BT, bool dropout);

// The sites in the order of LoraViews::sites.
enum LoraSite : int { kLoraQkv, kLoraAttproj, kLoraFc, kLoraFcproj };
// The site of a module on the weight of that TensorRole (-1: not a layer's matmul weight).
inline int lora_site_of(int role) {
  return role == kQkvw ? kLoraQkv : role == kAttprojw ? kLoraAttproj : role == kFcw ? kLoraFc
       : role == kFcprojw ? kLoraFcproj : -1;
}
// The views of `modules` (each with its pointers, or none where only shapes matter): grouped by
// layer and site in the order they come (the caller sorts them by layer, site, col0).
LoraViews lora_views_of(const std::vector<LoraModuleView>& modules, int num_layers, int r,
                        float scale);

}  // namespace llmcpu
