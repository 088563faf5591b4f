// The gated MLP units over rows [gate (H) | up (H)] (SwiGLU, GeGLU), scalar reference: the row
// loops, with the activation a parameter:
//   out = act(gate) up,  dgate = (dout up) act'(gate),  dup = dout act(gate)
// `value(x)` gives act(x); `grad_and_value(x, g, y)` gives act'(x) into g and act(x) into y.
#pragma once

#include <cstddef>

namespace llmcpu::scalar {

template <typename F, typename Value>
void gated_forward(F* out,        // (N,H)
                   const F* inp,  // (N,2H): [gate | up] per row
                   size_t N, int H, const Value& value) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const F* gate = inp + r * 2 * H;
    const F* up = gate + H;
    F* y = out + r * H;
    for (int h = 0; h < H; ++h) y[h] = value(gate[h]) * up[h];
  }
}

// dinp (N,2H) overwritten: [dgate | dup] per row.
template <typename F, typename GradAndValue>
void gated_backward(F* dinp, const F* dout, const F* inp,  // (N,2H), (N,H), (N,2H)
                    size_t N, int H, const GradAndValue& grad_and_value) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const F* gate = inp + r * 2 * H;
    const F* up = gate + H;
    const F* dy = dout + r * H;
    F* dgate = dinp + r * 2 * H;
    F* dup = dgate + H;
    for (int h = 0; h < H; ++h) {
      F g, y;
      grad_and_value(gate[h], g, y);
      dgate[h] = dy[h] * up[h] * g;
      dup[h] = dy[h] * y;
    }
  }
}

}  // namespace llmcpu::scalar
