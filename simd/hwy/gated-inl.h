// The gated MLP units over rows [gate (H) | up (H)] (SwiGLU, GeGLU), shared by their kernels: the
// row loops, tails and bf16 loads and stores, with the activation a parameter. An activation Act is
// constructed from the DF in each thread and has
//   VF Value(VF x)                          act(x)
//   void GradAndValue(VF x, VF& g, VF& y)   act'(x) into g, act(x) into y
// and the units compute
//   out = act(gate) up,  dgate = (dout up) act'(gate),  dup = dout act(gate)
// Threads split the rows. Re-included per target (no #pragma once).

#if defined(LLMCPU_SIMD_HWY_GATED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LLMCPU_SIMD_HWY_GATED_INL_H_
#undef LLMCPU_SIMD_HWY_GATED_INL_H_
#else
#define LLMCPU_SIMD_HWY_GATED_INL_H_
#endif

#include <stddef.h>

#include "hwy/highway.h"
#include "simd/hwy/bf16-inl.h"
#include "simd/hwy/common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {

// In: float, or bf16 (widened exactly); Out: float, or bf16 (rounded at the store).
template <class Act, typename Out, typename In>
void GatedForward(Out* out, const In* inp, size_t N, int H_) {
  const size_t H = size_t(H_);
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const DF d;
    const Act act{d};
    const size_t L = hn::Lanes(d);
    const In* HWY_RESTRICT gate = inp + r * 2 * H;
    const In* HWY_RESTRICT up = gate + H;
    Out* HWY_RESTRICT y = out + r * H;
    size_t h = 0;
    for (; h + L <= H; h += L) {
      StoreOut(hn::Mul(act.Value(LoadIn(d, gate + h)), LoadIn(d, up + h)), d, y + h);
    }
    if (h < H) {
      const size_t k = H - h;
      StoreOutN(hn::Mul(act.Value(LoadInN(d, gate + h, k)), LoadInN(d, up + h, k)), d, y + h, k);
    }
  }
}

// dinp (N, 2H) overwritten with [dgate | dup]. In: float, or bf16 (widened exactly).
template <class Act, typename In>
void GatedBackward(float* dinp, const float* dout, const In* inp, size_t N, int H_) {
  const size_t H = size_t(H_);
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const DF d;
    const Act act{d};
    const size_t L = hn::Lanes(d);
    const In* HWY_RESTRICT gate = inp + r * 2 * H;
    const In* HWY_RESTRICT up = gate + H;
    const float* HWY_RESTRICT dy = dout + r * H;
    float* HWY_RESTRICT dgate = dinp + r * 2 * H;
    float* HWY_RESTRICT dup = dgate + H;
    VF g, y;
    size_t h = 0;
    for (; h + L <= H; h += L) {
      const VF dyv = hn::LoadU(d, dy + h);
      act.GradAndValue(LoadIn(d, gate + h), g, y);
      hn::StoreU(hn::Mul(hn::Mul(dyv, LoadIn(d, up + h)), g), d, dgate + h);
      hn::StoreU(hn::Mul(dyv, y), d, dup + h);
    }
    if (h < H) {
      const size_t k = H - h;
      const VF dyv = LoadTail(d, dy + h, k);
      act.GradAndValue(LoadInN(d, gate + h, k), g, y);
      StoreTail(hn::Mul(hn::Mul(dyv, LoadInN(d, up + h, k)), g), d, dgate + h, k);
      StoreTail(hn::Mul(dyv, y), d, dup + h, k);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();

#endif  // LLMCPU_SIMD_HWY_GATED_INL_H_
