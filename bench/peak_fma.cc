// The fp32 compute roof of this machine for bench_kernels: a register-resident loop of independent
// fused multiply-adds, written with Highway and run on the best target the CPU has, on every thread
// of the OpenMP team at once. No memory traffic: what it measures is FMA throughput alone.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/peak_fma.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include <cstddef>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Twelve accumulator chains cover the FMA latency times the number of FMA pipes of current cores.
// Returns the number of floating-point operations performed (2 per lane per FMA).
double FmaLoop(size_t iterations, float seed) {
  const hn::ScalableTag<float> d;
  const auto x = hn::Set(d, 0.999999f), y = hn::Set(d, 1e-7f);
  auto a0 = hn::Set(d, seed), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
  auto a6 = a0, a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
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

}  // namespace HWY_NAMESPACE
}  // namespace bench
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace llmcpu::bench {
HWY_EXPORT(FmaLoop);
double fma_loop(size_t iterations, float seed) {
  return HWY_DYNAMIC_DISPATCH(FmaLoop)(iterations, seed);
}
}  // namespace llmcpu::bench
#endif
