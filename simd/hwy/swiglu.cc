// SwiGLU, vectorized (the math of simd/scalar/swiglu.h): rows [gate (H) | up (H)],
//   out = silu(gate) up,  silu(x) = x sigmoid(x)
//   dgate = dout up s (1 + x (1 - s)),  dup = dout silu(gate),  s = sigmoid(gate)
// The sigmoid comes from e = exp(-|x|) (hwy/contrib/math, 1 ulp; its argument is never positive,
// inside Exp's valid range): r = 1 / (1 + e), sigmoid(x) = r or e r by the sign of x, and
// 1 - sigmoid(x) the other one, so no subtraction cancels. The rows are gated-inl.h's. The bf16
// table's entries are the same code on a bf16 input (widened exactly), the forward's output rounded
// to bf16 at the store.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/swiglu.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "simd/bf16.h"
#include "simd/hwy/bf16-inl.h"
#include "simd/hwy/common-inl.h"
#include "simd/hwy/gated-inl.h"
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

// silu(x) = x sigmoid(x) and silu'(x) = s (1 + x (1 - s)), for GatedForward / GatedBackward.
struct Silu {
  VF Value(VF x) const {
    VF s, sm;
    SigmoidPair(d, x, s, sm);
    return hn::Mul(x, s);
  }
  void GradAndValue(VF x, VF& g, VF& y) const {
    VF s, sm;
    SigmoidPair(d, x, s, sm);
    g = hn::Mul(s, hn::Add(hn::Set(d, 1.0f), hn::Mul(x, sm)));
    y = hn::Mul(x, s);
  }
  DF d;
};

}  // namespace

void FillSwiGlu(KernelTable& t) {
  t.swiglu_forward = &GatedForward<Silu, float, float>;
  t.swiglu_backward = &GatedBackward<Silu, float>;
}

void FillSwiGluBf16(Bf16Kernels& t) {
  t.swiglu_forward = &GatedForward<Silu, bf16, bf16>;
  t.swiglu_backward = &GatedBackward<Silu, bf16>;
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
