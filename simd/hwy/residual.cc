// Residual connection, vectorized (simd/scalar/residual.h): out = a + b; out may alias a or b.
// Memory-bound: two reads and one write per element.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/residual.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "simd/hwy/common-inl.h"
#include "simd/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace {

void ResidualForward(float* out, const float* a, const float* b, size_t N) {
  ParallelChunks(N, [&](size_t begin, size_t end) {
    const DF d;
    const size_t L = hn::Lanes(d);
    size_t i = begin;
    for (; i + L <= end; i += L) {
      hn::StoreU(hn::Add(hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, out + i);
    }
    if (i < end) {
      const size_t n = end - i;
      StoreTail(hn::Add(LoadTail(d, a + i, n), LoadTail(d, b + i, n)), d, out + i, n);
    }
  });
}

}  // namespace

void FillResidual(KernelTable& t) { t.residual_forward = &ResidualForward; }

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
