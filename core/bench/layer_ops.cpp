// The ops of a GPT-2 training step with their costs and their calls (layer_ops.h).
// Cost model, per call (FLOPs: 2 per multiply-accumulate; bytes: every tensor read or written once,
// 4 per fp32 value, 2 per bf16 value, an accumulated (+=) output read and written):
//   matmul (N, C) x (OC, C)^T:  forward 2 N C OC, backward 4 N C OC (dinp and dweight)
//   causal attention:           forward 4 hs per (query, key) pair with key <= query (q.k and p v),
//                               backward 10 hs per pair (s recomputed, dv, dp, dq, dk)
//   elementwise and rows:       layernorm 8 (forward) / 14 (backward) per element, GELU 10 / 20,
//                               residual 1, softmax + cross-entropy 3 per logit, AdamW 13 per
//                               parameter, the embedding 1 / 2 per element
// The matmuls against the GEMM peak; everything else against the fp32 peak, and the memory roof.
#include "core/bench/layer_ops.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "core/model/activations.h"
#include "core/model/parameters.h"
#include "core/util/aligned_buffer.h"

namespace llmcpu::bench {
namespace {

// Input buffers of one op, filled in parallel from a hash of the index: values in [lo, hi).
class Inputs {
 public:
  float* f32(size_t n, float lo = -1.0f, float hi = 1.0f) {
    f_.emplace_back(std::max<size_t>(n, 1));
    float* p = f_.back().data();
    const uint64_t salt = ++salt_;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) p[i] = lo + (hi - lo) * unit(i, salt);
    return p;
  }
  bf16* b16(size_t n) {
    h_.emplace_back(std::max<size_t>(n, 1));
    bf16* p = h_.back().data();
    const uint64_t salt = ++salt_;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) p[i] = float_to_bf16(2.0f * unit(i, salt) - 1.0f);
    return p;
  }
  int* tokens(size_t n, int V) {
    i_.emplace_back(std::max<size_t>(n, 1));
    int* p = i_.back().data();
    const uint64_t salt = ++salt_;
    for (size_t i = 0; i < n; ++i) p[i] = std::min(V - 1, int(unit(i, salt) * float(V)));
    return p;
  }

 private:
  // splitmix64 of (i, salt), top 24 bits as a float in [0, 1).
  static float unit(uint64_t i, uint64_t salt) {
    uint64_t z = i + salt * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return float(z >> 40) * 0x1.0p-24f;
  }
  std::vector<AlignedBuffer<float>> f_;
  std::vector<AlignedBuffer<bf16>> h_;
  std::vector<AlignedBuffer<int>> i_;
  uint64_t salt_ = 0;
};

// A prepared call: the inputs it owns and the call on them.
std::function<void()> owning(std::shared_ptr<Inputs> in, std::function<void()> call) {
  return [in = std::move(in), call = std::move(call)] { call(); };
}

std::string dims(std::initializer_list<std::pair<const char*, size_t>> d) {
  std::string s;
  for (const auto& [name, value] : d) {
    if (!s.empty()) s += ' ';
    s.append(name).append("=").append(std::to_string(value));
  }
  return s;
}

}  // namespace

