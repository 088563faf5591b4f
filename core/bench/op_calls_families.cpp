// The prepared calls of the ops later families add (op_calls.h): the per-head RMSNorm of q and k
// (Qwen3, Gemma 3), the scale of the embedding and its gradient (Gemma) and the soft-cap (Gemma 2),
// on the tables the executors call (bf16: the bf16 table's storage entries). GeGLU is SwiGLU's
// call (gated_forward_call).
#include <memory>

#include "core/bench/op_calls.h"
#include "core/bench/op_inputs.h"

namespace llmcpu::bench {

Prepare head_rmsnorm_forward_call(const OpKernels& x, size_t N, int NH, int NKV, int D,
                                  size_t row_stride) {
  return [x, N, NH, NKV, D, row_stride] {
    auto in = std::make_shared<Inputs>();
    const size_t heads = size_t(NH + NKV);
    float* saved = in->f32(N * heads * D);
    float* rstd = in->f32(N * heads);
    const float *wq = in->f32(size_t(D), 0.5f, 1.5f), *wk = in->f32(size_t(D), 0.5f, 1.5f);
    if (x.bf16) {
      bf16* rows = in->b16(N * row_stride);
      return owning(in, [&h = x.h, rows, saved, rstd, wq, wk, N, NH, NKV, D, row_stride] {
        h.head_rmsnorm_forward(rows, saved, rstd, wq, wk, N, NH, NKV, D, row_stride, 1e-6f, 0);
      });
    }
    float* rows = in->f32(N * row_stride);
    return owning(in, [&k = x.k, rows, saved, rstd, wq, wk, N, NH, NKV, D, row_stride] {
      k.head_rmsnorm_forward(rows, saved, rstd, wq, wk, N, NH, NKV, D, row_stride, 1e-6f, 0);
    });
  };
}

Prepare head_rmsnorm_backward_call(const OpKernels& x, size_t N, int NH, int NKV, int D,
                                   size_t row_stride) {
  return [x, N, NH, NKV, D, row_stride] {
    auto in = std::make_shared<Inputs>();
    const size_t heads = size_t(NH + NKV);
    float* rows = in->f32(N * row_stride);
    const float* saved = in->f32(N * heads * D);
    const float* rstd = in->f32(N * heads, 0.5f, 2.0f);
    const float *wq = in->f32(size_t(D), 0.5f, 1.5f), *wk = in->f32(size_t(D), 0.5f, 1.5f);
    float *dwq = in->f32(size_t(D)), *dwk = in->f32(size_t(D));
    return owning(in, [&k = x.k, rows, dwq, dwk, saved, rstd, wq, wk, N, NH, NKV, D, row_stride] {
      k.head_rmsnorm_backward(rows, dwq, dwk, saved, rstd, wq, wk, N, NH, NKV, D, row_stride, 0);
    });
  };
}

Prepare scale_call(const OpKernels& x, size_t N) {
  return [x, N] {
    auto in = std::make_shared<Inputs>();
    float* v = in->f32(N);
    return owning(in, [&k = x.k, v, N] { k.scale(v, 1.0f, N); });
  };
}

Prepare softcap_call(const OpKernels& x, size_t N, bool backward) {
  return [x, N, backward] {
    auto in = std::make_shared<Inputs>();
    float* v = in->f32(N, -8.0f, 8.0f);
    if (!backward) return owning(in, [&k = x.k, v, N] { k.softcap_forward(v, N, 30.0f); });
    const float* capped = in->f32(N, -20.0f, 20.0f);
    return owning(in, [&k = x.k, v, capped, N] { k.softcap_backward(v, capped, N, 30.0f); });
  };
}

}  // namespace llmcpu::bench
