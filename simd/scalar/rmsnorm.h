// RMSNorm over the channel dimension, forward and backward (scalar reference), as Hugging Face's
// LlamaRMSNorm computes it with its statistics in fp32. No mean is subtracted and there is no bias:
//   ms = (1/C) sum_c x_c^2,  rstd = 1 / sqrt(ms + eps),  y_c = (x_c * rstd) * w_c
// Backward, with n_c = x_c * rstd and g_c = w_c * dy_c:
//   dx_c += rstd * (g_c - n_c * mean(g * n))
//   dw_c += sum over rows of n_c * dy_c
// rstd is kept per row for the backward pass. eps comes from the model's config (rms_norm_eps).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "simd/scalar/common.h"

namespace llmcpu::scalar {

template <typename F>
void rmsnorm_forward(F* out,           // (N,C)
                     F* rstd,          // (N)
                     const F* inp,     // (N,C)
                     const F* weight,  // (C)
                     size_t N, int C, F eps) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const F* x = inp + r * C;
    const F s = F(1) / std::sqrt(dot(x, x, size_t(C)) / F(C) + eps);
    F* y = out + r * C;
    for (int c = 0; c < C; ++c) y[c] = x[c] * s * weight[c];
    rstd[r] = s;
  }
}

// The forward's output from its saved rstd (recomputation): the same expression, the same bits.
template <typename F>
void rmsnorm_apply(F* out, const F* inp, const F* rstd,  // (N,C), (N,C), (N)
                   const F* weight, size_t N, int C) {   // (C)
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const F* x = inp + r * C;
    const F s = rstd[r];
    F* y = out + r * C;
    for (int c = 0; c < C; ++c) y[c] = x[c] * s * weight[c];
  }
}

template <typename F>
void rmsnorm_backward(F* dinp,          // (N,C) accumulated into (+=)
                      F* dweight,       // (C) accumulated into (+=)
                      const F* dout,    // (N,C)
                      const F* inp,     // (N,C)
                      const F* weight,  // (C)
                      const F* rstd,    // (N)
                      size_t N, int C) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const F* x = inp + r * C;
    const F* dy = dout + r * C;
    const F s = rstd[r];
    F acc_gn[kLanes] = {};
    for (int c = 0; c < C; ++c) acc_gn[c % kLanes] += weight[c] * dy[c] * (x[c] * s);
    const F gn_mean = combine_lanes(acc_gn) / F(C);
    F* dx = dinp + r * C;
    for (int c = 0; c < C; ++c) dx[c] += s * (weight[c] * dy[c] - x[c] * s * gn_mean);
  }
  // The weight gradient: each thread owns a slice of channels and walks the rows in order.
  constexpr int kSlice = 64;
  const int slices = (C + kSlice - 1) / kSlice;
#pragma omp parallel for schedule(static)
  for (int sl = 0; sl < slices; ++sl) {
    const int c0 = sl * kSlice, c1 = std::min(C, c0 + kSlice);
    for (size_t r = 0; r < N; ++r) {
      const F* x = inp + r * C;
      const F* dy = dout + r * C;
      for (int c = c0; c < c1; ++c) dweight[c] += x[c] * rstd[r] * dy[c];
    }
  }
}

}  // namespace llmcpu::scalar
