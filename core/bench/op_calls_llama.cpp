// The prepared calls of the Llama family's ops (op_calls.h): RMSNorm, the rotary embedding and
// SwiGLU and GeGLU, on the tables the executors call (bf16: the bf16 table's storage entries).
#include <cmath>
#include <memory>

#include "core/bench/op_calls.h"
#include "core/bench/op_inputs.h"

namespace llmcpu::bench {
namespace {

// RMSNorm's input, weight and saved rstd (as a forward would leave it, within [0.5, 2)).
struct RmsInputs {
  const float *inp, *w;
  float* rstd;
};
RmsInputs rms_inputs(Inputs& in, size_t N, int C) {
  return {in.f32(N * size_t(C)), in.f32(size_t(C), 0.5f, 1.5f), in.f32(N, 0.5f, 2.0f)};
}

// Rotary tables of T positions: angles in [-pi, pi) (the kernel reads them, whatever they are).
struct RopeTables {
  const float *cos, *sin;
};
RopeTables rope_tables_of(Inputs& in, int T, int D) {
  const size_t n = size_t(T) * (D / 2);
  return {in.f32(n), in.f32(n)};
}

}  // namespace

Prepare rmsnorm_forward_call(const OpKernels& x, size_t N, int C) {
  return [x, N, C] {
    auto in = std::make_shared<Inputs>();
    const RmsInputs s = rms_inputs(*in, N, C);
    if (x.bf16) {
      bf16* out = in->b16(N * size_t(C));
      return owning(in, [&h = x.h, out, s, N, C] {
        h.rmsnorm_forward(out, s.rstd, s.inp, s.w, N, C, 1e-5f);
      });
    }
    float* out = in->f32(N * size_t(C));
    return owning(in, [&k = x.k, out, s, N, C] {
      k.rmsnorm_forward(out, s.rstd, s.inp, s.w, N, C, 1e-5f);
    });
  };
}

Prepare rmsnorm_apply_call(const OpKernels& x, size_t N, int C) {
  return [x, N, C] {
    auto in = std::make_shared<Inputs>();
    const RmsInputs s = rms_inputs(*in, N, C);
    if (x.bf16) {
      bf16* out = in->b16(N * size_t(C));
      return owning(in, [&h = x.h, out, s, N, C] { h.rmsnorm_apply(out, s.inp, s.rstd, s.w, N, C); });
    }
    float* out = in->f32(N * size_t(C));
    return owning(in, [&k = x.k, out, s, N, C] { k.rmsnorm_apply(out, s.inp, s.rstd, s.w, N, C); });
  };
}

Prepare rmsnorm_backward_call(const OpKernels& x, size_t N, int C) {
  return [x, N, C] {
    auto in = std::make_shared<Inputs>();
    const RmsInputs s = rms_inputs(*in, N, C);
    float *dinp = in->f32(N * size_t(C)), *dw = in->f32(size_t(C));
    const float* dout = in->f32(N * size_t(C));
    return owning(in, [&k = x.k, dinp, dw, dout, s, N, C] {
      k.rmsnorm_backward(dinp, dw, dout, s.inp, s.w, s.rstd, N, C);
    });
  };
}

Prepare rope_forward_call(const OpKernels& x, size_t N, int T, int heads, int D, size_t row_stride) {
  return [x, N, T, heads, D, row_stride] {
    auto in = std::make_shared<Inputs>();
    const RopeTables t = rope_tables_of(*in, T, D);
    if (x.bf16) {
      bf16* rows = in->b16(N * row_stride);
      return owning(in, [&h = x.h, rows, t, N, T, heads, D, row_stride] {
        h.rope_forward(rows, t.cos, t.sin, N, T, 0, heads, D, row_stride);
      });
    }
    float* rows = in->f32(N * row_stride);
    return owning(in, [&k = x.k, rows, t, N, T, heads, D, row_stride] {
      k.rope_forward(rows, t.cos, t.sin, N, T, 0, heads, D, row_stride);
    });
  };
}

Prepare rope_backward_call(const OpKernels& x, size_t N, int T, int heads, int D,
                           size_t row_stride) {
  return [x, N, T, heads, D, row_stride] {
    auto in = std::make_shared<Inputs>();
    const RopeTables t = rope_tables_of(*in, T, D);
    float* rows = in->f32(N * row_stride);
    return owning(in, [&k = x.k, rows, t, N, T, heads, D, row_stride] {
      k.rope_backward(rows, t.cos, t.sin, N, T, 0, heads, D, row_stride);
    });
  };
}

Prepare gated_forward_call(const OpKernels& x, size_t N, int H, bool gelu) {
  const auto f32 = gelu ? &KernelTable::geglu_forward : &KernelTable::swiglu_forward;
  const auto b16 = gelu ? &Bf16Kernels::geglu_forward : &Bf16Kernels::swiglu_forward;
  return [x, N, H, f32, b16] {
    auto in = std::make_shared<Inputs>();
    const size_t n = N * size_t(H);
    if (x.bf16) {
      const bf16* inp = in->b16(2 * n);
      bf16* out = in->b16(n);
      return owning(in, [f = x.h.*b16, out, inp, N, H] { f(out, inp, N, H); });
    }
    const float* inp = in->f32(2 * n, -4.0f, 4.0f);
    float* out = in->f32(n);
    return owning(in, [f = x.k.*f32, out, inp, N, H] { f(out, inp, N, H); });
  };
}

Prepare gated_backward_call(const OpKernels& x, size_t N, int H, bool gelu) {
  const auto f32 = gelu ? &KernelTable::geglu_backward : &KernelTable::swiglu_backward;
  const auto b16 = gelu ? &Bf16Kernels::geglu_backward : &Bf16Kernels::swiglu_backward;
  return [x, N, H, f32, b16] {
    auto in = std::make_shared<Inputs>();
    const size_t n = N * size_t(H);
    float* dinp = in->f32(2 * n);
    const float* dout = in->f32(n);
    if (x.bf16) {
      const bf16* inp = in->b16(2 * n);
      return owning(in, [f = x.h.*b16, dinp, dout, inp, N, H] { f(dinp, dout, inp, N, H); });
    }
    const float* inp = in->f32(2 * n, -4.0f, 4.0f);
    return owning(in, [f = x.k.*f32, dinp, dout, inp, N, H] { f(dinp, dout, inp, N, H); });
  };
}

}  // namespace llmcpu::bench
