// GELU in GPT-2's tanh form, vectorized (the math of simd/scalar/gelu.h):
//   gelu(x)  = 0.5 x (1 + tanh(u)),   u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// tanh comes from hwy/contrib/math (a few ulp). Memory-bound: one read and one write per element
// forward, two reads and a write backward.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/gelu.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "simd/hwy/bf16-inl.h"
#include "simd/hwy/common-inl.h"
#include "simd/bf16.h"
#include "simd/kernels.h"
#include "simd/scalar/gelu.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace {

// The constants, broadcast where they are used (the compiler hoists them out of the loops): SVE
// vectors are sizeless and cannot be members of a struct.
struct GeluConsts {
  VF half() const { return hn::Set(d, 0.5f); }
  VF one() const { return hn::Set(d, 1.0f); }
  VF s() const { return hn::Set(d, float(scalar::kGeluScale)); }
  VF k() const { return hn::Set(d, float(scalar::kGeluCube)); }
  VF s3k() const { return hn::Set(d, float(3.0 * scalar::kGeluCube)); }
  DF d;
};

HWY_INLINE VF GeluOne(DF d, const GeluConsts& g, VF x) {
  const VF x3 = hn::Mul(hn::Mul(x, x), x);
  const VF th = hn::Tanh(d, hn::Mul(g.s(), hn::MulAdd(g.k(), x3, x)));
  return hn::Mul(hn::Mul(g.half(), x), hn::Add(g.one(), th));
}

HWY_INLINE VF GeluGradOne(DF d, const GeluConsts& g, VF x, VF dy) {
  const VF x2 = hn::Mul(x, x);
  const VF th = hn::Tanh(d, hn::Mul(g.s(), hn::MulAdd(hn::Mul(g.k(), x2), x, x)));
  const VF left = hn::Mul(g.half(), hn::Add(g.one(), th));
  const VF sech2 = hn::NegMulAdd(th, th, g.one());  // 1 - tanh^2
  const VF du = hn::Mul(g.s(), hn::MulAdd(g.s3k(), x2, g.one()));
  const VF right = hn::Mul(hn::Mul(hn::Mul(g.half(), x), sech2), du);
  return hn::Mul(hn::Add(left, right), dy);
}

// In: float, or bf16 (widened exactly); Out: float, or bf16 (rounded at the store).
template <typename Out, typename In>
void GeluForward(Out* out, const In* inp, size_t N) {
  ParallelChunks(N, [&](size_t begin, size_t end) {
    const DF d;
    const GeluConsts g{d};
    const size_t L = hn::Lanes(d);
    size_t i = begin;
    for (; i + L <= end; i += L) StoreOut(GeluOne(d, g, LoadIn(d, inp + i)), d, out + i);
    if (i < end) StoreOutN(GeluOne(d, g, LoadInN(d, inp + i, end - i)), d, out + i, end - i);
  });
}

// dinp = gelu'(inp) * dout (overwritten; dinp may alias dout). In: float, or bf16.
template <typename In>
void GeluBackward(float* dinp, const In* inp, const float* dout, size_t N) {
  ParallelChunks(N, [&](size_t begin, size_t end) {
    const DF d;
    const GeluConsts g{d};
    const size_t L = hn::Lanes(d);
    size_t i = begin;
    for (; i + L <= end; i += L) {
      hn::StoreU(GeluGradOne(d, g, LoadIn(d, inp + i), hn::LoadU(d, dout + i)), d, dinp + i);
    }
    if (i < end) {
      const size_t n = end - i;
      StoreTail(GeluGradOne(d, g, LoadInN(d, inp + i, n), LoadTail(d, dout + i, n)), d, dinp + i,
                n);
    }
  });
}

}  // namespace

void FillGelu(KernelTable& t) {
  t.gelu_forward = &GeluForward<float, float>;
  t.gelu_backward = &GeluBackward<float>;
}

void FillGeluBf16(Bf16Kernels& t) {
  t.gelu_forward = &GeluForward<bf16, float>;
  t.gelu_forward_bf16 = &GeluForward<bf16, bf16>;
  t.gelu_backward = &GeluBackward<bf16>;
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
