// Fused softmax + cross-entropy over the first V of Vp logits per row (scalar reference).
// Forward, per row n with target y:
//   lse_n  = log sum_{v<V} exp(z_v)       (computed as m + log sum exp(z_v - m), m = max z)
//   loss_n = lse_n - z_y
// Backward with dloss = d(total)/d(loss_n), overwriting the logits in place:
//   dz_v = (exp(z_v - lse_n) - [v == y]) * dloss   for v < V,   dz_v = 0 for the padding V <= v < Vp.
// A row whose target is negative is not a target (a masked token, PyTorch's ignore_index): its
// loss and lse are 0, and its gradient row is all zero.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "simd/scalar/common.h"

namespace llmcpu::scalar {

template <typename F>
void softmax_xent_forward(F* losses,         // (N)
                          F* lse,            // (N) kept for the backward pass
                          const F* logits,   // (N,Vp)
                          const int* targets,  // (N)
                          size_t N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    const F* z = logits + n * Vp;
    if (targets[n] < 0) {
      losses[n] = lse[n] = 0;
      continue;
    }
    F m = z[0];
    for (int v = 1; v < V; ++v) m = std::max(m, z[v]);
    F acc[kLanes] = {};
    for (int v = 0; v < V; ++v) acc[v % kLanes] += std::exp(z[v] - m);
    lse[n] = m + std::log(combine_lanes(acc));
    losses[n] = lse[n] - z[targets[n]];
  }
}

template <typename F>
void softmax_xent_backward(F* logits,          // (N,Vp) in: logits, out: dlogits
                           const F* lse,       // (N)
                           const int* targets,  // (N)
                           F dloss, size_t N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    F* z = logits + n * Vp;
    if (targets[n] < 0) {
      std::fill(z, z + Vp, F(0));
      continue;
    }
    for (int v = 0; v < V; ++v) z[v] = std::exp(z[v] - lse[n]) * dloss;
    z[targets[n]] -= dloss;
    for (int v = V; v < Vp; ++v) z[v] = 0;
  }
}

}  // namespace llmcpu::scalar
