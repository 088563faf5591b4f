// The portable bf16 GEMMs (Bf16Kernels::matmul_*, simd/bf16.h) for CPUs without bf16 dot-product
// instructions (AVX2, AVX-512 without AVX512-BF16, NEON without BF16): bf16 weights and
// activations, fp32 FMAs. Each operand is widened exactly to fp32 where the blocked drivers of
// matmul_drivers-inl.h pack it or first read a block of it (a weight a block of output channels or
// a K slice at a time), so the product is the fp32 GEMM of the same values: products of bf16
// values are exact in fp32, as in a bf16 dot-product unit that accumulates in fp32. dout enters
// the products rounded to bf16 (round to nearest even, as autocast does) where a block reads it,
// with no rounded copy of the whole of it; dbias sums the fp32 dout. The forward's output can be
// rounded to bf16 in the tile's epilogue (matmul_forward_bf16: the bits of matmul_forward's output
// rounded once). Two tables per target, as for fp32: blocks on the Highway micro-kernel, and on
// libxsmm's where the build has it.
// Not here: the AVX512-BF16 GEMMs (simd/x86/bf16_gemm.cpp), the rest of the bf16 table (bf16.cc).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/bf16_matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include <type_traits>

#include "hwy/highway.h"
#include "simd/bf16.h"
#include "simd/hwy/bf16-inl.h"
#include "simd/hwy/common-inl.h"
#include "simd/hwy/matmul_drivers-inl.h"
#include "simd/hwy/matmul_packed-inl.h"
#include "simd/workspace.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {

void BackwardBias(float* dbias, const float* dout, size_t N, size_t OC);  // matmul.cc

namespace {

using namespace matmul_detail;  // NOLINT: the drivers of this family

template <class G, class OutT>
void Forward(OutT* out, const bf16* inp, const bf16* weight, const float* bias, size_t N, int C,
             int OC) {
  ForwardT<G, bf16, OutT>(out, inp, weight, bias, N, C, OC);
}

template <class G>
void Backward(float* dinp, float* dweight, float* dbias, const float* dout, const bf16* inp,
              const bf16* weight, size_t N, int C, int OC) {
  const RoundedF32* d = reinterpret_cast<const RoundedF32*>(dout);  // rounded where it is read
  if (dinp) PackedBackwardInput(dinp, d, weight, N, size_t(C), size_t(OC));
  if (dweight) PackedBackwardWeight(dweight, d, inp, N, size_t(C), size_t(OC));
  if (dbias) BackwardBias(dbias, dout, N, size_t(OC));
}

// The sizing entries: what the drivers ask for with converted operands (matmul_drivers-inl.h);
// BackwardBias takes no scratch.
template <class G>
ScratchUse ForwardScratch(size_t N, int C, int OC, bool /*bias*/, int threads) {
  return ScratchUse()
      .ask(ScratchSlot::kGemmPack,
           PanelFloats(G::FwdRows(), FwdChunkPanels<G>(N) * G::FwdRows(), size_t(C)))
      .ask_each(ScratchSlot::kBf16A, FwdWeightFloats<G, bf16>(N, size_t(C), size_t(OC),
                                                              size_t(std::max(threads, 1))));
}

template <class G>
ScratchUse BackwardScratch(size_t N, int C, int OC, bool dinp, bool /*dbias*/, int threads) {
  ScratchUse use = PackedBackwardWeightScratch(N, size_t(C));
  if (dinp) use.merge(PackedBackwardInputScratch(N, size_t(C), size_t(OC), true, threads));
  return use;
}

template <class G>
void Fill(Bf16Kernels& t) {
  t.matmul_forward = &Forward<G, float>;
  t.matmul_forward_bf16 = &Forward<G, bf16>;
  t.matmul_backward = &Backward<G>;
  t.matmul_forward_scratch = &ForwardScratch<G>;
  t.matmul_backward_scratch = &BackwardScratch<G>;
}

}  // namespace

// Fills the bf16 GEMM entries; use_xsmm picks libxsmm's block kernels where this build has them
// and the target is an x86 SIMD one (AVX2 or better). Returns whether libxsmm is used.
bool FillMatmulBf16(Bf16Kernels& t, bool use_xsmm) {
#ifdef LLMCPU_MATMUL_XSMM
  if (use_xsmm && XsmmGemm::Available()) {
    Fill<XsmmGemm>(t);
    return true;
  }
#endif
  (void)use_xsmm;
  Fill<HwyGemm>(t);
  return false;
}
#undef LLMCPU_MATMUL_XSMM

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
