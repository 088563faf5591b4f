// The loops that measure this machine's roofs (simd/roofs.h), written with Highway and compiled for
// every target (one call per thread of the OpenMP team, all at once):
//   FmaLoop:   register-resident independent fused multiply-adds, no memory traffic (compute roof);
//   Triad:     a = b + s c, and Update: a += s b, over one thread's slice of arrays far larger
//              than the caches, with full-width vectors (bandwidth roof).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/roofline.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include <cstddef>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace roofs {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Twelve accumulator chains cover the FMA latency times the number of FMA pipes of current cores.
// Returns the number of floating-point operations performed (2 per lane per FMA).
double FmaLoop(size_t iterations, float seed) {
  const hn::ScalableTag<float> d;
  const auto x = hn::Set(d, 0.999999f), y = hn::Set(d, 1e-7f);
  // Distinct starting values: identical chains would be merged by the compiler.
  auto a0 = hn::Set(d, seed), a1 = hn::Set(d, seed + 1), a2 = hn::Set(d, seed + 2);
  auto a3 = hn::Set(d, seed + 3), a4 = hn::Set(d, seed + 4), a5 = hn::Set(d, seed + 5);
  auto a6 = hn::Set(d, seed + 6), a7 = hn::Set(d, seed + 7), a8 = hn::Set(d, seed + 8);
  auto a9 = hn::Set(d, seed + 9), a10 = hn::Set(d, seed + 10), a11 = hn::Set(d, seed + 11);
  for (size_t i = 0; i < iterations; ++i) {
    a0 = hn::MulAdd(a0, x, y), a1 = hn::MulAdd(a1, x, y), a2 = hn::MulAdd(a2, x, y);
    a3 = hn::MulAdd(a3, x, y), a4 = hn::MulAdd(a4, x, y), a5 = hn::MulAdd(a5, x, y);
    a6 = hn::MulAdd(a6, x, y), a7 = hn::MulAdd(a7, x, y), a8 = hn::MulAdd(a8, x, y);
    a9 = hn::MulAdd(a9, x, y), a10 = hn::MulAdd(a10, x, y), a11 = hn::MulAdd(a11, x, y);
  }
  const auto s = hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)),
                         hn::Add(hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)),
                                 hn::Add(hn::Add(a8, a9), hn::Add(a10, a11))));
  // Data-dependent result so the loop cannot be removed; never true for the values used.
  if (hn::GetLane(s) == 12345.0f) return 0;
  return 2.0 * 12 * double(hn::Lanes(d)) * double(iterations);
}

void Triad(float* HWY_RESTRICT a, const float* HWY_RESTRICT b, const float* HWY_RESTRICT c, float s,
           size_t n) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const auto vs = hn::Set(d, s);
  size_t i = 0;
  for (; i + L <= n; i += L)
    hn::StoreU(hn::MulAdd(vs, hn::LoadU(d, c + i), hn::LoadU(d, b + i)), d, a + i);
  for (; i < n; ++i) a[i] = b[i] + s * c[i];
}

void Update(float* HWY_RESTRICT a, const float* HWY_RESTRICT b, float s, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const auto vs = hn::Set(d, s);
  size_t i = 0;
  for (; i + L <= n; i += L)
    hn::StoreU(hn::MulAdd(vs, hn::LoadU(d, b + i), hn::LoadU(d, a + i)), d, a + i);
  for (; i < n; ++i) a[i] += s * b[i];
}

}  // namespace HWY_NAMESPACE
}  // namespace roofs
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "simd/isa_cap.h"
#include "simd/roofs.h"

namespace llmcpu::roofs {
HWY_EXPORT(FmaLoop);
HWY_EXPORT(Triad);
HWY_EXPORT(Update);
double fma_loop(size_t iterations, float seed) {
  isa_cap();  // Highway's chosen target within LLMCPU_MAX_ISA
  return HWY_DYNAMIC_DISPATCH(FmaLoop)(iterations, seed);
}
double fma_loop_on(int64_t hwy_target, size_t iterations, float seed) {
  // HWY_EXPORT's table: an initialising entry, one entry per dynamic target in bit order, then the
  // portable fallback (as simd/hwy/table.cc indexes it).
  const bool fallback = (hwy_target & (HWY_SCALAR | HWY_EMU128)) != 0;
  const size_t index =
      fallback ? HWY_MAX_DYNAMIC_TARGETS + 1
               : hwy::Num0BitsBelowLS1Bit_Nonzero64(uint64_t(HWY_CHOSEN_TARGET_SHIFT(hwy_target)));
  return HWY_DISPATCH_TABLE(FmaLoop)[index](iterations, seed);
}
void triad(float* a, const float* b, const float* c, float s, size_t n) {
  isa_cap();
  HWY_DYNAMIC_DISPATCH(Triad)(a, b, c, s, n);
}
void update(float* a, const float* b, float s, size_t n) {
  isa_cap();
  HWY_DYNAMIC_DISPATCH(Update)(a, b, s, n);
}
}  // namespace llmcpu::roofs
#endif
