// Residual connection (scalar reference): out = a + b. out may alias a or b.
// Its backward is the identity on both inputs, so the model passes the gradient through in place.
#pragma once

#include <cstddef>

namespace llmcpu::scalar {

template <typename F>
void residual_forward(F* out, const F* a, const F* b, size_t N) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < N; ++i) out[i] = a[i] + b[i];
}

}  // namespace llmcpu::scalar
