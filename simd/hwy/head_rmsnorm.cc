// Per-head RMSNorm of the query and key heads in place, vectorized (the math of
// simd/scalar/head_rmsnorm.h), with W_i = w_i + weight_offset:
//   rstd = 1 / sqrt(mean(x^2) + eps),  y_i = (x_i rstd) W_i
// Backward, with n_i = x_i rstd and g_i = W_i dy_i:
//   dx_i = rstd (g_i - n_i mean(g n));  dw_i += sum over rows and heads of n_i dy_i
// Threads split the (row, head) pairs. The backward takes the weight gradients first, while dx
// still holds dy: each thread owns a slice of one weight's channels and walks the rows and their
// heads in order, so every element of dwq and dwk has one owner and one order of additions (the
// same bits for any thread count), and no scratch is needed. The bf16 table's forward is the same
// code on bf16 heads (widened exactly into saved), the output rounded at the store.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/head_rmsnorm.cc"
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

// One head: its input into `in` (fp32, widened exactly from bf16), y = (in s) (w + off) back into
// the head. Returns s. T: float, or bf16 (rounded at the store).
template <typename T>
HWY_INLINE float HeadForward(T* HWY_RESTRICT y, float* HWY_RESTRICT in, const float* HWY_RESTRICT w,
                             size_t D, float eps, float offset) {
  const DF d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + L <= D; i += L) hn::StoreU(LoadIn(d, y + i), d, in + i);
  if (i < D) StoreTail(LoadInN(d, y + i, D - i), d, in + i, D - i);
  const float s = 1.0f / std::sqrt(Dot(in, in, D) / float(D) + eps);
  const VF vs = hn::Set(d, s), off = hn::Set(d, offset);
  for (i = 0; i + L <= D; i += L) {
    StoreOut(hn::Mul(hn::Mul(hn::LoadU(d, in + i), vs), hn::Add(hn::LoadU(d, w + i), off)), d,
             y + i);
  }
  if (i < D) {
    const size_t k = D - i;
    StoreOutN(hn::Mul(hn::Mul(LoadTail(d, in + i, k), vs), hn::Add(LoadTail(d, w + i, k), off)), d,
              y + i, k);
  }
  return s;
}

template <typename T>
void HeadRmsNormForward(T* x, float* saved, float* rstd, const float* wq, const float* wk, size_t N,
                        int NH, int NKV, int D_, size_t row_stride, float eps,
                        float weight_offset) {
  const size_t D = size_t(D_), heads = size_t(NH + NKV), pairs = N * heads;
#pragma omp parallel for schedule(static)
  for (size_t j = 0; j < pairs; ++j) {
    const size_t h = j % heads;
    rstd[j] = HeadForward(x + (j / heads) * row_stride + h * D, saved + j * D,
                          h < size_t(NH) ? wq : wk, D, eps, weight_offset);
  }
}

