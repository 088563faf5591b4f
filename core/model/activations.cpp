#include "core/model/activations.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/runtime/numa_memory.h"
#include "simd/error.h"

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
  size_t bytes() const { return total_ * sizeof(E); }
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

// The forward views of one precision: fp32 tensors into `f32`, the G tensors into `gemm` (the same
// carver when G is float), the head's logits into `head`.
template <typename G>
void lay_out(ActivationViews<G>& a, const ModelConfig& c, int B, int T,
             const ActivationOptions& o, Carver<float>& f32, Carver<G>& gemm,
             Carver<float>& head) {
  const size_t L = c.num_layers, NH = c.num_heads, C = c.channels, Vp = c.padded_vocab_size;
  const size_t BT = (size_t)B * T;
  // A recomputed tensor has one layer's buffer, shared by all layers; recomputed layers keep only
  // their outputs (residual3) for each.
  const bool layers = o.recompute == Recompute::kLayers;
  const size_t Lk = layers ? 1 : L;
  const size_t Lgelu = o.recompute == Recompute::kNone ? L : 1;
  const size_t Lln = o.recompute == Recompute::kAllPointwise || layers ? 1 : L;
  a.L = c.num_layers;
  a.BT = BT;
  a.C = C;
  a.NH = NH;
  a.QKV = c.qkv_width();
  a.A = c.attn_width();
  a.F = c.fc_width();
  a.H = c.hidden_size();
  const bool qk_norm = c.family().qk_norm;
  a.QK_heads = qk_norm ? size_t(c.num_heads + c.kv_heads()) : 0;
  a.QK = a.QK_heads * size_t(c.head_size());
  a.head_rows = head_chunk_rows(c, BT, o.keep_logits);
  a.keep_logits = o.keep_logits;
  a.recompute = o.recompute;
  f32.add(&a.encoded, BT * C);
  gemm.add(&a.ln1, Lln * BT * C);
  f32.add(&a.ln1_mean, Lk * BT);
  f32.add(&a.ln1_rstd, Lk * BT);
  gemm.add(&a.qkv, Lk * BT * a.QKV);
  gemm.add(&a.atty, Lk * BT * a.A);
  f32.add(&a.lse, Lk * BT * NH);
  if (qk_norm) {
    f32.add(&a.qk_saved, Lk * BT * a.QK);
    f32.add(&a.qk_rstd, Lk * BT * a.QK_heads);
  }
  if (c.family().post_norms) {
    f32.add(&a.attn_out, Lk * BT * C);
    f32.add(&a.attn_post_rstd, Lk * BT);
    f32.add(&a.mlp_out, Lk * BT * C);
    f32.add(&a.mlp_post_rstd, Lk * BT);
  }
  f32.add(&a.residual2, Lk * BT * C);
  gemm.add(&a.ln2, Lln * BT * C);
  f32.add(&a.ln2_mean, Lk * BT);
  f32.add(&a.ln2_rstd, Lk * BT);
  gemm.add(&a.fch, Lk * BT * a.F);
  gemm.add(&a.fch_gelu, Lgelu * BT * a.H);
  f32.add(&a.residual3, L * BT * C);
  gemm.add(&a.lnf, BT * C);
  f32.add(&a.lnf_mean, BT);
  f32.add(&a.lnf_rstd, BT);
  f32.add(&a.lse_head, BT);
  f32.add(&a.losses, BT);
  if (c.family().positions == PositionKind::kRope) {
    const size_t half = size_t(T) * (c.head_size() / 2);
    f32.add(&a.rope_cos, half);
    f32.add(&a.rope_sin, half);
    if (c.rope_local.head_dim > 0) {
      f32.add(&a.rope_cos_local, half);
      f32.add(&a.rope_sin_local, half);
    }
  }
  head.add(&a.logits, (o.keep_logits ? BT : a.head_rows) * Vp);
  // Soft-capped logits: their gradient needs the capped values, so it has a buffer of its own.
  if (o.keep_logits || c.final_softcap > 0) head.add(&a.dlogits, a.head_rows * Vp);
}

void lay_out_grads(ActivationGradViews& g, const ModelConfig& c, int B, int T,
                   Carver<float>& bwd) {
  const size_t BT = (size_t)B * T, C = c.channels;
  bwd.add(&g.dresidual, BT * C);
  bwd.add(&g.dln, BT * C);
  bwd.add(&g.datty, BT * c.attn_width());
  bwd.add(&g.dqkv, BT * c.qkv_width());
  bwd.add(&g.dfch, BT * std::max(c.fc_width(), c.qkv_width()));
  if (c.family().gated_mlp()) bwd.add(&g.dact, BT * c.hidden_size());
  if (c.pad_token_id >= 0) bwd.add(&g.pad_row, C);
}

}  // namespace

