// AdamW update, vectorized (the math of simd/scalar/adamw.h, step for step as torch.optim.AdamW):
//   p <- p (1 - lr wd);  m <- m + (g - m)(1 - beta1);  v <- beta2 v + (1 - beta2) g^2
//   p <- p - (lr / (1 - beta1^t)) m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// Memory-bound: four floats read and three written per parameter (four with clear_grad: the
// gradient's line is in cache by then, so the zeroing costs about 3% of the pass where a separate
// one cost a third of it). The gradient is scaled by grad_scale (one multiply, as the reference).
// sqrt and the division are the IEEE ones, so each element matches the reference to within the
// rounding of the FMAs.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/adamw.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include <cmath>

#include "hwy/highway.h"
#include "simd/bf16.h"
#include "simd/hwy/bf16-inl.h"
#include "simd/hwy/common-inl.h"
#include "simd/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace {

// param_bf16: when not null, also receives the updated parameters rounded to bf16 (the working copy
// of the bf16 path), written while they are still in registers.
void AdamWUpdateTo(float* param, bf16* param_bf16, float* m, float* v, float* grad, size_t N,
                   const AdamWStep& s) {
  const float decay = float(1.0 - s.lr * s.weight_decay);
  const float b1 = float(s.beta1), b2 = float(s.beta2);
  const float step_size = float(s.lr / (1.0 - std::pow(s.beta1, double(s.t))));
  const float bc2_sqrt = float(std::sqrt(1.0 - std::pow(s.beta2, double(s.t))));
  const float eps = float(s.eps), scale = s.grad_scale;
  const bool clear = s.clear_grad;
  ParallelChunks(N, [&](size_t begin, size_t end) {
    const DF d;
    const VF vdecay = hn::Set(d, decay), one_b1 = hn::Set(d, 1.0f - b1);
    const VF vb2 = hn::Set(d, b2), one_b2 = hn::Set(d, 1.0f - b2);
    const VF vstep = hn::Set(d, step_size), vbc2 = hn::Set(d, bc2_sqrt), veps = hn::Set(d, eps);
    const VF vscale = hn::Set(d, scale);
    const size_t L = hn::Lanes(d);
    auto update = [&](VF p, VF mi, VF vi, VF g, VF* p_out, VF* m_out, VF* v_out) {
      g = hn::Mul(g, vscale);
      p = hn::Mul(p, vdecay);
      mi = hn::MulAdd(hn::Sub(g, mi), one_b1, mi);
      vi = hn::MulAdd(vi, vb2, hn::Mul(hn::Mul(one_b2, g), g));
      const VF denom = hn::Add(hn::Div(hn::Sqrt(vi), vbc2), veps);
      *p_out = hn::NegMulAdd(vstep, hn::Div(mi, denom), p);
      *m_out = mi;
      *v_out = vi;
    };
    size_t i = begin;
    for (; i + L <= end; i += L) {
      VF p, mi, vi;
      update(hn::LoadU(d, param + i), hn::LoadU(d, m + i), hn::LoadU(d, v + i),
             hn::LoadU(d, grad + i), &p, &mi, &vi);
      hn::StoreU(p, d, param + i);
      if (param_bf16) StoreBf16(p, d, param_bf16 + i);
      hn::StoreU(mi, d, m + i);
      hn::StoreU(vi, d, v + i);
      if (clear) hn::StoreU(hn::Zero(d), d, grad + i);
    }
    if (i < end) {
      const size_t n = end - i;
      VF p, mi, vi;
      update(LoadTail(d, param + i, n), LoadTail(d, m + i, n), LoadTail(d, v + i, n),
             LoadTail(d, grad + i, n), &p, &mi, &vi);
      StoreTail(p, d, param + i, n);
      if (param_bf16) StoreOutN(p, d, param_bf16 + i, n);
      StoreTail(mi, d, m + i, n);
      StoreTail(vi, d, v + i, n);
      if (clear) StoreTail(hn::Zero(d), d, grad + i, n);
    }
  });
}

void AdamWUpdate(float* param, float* m, float* v, float* grad, size_t N, const AdamWStep& s) {
  AdamWUpdateTo(param, nullptr, m, v, grad, N, s);
}

}  // namespace

void FillAdamW(KernelTable& t) { t.adamw_update = &AdamWUpdate; }

void FillAdamWBf16(Bf16Kernels& t) { t.adamw_update = &AdamWUpdateTo; }

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
