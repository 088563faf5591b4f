// SwiGLU, the gate of the Llama MLP, forward and backward (scalar reference). Each input row is the
// output of one fused gate+up matmul, [gate (H) | up (H)]:
//   out = silu(gate) * up,  silu(x) = x * sigmoid(x)
// Backward, with s = sigmoid(gate):
//   dgate = dout * up * silu'(gate),  silu'(x) = s (1 + x (1 - s))
//   dup   = dout * silu(gate)
// The sigmoid is computed from e = exp(-|x|), which never overflows:
//   r = 1 / (1 + e);  sigmoid(x) = r for x >= 0, e r for x < 0;  1 - sigmoid(x) = the other one.
// So 1 - s is never formed by a subtraction that cancels, and every target computes the same
// expressions (the vectorized ones with their own exp).
#pragma once

#include <cmath>
#include <cstddef>

#include "simd/scalar/gated.h"

namespace llmcpu::scalar {

// sigmoid(x) into s and sigmoid(-x) = 1 - sigmoid(x) into sm.
template <typename F>
inline void sigmoid_pair(F x, F& s, F& sm) {
  const F e = std::exp(-std::fabs(x));
  const F r = F(1) / (F(1) + e);
  const F er = e * r;
  s = x >= F(0) ? r : er;
  sm = x >= F(0) ? er : r;
}

template <typename F>
void swiglu_forward(F* out, const F* inp, size_t N, int H) {  // (N,H), (N,2H)
  gated_forward(out, inp, N, H, [](F x) {
    F s, sm;
    sigmoid_pair(x, s, sm);
    return x * s;
  });
}

// dinp (N,2H) overwritten: [dgate | dup] per row.
template <typename F>
void swiglu_backward(F* dinp, const F* dout, const F* inp,  // (N,2H), (N,H), (N,2H)
                     size_t N, int H) {
  gated_backward(dinp, dout, inp, N, H, [](F x, F& g, F& y) {
    F s, sm;
    sigmoid_pair(x, s, sm);
    g = s * (F(1) + x * sm);
    y = x * s;
  });
}

}  // namespace llmcpu::scalar
