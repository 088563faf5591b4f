// Per-head RMSNorm of the query and key heads, in place in the qkv rows (scalar reference): Qwen3's
// q_norm / k_norm, and Gemma 3's with a weight offset of 1 (its RMSNorm scales by 1 + w). Each head
// of D values is normalized on its own, as Hugging Face's Qwen3RMSNorm / Gemma3RMSNorm compute it
// in fp32, with W_i = w_i + weight_offset (rounded once, as PyTorch's 1.0 + weight):
//   ms = (1/D) sum_i x_i^2,  rstd = 1 / sqrt(ms + eps),  y_i = (x_i * rstd) * W_i
// Backward, with n_i = x_i * rstd and g_i = W_i * dy_i (dy read from dx, then overwritten):
//   dx_i = rstd * (g_i - n_i * mean(g * n))
//   dw_i += sum over rows and the heads that use w of n_i * dy_i
// The heads: a row holds NH query heads (weight wq) then NKV key heads (weight wk), D apart from
// x + r * row_stride; what follows them in the row (the values) is not read or written. The input
// is kept in `saved`, contiguous (N, NH+NKV, D), and rstd (N, NH+NKV) for the backward pass.
// Not here: RoPE (applied to the normalized heads afterwards, rope.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "simd/scalar/common.h"

namespace llmcpu::scalar {

template <typename F>
void head_rmsnorm_forward(F* x,         // (N, row_stride): heads (NH+NKV, D) first, in place
                          F* saved,     // (N, NH+NKV, D) the input
                          F* rstd,      // (N, NH+NKV)
                          const F* wq,  // (D)
                          const F* wk,  // (D)
                          size_t N, int NH, int NKV, int D, size_t row_stride, F eps,
                          F weight_offset) {
  const size_t heads = size_t(NH + NKV), pairs = N * heads;
#pragma omp parallel for schedule(static)
  for (size_t j = 0; j < pairs; ++j) {
    const size_t h = j % heads;
    F* y = x + (j / heads) * row_stride + h * size_t(D);
    F* in = saved + j * size_t(D);
    for (int i = 0; i < D; ++i) in[i] = y[i];
    const F* w = int(h) < NH ? wq : wk;
    const F s = F(1) / std::sqrt(dot(in, in, size_t(D)) / F(D) + eps);
    for (int i = 0; i < D; ++i) y[i] = in[i] * s * (w[i] + weight_offset);
    rstd[j] = s;
  }
}

template <typename F>
void head_rmsnorm_backward(F* dx,           // (N, row_stride): dy in, d(input) out, heads only
                           F* dwq,          // (D) accumulated into (+=)
                           F* dwk,          // (D) accumulated into (+=)
                           const F* saved,  // (N, NH+NKV, D)
                           const F* rstd,   // (N, NH+NKV)
                           const F* wq,     // (D)
                           const F* wk,     // (D)
                           size_t N, int NH, int NKV, int D, size_t row_stride, F weight_offset) {
  const size_t heads = size_t(NH + NKV), pairs = N * heads;
  // The weight gradients first (dx still holds dy): each thread owns a slice of one weight's
  // channels and walks the rows and their heads in order.
  constexpr int kSlice = 16;
  const int slices = (D + kSlice - 1) / kSlice;
#pragma omp parallel for schedule(static)
  for (int sl = 0; sl < 2 * slices; ++sl) {
    const bool key = sl >= slices;
    F* dw = key ? dwk : dwq;
    const size_t h0 = key ? size_t(NH) : 0, h1 = key ? heads : size_t(NH);
    const int c0 = (sl % slices) * kSlice, c1 = std::min(D, c0 + kSlice);
    for (size_t r = 0; r < N; ++r) {
      for (size_t h = h0; h < h1; ++h) {
        const size_t j = r * heads + h;
        const F* in = saved + j * size_t(D);
        const F* dy = dx + r * row_stride + h * size_t(D);
        for (int c = c0; c < c1; ++c) dw[c] += in[c] * rstd[j] * dy[c];
      }
    }
  }
#pragma omp parallel for schedule(static)
  for (size_t j = 0; j < pairs; ++j) {
    const size_t h = j % heads;
    const F* in = saved + j * size_t(D);
    const F* w = int(h) < NH ? wq : wk;
    F* d = dx + (j / heads) * row_stride + h * size_t(D);
    const F s = rstd[j];
    F acc_gn[kLanes] = {};
    for (int c = 0; c < D; ++c) acc_gn[c % kLanes] += (w[c] + weight_offset) * d[c] * (in[c] * s);
    const F gn_mean = combine_lanes(acc_gn) / F(D);
    for (int c = 0; c < D; ++c) d[c] = s * ((w[c] + weight_offset) * d[c] - in[c] * s * gn_mean);
  }
}

}  // namespace llmcpu::scalar
