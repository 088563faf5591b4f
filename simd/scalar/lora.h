// LoRA's low-rank passes (scalar reference), on a block of `cols` columns of rows `ld_*` apart:
//   lora_rank_update       out[n,c] += scale * sum_{k<r} u[n,k] w[k,c]     w (r, cols)
//   lora_project           out[n,k]  = scale * sum_{c<cols} d[n,c] b[c,k]   b (cols, r)
//   lora_outer_accumulate  acc[c,k] += scale * sum_{n<N} d[n,c] u[n,k]     acc (cols, r)
// Each sum in index order in one accumulator of type F, then multiplied by scale and added (or
// stored) once: the order kernels.h states for every table. The first two split rows over threads,
// the third columns: every element has one owner. No blocking: a reference, not a path (the
// vectorized tables block for the caches).
#pragma once

#include <cstddef>

namespace llmcpu::scalar {

template <typename F>
void lora_rank_update(F* out,         // (N, ld_out), columns [0, cols) updated
                      size_t ld_out,  //
                      const F* u,     // (N, ld_u), columns [0, r) read
                      size_t ld_u,    //
                      const F* w,     // (r, cols)
                      size_t N, int r, int cols, F scale) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    F* y = out + n * ld_out;
    const F* un = u + n * ld_u;
    for (int c = 0; c < cols; ++c) {
      F s = 0;
      for (int k = 0; k < r; ++k) s += un[k] * w[size_t(k) * cols + c];
      y[c] += scale * s;
    }
  }
}

template <typename F>
void lora_project(F* out,         // (N, ld_out), columns [0, r) overwritten
                  size_t ld_out,  //
                  const F* d,     // (N, ld_d), columns [0, cols) read
                  size_t ld_d,    //
                  const F* b,     // (cols, r)
                  size_t N, int cols, int r, F scale) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    const F* dn = d + n * ld_d;
    for (int k = 0; k < r; ++k) {
      F s = 0;
      for (int c = 0; c < cols; ++c) s += dn[c] * b[size_t(c) * r + k];
      out[n * ld_out + k] = scale * s;
    }
  }
}

template <typename F>
void lora_outer_accumulate(F* acc,       // (cols, r) accumulated
                           const F* d,   // (N, ld_d), columns [0, cols) read
                           size_t ld_d,  //
                           const F* u,   // (N, ld_u), columns [0, r) read
                           size_t ld_u,  //
                           size_t N, int cols, int r, F scale) {
#pragma omp parallel for schedule(static)
  for (int c = 0; c < cols; ++c) {
    for (int k = 0; k < r; ++k) {
      F s = 0;
      for (size_t n = 0; n < N; ++n) s += d[n * ld_d + c] * u[n * ld_u + k];
      acc[size_t(c) * r + k] += scale * s;
    }
  }
}

}  // namespace llmcpu::scalar
