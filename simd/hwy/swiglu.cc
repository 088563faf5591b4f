// SwiGLU, vectorized (the math of simd/scalar/swiglu.h): rows [gate (H) | up (H)],
//   out = silu(gate) up,  silu(x) = x sigmoid(x)
//   dgate = dout up s (1 + x (1 - s)),  dup = dout silu(gate),  s = sigmoid(gate)
// The sigmoid comes from e = exp(-|x|) (hwy/contrib/math, 1 ulp; its argument is never positive,
// inside Exp's valid range): r = 1 / (1 + e), sigmoid(x) = r or e r by the sign of x, and
// 1 - sigmoid(x) the other one, so no subtraction cancels. Threads split the rows. The bf16 table's
// entries are the same code on a bf16 input (widened exactly), the forward's output rounded to bf16
// at the store.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/swiglu.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "simd/bf16.h"
#include "simd/hwy/bf16-inl.h"
#include "simd/hwy/common-inl.h"
#include "simd/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace {

// sigmoid(x) into s and sigmoid(-x) = 1 - sigmoid(x) into sm.
HWY_INLINE void SigmoidPair(DF d, VF x, VF& s, VF& sm) {
  const VF e = hn::Exp(d, hn::Neg(hn::Abs(x)));
  const VF r = hn::Div(hn::Set(d, 1.0f), hn::Add(hn::Set(d, 1.0f), e));
  const VF er = hn::Mul(e, r);
  const auto positive = hn::Ge(x, hn::Zero(d));
  s = hn::IfThenElse(positive, r, er);
  sm = hn::IfThenElse(positive, er, r);
}

HWY_INLINE VF SwiGluOne(DF d, VF x, VF up) {
  VF s, sm;
  SigmoidPair(d, x, s, sm);
  return hn::Mul(hn::Mul(x, s), up);
}

// dgate and dup of one vector of a row.
HWY_INLINE void SwiGluGradOne(DF d, VF x, VF up, VF dy, VF& dgate, VF& dup) {
  VF s, sm;
  SigmoidPair(d, x, s, sm);
  const VF dsilu = hn::Mul(s, hn::Add(hn::Set(d, 1.0f), hn::Mul(x, sm)));
  dgate = hn::Mul(hn::Mul(dy, up), dsilu);
  dup = hn::Mul(dy, hn::Mul(x, s));
}

// In: float, or bf16 (widened exactly); Out: float, or bf16 (rounded at the store).
template <typename Out, typename In>
void SwiGluForward(Out* out, const In* inp, size_t N, int H_) {
  const size_t H = size_t(H_);
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const DF d;
    const size_t L = hn::Lanes(d);
    const In* HWY_RESTRICT gate = inp + r * 2 * H;
    const In* HWY_RESTRICT up = gate + H;
    Out* HWY_RESTRICT y = out + r * H;
    size_t h = 0;
    for (; h + L <= H; h += L) {
      StoreOut(SwiGluOne(d, LoadIn(d, gate + h), LoadIn(d, up + h)), d, y + h);
    }
    if (h < H) {
      const size_t k = H - h;
      StoreOutN(SwiGluOne(d, LoadInN(d, gate + h, k), LoadInN(d, up + h, k)), d, y + h, k);
    }
  }
}

// In: float, or bf16 (widened exactly).
template <typename In>
void SwiGluBackward(float* dinp, const float* dout, const In* inp, size_t N, int H_) {
  const size_t H = size_t(H_);
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const DF d;
    const size_t L = hn::Lanes(d);
    const In* HWY_RESTRICT gate = inp + r * 2 * H;
    const In* HWY_RESTRICT up = gate + H;
    const float* HWY_RESTRICT dy = dout + r * H;
    float* HWY_RESTRICT dgate = dinp + r * 2 * H;
    float* HWY_RESTRICT dup = dgate + H;
    VF g, u;
    size_t h = 0;
    for (; h + L <= H; h += L) {
      SwiGluGradOne(d, LoadIn(d, gate + h), LoadIn(d, up + h), hn::LoadU(d, dy + h), g, u);
      hn::StoreU(g, d, dgate + h);
      hn::StoreU(u, d, dup + h);
    }
    if (h < H) {
      const size_t k = H - h;
      SwiGluGradOne(d, LoadInN(d, gate + h, k), LoadInN(d, up + h, k), LoadTail(d, dy + h, k), g,
                    u);
      StoreTail(g, d, dgate + h, k);
      StoreTail(u, d, dup + h, k);
    }
  }
}

}  // namespace

void FillSwiGlu(KernelTable& t) {
  t.swiglu_forward = &SwiGluForward<float, float>;
  t.swiglu_backward = &SwiGluBackward<float>;
}

void FillSwiGluBf16(Bf16Kernels& t) {
  t.swiglu_forward = &SwiGluForward<bf16, bf16>;
  t.swiglu_backward = &SwiGluBackward<bf16>;
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
