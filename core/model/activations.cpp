#include "core/model/activations.h"

#include <utility>
#include <vector>

#include "core/runtime/numa_memory.h"

namespace llmcpu {

namespace {

// Lays out views back to back in one buffer, each rounded up to 64 bytes.
template <typename E>
class Carver {
 public:
  void add(E** slot, size_t n) {
    views_.emplace_back(slot, n);
    total_ += round_up(n);
  }
  // Allocates the buffer, places its pages (first touch: the kernels) and points the views into it.
  void carve(AlignedBuffer<E>* buffer) const {
    if (total_ == 0) return;
    *buffer = AlignedBuffer<E>(total_);
    place_arena(buffer->data(), total_ * sizeof(E));
    size_t offset = 0;
    for (auto& [slot, n] : views_) {
      *slot = buffer->data() + offset;
      offset += round_up(n);
    }
  }

 private:
  static constexpr size_t kPerLine = 64 / sizeof(E);
  static size_t round_up(size_t n) { return (n + kPerLine - 1) / kPerLine * kPerLine; }
  std::vector<std::pair<E**, size_t>> views_;
  size_t total_ = 0;
};

// The forward views of one precision: fp32 tensors into `f32`, the GEMM inputs into `gemm` (the
// same carver when G is float).
template <typename G>
void lay_out(ActivationViews<G>& a, const ModelConfig& c, int B, int T, Carver<float>& f32,
             Carver<G>& gemm) {
  const size_t L = c.num_layers, NH = c.num_heads, C = c.channels, Vp = c.padded_vocab_size;
  const size_t BT = (size_t)B * T;
  a.L = c.num_layers;
  a.BT = BT;
  a.C = C;
  a.att_size = B * NH * T * T;
  f32.add(&a.encoded, BT * C);
  gemm.add(&a.ln1, L * BT * C);
  f32.add(&a.ln1_mean, L * BT);
  f32.add(&a.ln1_rstd, L * BT);
  f32.add(&a.qkv, L * BT * 3 * C);
  gemm.add(&a.atty, L * BT * C);
  f32.add(&a.att, L * a.att_size);
  f32.add(&a.residual2, L * BT * C);
  gemm.add(&a.ln2, L * BT * C);
  f32.add(&a.ln2_mean, L * BT);
  f32.add(&a.ln2_rstd, L * BT);
  f32.add(&a.fch, L * BT * 4 * C);
  gemm.add(&a.fch_gelu, L * BT * 4 * C);
  f32.add(&a.residual3, L * BT * C);
  gemm.add(&a.lnf, BT * C);
  f32.add(&a.lnf_mean, BT);
  f32.add(&a.lnf_rstd, BT);
  f32.add(&a.logits, BT * Vp);
  f32.add(&a.lse, BT);
  f32.add(&a.losses, BT);
}

}  // namespace

ActivationArena::ActivationArena(const ModelConfig& c, int B, int T, Precision precision)
    : B_(B), T_(T) {
  Carver<float> fwd;
  if (precision == Precision::kBf16) {
    Carver<bf16> half;
    lay_out(acts_bf16, c, B, T, fwd, half);
    half.carve(&forward_bf16_);
  } else {
    lay_out(acts, c, B, T, fwd, fwd);
  }
  fwd.carve(&forward_);

  const size_t BT = (size_t)B * T, C = c.channels;
  ActivationGradViews& g = grads;
  Carver<float> bwd;
  bwd.add(&g.dresidual, BT * C);
  bwd.add(&g.dln, BT * C);
  bwd.add(&g.datty, BT * C);
  bwd.add(&g.dqkv, BT * 3 * C);
  bwd.add(&g.dfch, BT * 4 * C);
  bwd.add(&g.dscores, (size_t)B * c.num_heads * T);
  bwd.carve(&backward_);
}

}  // namespace llmcpu
