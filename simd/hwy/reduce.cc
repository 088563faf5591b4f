// Reductions over flat buffers, vectorized (simd/scalar/reduce.h):
//   sum_squares(x) = sum_i x_i^2 in double, in the reference's fixed chunks (kReduceChunk) whose
//   partial sums are added in order, so the result is the same for any thread count;
//   scale(x, f): x_i *= f.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/reduce.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "simd/hwy/common-inl.h"
#include "simd/kernels.h"
#include "simd/scalar/reduce.h"
#include "simd/workspace.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace {

// sum of squares of x[0, n) in double: floats widened half a vector at a time.
double SumSquaresChunk(const float* HWY_RESTRICT x, size_t n) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> dh;  // as many floats as dd has doubles
  const size_t L = hn::Lanes(dd);
  auto s0 = hn::Zero(dd), s1 = s0, s2 = s0, s3 = s0;  // four chains hide the FMA latency
  size_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    const auto a = hn::PromoteTo(dd, hn::LoadU(dh, x + i));
    const auto b = hn::PromoteTo(dd, hn::LoadU(dh, x + i + L));
    const auto c = hn::PromoteTo(dd, hn::LoadU(dh, x + i + 2 * L));
    const auto e = hn::PromoteTo(dd, hn::LoadU(dh, x + i + 3 * L));
    s0 = hn::MulAdd(a, a, s0);
    s1 = hn::MulAdd(b, b, s1);
    s2 = hn::MulAdd(c, c, s2);
    s3 = hn::MulAdd(e, e, s3);
  }
  double total = hn::GetLane(hn::SumOfLanes(dd, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
  for (; i < n; ++i) total += double(x[i]) * double(x[i]);
  return total;
}

// One partial sum per chunk, in the calling thread's scratch (doubles: two floats each).
size_t PartialFloats(size_t chunks) { return 2 * (chunks ? chunks : 1); }

double SumSquares(const float* x, size_t N) {
  constexpr size_t kChunk = scalar::kReduceChunk;
  const size_t chunks = (N + kChunk - 1) / kChunk;
  double* partial =
      reinterpret_cast<double*>(thread_scratch(ScratchSlot::kReduce, PartialFloats(chunks)));
#pragma omp parallel for schedule(static)
  for (size_t c = 0; c < chunks; ++c) {
    const size_t i0 = c * kChunk;
    partial[c] = SumSquaresChunk(x + i0, (i0 + kChunk < N ? i0 + kChunk : N) - i0);
  }
  double total = 0;
  for (size_t c = 0; c < chunks; ++c) total += partial[c];
  return total;
}

ScratchUse SumSquaresScratch(size_t N, int /*threads*/) {
  constexpr size_t kChunk = scalar::kReduceChunk;
  return ScratchUse().ask(ScratchSlot::kReduce, PartialFloats((N + kChunk - 1) / kChunk));
}

void Scale(float* x, float factor, size_t N) {
  ParallelChunks(N, [&](size_t begin, size_t end) {
    const DF d;
    const VF f = hn::Set(d, factor);
    const size_t L = hn::Lanes(d);
    size_t i = begin;
    for (; i + L <= end; i += L) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), f), d, x + i);
    if (i < end) StoreTail(hn::Mul(LoadTail(d, x + i, end - i), f), d, x + i, end - i);
  });
}

}  // namespace

void FillReduce(KernelTable& t) {
  t.sum_squares = &SumSquares;
  t.sum_squares_scratch = &SumSquaresScratch;
  t.scale = &Scale;
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
