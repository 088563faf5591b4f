// Loads and stores of the first n lanes (n <= Lanes) that touch no memory past p[n - 1], on every
// target. Re-included per target (no #pragma once).
// Highway 1.0.3's MaskedLoad and BlendedStore are true masked memory operations on AVX2, AVX-512
// and SVE; on NEON and on the portable fallback they read (and BlendedStore rewrites) the whole
// vector, which runs past the end of a buffer. There the ragged tail goes through a small stack
// copy.

#if defined(LLMCPU_SIMD_HWY_TAIL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LLMCPU_SIMD_HWY_TAIL_INL_H_
#undef LLMCPU_SIMD_HWY_TAIL_INL_H_
#else
#define LLMCPU_SIMD_HWY_TAIL_INL_H_
#endif

#include <stddef.h>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2) || HWY_TARGET == HWY_SVE || HWY_TARGET == HWY_SVE2 || \
    HWY_TARGET == HWY_SVE_256 || HWY_TARGET == HWY_SVE2_128
inline constexpr bool kMaskedMemoryIsExact = true;
#else
inline constexpr bool kMaskedMemoryIsExact = false;
#endif

// p[0, n) into the first n lanes, zeros in the others.
template <class D>
HWY_INLINE hn::Vec<D> LoadN(D d, const hn::TFromD<D>* HWY_RESTRICT p, size_t n) {
  if constexpr (kMaskedMemoryIsExact) {
    return hn::MaskedLoad(hn::FirstN(d, n), d, p);
  } else {
    HWY_ALIGN hn::TFromD<D> buf[HWY_MAX_BYTES / sizeof(hn::TFromD<D>)] = {};
    for (size_t i = 0; i < n; ++i) buf[i] = p[i];
    return hn::Load(d, buf);
  }
}

// The first n lanes of v into p[0, n); p[n, ...) untouched.
template <class D>
HWY_INLINE void StoreN(hn::Vec<D> v, D d, hn::TFromD<D>* HWY_RESTRICT p, size_t n) {
  if constexpr (kMaskedMemoryIsExact) {
    hn::BlendedStore(v, hn::FirstN(d, n), d, p);
  } else {
    HWY_ALIGN hn::TFromD<D> buf[HWY_MAX_BYTES / sizeof(hn::TFromD<D>)] = {};
    hn::Store(v, d, buf);
    for (size_t i = 0; i < n; ++i) p[i] = buf[i];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();

#endif  // LLMCPU_SIMD_HWY_TAIL_INL_H_
