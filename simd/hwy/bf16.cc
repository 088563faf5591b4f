// The bf16 kernel table of one Highway target (simd/bf16.h): fp32 <-> bf16 conversions, and the
// portable bf16 GEMMs, which widen their operands exactly to fp32 and run this target's fp32 GEMM
// (products of bf16 values are exact in fp32, so this is the same math as a bf16 dot-product unit
// that accumulates in fp32, at fp32 speed). The layernorm, GELU, RMSNorm, RoPE, SwiGLU, AdamW and
// flash attention entries come from their family files (written once for float and bf16 operands).
// x86 CPUs with AVX512-BF16 get a faster GEMM from simd/x86/, Arm CPUs with BF16 one from simd/arm/
// (chosen in simd/bf16_dispatch.cpp).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/bf16.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "simd/bf16.h"
#include "simd/hwy/bf16-inl.h"
#include "simd/hwy/common-inl.h"
#include "simd/kernels.h"
#include "simd/workspace.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {

void FillLayerNormBf16(Bf16Kernels& t);
void FillGeluBf16(Bf16Kernels& t);
void FillRmsNormBf16(Bf16Kernels& t);
void FillRopeBf16(Bf16Kernels& t);
void FillSwiGluBf16(Bf16Kernels& t);
void FillAdamWBf16(Bf16Kernels& t);
void FillFlashAttentionBf16(Bf16Kernels& t);  // flash_attention.cc
void BackwardBias(float* dbias, const float* dout, size_t N, size_t OC);  // matmul.cc

namespace {

// This target's fp32 table (with the Highway GEMM), set once by FillBf16.
const KernelTable* g_fp32 = nullptr;

void ToBf16(bf16* out, const float* in, size_t N) {
  ParallelChunks(N, [&](size_t begin, size_t end) {
    const DF d;
    const size_t L = hn::Lanes(d);
    size_t i = begin;
    for (; i + L <= end; i += L) StoreBf16(hn::LoadU(d, in + i), d, out + i);
    for (; i < end; ++i) out[i] = float_to_bf16(in[i]);
  });
}

void ToF32(float* out, const bf16* in, size_t N) {
  ParallelChunks(N, [&](size_t begin, size_t end) {
    const DF d;
    const size_t L = hn::Lanes(d);
    size_t i = begin;
    for (; i + L <= end; i += L) hn::StoreU(LoadBf16(d, in + i), d, out + i);
    for (; i < end; ++i) out[i] = bf16_to_float(in[i]);
  });
}

// x rounded to bf16 and widened back: the values a bf16 GEMM sees.
void RoundThroughBf16(float* out, const float* in, size_t N) {
  ParallelChunks(N, [&](size_t begin, size_t end) {
    const DF d;
    const size_t L = hn::Lanes(d);
    HWY_ALIGN bf16 tmp[HWY_MAX_BYTES / sizeof(float)];
    size_t i = begin;
    for (; i + L <= end; i += L) {
      StoreBf16(hn::LoadU(d, in + i), d, tmp);
      hn::StoreU(LoadBf16(d, tmp), d, out + i);
    }
    for (; i < end; ++i) out[i] = bf16_to_float(float_to_bf16(in[i]));
  });
}

void MatmulForward(float* out, const bf16* inp, const bf16* weight, const float* bias, size_t N,
                   int C, int OC) {
  const size_t nx = N * size_t(C), nw = size_t(OC) * size_t(C);
  float* x = thread_scratch(ScratchSlot::kBf16A, nx);
  float* w = thread_scratch(ScratchSlot::kBf16B, nw);
  ToF32(x, inp, nx);
  ToF32(w, weight, nw);
  g_fp32->matmul_forward(out, x, w, bias, N, C, OC);
}

void MatmulBackward(float* dinp, float* dweight, float* dbias, const float* dout, const bf16* inp,
                    const bf16* weight, size_t N, int C, int OC) {
  const size_t nd = N * size_t(OC), nx = N * size_t(C), nw = size_t(OC) * size_t(C);
  float* d = thread_scratch(ScratchSlot::kBf16C, nd);
  float* x = thread_scratch(ScratchSlot::kBf16A, nx);
  float* w = thread_scratch(ScratchSlot::kBf16B, nw);
  RoundThroughBf16(d, dout, nd);
  ToF32(x, inp, nx);
  ToF32(w, weight, nw);
  g_fp32->matmul_backward(dinp, dweight, nullptr, d, x, w, N, C, OC);
  if (dbias) BackwardBias(dbias, dout, N, size_t(OC));
}

// The sizing entries: the widened operands in the calling thread's scratch, then what this
// target's fp32 GEMM asks for (its dbias is summed here, without scratch).
ScratchUse MatmulForwardScratch(size_t N, int C, int OC, bool bias, int threads) {
  return ScratchUse()
      .ask(ScratchSlot::kBf16A, N * size_t(C))
      .ask(ScratchSlot::kBf16B, size_t(OC) * size_t(C))
      .merge(g_fp32->matmul_forward_scratch(N, C, OC, bias, threads));
}

ScratchUse MatmulBackwardScratch(size_t N, int C, int OC, bool dinp, bool /*dbias*/, int threads) {
  return ScratchUse()
      .ask(ScratchSlot::kBf16C, N * size_t(OC))
      .ask(ScratchSlot::kBf16A, N * size_t(C))
      .ask(ScratchSlot::kBf16B, size_t(OC) * size_t(C))
      .merge(g_fp32->matmul_backward_scratch(N, C, OC, dinp, false, threads));
}

}  // namespace

void FillBf16(Bf16Kernels& t, const KernelTable& fp32) {
  g_fp32 = &fp32;
  t.target = fp32.target;
  t.to_bf16 = &ToBf16;
  t.to_f32 = &ToF32;
  t.matmul_forward = &MatmulForward;
  t.matmul_forward_bf16 = nullptr;  // the caller rounds matmul_forward's output
  t.matmul_backward = &MatmulBackward;
  t.matmul_forward_scratch = &MatmulForwardScratch;
  t.matmul_backward_scratch = &MatmulBackwardScratch;
  FillLayerNormBf16(t);
  FillGeluBf16(t);
  FillRmsNormBf16(t);
  FillRopeBf16(t);
  FillSwiGluBf16(t);
  FillAdamWBf16(t);
  FillFlashAttentionBf16(t);
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
