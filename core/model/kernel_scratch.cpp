#include "core/model/kernel_scratch.h"

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "core/model/parameters.h"
#include "core/model/transformer.h"

namespace llmcpu {

namespace {

// An executor (core/model/executors.h) whose ops only add the scratch their kernel would ask for:
// the GEMMs and attention of the fp32 table, or of the bf16 one for bf16 activations (G), as
// Fp32Executor and Bf16Executor route them. The other ops take no scratch. Pointers are only
// tested for null (a bias, dinp), never read.
template <typename G>
struct ScratchSizer {
  using Act = G;
  static constexpr bool kBf16 = std::is_same_v<G, bf16>;
  const KernelTable& k;
  const Bf16Kernels& h;
  int threads;
  ScratchUse& use;

  void matmul_forward(const void* /*out*/, const void* /*inp*/, const float* /*weight*/,
                      const float* bias, size_t N, int C, int OC) {
    use.merge(kBf16 ? h.matmul_forward_scratch(N, C, OC, bias != nullptr, threads)
                    : k.matmul_forward_scratch(N, C, OC, bias != nullptr, threads));
  }
  void matmul_backward(const float* dinp, const float* /*dweight*/, const float* dbias,
                       const float* /*dout*/, const void* /*inp*/, const float* /*weight*/,
                       size_t N, int C, int OC) {
    const bool has_dinp = dinp != nullptr, has_dbias = dbias != nullptr;
    use.merge(kBf16 ? h.matmul_backward_scratch(N, C, OC, has_dinp, has_dbias, threads)
                    : k.matmul_backward_scratch(N, C, OC, has_dinp, has_dbias, threads));
  }
  void attention_forward(int /*l*/, const void* /*out*/, const float* /*lse*/, const void* /*qkv*/,
                         int B, int T, int NH, int NKV, int D, const AttentionOptions&) {
    use.merge(kBf16 ? h.flash_attention_forward_scratch(B, T, NH, NKV, D, threads)
                    : k.flash_attention_forward_scratch(B, T, NH, NKV, D, threads));
  }
  void attention_backward(int /*l*/, const float* /*dqkv*/, const float* /*dout*/,
                          const void* /*out*/, const void* /*qkv*/, const float* /*lse*/, int B,
                          int T, int NH, int NKV, int D, const AttentionOptions&) {
    use.merge(kBf16 ? h.flash_attention_backward_scratch(B, T, NH, NKV, D, threads)
                    : k.flash_attention_backward_scratch(B, T, NH, NKV, D, threads));
  }
  // LoRA's GEMMs: the down products as the executor's (bf16 with a bf16 input), the up ones fp32.
  void lora_down(const float* /*u*/, const void* /*inp*/, const LoraModuleView& m, size_t N,
                 int r) {
    use.merge(kBf16 ? h.matmul_forward_scratch(N, int(m.p.in), r, false, threads)
                    : k.matmul_forward_scratch(N, int(m.p.in), r, false, threads));
  }
  // The rank updates and projections take no scratch; dA's product is a GEMM without dinp.
  template <class... A>
  void lora_up(A&&...) {}
  template <class... A>
  void lora_up_backward(A&&...) {}
  void lora_down_backward(const float*, const float*, const float*, const void*,
                          const LoraModuleView& m, size_t N, int r, float, uint64_t) {
    use.merge(kBf16 ? h.matmul_backward_scratch(N, int(m.p.in), r, false, false, threads)
                    : k.matmul_backward_scratch(N, int(m.p.in), r, false, false, threads));
  }
  template <class... A>
  void lora_dropout(A&&...) {}
  template <class... A>
  void layernorm_forward(A&&...) {}
  template <class... A>
  void layernorm_apply(A&&...) {}
  template <class... A>
  void layernorm_backward(A&&...) {}
  template <class... A>
  void rmsnorm_forward(A&&...) {}
  template <class... A>
  void rmsnorm_apply(A&&...) {}
  template <class... A>
  void rmsnorm_backward(A&&...) {}
  template <class... A>
  void rope_forward(A&&...) {}
  template <class... A>
  void rope_backward(A&&...) {}
  template <class... A>
  void swiglu_forward(A&&...) {}
  template <class... A>
  void swiglu_backward(A&&...) {}
  template <class... A>
  void geglu_forward(A&&...) {}
  template <class... A>
  void geglu_backward(A&&...) {}
  template <class... A>
  void head_rmsnorm_forward(A&&...) {}
  template <class... A>
  void head_rmsnorm_backward(A&&...) {}
  template <class... A>
  void scale(A&&...) {}
  template <class... A>
  void post_norm_forward(A&&...) {}
  template <class... A>
  void zero(A&&...) {}
  template <class... A>
  void copy_floats(A&&...) {}
  template <class... A>
  void softcap_forward(A&&...) {}
  template <class... A>
  void softcap_backward(A&&...) {}
  template <class... A>
  void gelu_forward(A&&...) {}
  template <class... A>
  void gelu_backward(A&&...) {}
  template <class... A>
  void residual_forward(A&&...) {}
};

// Layer views whose every pointer is `f` (or `g`): not null where the model has the tensor (GPT-2
// has all its biases; the others those their family and flags say).
LayerParams<float> params_at(float* f, const ModelConfig& c) {
  const bool layernorm = c.family().norm == NormKind::kLayerNorm;
  const auto bias = [f](bool present) { return present ? f : nullptr; };
  return {.ln1w = f,
          .ln1b = bias(layernorm),
          .q_norm = bias(c.family().qk_norm),
          .k_norm = bias(c.family().qk_norm),
          .qkvw = f,
          .qkvb = bias(c.qkv_bias),
          .attprojw = f,
          .attprojb = bias(c.attn_proj_bias),
          .attn_post_norm = bias(c.family().post_norms),
          .ln2w = f,
          .ln2b = bias(layernorm),
          .fcw = f,
          .fcb = bias(c.mlp_bias),
          .fcprojw = f,
          .fcprojb = bias(c.mlp_bias),
          .mlp_post_norm = bias(c.family().post_norms)};
}

template <typename G>
LayerActivations<G> activations_at(float* f, G* g, Recompute recompute) {
  return {.residual = f,
          .ln1 = g,
          .ln1_mean = f,
          .ln1_rstd = f,
          .qkv = g,
          .atty = g,
          .lse = f,
          .qk_saved = f,
          .qk_rstd = f,
          .attn_out = f,
          .attn_post_rstd = f,
          .residual2 = f,
          .ln2 = g,
          .ln2_mean = f,
          .ln2_rstd = f,
          .fch = g,
          .fch_gelu = g,
          .mlp_out = f,
          .mlp_post_rstd = f,
          .residual3 = f,
          .rope_cos = f,
          .rope_sin = f,
          .rope_cos_local = f,
          .rope_sin_local = f,
          .recompute_gelu = recompute == Recompute::kGelu || recompute == Recompute::kAllPointwise,
          .recompute_layernorm = recompute == Recompute::kAllPointwise,
          .recompute_layer = recompute == Recompute::kLayers};
}

template <typename G>
void size_step(ScratchSizer<G>& x, const ModelConfig& c, int B, int T, const ActivationOptions& o) {
  float f = 0;
  G g{};
  const LayerParams<float> p = params_at(&f, c);
  const LayerActivations<G> a = activations_at(&f, &g, o.recompute);
  const ActivationGradViews d{&f, &f, &f, &f, &f, &f};
  const int C = c.channels, Vp = c.padded_vocab_size;
  const BlockShape s = BlockShape::of(c, B, T);
  // Every block has the same shapes: one stands for all.
  block_forward(x, 0, p, a, s);
  // The head (Model::head): per chunk of rows, logits = lnf wte^T (no bias), then its backward
  // into d(lnf) and dwte.
  const size_t BT = size_t(B) * size_t(T), rows = head_chunk_rows(c, BT, o.keep_logits);
  for (size_t r = 0; r < BT; r += rows) {
    const size_t n = std::min(rows, BT - r);
    x.matmul_forward(&f, &g, &f, nullptr, n, C, Vp);
    x.matmul_backward(&f, &f, nullptr, &f, &g, &f, n, C, Vp);
  }
  block_backward(x, 0, p, p, a, d, s);
}

}  // namespace

ScratchUse step_scratch(const ModelConfig& config, int B, int T, const ActivationOptions& options,
                        const KernelTable& k, const Bf16Kernels& h, int threads) {
  ScratchUse use;
  if (options.precision == Precision::kBf16) {
    ScratchSizer<bf16> x{k, h, threads, use};
    size_step(x, config, B, T, options);
  } else {
    ScratchSizer<float> x{k, h, threads, use};
    size_step(x, config, B, T, options);
  }
  return use;
}

}  // namespace llmcpu
