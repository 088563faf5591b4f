// RMSNorm over channels, vectorized (the math of simd/scalar/rmsnorm.h):
//   ms = (1/C) sum_c x_c^2,  rstd = 1 / sqrt(ms + eps),  y_c = (x_c rstd) w_c
// Backward, with n_c = x_c rstd and g_c = w_c dy_c:
//   dx_c += rstd (g_c - n_c mean(g n));  dw_c += sum_rows n_c dy_c
// Rows are independent (threads split them); the weight gradient gives each thread a slice of
// channels that walks the rows in order, so every element has one owner and a fixed order. The bf16
// table's forward and apply are the same code with the output rounded at the store.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/rmsnorm.cc"
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

// One row y_c = (x_c s) w_c: the forward's output and its recomputation share it, so both give
// the same bits. Out: float, or bf16 (the same fp32 math, rounded at the store).
template <typename Out>
HWY_INLINE void RmsNormApplyRow(Out* HWY_RESTRICT y, const float* HWY_RESTRICT x,
                                const float* HWY_RESTRICT weight, float s, size_t C) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF vs = hn::Set(d, s);
  size_t c = 0;
  for (; c + L <= C; c += L) {
    StoreOut(hn::Mul(hn::Mul(hn::LoadU(d, x + c), vs), hn::LoadU(d, weight + c)), d, y + c);
  }
  if (c < C) {
    const size_t k = C - c;
    StoreOutN(hn::Mul(hn::Mul(LoadTail(d, x + c, k), vs), LoadTail(d, weight + c, k)), d, y + c, k);
  }
}

template <typename Out>
void RmsNormForward(Out* out, float* rstd, const float* inp, const float* weight, size_t N, int C_,
                    float eps) {
  const size_t C = size_t(C_);
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const float* HWY_RESTRICT x = inp + r * C;
    const float s = 1.0f / std::sqrt(Dot(x, x, C) / float(C) + eps);
    RmsNormApplyRow(out + r * C, x, weight, s, C);
    rstd[r] = s;
  }
}

template <typename Out>
void RmsNormApply(Out* out, const float* inp, const float* rstd, const float* weight, size_t N,
                  int C_) {
  const size_t C = size_t(C_);
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) RmsNormApplyRow(out + r * C, inp + r * C, weight, rstd[r], C);
}

// One row of dx: dx_c += s (w_c dy_c - n_c gn_mean), gn_mean = mean(g n).
HWY_INLINE void RmsNormBackwardRow(float* HWY_RESTRICT dx, const float* HWY_RESTRICT dy,
                                   const float* HWY_RESTRICT x, const float* HWY_RESTRICT w,
                                   float s, size_t C) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF vs = hn::Set(d, s);
  // Pass 1: sum g n (zeros past the tail contribute nothing).
  VF s0 = hn::Zero(d), s1 = s0;
  size_t c = 0;
  for (; c + 2 * L <= C; c += 2 * L) {
    const VF g0 = hn::Mul(hn::LoadU(d, w + c), hn::LoadU(d, dy + c));
    const VF g1 = hn::Mul(hn::LoadU(d, w + c + L), hn::LoadU(d, dy + c + L));
    s0 = hn::MulAdd(g0, hn::Mul(hn::LoadU(d, x + c), vs), s0);
    s1 = hn::MulAdd(g1, hn::Mul(hn::LoadU(d, x + c + L), vs), s1);
  }
  for (; c < C; c += L) {
    const size_t k = C - c < L ? C - c : L;
    const VF g = hn::Mul(LoadTail(d, w + c, k), LoadTail(d, dy + c, k));
    s0 = hn::MulAdd(g, hn::Mul(LoadTail(d, x + c, k), vs), s0);
  }
  const VF gn_mean = hn::Set(d, ReduceSum(d, hn::Add(s0, s1)) / float(C));
  // Pass 2: dx.
  auto grad = [&](VF xv, VF wv, VF dyv, VF dxv) {
    const VF t = hn::NegMulAdd(hn::Mul(xv, vs), gn_mean, hn::Mul(wv, dyv));
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

void RmsNormBackward(float* dinp, float* dweight, const float* dout, const float* inp,
                     const float* weight, const float* rstd, size_t N, int C_) {
  const size_t C = size_t(C_);
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (size_t r = 0; r < N; ++r) {
      RmsNormBackwardRow(dinp + r * C, dout + r * C, inp + r * C, weight, rstd[r], C);
    }
    // The weight gradient: slices of channels, rows in order (nothing above writes dweight).
    constexpr size_t kSlice = 64;
    const size_t slices = (C + kSlice - 1) / kSlice;
#pragma omp for schedule(static)
    for (size_t sl = 0; sl < slices; ++sl) {
      const DF d;
      const size_t L = hn::Lanes(d);
      const size_t c0 = sl * kSlice, c1 = c0 + kSlice < C ? c0 + kSlice : C;
      for (size_t c = c0; c < c1; c += L) {
        const size_t k = c1 - c < L ? c1 - c : L;  // lanes in this vector of the slice
        VF dw = LoadTail(d, dweight + c, k);
        for (size_t r = 0; r < N; ++r) {
          const VF n = hn::Mul(LoadTail(d, inp + r * C + c, k), hn::Set(d, rstd[r]));
          dw = hn::MulAdd(n, LoadTail(d, dout + r * C + c, k), dw);
        }
        StoreTail(dw, d, dweight + c, k);
      }
    }
  }
}

}  // namespace

void FillRmsNorm(KernelTable& t) {
  t.rmsnorm_forward = &RmsNormForward<float>;
  t.rmsnorm_apply = &RmsNormApply<float>;
  t.rmsnorm_backward = &RmsNormBackward;
}

void FillRmsNormBf16(Bf16Kernels& t) {
  t.rmsnorm_forward = &RmsNormForward<bf16>;
  t.rmsnorm_apply = &RmsNormApply<bf16>;
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