std::vector<LayerOp> layer_ops(const ModelConfig& config, int B, int T, Precision precision,
                               const KernelTable& k, const Bf16Kernels& h) {
  const bool b16 = precision == Precision::kBf16;
  const size_t L = config.num_layers, C = config.channels, NH = config.num_heads;
  const size_t V = config.vocab_size, Vp = config.padded_vocab_size, hs = C / NH;
  const size_t BT = size_t(B) * T, rows = head_chunk_rows(config, BT);
  const int chunks = int((BT + rows - 1) / rows);
  const double A = b16 ? 2 : 4;  // bytes of a GEMM-input activation or weight
  const double pairs = double(B) * NH * double(T) * (T + 1) / 2;
  const int Vi = int(V), Vpi = int(Vp), Ci = int(C), NHi = int(NH);
  std::vector<LayerOp> ops;

  // One matmul of the model, forward and backward: out (N, OC) = inp (N, IC) w^T + bias. `stored`
  // is the byte size of its stored output (bf16 qkv and fch are rounded from an fp32 scratch).
  struct Gemm {
    const char* name;
    size_t N;
    int IC, OC, per_step;
    bool bias;
    double stored;
  };
  auto add_gemm_forward = [&](const Gemm& g) {
    const size_t N = g.N, IC = g.IC, OC = g.OC;
    LayerOp op{g.name, "forward", dims({{"N", N}, {"C", IC}, {"OC", OC}}), g.per_step,
               2.0 * N * IC * OC, A * (N * IC + OC * IC) + g.stored * N * OC + (g.bias ? 4.0 * OC : 0),
               b16 ? Roof::kBf16 : Roof::kFp32, {}};
    const bool round = b16 && g.stored == 2;
    op.prepare = [&k, &h, g, b16, round] {
      auto in = std::make_shared<Inputs>();
      const size_t N = g.N, IC = g.IC, OC = g.OC;
      float* out = in->f32(N * OC);
      const float* bias = g.bias ? in->f32(OC) : nullptr;
      if (!b16) {
        const float *x = in->f32(N * IC), *w = in->f32(OC * IC);
        return owning(in, [&k, g, out, x, w, bias] { k.matmul_forward(out, x, w, bias, g.N, g.IC, g.OC); });
      }
      const bf16 *x = in->b16(N * IC), *w = in->b16(OC * IC);
      bf16* stored = round ? in->b16(N * OC) : nullptr;
      return owning(in, [&h, g, out, x, w, bias, stored] {
        h.matmul_forward(out, x, w, bias, g.N, g.IC, g.OC);
        if (stored) h.to_bf16(stored, out, g.N * size_t(g.OC));
      });
    };
    ops.push_back(std::move(op));
  };
  auto add_gemm_backward = [&](const Gemm& g) {
    const size_t N = g.N, IC = g.IC, OC = g.OC;
    LayerOp op{g.name, "backward", dims({{"N", N}, {"C", IC}, {"OC", OC}}), g.per_step,
               4.0 * N * IC * OC, 4.0 * N * OC + A * (N * IC + OC * IC) + 4.0 * N * IC +
                                      8.0 * OC * IC + (g.bias ? 8.0 * OC : 0),
               b16 ? Roof::kBf16 : Roof::kFp32, {}};
    op.prepare = [&k, &h, g, b16] {
      auto in = std::make_shared<Inputs>();
      const size_t N = g.N, IC = g.IC, OC = g.OC;
      float *dinp = in->f32(N * IC), *dw = in->f32(OC * IC);
      float* db = g.bias ? in->f32(OC) : nullptr;
      const float* dout = in->f32(N * OC);
      if (!b16) {
        const float *x = in->f32(N * IC), *w = in->f32(OC * IC);
        return owning(in, [&k, g, dinp, dw, db, dout, x, w] {
          k.matmul_backward(dinp, dw, db, dout, x, w, g.N, g.IC, g.OC);
        });
      }
      const bf16 *x = in->b16(N * IC), *w = in->b16(OC * IC);
      return owning(in, [&h, g, dinp, dw, db, dout, x, w] {
        h.matmul_backward(dinp, dw, db, dout, x, w, g.N, g.IC, g.OC);
      });
    };
    ops.push_back(std::move(op));
  };
  const int Li = int(L);
  const Gemm qkv{"matmul qkv", BT, Ci, 3 * Ci, Li, true, A};
  const Gemm attproj{"matmul attention proj", BT, Ci, Ci, Li, true, 4};
  const Gemm fc{"matmul fc", BT, Ci, 4 * Ci, Li, true, A};
  const Gemm fcproj{"matmul fc proj", BT, 4 * Ci, Ci, Li, true, 4};
  const Gemm lm_head{"matmul lm head", rows, Ci, Vpi, chunks, false, 4};

  auto encoder_forward = [&] {
    LayerOp op{"encoder", "forward", dims({{"B", B}, {"T", T}, {"C", C}}), 1, double(BT * C),
               4.0 * (BT + 2 * BT * C + T * C), Roof::kFp32, {}};
    op.prepare = [&k, B, T, Ci, Vi, Vpi] {
      auto in = std::make_shared<Inputs>();
      const size_t BT = size_t(B) * T;
      float* out = in->f32(BT * Ci);
      const int* tok = in->tokens(BT, Vi);
      const float *wte = in->f32(size_t(Vpi) * Ci), *wpe = in->f32(size_t(T) * Ci);
      return owning(in, [&k, out, tok, wte, wpe, B, T, Ci] { k.encoder_forward(out, tok, wte, wpe, B, T, Ci); });
    };
    ops.push_back(std::move(op));
  };
  auto layernorm = [&](const char* pass) {
    const bool fwd = std::string(pass) == "forward";
    LayerOp op{"layernorm", pass, dims({{"N", BT}, {"C", C}}), 2 * Li + 1,
               (fwd ? 8.0 : 14.0) * BT * C,
               fwd ? (4.0 + A) * BT * C + 8.0 * BT + 8.0 * C : 16.0 * BT * C + 8.0 * BT + 20.0 * C,
               Roof::kFp32, {}};
    op.prepare = [&k, &h, fwd, b16, BT, Ci] {
      auto in = std::make_shared<Inputs>();
      const size_t NC = BT * Ci;
      const float *x = in->f32(NC), *w = in->f32(Ci), *b = in->f32(Ci);
      float *mean = in->f32(BT), *rstd = in->f32(BT, 0.5f, 1.5f);
      if (fwd && b16) {
        bf16* out = in->b16(NC);
        return owning(in, [&h, out, mean, rstd, x, w, b, BT, Ci] { h.layernorm_forward(out, mean, rstd, x, w, b, BT, Ci); });
      }
      if (fwd) {
        float* out = in->f32(NC);
        return owning(in, [&k, out, mean, rstd, x, w, b, BT, Ci] { k.layernorm_forward(out, mean, rstd, x, w, b, BT, Ci); });
      }
      float *dinp = in->f32(NC), *dw = in->f32(Ci), *db = in->f32(Ci);
      const float* dout = in->f32(NC);
      return owning(in, [&k, dinp, dw, db, dout, x, w, mean, rstd, BT, Ci] {
        k.layernorm_backward(dinp, dw, db, dout, x, w, mean, rstd, BT, Ci);
      });
    };
    ops.push_back(std::move(op));
  };
  auto attention = [&](const char* pass) {
    const bool fwd = std::string(pass) == "forward";
    LayerOp op{"attention", pass, dims({{"B", B}, {"T", T}, {"NH", NH}, {"hs", hs}}), Li,
               (fwd ? 4.0 : 10.0) * pairs * hs,
               fwd ? A * 4 * BT * C + 4.0 * B * NH * T
                   : 4.0 * BT * C + A * 4 * BT * C + 4.0 * B * NH * T + 4.0 * 3 * BT * C,
               Roof::kFp32, {}};
    op.prepare = [&k, &h, fwd, b16, B, T, Ci, NHi] {
      auto in = std::make_shared<Inputs>();
      const size_t NC = size_t(B) * T * Ci;
      float* lse = in->f32(size_t(B) * NHi * T);
      float *dqkv = in->f32(3 * NC), *dout = in->f32(NC);
      if (b16) {
        const bf16* qkv = in->b16(3 * NC);
        bf16* out = in->b16(NC);
        h.flash_attention_forward(out, lse, qkv, B, T, Ci, NHi);  // the backward's out and lse
        if (fwd) return owning(in, [&h, out, lse, qkv, B, T, Ci, NHi] { h.flash_attention_forward(out, lse, qkv, B, T, Ci, NHi); });
        return owning(in, [&h, dqkv, dout, out, qkv, lse, B, T, Ci, NHi] {
          h.flash_attention_backward(dqkv, dout, out, qkv, lse, B, T, Ci, NHi);
        });
      }
      const float* qkv = in->f32(3 * NC);
      float* out = in->f32(NC);
      k.flash_attention_forward(out, lse, qkv, B, T, Ci, NHi);
      if (fwd) return owning(in, [&k, out, lse, qkv, B, T, Ci, NHi] { k.flash_attention_forward(out, lse, qkv, B, T, Ci, NHi); });
      return owning(in, [&k, dqkv, dout, out, qkv, lse, B, T, Ci, NHi] {
        k.flash_attention_backward(dqkv, dout, out, qkv, lse, B, T, Ci, NHi);
      });
    };
    ops.push_back(std::move(op));
  };
  auto residual = [&] {
    const size_t N = BT * C;
    LayerOp op{"residual", "forward", dims({{"N", N}}), 2 * Li, double(N), 12.0 * N, Roof::kFp32, {}};
    op.prepare = [&k, N] {
      auto in = std::make_shared<Inputs>();
      float* out = in->f32(N);
      const float *a = in->f32(N), *b = in->f32(N);
      return owning(in, [&k, out, a, b, N] { k.residual_forward(out, a, b, N); });
    };
    ops.push_back(std::move(op));
  };
  auto gelu = [&](const char* pass) {
    const bool fwd = std::string(pass) == "forward";
    const size_t N = BT * 4 * C;
    LayerOp op{"gelu", pass, dims({{"N", N}}), Li, (fwd ? 10.0 : 20.0) * N,
               fwd ? 2 * A * N : (A + 8.0) * N, Roof::kFp32, {}};
    op.prepare = [&k, &h, fwd, b16, N] {
      auto in = std::make_shared<Inputs>();
      float *dinp = in->f32(N), *dout = in->f32(N);
      if (b16) {
        const bf16* x = in->b16(N);
        bf16* out = in->b16(N);
        if (fwd) return owning(in, [&h, out, x, N] { h.gelu_forward_bf16(out, x, N); });
        return owning(in, [&h, dinp, x, dout, N] { h.gelu_backward(dinp, x, dout, N); });
      }
      const float* x = in->f32(N);
      float* out = in->f32(N);
      if (fwd) return owning(in, [&k, out, x, N] { k.gelu_forward(out, x, N); });
      return owning(in, [&k, dinp, x, dout, N] { k.gelu_backward(dinp, x, dout, N); });
    };
    ops.push_back(std::move(op));
  };
  auto softmax_xent = [&](const char* pass) {
    const bool fwd = std::string(pass) == "forward";
    LayerOp op{"softmax + cross-entropy", pass, dims({{"N", rows}, {"V", V}, {"Vp", Vp}}), chunks,
               3.0 * rows * V, (fwd ? 4.0 : 8.0) * rows * Vp + 12.0 * rows, Roof::kFp32, {}};
    op.prepare = [&k, fwd, rows, Vi, Vpi] {
      auto in = std::make_shared<Inputs>();
      float *logits = in->f32(rows * Vpi, -4.0f, 4.0f), *losses = in->f32(rows), *lse = in->f32(rows);
      const int* targets = in->tokens(rows, Vi);
      k.softmax_xent_forward(losses, lse, logits, targets, rows, Vi, Vpi);  // the backward's lse
      if (fwd) return owning(in, [&k, losses, lse, logits, targets, rows, Vi, Vpi] { k.softmax_xent_forward(losses, lse, logits, targets, rows, Vi, Vpi); });
      // In place, as the model turns a chunk's logits into their gradient.
      const float dloss = 1.0f / float(rows);
      return owning(in, [&k, logits, lse, targets, dloss, rows, Vi, Vpi] {
        k.softmax_xent_backward(logits, lse, targets, dloss, rows, Vi, Vpi);
      });
    };
    ops.push_back(std::move(op));
  };
  auto encoder_backward = [&] {
    LayerOp op{"encoder", "backward", dims({{"B", B}, {"T", T}, {"C", C}}), 1, 2.0 * BT * C,
               4.0 * (BT + 3 * BT * C + 2 * T * C), Roof::kFp32, {}};
    op.prepare = [&k, B, T, Ci, Vi, Vpi] {
      auto in = std::make_shared<Inputs>();
      const size_t BT = size_t(B) * T;
      float *dwte = in->f32(size_t(Vpi) * Ci), *dwpe = in->f32(size_t(T) * Ci);
      const float* dout = in->f32(BT * Ci);
      const int* tok = in->tokens(BT, Vi);
      return owning(in, [&k, dwte, dwpe, dout, tok, B, T, Ci] { k.encoder_backward(dwte, dwpe, dout, tok, B, T, Ci); });
    };
    ops.push_back(std::move(op));
  };
  auto adamw = [&] {
    const size_t P = ParameterLayout(config).total();
    LayerOp op{"adamw", "update", dims({{"params", P}}), 1, 13.0 * P, (28.0 + (b16 ? 2 : 0)) * P,
               Roof::kFp32, {}};
    op.prepare = [&k, &h, b16, P] {
      auto in = std::make_shared<Inputs>();
      float *param = in->f32(P), *m = in->f32(P), *v = in->f32(P, 0.0f, 1e-4f);
      const float* grad = in->f32(P, -1e-2f, 1e-2f);
      bf16* copy = b16 ? in->b16(P) : nullptr;
      const AdamWStep step{1e-4, 0.9, 0.999, 1e-8, 0.1, 10};
      if (b16) return owning(in, [&h, param, copy, m, v, grad, P, step] { h.adamw_update(param, copy, m, v, grad, P, step); });
      return owning(in, [&k, param, m, v, grad, P, step] { k.adamw_update(param, m, v, grad, P, step); });
    };
    ops.push_back(std::move(op));
  };

  // Forward, in the order of a step (core/model/transformer.h and Gpt2's head).
  encoder_forward();
  layernorm("forward");
  add_gemm_forward(qkv);
  attention("forward");
  add_gemm_forward(attproj);
  residual();
  add_gemm_forward(fc);
  gelu("forward");
  add_gemm_forward(fcproj);
  add_gemm_forward(lm_head);
  softmax_xent("forward");
  // Backward, in reverse.
  softmax_xent("backward");
  add_gemm_backward(lm_head);
  layernorm("backward");
  add_gemm_backward(fcproj);
  gelu("backward");
  add_gemm_backward(fc);
  add_gemm_backward(attproj);
  attention("backward");
  add_gemm_backward(qkv);
  encoder_backward();
  adamw();
  return ops;
}

}  // namespace llmcpu::bench
