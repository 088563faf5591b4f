// Rotary position embedding in the rotate_half layout, vectorized (the math of simd/scalar/rope.h):
// for a head's halves a = x[0, D/2) and b = x[D/2, D) at position p, c = cos[p, :], s = sin[p, :],
//   forward:   a' = a c - b s,   b' = b c + a s
//   backward:  da = da' c + db' s,   db = db' c - da' s
// Each element takes the reference's two products and one addition or subtraction, unfused
// (the build passes -ffp-contract=off), so every target gives the scalar reference's bits. Rows
// are independent; threads split them. A half shorter than a vector is one masked vector. The bf16
// table's forward rotates bf16 rows: widened exactly, the same fp32 math, rounded once at the
// store, so every target gives the bits of the scalar reference's fp32 rotation rounded to bf16.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/rope.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "simd/bf16.h"
#include "simd/hwy/bf16-inl.h"
#include "simd/hwy/common-inl.h"
#include "simd/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace {

// The first n lanes (n <= Lanes) of an fp32 table row, or of a head's half: float, or bf16
// (widened exactly; rounded at the store). Past n: zeros, and nothing stored.
HWY_INLINE VF LoadLanes(DF d, const float* HWY_RESTRICT p, size_t n) {
  return n == hn::Lanes(d) ? hn::LoadU(d, p) : LoadTail(d, p, n);
}
HWY_INLINE VF LoadLanes(DF d, const bf16* HWY_RESTRICT p, size_t n) {
  return n == hn::Lanes(d) ? LoadBf16(d, p) : LoadInN(d, p, n);
}
HWY_INLINE void StoreLanes(VF v, DF d, float* HWY_RESTRICT p, size_t n) {
  if (n == hn::Lanes(d)) {
    hn::StoreU(v, d, p);
  } else {
    StoreTail(v, d, p, n);
  }
}
HWY_INLINE void StoreLanes(VF v, DF d, bf16* HWY_RESTRICT p, size_t n) {
  if (n == hn::Lanes(d)) {
    StoreBf16(v, d, p);
  } else {
    StoreOutN(v, d, p, n);
  }
}

// The first n lanes (n <= Lanes) of one head's halves at a and b, rotated in place. The loads of
// a vector come before its stores, and the lanes of a never overlap those of b.
template <bool kTranspose, typename E>
HWY_INLINE void RotateLanes(E* HWY_RESTRICT a, E* HWY_RESTRICT b, const float* HWY_RESTRICT c,
                            const float* HWY_RESTRICT s, size_t n) {
  const DF d;
  const VF va = LoadLanes(d, a, n), vb = LoadLanes(d, b, n);
  const VF vc = LoadLanes(d, c, n), vs = LoadLanes(d, s, n);
  VF ra, rb;
  if constexpr (kTranspose) {
    ra = hn::Add(hn::Mul(va, vc), hn::Mul(vb, vs));
    rb = hn::Sub(hn::Mul(vb, vc), hn::Mul(va, vs));
  } else {
    ra = hn::Sub(hn::Mul(va, vc), hn::Mul(vb, vs));
    rb = hn::Add(hn::Mul(vb, vc), hn::Mul(va, vs));
  }
  StoreLanes(ra, d, a, n);
  StoreLanes(rb, d, b, n);
}

// E: the rows' elements, float or bf16.
template <bool kTranspose, typename E>
void Rope(E* x, const float* cos, const float* sin, size_t N, int T, int pos0, int heads, int D,
          size_t row_stride) {
  const size_t half = size_t(D) / 2;
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const size_t L = hn::Lanes(DF());
    const size_t p = size_t(pos0) + r % size_t(T);
    const float* c = cos + p * half;
    const float* s = sin + p * half;
    for (size_t h = 0; h < size_t(heads); ++h) {
      E* a = x + r * row_stride + h * size_t(D);
      for (size_t j = 0; j < half; j += L) {
        RotateLanes<kTranspose>(a + j, a + half + j, c + j, s + j, half - j < L ? half - j : L);
      }
    }
  }
}

}  // namespace

void FillRope(KernelTable& t) {
  t.rope_forward = &Rope<false, float>;
  t.rope_backward = &Rope<true, float>;
}

void FillRopeBf16(Bf16Kernels& t) { t.rope_forward = &Rope<false, bf16>; }

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
