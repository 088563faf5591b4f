// Soft-capping of the final logits (Gemma 2 and 3), forward and backward (scalar reference), as
// Hugging Face computes it: logits / cap, tanh, times cap.
//   y = cap * tanh(x / cap)
//   dx = dy * (1 - tanh^2(x / cap)) = dy * (1 - (y / cap)^2)
// The backward reads the capped values y (what the forward leaves in place), not x. Where
// |x| >> cap, tanh is 1 in fp32, y = +-cap and the gradient 0.
// Not here: the soft-cap of attention scores (attention_options.h), inside the attention kernels.
#pragma once

#include <cmath>
#include <cstddef>

namespace llmcpu::scalar {

template <typename F>
void softcap_forward(F* x, size_t N, F cap) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < N; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

// dx (N) holds dy and is overwritten with d(x); capped (N) the forward's output.
template <typename F>
void softcap_backward(F* dx, const F* capped, size_t N, F cap) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < N; ++i) {
    const F t = capped[i] / cap;
    dx[i] *= F(1) - t * t;
  }
}

}  // namespace llmcpu::scalar
