// Token + position embedding, forward and backward (scalar reference).
//   out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]
// Backward accumulates into the embedding gradients; tokens are trusted to be < Vp (the loaders
// check). Models without a position table (Llama: rotary positions in attention) pass wpe = null,
// then out[b,t,:] = wte[inp[b,t],:], and dwpe = null, then only dwte is accumulated.
#pragma once

#include <algorithm>

namespace llmcpu::scalar {

template <typename F>
void encoder_forward(F* out,          // (B,T,C)
                     const int* inp,  // (B,T)
                     const F* wte,    // (Vp,C)
                     const F* wpe,    // (maxT,C) or null
                     int B, int T, int C) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      F* o = out + ((size_t)b * T + t) * C;
      const F* e = wte + (size_t)inp[b * T + t] * C;
      if (!wpe) {
        for (int c = 0; c < C; ++c) o[c] = e[c];
        continue;
      }
      const F* p = wpe + (size_t)t * C;
      for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
    }
  }
}

// dwte[inp[b,t],:] += dout[b,t,:] (unless dwte is null); dwpe[t,:] += dout[b,t,:] (unless dwpe
// is null)
// Each thread owns a slice of channels and walks the tokens in order: deterministic, no atomics.
template <typename F>
void encoder_backward(F* dwte,         // (Vp,C) or null
                      F* dwpe,         // (maxT,C) or null
                      const F* dout,   // (B,T,C)
                      const int* inp,  // (B,T)
                      int B, int T, int C) {
  constexpr int kSlice = 64;
  const int slices = (C + kSlice - 1) / kSlice;
#pragma omp parallel for schedule(static)
  for (int s = 0; s < slices; ++s) {
    const int c0 = s * kSlice, c1 = std::min(C, c0 + kSlice);
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t < T; ++t) {
        const F* d = dout + ((size_t)b * T + t) * C;
        if (dwte) {
          F* de = dwte + (size_t)inp[b * T + t] * C;
          for (int c = c0; c < c1; ++c) de[c] += d[c];
        }
        if (!dwpe) continue;
        F* dp = dwpe + (size_t)t * C;
        for (int c = c0; c < c1; ++c) dp[c] += d[c];
      }
    }
  }
}

}  // namespace llmcpu::scalar
