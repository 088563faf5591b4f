// Fully connected layer in nn.Linear layout, forward and backward (scalar reference).
//   out[n,o] = bias[o] + sum_i inp[n,i] * weight[o,i]          (weight is (OC, C), bias may be null)
//   dinp[n,i]     = sum_o dout[n,o] * weight[o,i]              (overwritten)
//   dweight[o,i] += sum_n dout[n,o] * inp[n,i]                 (accumulated; skipped when null)
//   dbias[o]     += sum_n dout[n,o]                            (accumulated; skipped when null)
// Work is split over rows (forward, dinp) or output channels (dweight, dbias), so every element has
// one owner and a fixed summation order whatever the thread count. Small register tiles (4 rows or
// 4 output channels at once) keep it usable as a reference on GPT-2 124M shapes; the fast GEMMs
// live in the vectorized targets.
#pragma once

#include <algorithm>
#include <cstddef>

#include "simd/scalar/common.h"

namespace llmcpu::scalar {

inline constexpr int kMatmulTile = 4;

template <typename F>
void matmul_forward(F* out,           // (N,OC)
                    const F* inp,     // (N,C)
                    const F* weight,  // (OC,C)
                    const F* bias,    // (OC) or null
                    size_t N, int C, int OC) {
  const size_t tiles = (N + kMatmulTile - 1) / kMatmulTile;
#pragma omp parallel for schedule(static)
  for (size_t tile = 0; tile < tiles; ++tile) {
    const size_t n0 = tile * kMatmulTile, n1 = std::min(N, n0 + kMatmulTile);
    for (int o = 0; o < OC; ++o) {
      const F* w = weight + (size_t)o * C;
      const F b = bias ? bias[o] : F(0);
      for (size_t n = n0; n < n1; ++n) out[n * OC + o] = b + dot(inp + n * C, w, C);
    }
  }
}

template <typename F>
void matmul_backward(F* dinp,           // (N,C) overwritten; may be null
                     F* dweight,        // (OC,C) accumulated; may be null (a frozen weight)
                     F* dbias,          // (OC) accumulated; may be null
                     const F* dout,     // (N,OC)
                     const F* inp,      // (N,C)
                     const F* weight,   // (OC,C)
                     size_t N, int C, int OC) {
  if (dinp) {
    const size_t tiles = (N + kMatmulTile - 1) / kMatmulTile;
#pragma omp parallel for schedule(static)
    for (size_t tile = 0; tile < tiles; ++tile) {
      const size_t n0 = tile * kMatmulTile, n1 = std::min(N, n0 + kMatmulTile);
      for (size_t n = n0; n < n1; ++n) std::fill(dinp + n * C, dinp + (n + 1) * C, F(0));
      for (int o = 0; o < OC; ++o) {
        const F* w = weight + (size_t)o * C;
        for (size_t n = n0; n < n1; ++n) {
          const F d = dout[n * OC + o];
          F* dx = dinp + n * C;
          for (int i = 0; i < C; ++i) dx[i] += d * w[i];
        }
      }
    }
  }
  const int otiles = (OC + kMatmulTile - 1) / kMatmulTile;
#pragma omp parallel for schedule(static)
  for (int tile = 0; tile < otiles; ++tile) {
    const int o0 = tile * kMatmulTile, o1 = std::min(OC, o0 + kMatmulTile);
    for (size_t n = 0; dweight && n < N; ++n) {
      const F* x = inp + n * C;
      for (int o = o0; o < o1; ++o) {
        const F d = dout[n * OC + o];
        F* dw = dweight + (size_t)o * C;
        for (int i = 0; i < C; ++i) dw[i] += d * x[i];
      }
    }
    if (dbias) {
      for (int o = o0; o < o1; ++o) {
        F acc = 0;
        for (size_t n = 0; n < N; ++n) acc += dout[n * OC + o];
        dbias[o] += acc;
      }
    }
  }
}

}  // namespace llmcpu::scalar
