// Small Highway helpers shared by the kernel families: sums and dot products over a row, and the
// chunking of flat element-wise loops over an OpenMP team. Re-included per target (no #pragma
// once). Rows of any length: whole vectors, then one masked vector for the ragged tail (masked
// loads never touch memory past the end).

#if defined(LLMCPU_SIMD_HWY_COMMON_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LLMCPU_SIMD_HWY_COMMON_INL_H_
#undef LLMCPU_SIMD_HWY_COMMON_INL_H_
#else
#define LLMCPU_SIMD_HWY_COMMON_INL_H_
#endif

#include <stddef.h>

#include "hwy/highway.h"
#include "simd/hwy/tail-inl.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Element-wise kernels hand each thread whole chunks of this many floats (a multiple of every
// vector length), so the split never depends on the vector width.
inline constexpr size_t kChunkFloats = 4096;

// Loads the n < Lanes floats at p, zeros in the other lanes; stores the first n lanes.
HWY_INLINE VF LoadTail(DF d, const float* HWY_RESTRICT p, size_t n) { return LoadN(d, p, n); }
HWY_INLINE void StoreTail(VF v, DF d, float* HWY_RESTRICT p, size_t n) { StoreN(v, d, p, n); }

HWY_INLINE float ReduceSum(DF d, VF v) { return hn::GetLane(hn::SumOfLanes(d, v)); }

// sum_i x[i], four independent accumulators.
HWY_INLINE float Sum(const float* HWY_RESTRICT x, size_t n) {
  const DF d;
  const size_t L = hn::Lanes(d);
  VF s0 = hn::Zero(d), s1 = s0, s2 = s0, s3 = s0;
  size_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    s0 = hn::Add(s0, hn::LoadU(d, x + i));
    s1 = hn::Add(s1, hn::LoadU(d, x + i + L));
    s2 = hn::Add(s2, hn::LoadU(d, x + i + 2 * L));
    s3 = hn::Add(s3, hn::LoadU(d, x + i + 3 * L));
  }
  for (; i + L <= n; i += L) s0 = hn::Add(s0, hn::LoadU(d, x + i));
  if (i < n) s1 = hn::Add(s1, LoadTail(d, x + i, n - i));
  return ReduceSum(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)));
}

// sum_i a[i] * b[i], four independent accumulators.
HWY_INLINE float Dot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, size_t n) {
  const DF d;
  const size_t L = hn::Lanes(d);
  VF s0 = hn::Zero(d), s1 = s0, s2 = s0, s3 = s0;
  size_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    s0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), s0);
    s1 = hn::MulAdd(hn::LoadU(d, a + i + L), hn::LoadU(d, b + i + L), s1);
    s2 = hn::MulAdd(hn::LoadU(d, a + i + 2 * L), hn::LoadU(d, b + i + 2 * L), s2);
    s3 = hn::MulAdd(hn::LoadU(d, a + i + 3 * L), hn::LoadU(d, b + i + 3 * L), s3);
  }
  for (; i + L <= n; i += L) s0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), s0);
  if (i < n) s1 = hn::MulAdd(LoadTail(d, a + i, n - i), LoadTail(d, b + i, n - i), s1);
  return ReduceSum(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)));
}

// Calls f(begin, end) for consecutive chunks of [0, n), chunks spread over the OpenMP team.
// f handles a ragged tail itself (only the last chunk has one).
template <class F>
HWY_INLINE void ParallelChunks(size_t n, const F& f) {
  const size_t chunks = (n + kChunkFloats - 1) / kChunkFloats;
#pragma omp parallel for schedule(static)
  for (size_t c = 0; c < chunks; ++c) {
    const size_t begin = c * kChunkFloats;
    f(begin, begin + kChunkFloats < n ? begin + kChunkFloats : n);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();

#endif  // LLMCPU_SIMD_HWY_COMMON_INL_H_
