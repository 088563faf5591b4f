// The bf16 kernel table of one Highway target (simd/bf16.h): fp32 <-> bf16 conversions here; the
// portable bf16 GEMMs, which widen their operands exactly to fp32 inside the fp32 GEMM's packing
// (bf16_matmul.cc); the layernorm, GELU (and GeGLU), RMSNorm, per-head RMSNorm, RoPE, SwiGLU,
// AdamW, LoRA rank update and flash attention entries from their family files (written once for
// float and bf16 operands).
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
void FillHeadRmsNormBf16(Bf16Kernels& t);
void FillRopeBf16(Bf16Kernels& t);
void FillSwiGluBf16(Bf16Kernels& t);
void FillAdamWBf16(Bf16Kernels& t);
void FillLoraBf16(Bf16Kernels& t);                   // lora.cc
void FillFlashAttentionBf16(Bf16Kernels& t);         // flash_attention.cc
bool FillMatmulBf16(Bf16Kernels& t, bool use_xsmm);  // bf16_matmul.cc

namespace {

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

}  // namespace

void FillBf16(Bf16Kernels& t, std::string_view target, bool use_xsmm) {
  t.target = target;
  t.to_bf16 = &ToBf16;
  t.to_f32 = &ToF32;
  FillMatmulBf16(t, use_xsmm);
  FillLayerNormBf16(t);
  FillGeluBf16(t);
  FillRmsNormBf16(t);
  FillHeadRmsNormBf16(t);
  FillRopeBf16(t);
  FillSwiGluBf16(t);
  FillAdamWBf16(t);
  FillLoraBf16(t);
  FillFlashAttentionBf16(t);
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
