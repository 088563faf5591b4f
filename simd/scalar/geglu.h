// GeGLU, the gate of the Gemma MLP, forward and backward (scalar reference): SwiGLU (swiglu.h) with
// GELU's tanh form (gelu.h, PyTorch's gelu(approximate='tanh')) in place of silu. Each input row is
// the output of one fused gate+up matmul, [gate (H) | up (H)]:
//   out = gelu(gate) * up
// Backward:
//   dgate = dout * up * gelu'(gate),  dup = dout * gelu(gate)
#pragma once

#include <cstddef>

#include "simd/scalar/gated.h"
#include "simd/scalar/gelu.h"

namespace llmcpu::scalar {

template <typename F>
void geglu_forward(F* out, const F* inp, size_t N, int H) {  // (N,H), (N,2H)
  gated_forward(out, inp, N, H, [](F x) { return gelu_one(x); });
}

// dinp (N,2H) overwritten: [dgate | dup] per row.
template <typename F>
void geglu_backward(F* dinp, const F* dout, const F* inp,  // (N,2H), (N,H), (N,2H)
                    size_t N, int H) {
  gated_backward(dinp, dout, inp, N, H, [](F x, F& g, F& y) {
    g = gelu_grad_one(x);
    y = gelu_one(x);
  });
}

}  // namespace llmcpu::scalar
