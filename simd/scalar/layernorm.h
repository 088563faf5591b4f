// LayerNorm over the channel dimension, forward and backward (scalar reference).
//   mean = (1/C) sum_c x_c,  var = (1/C) sum_c (x_c - mean)^2,  rstd = 1 / sqrt(var + eps)
//   y_c  = (x_c - mean) * rstd * w_c + b_c
// Backward, with n_c = (x_c - mean) * rstd and g_c = w_c * dy_c:
//   dx_c += rstd * (g_c - mean(g) - n_c * mean(g * n))
//   dw_c += sum over rows of n_c * dy_c,   db_c += sum over rows of dy_c
// The statistics (mean, rstd) are kept per row for the backward pass. eps = 1e-5 as in GPT-2.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "simd/scalar/common.h"

namespace llmcpu::scalar {

inline constexpr double kLayerNormEps = 1e-5;

template <typename F>
void layernorm_forward(F* out,      // (N,C)
                       F* mean,     // (N)
                       F* rstd,     // (N)
                       const F* inp,  // (N,C)
                       const F* weight, const F* bias,  // (C)
                       size_t N, int C) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const F* x = inp + r * C;
    F acc[kLanes] = {};
    const F m = sum(x, C) / F(C);
    for (int c = 0; c < C; ++c) acc[c % kLanes] += (x[c] - m) * (x[c] - m);
    const F v = combine_lanes(acc) / F(C);
    const F s = F(1) / std::sqrt(v + F(kLayerNormEps));
    F* y = out + r * C;
    for (int c = 0; c < C; ++c) y[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[r] = m;
    rstd[r] = s;
  }
}

// The forward's output from its saved statistics (recomputation): the same expression, the same
// bits.
template <typename F>
void layernorm_apply(F* out, const F* inp, const F* mean, const F* rstd,  // (N,C), (N,C), (N), (N)
                     const F* weight, const F* bias, size_t N, int C) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const F* x = inp + r * C;
    const F m = mean[r], s = rstd[r];
    F* y = out + r * C;
    for (int c = 0; c < C; ++c) y[c] = (x[c] - m) * s * weight[c] + bias[c];
  }
}

template <typename F>
void layernorm_backward(F* dinp,        // (N,C) accumulated into (+=)
                        F* dweight, F* dbias,  // (C) accumulated into (+=)
                        const F* dout,  // (N,C)
                        const F* inp,   // (N,C)
                        const F* weight,  // (C)
                        const F* mean, const F* rstd,  // (N)
                        size_t N, int C) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const F* x = inp + r * C;
    const F* dy = dout + r * C;
    const F m = mean[r], s = rstd[r];
    F acc_g[kLanes] = {}, acc_gn[kLanes] = {};
    for (int c = 0; c < C; ++c) {
      const F n = (x[c] - m) * s;
      const F g = weight[c] * dy[c];
      acc_g[c % kLanes] += g;
      acc_gn[c % kLanes] += g * n;
    }
    const F g_mean = combine_lanes(acc_g) / F(C);
    const F gn_mean = combine_lanes(acc_gn) / F(C);
    F* dx = dinp + r * C;
    for (int c = 0; c < C; ++c) {
      const F n = (x[c] - m) * s;
      dx[c] += s * (weight[c] * dy[c] - g_mean - n * gn_mean);
    }
  }
  // Parameter gradients: each thread owns a slice of channels and walks the rows in order.
  constexpr int kSlice = 64;
  const int slices = (C + kSlice - 1) / kSlice;
#pragma omp parallel for schedule(static)
  for (int sl = 0; sl < slices; ++sl) {
    const int c0 = sl * kSlice, c1 = std::min(C, c0 + kSlice);
    for (size_t r = 0; r < N; ++r) {
      const F* x = inp + r * C;
      const F* dy = dout + r * C;
      for (int c = c0; c < c1; ++c) {
        dweight[c] += (x[c] - mean[r]) * rstd[r] * dy[c];
        dbias[c] += dy[c];
      }
    }
  }
}

}  // namespace llmcpu::scalar
