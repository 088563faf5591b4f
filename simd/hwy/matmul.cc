// Fully connected layer (nn.Linear layout), vectorized: the math of simd/scalar/matmul.h,
//   out[n,o] = bias[o] + sum_i inp[n,i] W[o,i];  dinp = dout W;  dW += dout^T inp;
//   dbias += sum_n dout
// the fp32 table's entries: the forward pass on the blocked driver of matmul_drivers-inl.h (the
// weight read in place, the tokens packed; its blocks on the Highway micro-kernel or, on x86
// builds with libxsmm, on libxsmm's kernels: two tables, same driver, same layouts), the backward
// pass on packed panels and the Highway register tile (matmul_packed-inl.h), except in the
// AVX-512 libxsmm table, which runs it on the AVX-512 register tile of simd/x86/f32_gemm.h
// (below). Scratch grows to the largest shape once. (oneDNN's sgemm was as fast for dinp, but it
// allocates its packing buffers on every call, and a step must allocate nothing after planning.)
// Not here: the kernel table (simd/hwy/table.cc), the bf16 entries (bf16_matmul.cc), the libxsmm
// kernel cache (simd/gemm/xsmm.cpp).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "simd/hwy/gemm-inl.h"
#include "simd/hwy/matmul_drivers-inl.h"
#include "simd/hwy/matmul_packed-inl.h"
#include "simd/kernels.h"
#include "simd/workspace.h"
#if LLMCPU_HAVE_LIBXSMM
#include "simd/gemm/xsmm.h"
#endif
#if LLMCPU_HAVE_X86_KERNELS
#include "simd/x86/f32_gemm.h"
#endif

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {

// dbias[o] += sum_n dout[n,o], vectorized over o, tokens in order (also the bf16 GEMMs' dbias,
// simd/hwy/bf16.cc).
void BackwardBias(float* dbias, const float* dout, size_t N, size_t OC) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const size_t chunks = (OC + L - 1) / L;
#pragma omp parallel for schedule(static)
  for (size_t c = 0; c < chunks; ++c) {
    const size_t o = c * L, k = std::min(L, OC - o);
    auto acc = hn::Zero(d);
    for (size_t n = 0; n < N; ++n) acc = hn::Add(acc, LoadN(d, dout + n * OC + o, k));
    StoreN(hn::Add(acc, LoadN(d, dbias + o, k)), d, dbias + o, k);
  }
}

namespace {

using namespace matmul_detail;  // NOLINT: the drivers of this family

template <class G>
void Forward(float* out, const float* inp, const float* weight, const float* bias, size_t N, int C,
             int OC) {
  ForwardT<G, float, float>(out, inp, weight, bias, N, C, OC);
}

// The AVX-512 libxsmm table runs dinp and dW on the AVX-512 register tile of simd/x86/f32_gemm.h
// (packed operands, the bf16 GEMMs' blocking): 1.0-1.2x libxsmm's blocks at 256 tokens and
// 1.2-1.5x at 4096 for dinp, 0.9-1.1x for dW (bench/RESULTS.md). Its forward stays on libxsmm's.
#if LLMCPU_HAVE_X86_KERNELS && defined(LLMCPU_MATMUL_XSMM) && HWY_TARGET <= HWY_AVX3
#define LLMCPU_F32_TILE 1
#endif

template <class G>
void BackwardInput(float* dinp, const float* dout, const float* weight, size_t N, size_t C,
                   size_t OC) {
#ifdef LLMCPU_F32_TILE
  if constexpr (std::is_same_v<G, XsmmGemm>) {
    return x86::f32_matmul_backward_input(dinp, dout, weight, N, int(C), int(OC));
  }
#endif
  PackedBackwardInput(dinp, dout, weight, N, C, OC);
}

template <class G>
void BackwardWeight(float* dweight, const float* dout, const float* inp, size_t N, size_t C,
                    size_t OC) {
#ifdef LLMCPU_F32_TILE
  if constexpr (std::is_same_v<G, XsmmGemm>) {
    return x86::f32_matmul_backward_weight(dweight, dout, inp, N, int(C), int(OC));
  }
#endif
  PackedBackwardWeight(dweight, dout, inp, N, C, OC);
}

template <class G>
void Backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
              const float* weight, size_t N, int C, int OC) {
  if (dinp) BackwardInput<G>(dinp, dout, weight, N, size_t(C), size_t(OC));
  if (dweight) BackwardWeight<G>(dweight, dout, inp, N, size_t(C), size_t(OC));
  if (dbias) BackwardBias(dbias, dout, N, size_t(OC));
}

// The sizing entries (KernelTable::matmul_*_scratch): the forward pass packs the tokens in the
// calling thread's scratch, a chunk at a time; the backward pass packs its panels
// (matmul_packed-inl.h's entries, or the AVX-512 tile's own), and BackwardBias takes no scratch.
template <class G>
ScratchUse ForwardScratch(size_t N, int C, int /*OC*/, bool /*bias*/, int /*threads*/) {
  const size_t rows = FwdChunkPanels<G>(N) * G::FwdRows();
  return ScratchUse().ask(ScratchSlot::kGemmPack, PanelFloats(G::FwdRows(), rows, size_t(C)));
}

template <class G>
ScratchUse BackwardScratch(size_t N, int C, int OC, bool dinp, bool /*dbias*/, int threads) {
  ScratchUse use;
#ifdef LLMCPU_F32_TILE
  if constexpr (std::is_same_v<G, XsmmGemm>) {
    use = x86::f32_matmul_backward_weight_scratch(N, C, OC);
    if (dinp) use.merge(x86::f32_matmul_backward_input_scratch(N, C, OC, threads));
    return use;
  }
#endif
  use = PackedBackwardWeightScratch(N, size_t(C));
  if (dinp) use.merge(PackedBackwardInputScratch(N, size_t(C), size_t(OC), false, threads));
  return use;
}

}  // namespace

// Fills the matmul entries; use_xsmm picks libxsmm block kernels where this build has them and the
// target is an x86 SIMD one (AVX2 or better). Returns whether libxsmm is used.
bool FillMatmul(KernelTable& t, bool use_xsmm) {
#ifdef LLMCPU_MATMUL_XSMM
  if (use_xsmm && XsmmGemm::Available()) {
    t.matmul_forward = &Forward<XsmmGemm>;
    t.matmul_backward = &Backward<XsmmGemm>;
    t.matmul_forward_scratch = &ForwardScratch<XsmmGemm>;
    t.matmul_backward_scratch = &BackwardScratch<XsmmGemm>;
    return true;
  }
#endif
  (void)use_xsmm;
  t.matmul_forward = &Forward<HwyGemm>;
  t.matmul_backward = &Backward<HwyGemm>;
  t.matmul_forward_scratch = &ForwardScratch<HwyGemm>;
  t.matmul_backward_scratch = &BackwardScratch<HwyGemm>;
  return false;
}
#undef LLMCPU_MATMUL_XSMM
#undef LLMCPU_F32_TILE

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
