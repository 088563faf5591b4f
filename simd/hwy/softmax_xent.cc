// Fused softmax + cross-entropy over the first V of Vp logits per row, vectorized (the math of
// simd/scalar/softmax_xent.h):
//   lse_n = m + log sum_{v<V} exp(z_v - m),  m = max z;   loss_n = lse_n - z_y
//   backward, in place: dz_v = (exp(z_v - lse_n) - [v == y]) dloss for v < V, 0 for V <= v < Vp
// A negative target is a masked row: loss and lse 0, gradient row 0.
// exp and log come from hwy/contrib/math. Rows are independent; threads split them.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/softmax_xent.cc"
#include <algorithm>

#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "simd/hwy/common-inl.h"
#include "simd/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace {

HWY_INLINE float RowMax(const float* HWY_RESTRICT z, size_t V) {
  const DF d;
  const size_t L = hn::Lanes(d);
  VF m0 = hn::Set(d, z[0]), m1 = m0;
  size_t v = 0;
  for (; v + 2 * L <= V; v += 2 * L) {
    m0 = hn::Max(m0, hn::LoadU(d, z + v));
    m1 = hn::Max(m1, hn::LoadU(d, z + v + L));
  }
  for (; v + L <= V; v += L) m0 = hn::Max(m0, hn::LoadU(d, z + v));
  // The tail's masked-off lanes load 0: blend them back to z[0], which never raises the max.
  if (v < V) m1 = hn::Max(m1, hn::IfThenElse(hn::FirstN(d, V - v), LoadTail(d, z + v, V - v), m0));
  return hn::GetLane(hn::MaxOfLanes(d, hn::Max(m0, m1)));
}

// sum_{v<V} exp(z_v - m)
HWY_INLINE float RowSumExp(const float* HWY_RESTRICT z, float m, size_t V) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF vm = hn::Set(d, m);
  VF s0 = hn::Zero(d), s1 = s0;
  size_t v = 0;
  for (; v + 2 * L <= V; v += 2 * L) {
    s0 = hn::Add(s0, hn::Exp(d, hn::Sub(hn::LoadU(d, z + v), vm)));
    s1 = hn::Add(s1, hn::Exp(d, hn::Sub(hn::LoadU(d, z + v + L), vm)));
  }
  for (; v + L <= V; v += L) s0 = hn::Add(s0, hn::Exp(d, hn::Sub(hn::LoadU(d, z + v), vm)));
  if (v < V) {
    const auto mask = hn::FirstN(d, V - v);
    s1 = hn::Add(s1, hn::IfThenElseZero(mask, hn::Exp(d, hn::Sub(LoadTail(d, z + v, V - v), vm))));
  }
  return ReduceSum(d, hn::Add(s0, s1));
}

void SoftmaxXentForward(float* losses, float* lse, const float* logits, const int* targets,
                        size_t N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    const DF d;
    const float* z = logits + n * size_t(Vp);
    if (targets[n] < 0) {
      losses[n] = lse[n] = 0.0f;
      continue;
    }
    const float m = RowMax(z, size_t(V));
    const float log_sum = hn::GetLane(hn::Log(d, hn::Set(d, RowSumExp(z, m, size_t(V)))));
    lse[n] = m + log_sum;
    losses[n] = lse[n] - z[targets[n]];
  }
}

void SoftmaxXentBackward(float* logits, const float* lse, const int* targets, float dloss, size_t N,
                         int V_, int Vp_) {
  const size_t V = size_t(V_), Vp = size_t(Vp_);
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    const DF d;
    const size_t L = hn::Lanes(d);
    float* HWY_RESTRICT z = logits + n * Vp;
    if (targets[n] < 0) {
      std::fill(z, z + Vp, 0.0f);
      continue;
    }
    const VF vl = hn::Set(d, lse[n]), vd = hn::Set(d, dloss);
    size_t v = 0;
    for (; v + L <= V; v += L) {
      hn::StoreU(hn::Mul(hn::Exp(d, hn::Sub(hn::LoadU(d, z + v), vl)), vd), d, z + v);
    }
    if (v < V) {
      StoreTail(hn::Mul(hn::Exp(d, hn::Sub(LoadTail(d, z + v, V - v), vl)), vd), d, z + v, V - v);
    }
    z[targets[n]] -= dloss;
    for (v = V; v < Vp; ++v) z[v] = 0.0f;
  }
}

}  // namespace

void FillSoftmaxXent(KernelTable& t) {
  t.softmax_xent_forward = &SoftmaxXentForward;
  t.softmax_xent_backward = &SoftmaxXentBackward;
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