// One head of dx in place: dy in, dx_i = s (g_i - n_i mean(g n)) out.
HWY_INLINE void HeadBackward(float* HWY_RESTRICT dx, const float* HWY_RESTRICT x,
                             const float* HWY_RESTRICT w, float s, float offset, size_t D) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF vs = hn::Set(d, s), off = hn::Set(d, offset);
  // Pass 1: sum g n (zeros past the tail contribute nothing).
  VF s0 = hn::Zero(d), s1 = s0;
  size_t c = 0;
  for (; c + 2 * L <= D; c += 2 * L) {
    const VF g0 = hn::Mul(hn::Add(hn::LoadU(d, w + c), off), hn::LoadU(d, dx + c));
    const VF g1 = hn::Mul(hn::Add(hn::LoadU(d, w + c + L), off), hn::LoadU(d, dx + c + L));
    s0 = hn::MulAdd(g0, hn::Mul(hn::LoadU(d, x + c), vs), s0);
    s1 = hn::MulAdd(g1, hn::Mul(hn::LoadU(d, x + c + L), vs), s1);
  }
  for (; c < D; c += L) {
    const size_t k = D - c < L ? D - c : L;
    const VF g = hn::Mul(hn::Add(LoadTail(d, w + c, k), off), LoadTail(d, dx + c, k));
    s0 = hn::MulAdd(g, hn::Mul(LoadTail(d, x + c, k), vs), s0);
  }
  const VF gn_mean = hn::Set(d, ReduceSum(d, hn::Add(s0, s1)) / float(D));
  // Pass 2: dx over dy.
  auto grad = [&](VF xv, VF wv, VF dyv) {
    return hn::Mul(vs, hn::NegMulAdd(hn::Mul(xv, vs), gn_mean, hn::Mul(hn::Add(wv, off), dyv)));
  };
  for (c = 0; c + L <= D; c += L) {
    hn::StoreU(grad(hn::LoadU(d, x + c), hn::LoadU(d, w + c), hn::LoadU(d, dx + c)), d, dx + c);
  }
  if (c < D) {
    const size_t k = D - c;
    StoreTail(grad(LoadTail(d, x + c, k), LoadTail(d, w + c, k), LoadTail(d, dx + c, k)), d, dx + c,
              k);
  }
}

void HeadRmsNormBackward(float* dx, float* dwq, float* dwk, const float* saved, const float* rstd,
                         const float* wq, const float* wk, size_t N, int NH, int NKV, int D_,
                         size_t row_stride, float weight_offset) {
  const size_t D = size_t(D_), heads = size_t(NH + NKV), pairs = N * heads;
  // Slices of 16 channels: a 64-byte line of each head, whole vectors on AVX2 and AVX-512.
  constexpr size_t kSlice = 16;
  const size_t slices = (D + kSlice - 1) / kSlice;
#pragma omp parallel
  {
    // The weight gradients: slice sl < slices of dwq, the others of dwk.
#pragma omp for schedule(static)
    for (size_t sl = 0; sl < 2 * slices; ++sl) {
      const DF d;
      const size_t L = hn::Lanes(d);
      const bool key = sl >= slices;
      float* HWY_RESTRICT dw = key ? dwk : dwq;
      const size_t h0 = key ? size_t(NH) : 0, h1 = key ? heads : size_t(NH);
      if (h0 == h1) continue;  // no heads use this weight (it may be null)
      const size_t c0 = (sl % slices) * kSlice, c1 = c0 + kSlice < D ? c0 + kSlice : D;
      for (size_t c = c0; c < c1; c += L) {
        const size_t k = c1 - c < L ? c1 - c : L;  // lanes in this vector of the slice
        auto load = [&](const float* p) { return k == L ? hn::LoadU(d, p) : LoadTail(d, p, k); };
        VF acc = load(dw + c);
        for (size_t r = 0; r < N; ++r) {
          for (size_t h = h0; h < h1; ++h) {
            const size_t j = r * heads + h;
            const VF n = hn::Mul(load(saved + j * D + c), hn::Set(d, rstd[j]));
            acc = hn::MulAdd(n, load(dx + r * row_stride + h * D + c), acc);
          }
        }
        if (k == L) {
          hn::StoreU(acc, d, dw + c);
        } else {
          StoreTail(acc, d, dw + c, k);
        }
      }
    }
    // dx, once every slice has read dy (the barrier at the end of the loop above).
#pragma omp for schedule(static)
    for (size_t j = 0; j < pairs; ++j) {
      const size_t h = j % heads;
      HeadBackward(dx + (j / heads) * row_stride + h * D, saved + j * D, h < size_t(NH) ? wq : wk,
                   rstd[j], weight_offset, D);
    }
  }
}

}  // namespace

void FillHeadRmsNorm(KernelTable& t) {
  t.head_rmsnorm_forward = &HeadRmsNormForward<float>;
  t.head_rmsnorm_backward = &HeadRmsNormBackward;
}

void FillHeadRmsNormBf16(Bf16Kernels& t) { t.head_rmsnorm_forward = &HeadRmsNormForward<bf16>; }

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
