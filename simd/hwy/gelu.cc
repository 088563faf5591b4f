// GELU in GPT-2's tanh form (simd/scalar/gelu.h), vectorized through the identity
// 0.5 (1 + tanh(u)) = sigma(2u) = 1 / (1 + exp(-2u)):
//   gelu(x)  = x sigma,   sigma = 1 / (1 + E),   E = exp(-2u),   u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = sigma + x sigma (1 - sigma) 2 u'(x)
//            = sigma + x E sigma^2 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// No step cancels (1 - sigma = E sigma), so one exp and one division per element give GELU to a
// few ulp; the tanh form needed expm1, a division and sign handling, twice the work. The exp is
// Cephes' expf polynomial on a two-part ln 2 reduction (relative error <= 2^-23, measured over
// every float argument it takes). GELU is compute-bound, not memory-bound: on AVX-512 one
// element takes about as long as moving its bytes three times over.
// GeGLU (simd/scalar/geglu.h) gates the up half of each row [gate (H) | up (H)] with this GELU,
// through gated-inl.h's rows: out = gelu(gate) up;  dgate = dout up gelu'(gate),
// dup = dout gelu(gate)  (one exp for both).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/gelu.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "simd/hwy/bf16-inl.h"
#include "simd/hwy/common-inl.h"
#include "simd/hwy/gated-inl.h"
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
  VF one() const { return hn::Set(d, 1.0f); }
  VF m2s() const { return hn::Set(d, float(-2.0 * scalar::kGeluScale)); }  // -2 sqrt(2/pi)
  VF k() const { return hn::Set(d, float(scalar::kGeluCube)); }
  VF s2() const { return hn::Set(d, float(2.0 * scalar::kGeluScale)); }
  VF s3k() const { return hn::Set(d, float(3.0 * scalar::kGeluCube)); }
  DF d;
};

// exp(a) for a in [-87, 88] (clamped there: sigma is then 1 or 0 to the last bit that matters),
// as 2^n p(r) with n = round(a / ln 2) and r = a - n ln 2 in two parts.
HWY_INLINE VF GeluExp(DF d, VF a) {
  const hn::RebindToSigned<DF> di;
  a = hn::Min(hn::Max(a, hn::Set(d, -87.0f)), hn::Set(d, 88.0f));
  const VF n = hn::Round(hn::Mul(a, hn::Set(d, 1.44269504088896341f)));
  VF r = hn::NegMulAdd(n, hn::Set(d, 0.693359375f), a);
  r = hn::NegMulAdd(n, hn::Set(d, -2.12194440e-4f), r);
  VF p = hn::Set(d, 1.9875691500e-4f);
  p = hn::MulAdd(p, r, hn::Set(d, 1.3981999507e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 8.3334519073e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 4.1665795894e-2f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.6666665459e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 5.0000001201e-1f));
  p = hn::MulAdd(p, hn::Mul(r, r), hn::Add(r, hn::Set(d, 1.0f)));
  const auto scale = hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127)));
  return hn::Mul(p, hn::BitCast(d, scale));
}

// E = exp(-2u) of x.
HWY_INLINE VF GeluE(DF d, const GeluConsts& g, VF x) {
  const VF x3 = hn::Mul(hn::Mul(x, x), x);
  return GeluExp(d, hn::Mul(g.m2s(), hn::MulAdd(g.k(), x3, x)));
}

HWY_INLINE VF GeluOne(DF d, const GeluConsts& g, VF x) {
  return hn::Div(x, hn::Add(g.one(), GeluE(d, g, x)));
}

// gelu'(x) into local and x sigma = gelu(x) into y, from one exp.
HWY_INLINE void GeluGradAndValue(DF d, const GeluConsts& g, VF x, VF& local, VF& y) {
  const VF e = GeluE(d, g, x);
  const VF sigma = hn::Div(g.one(), hn::Add(g.one(), e));
  const VF ds = hn::Mul(hn::Mul(e, sigma), sigma);                             // sigma (1 - sigma)
  const VF du = hn::Mul(g.s2(), hn::MulAdd(g.s3k(), hn::Mul(x, x), g.one()));  // 2 u'(x)
  local = hn::MulAdd(hn::Mul(x, ds), du, sigma);
  y = hn::Mul(x, sigma);
}

HWY_INLINE VF GeluGradOne(DF d, const GeluConsts& g, VF x, VF dy) {
  VF local, y;
  GeluGradAndValue(d, g, x, local, y);
  return hn::Mul(local, dy);
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

// GELU's tanh form as the activation of GeGLU's rows (gated-inl.h).
struct GeluGate {
  VF Value(VF x) const { return GeluOne(d, GeluConsts{d}, x); }
  void GradAndValue(VF x, VF& g, VF& y) const { GeluGradAndValue(d, GeluConsts{d}, x, g, y); }
  DF d;
};

}  // namespace

void FillGelu(KernelTable& t) {
  t.gelu_forward = &GeluForward<float, float>;
  t.gelu_backward = &GeluBackward<float>;
  t.geglu_forward = &GatedForward<GeluGate, float, float>;
  t.geglu_backward = &GatedBackward<GeluGate, float>;
}

void FillGeluBf16(Bf16Kernels& t) {
  t.gelu_forward = &GeluForward<bf16, float>;
  t.gelu_forward_bf16 = &GeluForward<bf16, bf16>;
  t.gelu_backward = &GeluBackward<bf16>;
  t.geglu_forward = &GatedForward<GeluGate, bf16, bf16>;
  t.geglu_backward = &GatedBackward<GeluGate, bf16>;
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
