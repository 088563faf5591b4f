// Token + position embedding, vectorized (simd/scalar/encoder.h):
//   out[b,t,:] = wte[inp[b,t],:] + wpe[t,:];   dwte[inp[b,t],:] += dout[b,t,:];  dwpe[t,:] += dout
// The backward pass gives each thread a slice of channels and walks the tokens in order: every
// gradient element has one owner and the same summation order as the reference (bit-identical).
// wpe = null (no position table): out[b,t,:] = wte[inp[b,t],:]; dwpe = null: only dwte.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/encoder.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include <cstring>

#include "hwy/highway.h"
#include "simd/hwy/common-inl.h"
#include "simd/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace {

// out[c] = a[c] + b[c] for c < C.
HWY_INLINE void AddRow(float* HWY_RESTRICT out, const float* HWY_RESTRICT a,
                       const float* HWY_RESTRICT b, size_t C) {
  const DF d;
  const size_t L = hn::Lanes(d);
  size_t c = 0;
  for (; c + L <= C; c += L)
    hn::StoreU(hn::Add(hn::LoadU(d, a + c), hn::LoadU(d, b + c)), d, out + c);
  if (c < C)
    StoreTail(hn::Add(LoadTail(d, a + c, C - c), LoadTail(d, b + c, C - c)), d, out + c, C - c);
}

void EncoderForward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T,
                    int C) {
#pragma omp parallel for schedule(static)
  for (int bt = 0; bt < B * T; ++bt) {
    float* o = out + size_t(bt) * C;
    const float* e = wte + size_t(inp[bt]) * C;
    if (wpe) {
      AddRow(o, e, wpe + size_t(bt % T) * C, size_t(C));
    } else {
      std::memcpy(o, e, size_t(C) * sizeof(float));
    }
  }
}

// row[c] += g[c] for c in [c0, c1).
HWY_INLINE void AccumulateSlice(float* HWY_RESTRICT row, const float* HWY_RESTRICT g, size_t c0,
                                size_t c1) {
  const DF d;
  const size_t L = hn::Lanes(d);
  size_t c = c0;
  for (; c + L <= c1; c += L)
    hn::StoreU(hn::Add(hn::LoadU(d, row + c), hn::LoadU(d, g + c)), d, row + c);
  if (c < c1) {
    const size_t n = c1 - c;
    StoreTail(hn::Add(LoadTail(d, row + c, n), LoadTail(d, g + c, n)), d, row + c, n);
  }
}

void EncoderBackward(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T,
                     int C) {
  constexpr int kSlice = 64;  // channels per owner: whole vectors on every target up to 2048 bits
  const int slices = (C + kSlice - 1) / kSlice;
#pragma omp parallel for schedule(static)
  for (int s = 0; s < slices; ++s) {
    const size_t c0 = size_t(s) * kSlice, c1 = c0 + kSlice < size_t(C) ? c0 + kSlice : size_t(C);
    for (int bt = 0; bt < B * T; ++bt) {
      const float* g = dout + size_t(bt) * C;
      AccumulateSlice(dwte + size_t(inp[bt]) * C, g, c0, c1);
      if (dwpe) AccumulateSlice(dwpe + size_t(bt % T) * C, g, c0, c1);
    }
  }
}

}  // namespace

void FillEncoder(KernelTable& t) {
  t.encoder_forward = &EncoderForward;
  t.encoder_backward = &EncoderBackward;
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
