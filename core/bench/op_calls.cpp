// The prepared calls of op_calls.h: inputs filled in parallel from a hash of the index, then the
// kernel the executor would call on them.
#include "core/bench/op_calls.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/bench/op_inputs.h"
#include "core/util/aligned_buffer.h"

namespace llmcpu::bench {

Prepare matmul_forward_call(const OpKernels& x, size_t N, int IC, int OC, bool bias, bool round) {
  return [x, N, IC, OC, bias, round] {
    auto in = std::make_shared<Inputs>();
    float* out = in->f32(N * OC);
    const float* b = bias ? in->f32(OC) : nullptr;
    if (!x.bf16) {
      const float *inp = in->f32(N * IC), *w = in->f32(size_t(OC) * IC);
      return owning(in, [&k = x.k, out, inp, w, b, N, IC, OC] {
        k.matmul_forward(out, inp, w, b, N, IC, OC);
      });
    }
    const bf16 *inp = in->b16(N * IC), *w = in->b16(size_t(OC) * IC);
    bf16* stored = round ? in->b16(N * OC) : nullptr;
    return owning(in, [&h = x.h, out, inp, w, b, stored, N, IC, OC] {
      if (stored && h.matmul_forward_bf16) return h.matmul_forward_bf16(stored, inp, w, b, N, IC, OC);
      h.matmul_forward(out, inp, w, b, N, IC, OC);
      if (stored) h.to_bf16(stored, out, N * size_t(OC));
    });
  };
}

Prepare matmul_backward_call(const OpKernels& x, size_t N, int IC, int OC, bool bias,
                             bool with_dinp, bool with_dweight) {
  return [x, N, IC, OC, bias, with_dinp, with_dweight] {
    auto in = std::make_shared<Inputs>();
    float* dinp = with_dinp ? in->f32(N * IC) : nullptr;
    float* dw = with_dweight ? in->f32(size_t(OC) * IC) : nullptr;
    float* db = bias ? in->f32(OC) : nullptr;
    const float* dout = in->f32(N * OC);
    if (!x.bf16) {
      const float *inp = in->f32(N * IC), *w = in->f32(size_t(OC) * IC);
      return owning(in, [&k = x.k, dinp, dw, db, dout, inp, w, N, IC, OC] {
        k.matmul_backward(dinp, dw, db, dout, inp, w, N, IC, OC);
      });
    }
    const bf16 *inp = in->b16(N * IC), *w = in->b16(size_t(OC) * IC);
    return owning(in, [&h = x.h, dinp, dw, db, dout, inp, w, N, IC, OC] {
      h.matmul_backward(dinp, dw, db, dout, inp, w, N, IC, OC);
    });
  };
}

Prepare lora_rank_update_call(const OpKernels& x, size_t N, int r, int cols, bool bf16_out) {
  return [x, N, r, cols, bf16_out] {
    auto in = std::make_shared<Inputs>();
    const float *u = in->f32(N * r), *w = in->f32(size_t(r) * cols);
    if (bf16_out) {
      bf16* out = in->b16(N * cols);
      return owning(in, [&h = x.h, out, u, w, N, r, cols] {
        h.lora_rank_update(out, size_t(cols), u, size_t(r), w, N, r, cols, 2.0f);
      });
    }
    float* out = in->f32(N * cols);
    return owning(in, [&k = x.k, out, u, w, N, r, cols] {
      k.lora_rank_update(out, size_t(cols), u, size_t(r), w, N, r, cols, 2.0f);
    });
  };
}

Prepare lora_up_backward_call(const OpKernels& x, size_t N, int cols, int r) {
  return [x, N, cols, r] {
    auto in = std::make_shared<Inputs>();
    const float *d = in->f32(N * cols), *b = in->f32(size_t(cols) * r), *u = in->f32(N * r);
    float *gB = in->f32(N * r), *db = in->f32(size_t(cols) * r);
    return owning(in, [&k = x.k, gB, db, d, b, u, N, cols, r] {
      k.lora_project(gB, size_t(r), d, size_t(cols), b, N, cols, r, 2.0f);
      k.lora_outer_accumulate(db, d, size_t(cols), u, size_t(r), N, cols, r, 2.0f);
    });
  };
}

Prepare encoder_forward_call(const OpKernels& x, int B, int T, int C, int V, int Vp,
                             bool positions) {
  return [x, B, T, C, V, Vp, positions] {
    auto in = std::make_shared<Inputs>();
    const size_t BT = size_t(B) * T;
    float* out = in->f32(BT * C);
    const int* tok = in->tokens(BT, V);
    const float* wte = in->f32(size_t(Vp) * C);
    const float* wpe = positions ? in->f32(size_t(T) * C) : nullptr;
    return owning(in, [&k = x.k, out, tok, wte, wpe, B, T, C] {
      k.encoder_forward(out, tok, wte, wpe, B, T, C);
    });
  };
}

Prepare encoder_backward_call(const OpKernels& x, int B, int T, int C, int V, int Vp,
                              bool positions) {
  return [x, B, T, C, V, Vp, positions] {
    auto in = std::make_shared<Inputs>();
    const size_t BT = size_t(B) * T;
    float* dwte = in->f32(size_t(Vp) * C);
    float* dwpe = positions ? in->f32(size_t(T) * C) : nullptr;
    const float* dout = in->f32(BT * C);
    const int* tok = in->tokens(BT, V);
    return owning(in, [&k = x.k, dwte, dwpe, dout, tok, B, T, C] {
      k.encoder_backward(dwte, dwpe, dout, tok, B, T, C);
    });
  };
}

namespace {

// A layernorm's inputs, its statistics and its weights, in the order both passes fill them.
struct LnInputs {
  const float *inp, *w, *b;
  float *mean, *rstd;
};
LnInputs ln_inputs(Inputs& in, size_t N, int C) {
  return {in.f32(N * C), in.f32(C), in.f32(C), in.f32(N), in.f32(N, 0.5f, 1.5f)};
}

}  // namespace

Prepare layernorm_forward_call(const OpKernels& x, size_t N, int C) {
  return [x, N, C] {
    auto in = std::make_shared<Inputs>();
    const LnInputs s = ln_inputs(*in, N, C);
    if (x.bf16) {
      bf16* out = in->b16(N * C);
      return owning(in, [&h = x.h, out, s, N, C] {
        h.layernorm_forward(out, s.mean, s.rstd, s.inp, s.w, s.b, N, C);
      });
    }
    float* out = in->f32(N * C);
    return owning(in, [&k = x.k, out, s, N, C] {
      k.layernorm_forward(out, s.mean, s.rstd, s.inp, s.w, s.b, N, C);
    });
  };
}

Prepare layernorm_apply_call(const OpKernels& x, size_t N, int C) {
  return [x, N, C] {
    auto in = std::make_shared<Inputs>();
    const LnInputs s = ln_inputs(*in, N, C);
    if (x.bf16) {
      bf16* out = in->b16(N * C);
      return owning(in, [&h = x.h, out, s, N, C] {
        h.layernorm_apply(out, s.inp, s.mean, s.rstd, s.w, s.b, N, C);
      });
    }
    float* out = in->f32(N * C);
    return owning(in, [&k = x.k, out, s, N, C] {
      k.layernorm_apply(out, s.inp, s.mean, s.rstd, s.w, s.b, N, C);
    });
  };
}

Prepare layernorm_backward_call(const OpKernels& x, size_t N, int C) {
  return [x, N, C] {
    auto in = std::make_shared<Inputs>();
    const LnInputs s = ln_inputs(*in, N, C);
    float *dinp = in->f32(N * C), *dw = in->f32(C), *db = in->f32(C);
    const float* dout = in->f32(N * C);
    return owning(in, [&k = x.k, dinp, dw, db, dout, s, N, C] {
      k.layernorm_backward(dinp, dw, db, dout, s.inp, s.w, s.mean, s.rstd, N, C);
    });
  };
}

namespace {

// Attention's inputs for both passes (qkv, and the forward's out and lse, computed) and the
// backward's dqkv and dout, in the element type G of its q, k, v.
template <class G>
struct AttentionInputs {
  float *lse, *dqkv, *dout;
  G *qkv, *out;
};
template <class G, class Table>
AttentionInputs<G> attention_inputs(Inputs& in, const Table& t, int B, int T, int NH, int NKV,
                                    int D, const AttentionOptions& opt) {
  const size_t BT = size_t(B) * T, QKV = BT * (NH + 2 * NKV) * D, A = BT * NH * D;
  AttentionInputs<G> r{in.f32(size_t(B) * NH * T), in.f32(QKV), in.f32(A), nullptr, nullptr};
  if constexpr (std::is_same_v<G, bf16>) {
    r.qkv = in.b16(QKV), r.out = in.b16(A);
  } else {
    r.qkv = in.f32(QKV), r.out = in.f32(A);
  }
  // The backward's out, lse.
  t.flash_attention_forward(r.out, r.lse, r.qkv, B, T, NH, NKV, D, opt);
  return r;
}

}  // namespace

Prepare attention_forward_call(const OpKernels& x, int B, int T, int NH, int NKV, int D,
                               const AttentionOptions& opt) {
  return [x, B, T, NH, NKV, D, opt] {
    auto in = std::make_shared<Inputs>();
    if (x.bf16) {
      const auto s = attention_inputs<bf16>(*in, x.h, B, T, NH, NKV, D, opt);
      return owning(in, [&h = x.h, s, B, T, NH, NKV, D, opt] {
        h.flash_attention_forward(s.out, s.lse, s.qkv, B, T, NH, NKV, D, opt);
      });
    }
    const auto s = attention_inputs<float>(*in, x.k, B, T, NH, NKV, D, opt);
    return owning(in, [&k = x.k, s, B, T, NH, NKV, D, opt] {
      k.flash_attention_forward(s.out, s.lse, s.qkv, B, T, NH, NKV, D, opt);
    });
  };
}

Prepare attention_backward_call(const OpKernels& x, int B, int T, int NH, int NKV, int D,
                                const AttentionOptions& opt) {
  return [x, B, T, NH, NKV, D, opt] {
    auto in = std::make_shared<Inputs>();
    if (x.bf16) {
      const auto s = attention_inputs<bf16>(*in, x.h, B, T, NH, NKV, D, opt);
      return owning(in, [&h = x.h, s, B, T, NH, NKV, D, opt] {
        h.flash_attention_backward(s.dqkv, s.dout, s.out, s.qkv, s.lse, B, T, NH, NKV, D, opt);
      });
    }
    const auto s = attention_inputs<float>(*in, x.k, B, T, NH, NKV, D, opt);
    return owning(in, [&k = x.k, s, B, T, NH, NKV, D, opt] {
      k.flash_attention_backward(s.dqkv, s.dout, s.out, s.qkv, s.lse, B, T, NH, NKV, D, opt);
    });
  };
}

Prepare residual_call(const OpKernels& x, size_t N) {
  return [x, N] {
    auto in = std::make_shared<Inputs>();
    float* out = in->f32(N);
    const float *a = in->f32(N), *b = in->f32(N);
    return owning(in, [&k = x.k, out, a, b, N] { k.residual_forward(out, a, b, N); });
  };
}

namespace {

// GELU's buffers for both passes: dinp and dout (fp32), then its input and output in G.
template <class G>
struct GeluInputs {
  float *dinp, *dout;
  G *inp, *out;
};
template <class G>
GeluInputs<G> gelu_inputs(Inputs& in, size_t N) {
  GeluInputs<G> r{in.f32(N), in.f32(N), nullptr, nullptr};
  if constexpr (std::is_same_v<G, bf16>) {
    r.inp = in.b16(N), r.out = in.b16(N);
  } else {
    r.inp = in.f32(N), r.out = in.f32(N);
  }
  return r;
}

}  // namespace

Prepare gelu_forward_call(const OpKernels& x, size_t N) {
  return [x, N] {
    auto in = std::make_shared<Inputs>();
    if (x.bf16) {
      const auto s = gelu_inputs<bf16>(*in, N);
      return owning(in, [&h = x.h, s, N] { h.gelu_forward_bf16(s.out, s.inp, N); });
    }
    const auto s = gelu_inputs<float>(*in, N);
    return owning(in, [&k = x.k, s, N] { k.gelu_forward(s.out, s.inp, N); });
  };
}

Prepare gelu_backward_call(const OpKernels& x, size_t N) {
  return [x, N] {
    auto in = std::make_shared<Inputs>();
    if (x.bf16) {
      const auto s = gelu_inputs<bf16>(*in, N);
      return owning(in, [&h = x.h, s, N] { h.gelu_backward(s.dinp, s.inp, s.dout, N); });
    }
    const auto s = gelu_inputs<float>(*in, N);
    return owning(in, [&k = x.k, s, N] { k.gelu_backward(s.dinp, s.inp, s.dout, N); });
  };
}

namespace {

// The logits, losses and log-sum-exps of one chunk, after a forward call (the backward's lse).
struct XentInputs {
  float *logits, *losses, *lse;
  const int* targets;
};
XentInputs xent_inputs(Inputs& in, const KernelTable& k, size_t rows, int V, int Vp) {
  XentInputs r{in.f32(rows * Vp, -4.0f, 4.0f), in.f32(rows), in.f32(rows), in.tokens(rows, V)};
  k.softmax_xent_forward(r.losses, r.lse, r.logits, r.targets, rows, V, Vp);
  return r;
}

}  // namespace

Prepare softmax_xent_forward_call(const OpKernels& x, size_t rows, int V, int Vp) {
  return [x, rows, V, Vp] {
    auto in = std::make_shared<Inputs>();
    const XentInputs s = xent_inputs(*in, x.k, rows, V, Vp);
    return owning(in, [&k = x.k, s, rows, V, Vp] {
      k.softmax_xent_forward(s.losses, s.lse, s.logits, s.targets, rows, V, Vp);
    });
  };
}

Prepare softmax_xent_backward_call(const OpKernels& x, size_t rows, int V, int Vp) {
  return [x, rows, V, Vp] {
    auto in = std::make_shared<Inputs>();
    const XentInputs s = xent_inputs(*in, x.k, rows, V, Vp);
    // In place, as the model turns a chunk's logits into their gradient.
    const float dloss = 1.0f / float(rows);
    return owning(in, [&k = x.k, s, dloss, rows, V, Vp] {
      k.softmax_xent_backward(s.logits, s.lse, s.targets, dloss, rows, V, Vp);
    });
  };
}

Prepare gradient_norm_call(const OpKernels& x, size_t P) {
  return [x, P] {
    auto in = std::make_shared<Inputs>();
    const float* grad = in->f32(P, -1e-2f, 1e-2f);
    return owning(in, [&k = x.k, grad, P] {
      volatile double norm = k.sum_squares(grad, P);  // kept: the result is the op's output
      (void)norm;
    });
  };
}

Prepare adamw_call(const OpKernels& x, size_t P) {
  return [x, P] {
    auto in = std::make_shared<Inputs>();
    float *param = in->f32(P), *m = in->f32(P), *v = in->f32(P, 0.0f, 1e-4f);
    float* grad = in->f32(P, -1e-2f, 1e-2f);
    // Clipped and cleared, as in the trainer's step (the gradients are zero after the first call:
    // the pass reads and writes the same bytes whatever they hold).
    const AdamWStep step{1e-4, 0.9, 0.999, 1e-8, 0.1, 10, 0.5f, true};
    if (x.bf16) {
      bf16* copy = in->b16(P);
      return owning(in, [&h = x.h, param, copy, m, v, grad, P, step] {
        h.adamw_update(param, copy, m, v, grad, P, step);
      });
    }
    return owning(
        in, [&k = x.k, param, m, v, grad, P, step] { k.adamw_update(param, m, v, grad, P, step); });
  };
}

}  // namespace llmcpu::bench
