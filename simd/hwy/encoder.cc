// Token + position embedding, vectorized (simd/scalar/encoder.h):
//   out[b,t,:] = wte[inp[b,t],:] + wpe[t,:];   dwte[inp[b,t],:] += dout[b,t,:];  dwpe[t,:] += dout
// The backward pass gives each thread a slice of channels and walks the tokens in order: every
// gradient element has one owner and the same summation order as the reference (bit-identical).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/encoder.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
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
    AddRow(out + size_t(bt) * C, wte + size_t(inp[bt]) * C, wpe + size_t(bt % T) * C, size_t(C));
  }
}

void EncoderBackward(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T,
                     int C) {
  constexpr int kSlice = 64;  // channels per owner: whole vectors on every target up to 2048 bits
  const int slices = (C + kSlice - 1) / kSlice;
#pragma omp parallel for schedule(static)
  for (int s = 0; s < slices; ++s) {
    const DF d;
    const size_t L = hn::Lanes(d);
    const size_t c0 = size_t(s) * kSlice, c1 = c0 + kSlice < size_t(C) ? c0 + kSlice : size_t(C);
    for (int bt = 0; bt < B * T; ++bt) {
      const float* HWY_RESTRICT g = dout + size_t(bt) * C;
      float* HWY_RESTRICT de = dwte + size_t(inp[bt]) * C;
      float* HWY_RESTRICT dp = dwpe + size_t(bt % T) * C;
      size_t c = c0;
      for (; c + L <= c1; c += L) {
        const VF v = hn::LoadU(d, g + c);
        hn::StoreU(hn::Add(hn::LoadU(d, de + c), v), d, de + c);
        hn::StoreU(hn::Add(hn::LoadU(d, dp + c), v), d, dp + c);
      }
      if (c < c1) {
        const size_t n = c1 - c;
        const VF v = LoadTail(d, g + c, n);
        StoreTail(hn::Add(LoadTail(d, de + c, n), v), d, de + c, n);
        StoreTail(hn::Add(LoadTail(d, dp + c, n), v), d, dp + c, n);
      }
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
