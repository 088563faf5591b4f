// The logit soft-cap of attention scores (attention_options.h), on a row of raw scores, shared by
// the flash kernels and the KV-cache decode. Re-included per target (no #pragma once). tanh from
// hwy/contrib/math (within 4 ulps).

#if defined(LLMCPU_SIMD_HWY_SOFTCAP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LLMCPU_SIMD_HWY_SOFTCAP_INL_H_
#undef LLMCPU_SIMD_HWY_SOFTCAP_INL_H_
#else
#define LLMCPU_SIMD_HWY_SOFTCAP_INL_H_
#endif

#include <stddef.h>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "simd/hwy/common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {

// s[0, n) <- c tanh(a s[0, n)): raw scores q.k to capped scores, with a = scale / c; the softmax
// then reads them with scale 1 (an exact multiplication).
HWY_INLINE void SoftCapRow(float* HWY_RESTRICT s, size_t n, float a, float c) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF va = hn::Set(d, a), vc = hn::Set(d, c);
  size_t u = 0;
  for (; u + L <= n; u += L) {
    hn::StoreU(hn::Mul(hn::Tanh(d, hn::Mul(hn::LoadU(d, s + u), va)), vc), d, s + u);
  }
  if (u < n) {
    StoreTail(hn::Mul(hn::Tanh(d, hn::Mul(LoadTail(d, s + u, n - u), va)), vc), d, s + u, n - u);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();

#endif  // LLMCPU_SIMD_HWY_SOFTCAP_INL_H_