size_t head_chunk_rows(const ModelConfig& c, size_t BT, bool keep_logits) {
  if (keep_logits) return BT;
  // A chunk's logits take at most this. Each chunk reads and writes the head's whole fp32
  // gradient (150 MB at GPT-2's vocabulary) and packs its weight, so chunks of about 800 rows
  // rather than 333 save 2.5% of the head's time at T=1024 (bench/RESULTS.md).
  constexpr size_t kHeadChunkBytes = size_t(192) << 20;
  const size_t most = std::clamp<size_t>(
      kHeadChunkBytes / (size_t(c.padded_vocab_size) * sizeof(float)), 1, std::max<size_t>(BT, 1));
  const size_t chunks = (BT + most - 1) / most;  // as few as fit, of equal rows (the last shorter)
  return std::max<size_t>(1, (BT + chunks - 1) / std::max<size_t>(chunks, 1));
}

Recompute parse_recompute(std::string_view word, std::string_view flag) {
  // llm.c's -r 0, 1, 2 mean the same.
  if (word == "none" || word == "0") return Recompute::kNone;
  if (word == "gelu" || word == "1") return Recompute::kGelu;
  if (word == "all-pointwise" || word == "2") return Recompute::kAllPointwise;
  if (word == "layers") return Recompute::kLayers;
  throw UsageError(std::string(flag) + " '" + std::string(word) +
                   "' is not a recomputation; expected none, gelu, all-pointwise or layers (or "
                   "llm.c's 0, 1, 2)");
}

const char* recompute_name(Recompute recompute) {
  switch (recompute) {
    case Recompute::kGelu:
      return "gelu";
    case Recompute::kAllPointwise:
      return "all-pointwise";
    case Recompute::kLayers:
      return "layers";
    default:
      return "none";
  }
}

ActivationArena::ActivationArena(const ModelConfig& c, int B, int T, const ActivationOptions& o)
    : B_(B), T_(T), options_(o) {
  Carver<float> fwd, head, bwd;
  if (o.precision == Precision::kBf16) {
    Carver<bf16> half;
    lay_out(acts_bf16, c, B, T, o, fwd, half, head);
    half.carve(&forward_bf16_);
  } else {
    lay_out(acts, c, B, T, o, fwd, fwd, head);
  }
  fwd.carve(&forward_);
  if (c.family().positions == PositionKind::kRope) {
    std::vector<float> cos, sin;
    const auto fill = [&](const RopeConfig& rope, float* cos_a, float* cos_b, float* sin_a,
                          float* sin_b) {
      rope_tables(rope, T, cos, sin);
      for (float* table : {cos_a, cos_b}) {
        if (table) std::copy(cos.begin(), cos.end(), table);
      }
      for (float* table : {sin_a, sin_b}) {
        if (table) std::copy(sin.begin(), sin.end(), table);
      }
    };
    fill(c.rope, acts.rope_cos, acts_bf16.rope_cos, acts.rope_sin, acts_bf16.rope_sin);
    if (c.rope_local.head_dim > 0) {
      fill(c.rope_local, acts.rope_cos_local, acts_bf16.rope_cos_local, acts.rope_sin_local,
           acts_bf16.rope_sin_local);
    }
  }
  head.carve(&head_);
  lay_out_grads(grads, c, B, T, bwd);
  bwd.carve(&backward_);
  if (!c.family().gated_mlp()) grads.dact = grads.dfch;
  if (!o.keep_logits && c.final_softcap == 0) {
    acts.dlogits = acts.logits, acts_bf16.dlogits = acts_bf16.logits;
  }
}

ActivationBytes ActivationArena::bytes(const ModelConfig& c, int B, int T,
                                       const ActivationOptions& o) {
  Carver<float> fwd, head, bwd;
  ActivationBytes r;
  if (o.precision == Precision::kBf16) {
    Carver<bf16> half;
    ActivationViews<bf16> a{};
    lay_out(a, c, B, T, o, fwd, half, head);
    r.forward = half.bytes();
  } else {
    ActivationViews<float> a{};
    lay_out(a, c, B, T, o, fwd, fwd, head);
  }
  ActivationGradViews g{};
  lay_out_grads(g, c, B, T, bwd);
  r.forward += fwd.bytes();
  r.head = head.bytes();
  r.backward = bwd.bytes();
  return r;
}

}  // namespace llmcpu
