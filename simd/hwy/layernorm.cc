// LayerNorm over channels, vectorized (the math of simd/scalar/layernorm.h):
//   mean = (1/C) sum_c x_c,  var = (1/C) sum_c (x_c - mean)^2,  rstd = 1 / sqrt(var + eps)
//   y_c  = (x_c - mean) * rstd * w_c + b_c
// Backward, with n_c = (x_c - mean) rstd and g_c = w_c dy_c:
//   dx_c += rstd (g_c - mean(g) - n_c mean(g n));  dw_c += sum_rows n_c dy_c;  db_c += sum_rows
//   dy_c
// Rows are independent (threads split them); the parameter gradients give each thread a slice of
// channels that walks the rows in order, so every element has one owner and a fixed order.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/layernorm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include <cmath>

#include "hwy/highway.h"
#include "simd/hwy/bf16-inl.h"
#include "simd/hwy/common-inl.h"
#include "simd/bf16.h"
#include "simd/kernels.h"
#include "simd/scalar/layernorm.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace {

// sum_c (x_c - m)^2
HWY_INLINE float SumSquaredDeviations(const float* HWY_RESTRICT x, float m, size_t C) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF vm = hn::Set(d, m);
  VF s0 = hn::Zero(d), s1 = s0;
  size_t c = 0;
  for (; c + 2 * L <= C; c += 2 * L) {
    const VF a = hn::Sub(hn::LoadU(d, x + c), vm), b = hn::Sub(hn::LoadU(d, x + c + L), vm);
    s0 = hn::MulAdd(a, a, s0);
    s1 = hn::MulAdd(b, b, s1);
  }
  for (; c + L <= C; c += L) {
    const VF a = hn::Sub(hn::LoadU(d, x + c), vm);
    s0 = hn::MulAdd(a, a, s0);
  }
  if (c < C) {
    const VF a = hn::IfThenElseZero(hn::FirstN(d, C - c), hn::Sub(LoadTail(d, x + c, C - c), vm));
    s1 = hn::MulAdd(a, a, s1);
  }
  return ReduceSum(d, hn::Add(s0, s1));
}

// One row y_c = (x_c - m) s w_c + b_c: the forward's output and its recomputation share it, so
// both give the same bits. Out: float, or bf16 (the same fp32 math, rounded at the store).
template <typename Out>
HWY_INLINE void LayerNormApplyRow(Out* HWY_RESTRICT y, const float* HWY_RESTRICT x,
                                  const float* HWY_RESTRICT weight, const float* HWY_RESTRICT bias,
                                  float m, float s, size_t C) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF vm = hn::Set(d, m), vs = hn::Set(d, s);
  size_t c = 0;
  for (; c + L <= C; c += L) {
    const VF n = hn::Mul(hn::Sub(hn::LoadU(d, x + c), vm), vs);
    StoreOut(hn::MulAdd(n, hn::LoadU(d, weight + c), hn::LoadU(d, bias + c)), d, y + c);
  }
  if (c < C) {
    const size_t k = C - c;
    const VF n = hn::Mul(hn::Sub(LoadTail(d, x + c, k), vm), vs);
    StoreOutN(hn::MulAdd(n, LoadTail(d, weight + c, k), LoadTail(d, bias + c, k)), d, y + c, k);
  }
}

template <typename Out>
void LayerNormForward(Out* out, float* mean, float* rstd, const float* inp, const float* weight,
                      const float* bias, size_t N, int C_) {
  const size_t C = size_t(C_);
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const float* HWY_RESTRICT x = inp + r * C;
    const float m = Sum(x, C) / float(C);
    const float v = SumSquaredDeviations(x, m, C) / float(C);
    const float s = 1.0f / std::sqrt(v + float(scalar::kLayerNormEps));
    LayerNormApplyRow(out + r * C, x, weight, bias, m, s, C);
    mean[r] = m;
    rstd[r] = s;
  }
}

template <typename Out>
void LayerNormApply(Out* out, const float* inp, const float* mean, const float* rstd,
                    const float* weight, const float* bias, size_t N, int C_) {
  const size_t C = size_t(C_);
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    LayerNormApplyRow(out + r * C, inp + r * C, weight, bias, mean[r], rstd[r], C);
  }
}

