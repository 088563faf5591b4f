// GeGLU, the gate of the Gemma MLP, forward and backward (scalar reference): SwiGLU (swiglu.h) with
// GELU's tanh form (gelu.h, PyTorch's gelu(approximate='tanh')) in place of silu. Each input row is
// the output of one fused gate+up matmul, [gate (H) | up (H)]:
//   out = gelu(gate) * up
// Backward:
//   dgate = dout * up * gelu'(gate),  dup = dout * gelu(gate)
#pragma once

#include <cstddef>

#include "simd/scalar/gelu.h"

namespace llmcpu::scalar {

template <typename F>
void geglu_forward(F* out,        // (N,H)
                   const F* inp,  // (N,2H): [gate | up] per row
                   size_t N, int H) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const F* gate = inp + r * 2 * H;
    const F* up = gate + H;
    F* y = out + r * H;
    for (int h = 0; h < H; ++h) y[h] = gelu_one(gate[h]) * up[h];
  }
}

// dinp (N,2H) overwritten: [dgate | dup] per row.
template <typename F>
void geglu_backward(F* dinp, const F* dout, const F* inp,  // (N,2H), (N,H), (N,2H)
                    size_t N, int H) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const F* gate = inp + r * 2 * H;
    const F* up = gate + H;
    const F* dy = dout + r * H;
    F* dgate = dinp + r * 2 * H;
    F* dup = dgate + H;
    for (int h = 0; h < H; ++h) {
      dgate[h] = dy[h] * up[h] * gelu_grad_one(gate[h]);
      dup[h] = dy[h] * gelu_one(gate[h]);
    }
  }
}

}  // namespace llmcpu::scalar
