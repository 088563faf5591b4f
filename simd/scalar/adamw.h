// AdamW update with decoupled weight decay, step for step as torch.optim.AdamW (scalar reference).
// With t the 1-based step count:
//   p <- p * (1 - lr * wd)
//   m <- beta1 m + (1 - beta1) g;      v <- beta2 v + (1 - beta2) g^2
//   p <- p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// Weight decay applies to every element, as it does when PyTorch's AdamW gets model.parameters().
// Two things the step may do with the gradient besides reading it: multiply it by grad_scale first
// (the clipping factor: the product is the one a separate pass scaling the gradients in place would
// have stored), and set it to zero once read (clear_grad: the next step's zeroing, in this pass).
#pragma once

#include <cmath>
#include <cstddef>

namespace llmcpu::scalar {

struct AdamWStep {
  double lr;
  double beta1;
  double beta2;
  double eps;
  double weight_decay;
  long long t;              // 1-based step count, for the bias corrections
  float grad_scale = 1.0f;  // g <- g * grad_scale before the update; 1: none
  bool clear_grad = false;  // grad[i] = 0 once read
};

template <typename F>
void adamw_update(F* param, F* m, F* v, F* grad, size_t N, const AdamWStep& s) {
  const F decay = F(1.0 - s.lr * s.weight_decay);
  const F b1 = F(s.beta1), b2 = F(s.beta2);
  const F step_size = F(s.lr / (1.0 - std::pow(s.beta1, double(s.t))));
  const F bc2_sqrt = F(std::sqrt(1.0 - std::pow(s.beta2, double(s.t))));
  const F eps = F(s.eps);
  const F scale = F(s.grad_scale);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < N; ++i) {
    const F g = grad[i] * scale;  // exact where scale = 1
    if (s.clear_grad) grad[i] = F(0);
    const F p = param[i] * decay;
    const F mi = m[i] + (g - m[i]) * (F(1) - b1);  // lerp, as torch's exp_avg.lerp_(grad, 1 - beta1)
    const F vi = v[i] * b2 + (F(1) - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] = p - step_size * mi / (std::sqrt(vi) / bc2_sqrt + eps);
  }
}

}  // namespace llmcpu::scalar