// One row of dx: dx_c += s (w_c dy_c - g_mean - n_c gn_mean).
HWY_INLINE void LayerNormBackwardRow(float* HWY_RESTRICT dx, const float* HWY_RESTRICT dy,
                                     const float* HWY_RESTRICT x, const float* HWY_RESTRICT w,
                                     float m, float s, size_t C) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF vm = hn::Set(d, m), vs = hn::Set(d, s);
  // Pass 1: sum g and sum g n.
  VF sg = hn::Zero(d), sgn = sg;
  size_t c = 0;
  for (; c + L <= C; c += L) {
    const VF g = hn::Mul(hn::LoadU(d, w + c), hn::LoadU(d, dy + c));
    const VF n = hn::Mul(hn::Sub(hn::LoadU(d, x + c), vm), vs);
    sg = hn::Add(sg, g);
    sgn = hn::MulAdd(g, n, sgn);
  }
  if (c < C) {
    const size_t k = C - c;
    const VF g = hn::Mul(LoadTail(d, w + c, k), LoadTail(d, dy + c, k));  // zero past the tail
    const VF n = hn::Mul(hn::Sub(LoadTail(d, x + c, k), vm), vs);
    sg = hn::Add(sg, g);
    sgn = hn::MulAdd(g, n, sgn);
  }
  const VF g_mean = hn::Set(d, ReduceSum(d, sg) / float(C));
  const VF gn_mean = hn::Set(d, ReduceSum(d, sgn) / float(C));
  // Pass 2: dx.
  auto grad = [&](VF xv, VF wv, VF dyv, VF dxv) {
    const VF n = hn::Mul(hn::Sub(xv, vm), vs);
    const VF t = hn::NegMulAdd(n, gn_mean, hn::Sub(hn::Mul(wv, dyv), g_mean));
    return hn::MulAdd(vs, t, dxv);
  };
  for (c = 0; c + L <= C; c += L) {
    hn::StoreU(
        grad(hn::LoadU(d, x + c), hn::LoadU(d, w + c), hn::LoadU(d, dy + c), hn::LoadU(d, dx + c)),
        d, dx + c);
  }
  if (c < C) {
    const size_t k = C - c;
    StoreTail(grad(LoadTail(d, x + c, k), LoadTail(d, w + c, k), LoadTail(d, dy + c, k),
                   LoadTail(d, dx + c, k)),
              d, dx + c, k);
  }
}

void LayerNormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, const float* mean, const float* rstd,
                       size_t N, int C_) {
  const size_t C = size_t(C_);
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (size_t r = 0; r < N; ++r) {
      LayerNormBackwardRow(dinp + r * C, dout + r * C, inp + r * C, weight, mean[r], rstd[r], C);
    }
    // Parameter gradients: slices of channels, rows in order (the loop above ends in a barrier).
    constexpr size_t kSlice = 64;
    const size_t slices = (C + kSlice - 1) / kSlice;
#pragma omp for schedule(static)
    for (size_t sl = 0; sl < slices; ++sl) {
      const DF d;
      const size_t L = hn::Lanes(d);
      const size_t c0 = sl * kSlice, c1 = c0 + kSlice < C ? c0 + kSlice : C;
      for (size_t c = c0; c < c1; c += L) {
        const size_t k = c1 - c < L ? c1 - c : L;  // lanes in this vector of the slice
        VF dw = LoadTail(d, dweight + c, k), db = LoadTail(d, dbias + c, k);
        for (size_t r = 0; r < N; ++r) {
          const VF dy = LoadTail(d, dout + r * C + c, k);
          const VF n = hn::Mul(hn::Sub(LoadTail(d, inp + r * C + c, k), hn::Set(d, mean[r])),
                               hn::Set(d, rstd[r]));
          dw = hn::MulAdd(n, dy, dw);
          db = hn::Add(db, dy);
        }
        StoreTail(dw, d, dweight + c, k);
        StoreTail(db, d, dbias + c, k);
      }
    }
  }
}

}  // namespace

void FillLayerNorm(KernelTable& t) {
  t.layernorm_forward = &LayerNormForward<float>;
  t.layernorm_apply = &LayerNormApply<float>;
  t.layernorm_backward = &LayerNormBackward;
}

void FillLayerNormBf16(Bf16Kernels& t) {
  t.layernorm_forward = &LayerNormForward<bf16>;
  t.layernorm_apply = &LayerNormApply<bf16>;
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
