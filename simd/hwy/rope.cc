// Rotary position embedding in the rotate_half layout, vectorized (the math of simd/scalar/rope.h):
// for a head's halves a = x[0, D/2) and b = x[D/2, D) at position p, c = cos[p, :], s = sin[p, :],
//   forward:   a' = a c - b s,   b' = b c + a s
//   backward:  da = da' c + db' s,   db = db' c - da' s
// Each element takes the reference's two products and one addition or subtraction, unfused
// (the build passes -ffp-contract=off), so every target gives the scalar reference's bits. Rows
// are independent; threads split them. A half shorter than a vector is one masked vector.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/rope.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "simd/hwy/common-inl.h"
#include "simd/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace {

// The first n lanes (n <= Lanes) of one head's halves at a and b, rotated in place. The loads of
// a vector come before its stores, and the lanes of a never overlap those of b.
template <bool kTranspose>
HWY_INLINE void RotateLanes(float* HWY_RESTRICT a, float* HWY_RESTRICT b,
                            const float* HWY_RESTRICT c, const float* HWY_RESTRICT s, size_t n) {
  const DF d;
  const bool full = n == hn::Lanes(d);
  const VF va = full ? hn::LoadU(d, a) : LoadTail(d, a, n);
  const VF vb = full ? hn::LoadU(d, b) : LoadTail(d, b, n);
  const VF vc = full ? hn::LoadU(d, c) : LoadTail(d, c, n);
  const VF vs = full ? hn::LoadU(d, s) : LoadTail(d, s, n);
  VF ra, rb;
  if constexpr (kTranspose) {
    ra = hn::Add(hn::Mul(va, vc), hn::Mul(vb, vs));
    rb = hn::Sub(hn::Mul(vb, vc), hn::Mul(va, vs));
  } else {
    ra = hn::Sub(hn::Mul(va, vc), hn::Mul(vb, vs));
    rb = hn::Add(hn::Mul(vb, vc), hn::Mul(va, vs));
  }
  if (full) {
    hn::StoreU(ra, d, a);
    hn::StoreU(rb, d, b);
  } else {
    StoreTail(ra, d, a, n);
    StoreTail(rb, d, b, n);
  }
}

template <bool kTranspose>
void Rope(float* x, const float* cos, const float* sin, size_t N, int T, int pos0, int heads, int D,
          size_t row_stride) {
  const size_t half = size_t(D) / 2;
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const size_t L = hn::Lanes(DF());
    const size_t p = size_t(pos0) + r % size_t(T);
    const float* c = cos + p * half;
    const float* s = sin + p * half;
    for (size_t h = 0; h < size_t(heads); ++h) {
      float* a = x + r * row_stride + h * size_t(D);
      for (size_t j = 0; j < half; j += L) {
        RotateLanes<kTranspose>(a + j, a + half + j, c + j, s + j, half - j < L ? half - j : L);
      }
    }
  }
}

}  // namespace

void FillRope(KernelTable& t) {
  t.rope_forward = &Rope<false>;
  t.rope_backward = &Rope<true>;
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
