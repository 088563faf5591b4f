// GELU in GPT-2's tanh form, forward and backward (scalar reference).
//   gelu(x)  = 0.5 x (1 + tanh(u)),   u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
#pragma once

#include <cmath>
#include <cstddef>

namespace llmcpu::scalar {

inline constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2/pi)
inline constexpr double kGeluCube = 0.044715;

// gelu(x) and gelu'(x) of one element (GeGLU, geglu.h, shares them).
template <typename F>
inline F gelu_one(F x) {
  const F s = F(kGeluScale), k = F(kGeluCube);
  return F(0.5) * x * (F(1) + std::tanh(s * (x + k * x * x * x)));
}
template <typename F>
inline F gelu_grad_one(F x) {
  const F s = F(kGeluScale), k = F(kGeluCube);
  const F th = std::tanh(s * (x + k * x * x * x));
  return F(0.5) * (F(1) + th) + F(0.5) * x * (F(1) - th * th) * s * (F(1) + F(3) * k * x * x);
}

template <typename F>
void gelu_forward(F* out, const F* inp, size_t N) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < N; ++i) out[i] = gelu_one(inp[i]);
}

// dinp = gelu'(inp) * dout (overwritten; dinp may alias dout).
template <typename F>
void gelu_backward(F* dinp, const F* inp, const F* dout, size_t N) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < N; ++i) dinp[i] = gelu_grad_one(inp[i]) * dout[i];
}

}  // namespace llmcpu::scalar
