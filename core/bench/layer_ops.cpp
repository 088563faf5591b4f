// The ops of a GPT-2 training step (layer_ops.h), recorded from the step: transformer.h's forward
// pass, head and backward pass run over a StepRecorder, on views that point into address space
// nothing reads, then the optimizer's update.
#include "core/bench/layer_ops.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/bench/step_recorder.h"
#include "core/model/activations.h"
#include "core/model/parameters.h"
#include "core/model/transformer.h"
#include "simd/error.h"

namespace llmcpu::bench {
namespace {

// Address space for the views the recorded passes are handed: mapped with no access (so it costs
// no memory, whatever the model's size) but for its first `writable` bytes (rounded up to pages),
// where the one write of the passes lands (transformer.h zeroes d(residual) before the final
// layernorm's backward).
class AddressSpace {
 public:
  AddressSpace(size_t bytes, size_t writable) : bytes_(bytes) {
    base_ = ::mmap(nullptr, bytes_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base_ == MAP_FAILED) {
      throw Error("bench: cannot reserve " + std::to_string(bytes_ >> 20) +
                  " MiB of address space to record a step in (" + std::strerror(errno) + ")");
    }
    if (writable > 0 && ::mprotect(base_, writable, PROT_READ | PROT_WRITE) != 0) {
      ::munmap(base_, bytes_);
      throw Error("bench: cannot map " + std::to_string(writable >> 10) +
                  " KiB to record a step in (" + std::strerror(errno) + ")");
    }
  }
  AddressSpace(const AddressSpace&) = delete;
  AddressSpace& operator=(const AddressSpace&) = delete;
  ~AddressSpace() { ::munmap(base_, bytes_); }
  char* at(size_t offset) const { return static_cast<char*>(base_) + offset; }

 private:
  void* base_;
  size_t bytes_;
};

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Activation views that all start at `base` (they overlap: the recorder reads none), for B x T of
// `c` with nothing recomputed and the head over chunks of rows, as the trainer plans a step. Every
// offset a pass takes from a view stays inside the arena's size.
template <class G>
ActivationViews<G> views_at(char* base, const ModelConfig& c, int B, int T) {
  float* f = reinterpret_cast<float*>(base);
  G* g = reinterpret_cast<G*>(base);
  const size_t BT = size_t(B) * T;
  return {.encoded = f,
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
          .lnf = g,
          .lnf_mean = f,
          .lnf_rstd = f,
          .logits = f,
          .dlogits = f,
          .lse_head = f,
          .losses = f,
          .rope_cos = f,
          .rope_sin = f,
          .rope_cos_local = f,
          .rope_sin_local = f,
          .L = c.num_layers,
          .BT = BT,
          .C = size_t(c.channels),
          .NH = size_t(c.num_heads),
          .QKV = size_t(c.qkv_width()),
          .A = size_t(c.attn_width()),
          .F = size_t(c.fc_width()),
          .H = size_t(c.hidden_size()),
          .QK = 0,
          .QK_heads = 0,
          .head_rows = head_chunk_rows(c, BT),
          .keep_logits = false,
          .recompute = Recompute::kNone};
}

// A LoRA step's adapters as the recorder takes them: their shapes, no memory (it reads none).
LoraViews recorded_adapters(const ModelConfig& c, const LoraOptions& o) {
  std::vector<LoraModuleView> modules;
  for (const LoraModule& m : select_lora_modules(c, o.targets)) {
    modules.push_back({{m.layer, m.role, m.row0, m.rows, m.in, nullptr, nullptr, nullptr, nullptr},
                       nullptr, nullptr, nullptr, size_t(o.r)});
  }
  std::stable_sort(modules.begin(), modules.end(), [](const auto& a, const auto& b) {
    return std::tuple(a.p.layer, lora_site_of(a.p.role), a.p.col0) <
           std::tuple(b.p.layer, lora_site_of(b.p.role), b.p.col0);
  });
  return lora_views_of(modules, c.num_layers, o.r, o.scale());
}

// A frozen base's gradients as the passes see them: none for the matmuls, the embedding and the
// head; the norms' (which go to a scratch) at `sink`.
ParameterViews<float> frozen_gradients(const ParameterViews<float>& p, float* sink) {
  ParameterViews<float> g = p;
  g.wte = g.lm_head = g.wpe = nullptr;
  g.qkvw = g.qkvb = g.attprojw = g.attprojb = g.fcw = g.fcb = g.fcprojw = g.fcprojb = nullptr;
  for (float** norm : {&g.ln1w, &g.ln1b, &g.q_norm, &g.k_norm, &g.attn_post_norm, &g.ln2w,
                       &g.ln2b, &g.mlp_post_norm, &g.lnfw, &g.lnfb}) {
    if (*norm) *norm = sink;
  }
  return g;
}

// The step as run_bench times it: zero_grad, Model::forward_backward, the gradient norm, AdamW;
// with `lora` the LoRA step (the base frozen, the norm and AdamW over the adapter).
template <class G>
std::vector<LayerOp> record_step(const ModelConfig& c, int B, int T, const OpKernels& kernels,
                                 const LoraOptions* lora) {
  const ParameterLayout layout(c);
  const size_t BT = size_t(B) * T;
  const ActivationOptions options{kernels.bf16 ? Precision::kBf16 : Precision::kFp32};
  const size_t arena = round_up(ActivationArena::bytes(c, B, T, options).total(), 64);
  const AddressSpace space(arena + layout.total() * sizeof(float), BT * c.channels * sizeof(float));
  const ActivationViews<G> a = views_at<G>(space.at(0), c, B, T);
  float* f = reinterpret_cast<float*>(space.at(0));
  const ActivationGradViews d{
      .dresidual = f, .dln = f, .datty = f, .dqkv = f, .dfch = f, .dact = f, .pad_row = f};
  // The gradients share the parameters' addresses: the recorder names a matmul by its weight only.
  float* params = reinterpret_cast<float*>(space.at(arena));
  const ParameterViews<float> p = ParameterViews<float>::carve(params, layout);

  StepRecorder<G> x(kernels, c, params);
  if (lora) {
    const LoraViews adapters = recorded_adapters(c, *lora);
    const ParameterViews<float> g = frozen_gradients(p, f);
    model_forward(x, c, p, a, nullptr, B, T, &adapters);
    model_head(x, c, p, g, a, d, reinterpret_cast<const int*>(f), 1.0f);
    model_backward(x, c, p, g, a, d, nullptr, B, T, [](int) {}, &adapters);
    const size_t P = lora_footprint(c, *lora, B, T).parameters;
    x.gradient_norm(P);
    x.adamw_update(P);
    return x.take();
  }
  model_forward(x, c, p, a, nullptr, B, T);
  // The recorder reads no tokens: any address stands for the targets.
  model_head(x, c, p, p, a, d, reinterpret_cast<const int*>(f), 1.0f);
  model_backward(x, c, p, p, a, d, nullptr, B, T, [](int) {});
  x.gradient_norm(layout.total());
  x.adamw_update(layout.total());
  return x.take();
}

}  // namespace

std::vector<LayerOp> layer_ops(const ModelConfig& config, int B, int T, Precision precision,
                               const KernelTable& k, const Bf16Kernels& h, const LoraOptions* lora) {
  const OpKernels kernels{k, h, precision == Precision::kBf16};
  if (kernels.bf16) return record_step<bf16>(config, B, T, kernels, lora);
  return record_step<float>(config, B, T, kernels, lora);
}

}  // namespace llmcpu::bench
