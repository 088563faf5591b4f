// Soft-capping of the final logits (Gemma 2 and 3), vectorized (the math of
// simd/scalar/softcap.h), in place over a flat buffer:
//   y = cap tanh(x / cap);  dx = dy (1 - t^2),  t = y / cap
// x / cap is a division, as Hugging Face computes it; tanh is hwy/contrib/math's (within 4 ulp;
// exactly +-1 where |x / cap| > 18.7, so the gradient is 0 there, and 1 - t^2 is one fused
// rounding). fp32 only: the logits are fp32 in both precisions. Threads split chunks of the buffer.
// Not here: the soft-cap of attention scores (softcap-inl.h, inside the attention kernels).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/softcap.cc"
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

void SoftCapForward(float* x, size_t N, float cap) {
  ParallelChunks(N, [&](size_t begin, size_t end) {
    const DF d;
    const size_t L = hn::Lanes(d);
    const VF c = hn::Set(d, cap);
    auto capped = [&](VF v) { return hn::Mul(c, hn::Tanh(d, hn::Div(v, c))); };
    size_t i = begin;
    for (; i + L <= end; i += L) hn::StoreU(capped(hn::LoadU(d, x + i)), d, x + i);
    if (i < end) StoreTail(capped(LoadTail(d, x + i, end - i)), d, x + i, end - i);
  });
}

void SoftCapBackward(float* dx, const float* capped, size_t N, float cap) {
  ParallelChunks(N, [&](size_t begin, size_t end) {
    const DF d;
    const size_t L = hn::Lanes(d);
    const VF c = hn::Set(d, cap), one = hn::Set(d, 1.0f);
    auto grad = [&](VF dy, VF y) {
      const VF t = hn::Div(y, c);
      return hn::Mul(dy, hn::NegMulAdd(t, t, one));
    };
    size_t i = begin;
    for (; i + L <= end; i += L) {
      hn::StoreU(grad(hn::LoadU(d, dx + i), hn::LoadU(d, capped + i)), d, dx + i);
    }
    if (i < end) {
      const size_t n = end - i;
      StoreTail(grad(LoadTail(d, dx + i, n), LoadTail(d, capped + i, n)), d, dx + i, n);
    }
  });
}

}  // namespace

void FillSoftCap(KernelTable& t) {
  t.softcap_forward = &SoftCapForward;
  t.softcap_backward = &SoftCapBackward;
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
