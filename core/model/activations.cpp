#include "core/model/activations.h"

#include <initializer_list>
#include <utility>
#include <vector>

#include "core/runtime/numa_memory.h"

namespace llmcpu {

namespace {

// Lays out views back to back in one buffer, each rounded up to 64 bytes; a view of 0 elements is
// null (a view the precision does not use).
template <typename E>
class Carver {
 public:
  explicit Carver(std::initializer_list<std::pair<E**, size_t>> views) : views_(views) {
    for (auto& [slot, n] : views_) total_ += round_up(n);
  }
  size_t total() const { return total_; }
  void carve(E* base) const {
    size_t offset = 0;
    for (auto& [slot, n] : views_) {
      *slot = n == 0 ? nullptr : base + offset;
      offset += round_up(n);
    }
  }

 private:
  static constexpr size_t kPerLine = 64 / sizeof(E);
  static size_t round_up(size_t n) { return (n + kPerLine - 1) / kPerLine * kPerLine; }
  std::vector<std::pair<E**, size_t>> views_;
  size_t total_ = 0;
};

}  // namespace

ActivationArena::ActivationArena(const ModelConfig& c, int B, int T, Precision precision)
    : B_(B), T_(T) {
  const size_t L = c.num_layers, NH = c.num_heads, C = c.channels, Vp = c.padded_vocab_size;
  const size_t BT = (size_t)B * T;
  // fp32 views that bf16 keeps in the bf16 arena instead (0: null).
  const size_t f32 = precision == Precision::kBf16 ? 0 : 1;
  ActivationViews& a = acts;
  const Carver<float> fwd({{&a.encoded, BT * C},
                           {&a.ln1, f32 * L * BT * C},
                           {&a.ln1_mean, L * BT},
                           {&a.ln1_rstd, L * BT},
                           {&a.qkv, L * BT * 3 * C},
                           {&a.atty, (f32 ? L : 1) * BT * C},
                           {&a.att, L * B * NH * T * T},
                           {&a.residual2, L * BT * C},
                           {&a.ln2, f32 * L * BT * C},
                           {&a.ln2_mean, L * BT},
                           {&a.ln2_rstd, L * BT},
                           {&a.fch, L * BT * 4 * C},
                           {&a.fch_gelu, f32 * L * BT * 4 * C},
                           {&a.residual3, L * BT * C},
                           {&a.lnf, f32 * BT * C},
                           {&a.lnf_mean, BT},
                           {&a.lnf_rstd, BT},
                           {&a.logits, BT * Vp},
                           {&a.lse, BT},
                           {&a.losses, BT}});
  forward_ = AlignedBuffer<float>(fwd.total());
  place_arena(forward_.data(), forward_.size() * sizeof(float));  // first touch: the kernels
  fwd.carve(forward_.data());

  if (precision == Precision::kBf16) {
    Bf16ActivationViews& h = acts_bf16;
    const Carver<bf16> half({{&h.ln1, L * BT * C},
                             {&h.atty, L * BT * C},
                             {&h.ln2, L * BT * C},
                             {&h.fch_gelu, L * BT * 4 * C},
                             {&h.lnf, BT * C}});
    forward_bf16_ = AlignedBuffer<bf16>(half.total());
    place_arena(forward_bf16_.data(), forward_bf16_.size() * sizeof(bf16));
    half.carve(forward_bf16_.data());
  }

  ActivationGradViews& g = grads;
  const Carver<float> bwd({{&g.dresidual, BT * C},
                           {&g.dln, BT * C},
                           {&g.datty, BT * C},
                           {&g.dqkv, BT * 3 * C},
                           {&g.dfch, BT * 4 * C},
                           {&g.dscores, B * NH * T}});
  backward_ = AlignedBuffer<float>(bwd.total());
  place_arena(backward_.data(), backward_.size() * sizeof(float));
  bwd.carve(backward_.data());
}

}  // namespace llmcpu
