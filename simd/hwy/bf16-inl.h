// fp32 <-> bf16 in Highway vectors, exactly as llmcpu::float_to_bf16 / bf16_to_float (simd/bf16.h):
// round to nearest even, NaN kept quiet. Written with integer ops (this Highway's DemoteTo to bf16
// truncates), so every target rounds the same way. StoreOut/LoadIn let a kernel written once for
// float outputs or inputs also serve bf16 ones. Re-included per target (no #pragma once).
#if defined(LLMCPU_SIMD_HWY_BF16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LLMCPU_SIMD_HWY_BF16_INL_H_
#undef LLMCPU_SIMD_HWY_BF16_INL_H_
#else
#define LLMCPU_SIMD_HWY_BF16_INL_H_
#endif

#include <stddef.h>
#include <stdint.h>

#include "hwy/highway.h"
#include "simd/bf16.h"
#include "simd/hwy/tail-inl.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// bf16 bits of each lane of v, in the low half of 32-bit lanes.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> Bf16Bits(DF df, hn::Vec<DF> v) {
  const hn::RebindToSigned<DF> di;
  const auto u = hn::BitCast(di, v);
  const auto hi = hn::And(hn::ShiftRight<16>(u), hn::Set(di, 0xffff));  // the upper half, unsigned
  const auto abs = hn::And(u, hn::Set(di, 0x7fffffff));
  // (|u| + 0x7fff + lsb) >> 16 with the sign put back: the scalar u + 0x7fff + lsb, as a carry into
  // the sign bit only happens for NaNs, which take the other branch.
  const auto lsb = hn::And(hi, hn::Set(di, 1));
  const auto rounded = hn::ShiftRight<16>(hn::Add(abs, hn::Add(hn::Set(di, 0x7fff), lsb)));
  const auto finite = hn::Or(rounded, hn::And(hi, hn::Set(di, 0x8000)));
  const auto quiet_nan = hn::Or(hi, hn::Set(di, 0x0040));
  return hn::IfThenElse(hn::Gt(abs, hn::Set(di, 0x7f800000)), quiet_nan, finite);
}

// Stores the lanes of v rounded to bf16 at p (a whole vector).
template <class DF>
HWY_INLINE void StoreBf16(hn::Vec<DF> v, DF df, bf16* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, DF> d16;
  hn::StoreU(hn::DemoteTo(d16, Bf16Bits(df, v)), d16, p);
}

// bf16 values at p widened to fp32 (a whole vector).
template <class DF>
HWY_INLINE hn::Vec<DF> LoadBf16(DF df, const bf16* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, DF> d16;
  const hn::RebindToUnsigned<DF> du;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, p))));
}

// Stores of a kernel's output vector: whole vectors and ragged tails, float or bf16.
template <class DF>
HWY_INLINE void StoreOut(hn::Vec<DF> v, DF df, float* HWY_RESTRICT p) {
  hn::StoreU(v, df, p);
}
template <class DF>
HWY_INLINE void StoreOut(hn::Vec<DF> v, DF df, bf16* HWY_RESTRICT p) {
  StoreBf16(v, df, p);
}
template <class DF>
HWY_INLINE void StoreOutN(hn::Vec<DF> v, DF df, float* HWY_RESTRICT p, size_t n) {
  StoreN(v, df, p, n);
}
template <class DF>
HWY_INLINE void StoreOutN(hn::Vec<DF> v, DF df, bf16* HWY_RESTRICT p, size_t n) {
  HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)] = {};
  hn::Store(v, df, buf);
  for (size_t i = 0; i < n; ++i) p[i] = float_to_bf16(buf[i]);
}

// Loads of a kernel's input vector, float or bf16 (widened exactly): whole vectors and ragged
// tails (zero past n).
template <class DF>
HWY_INLINE hn::Vec<DF> LoadIn(DF df, const float* HWY_RESTRICT p) {
  return hn::LoadU(df, p);
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadIn(DF df, const bf16* HWY_RESTRICT p) {
  return LoadBf16(df, p);
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadInN(DF df, const float* HWY_RESTRICT p, size_t n) {
  HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)] = {};
  for (size_t i = 0; i < n; ++i) buf[i] = p[i];
  return hn::Load(df, buf);
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadInN(DF df, const bf16* HWY_RESTRICT p, size_t n) {
  HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)] = {};
  for (size_t i = 0; i < n; ++i) buf[i] = bf16_to_float(p[i]);
  return hn::Load(df, buf);
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();

#endif  // LLMCPU_SIMD_HWY_BF16_INL_H_
