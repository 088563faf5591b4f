// The backward GEMMs of a linear layer on packed panels and the Highway register tile (gemm-inl.h:
// MR = two vectors by NR = 6 on AVX2, four on AVX-512, NEON and SVE), with the blocking of the
// AVX-512 tile of simd/x86/f32_gemm.cpp sized for the 256 KiB - 1 MiB L2 of the CPUs that run it:
//   dinp (N,C):       rows = channels, A = W's K slice packed in channel panels, P[k*MR + r] =
//                     W[(kc+k)*C + c0 + r]; B_j = dout row j (K = OC contiguous, read in place or
//                     rounded into a chunk's copy); K cut in kDinpKc slices, the tokens run in
//                     chunks whose dout rows stay in L2 while every panel passes over them.
//   dweight (OC,C) += rows = channels, A = a token slice of inp packed in channel panels,
//                     P[p][t][r] = inp[(t0+t)*C + p*MR + r] (the team packs each slice: the
//                     scratch holds one); B = dout's columns of a block of NR output channels,
//                     packed per token slice (B[t*NR + j]) for a group of blocks at once; the
//                     tokens in kPackedDwKc slices, the panels in chunks that stay in L2 while
//                     each thread runs a group of its blocks over them.
// Written once for fp32 operands and converted ones (matmul_drivers-inl.h's RowToF32: a bf16 W or
// inp widened where it is packed, a RoundedF32 dout rounded to bf16 where it is packed), so the
// portable bf16 GEMMs run on it too. Every output sums its K in order, slice by slice, whatever the
// thread count; threads own disjoint outputs. libxsmm's AVX2 blocks, reading the operands in place,
// ran the backward pass at 43-73% of the FMA roof (GPT-2 124M, B=4, T=64, bench/RESULTS.md).
// Re-included per target by foreach_target.h (no #pragma once).
// Not here: the forward pass (matmul_drivers-inl.h), the table entries (matmul.cc, bf16_matmul.cc).

#if defined(LLMCPU_SIMD_HWY_MATMUL_PACKED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LLMCPU_SIMD_HWY_MATMUL_PACKED_INL_H_
#undef LLMCPU_SIMD_HWY_MATMUL_PACKED_INL_H_
#else
#define LLMCPU_SIMD_HWY_MATMUL_PACKED_INL_H_
#endif

#include <omp.h>
#include <stddef.h>

#include <algorithm>

#include "hwy/highway.h"
#include "simd/hwy/gemm-inl.h"
#include "simd/hwy/matmul_drivers-inl.h"
#include "simd/scratch.h"
#include "simd/workspace.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace matmul_detail {

// Block sizes, fixed (never the thread count's). dinp: a panel's K slice is MR x kPackedDinpKc
// floats (32 KiB at MR = 16), and the dout rows of a chunk of token groups (kPackedDinpChunkBytes)
// stay in L2 while every panel of the thread passes over them. dW: a token slice of a panel is
// MR x kPackedDwKc floats, and kPackedDwL2Bytes of panels stay in L2 while a thread runs its
// blocks.
constexpr size_t kPackedDinpKc = 512;
constexpr size_t kPackedDinpChunkBytes = 192 * 1024;
constexpr size_t kPackedDwKc = 512;
constexpr size_t kPackedDwL2Bytes = 256 * 1024;
// dW packs the dout columns of kPackedDwBlocks blocks at once, reading each dout row along 96
// contiguous values: one block's 6 columns at a time cost a cache line per row (a row is OC values
// apart), fetched again for every chunk of panels.
constexpr size_t kPackedDwBlocks = 16;

// Floats of dW's packed dout columns: a slice's tokens by kPackedDwBlocks blocks.
inline size_t PackedDwBlockFloats(size_t N) {
  return std::min(kPackedDwKc, N) * kPackedDwBlocks * kGemmNR;
}

// dinp's channel panels: a thread's share, or all of them where they are fewer than the threads
// (the threads then split the tokens); and the most panels a thread packs (its scratch's size).
inline Range PackedChannelPanels(size_t cpanels, int tid, int nt) {
  return cpanels >= size_t(nt) ? split_range(cpanels, tid, nt) : Range{0, cpanels};
}
inline size_t PackedMostChannelPanels(size_t cpanels, int nt) {
  return cpanels >= size_t(nt) ? (cpanels + size_t(nt) - 1) / size_t(nt) : cpanels;
}

// Token groups (of NR) per dinp chunk for a K slice of kl values.
inline size_t PackedDinpChunk(size_t kl) {
  return std::max<size_t>(1, kPackedDinpChunkBytes / (kl * kGemmNR * sizeof(float)));
}

// P[k*MR + r] = X[(k0+k)*ld + c0 + r] for k < kl, r < MR (zero past `cols`): rows k0.. of a
// row-major matrix as one panel of MR columns.
template <class T>
void PackPanel(float* HWY_RESTRICT P, const T* HWY_RESTRICT X, size_t ld, size_t k0, size_t kl,
               size_t c0, size_t cols) {
  const size_t MR = GemmMR(), m = std::min(MR, cols - c0);
  if (m == MR) {
    for (size_t k = 0; k < kl; ++k) RowVectorsToF32(P + k * MR, X + (k0 + k) * ld + c0, MR);
    return;
  }
  for (size_t k = 0; k < kl; ++k) {
    RowToF32(P + k * MR, X + (k0 + k) * ld + c0, m);
    std::fill(P + k * MR + m, P + (k + 1) * MR, 0.0f);
  }
}

// dinp (N x C) = dout (N x OC) W (OC x C), overwritten.
template <class Td, class Tw>
void PackedBackwardInput(float* dinp, const Td* dout, const Tw* weight, size_t N, size_t C,
                         size_t OC) {
  const size_t MR = GemmMR(), NR = kGemmNR;
  const size_t cpanels = (C + MR - 1) / MR, groups = (N + NR - 1) / NR;
  const size_t slice = std::min(kPackedDinpKc, OC) * MR;  // floats of a panel's K slice
  TeamErrors errors;  // a thread's scratch may not be had: thrown after the region
#pragma omp parallel
  errors.run([&] {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const Range cr = PackedChannelPanels(cpanels, tid, nt);
    const Range gr = cpanels >= size_t(nt) ? Range{0, groups} : split_range(groups, tid, nt);
    float* A =
        thread_scratch(ScratchSlot::kGemmPanel, PackedMostChannelPanels(cpanels, nt) * slice);
    float* D = nullptr;  // a chunk's dout rows, rounded (a converted dout only)
    if constexpr (kWide<Td>) {
      const size_t kl = std::min(kPackedDinpKc, OC);
      D = thread_scratch(ScratchSlot::kBf16B, PackedDinpChunk(kl) * NR * kl);
    }
    // The thread's panels are packed as the first chunk of tokens reaches them, each one's W rows
    // (a cache line from each of kl rows, C floats apart) prefetched while the panel before it
    // computes: packed all at once at the start of a slice, they came from DRAM with nothing to
    // overlap (10-12% of dinp's time on AVX2; 7-11% read along W's rows or a slice ahead).
    for (size_t kc = 0; kc < OC; kc += kPackedDinpKc) {
      const size_t kl = std::min(kPackedDinpKc, OC - kc);
      const size_t chunk = PackedDinpChunk(kl);
      const size_t next_kl = kc + kl < OC ? std::min(kPackedDinpKc, OC - kc - kl) : 0;
      for (size_t g0 = gr.begin; g0 < gr.end; g0 += chunk) {
        const size_t g1 = std::min(gr.end, g0 + chunk);
        const bool first = g0 == gr.begin, last = g1 == gr.end;
        const size_t n_first = g0 * NR, n_end = std::min(N, g1 * NR);
        const F32Block d = AsF32(dout, OC, n_first, n_end - n_first, kc, kl, D);
        for (size_t cp = cr.begin; cp < cr.end; ++cp) {
          const size_t c0 = cp * MR;
          float* panel = A + (cp - cr.begin) * slice;
          if (first) PackPanel(panel, weight, C, kc, kl, c0, C);
          // The next panel to pack: this slice's next one, or the next slice's first.
          const Tw* ahead = nullptr;
          size_t ahead_rows = 0;
          if (first && cp + 1 < cr.end) {
            ahead = weight + kc * C + c0 + MR, ahead_rows = kl;
          } else if (last && cp + 1 == cr.end && next_kl) {
            ahead = weight + (kc + kl) * C + cr.begin * MR;
            ahead_rows = next_kl;
          }
          for (size_t g = g0; g < g1; ++g) {
            if (ahead) PrefetchRows(ahead, ahead_rows, C, MR, g - g0, g1 - g0);
            const size_t n0 = g * NR;
            GemmTileAny<BLayout::kCols>(std::min(MR, C - c0), std::min(NR, N - n0), kl, panel, MR,
                                        d.p + (n0 - n_first) * d.ld, d.ld, dinp + n0 * C + c0, C,
                                        kc > 0);
          }
        }
      }
    }
  });
  errors.rethrow();
}

// dW (OC x C) += dout^T inp.
template <class Td, class Ti>
void PackedBackwardWeight(float* dweight, const Td* dout, const Ti* inp, size_t N, size_t C,
                          size_t OC) {
  const size_t MR = GemmMR(), NR = kGemmNR;
  const size_t slice = std::min(kPackedDwKc, N);  // tokens per slice
  const size_t cpanels = (C + MR - 1) / MR, panel = MR * slice;
  float* A = thread_scratch(ScratchSlot::kGemmPack, PanelFloats(MR, C, slice));
  const size_t blocks = (OC + NR - 1) / NR;
  TeamErrors errors;  // a thread's scratch may not be had: thrown after the region
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    float* Bp = nullptr;  // a group of blocks' dout columns: Bp[(b - b0)*tn*NR + t*NR + j]
    errors.run([&] { Bp = thread_scratch(ScratchSlot::kGemmPanel, PackedDwBlockFloats(N)); });
    const Range br = split_range(blocks, tid, nt);
    const size_t chunk = std::max<size_t>(1, kPackedDwL2Bytes / (slice * MR * sizeof(float)));
    // Every thread meets the barriers, its work or not (a thread without scratch computes nothing).
    for (size_t t0 = 0; t0 < N; t0 += slice) {
      const size_t tn = std::min(slice, N - t0);
      // The slice's channel panels, P[cp][t][r], packed by the team: the tokens split.
      const Range tr = split_range(tn, tid, nt);
      for (size_t cp = 0; cp < cpanels; ++cp) {
        PackPanel(A + cp * panel + tr.begin * MR, inp, C, t0 + tr.begin, tr.end - tr.begin, cp * MR,
                  C);
      }
#pragma omp barrier
      for (size_t b0 = br.begin; Bp && b0 < br.end; b0 += kPackedDwBlocks) {
        const size_t b1 = std::min(br.end, b0 + kPackedDwBlocks);
        // The group's columns [b0*NR, min(OC, b1*NR)) of each dout row, read along the row.
        const size_t o_first = b0 * NR, width = std::min(OC, b1 * NR) - o_first;
        for (size_t t = 0; t < tn; ++t) {
          HWY_ALIGN float row[kPackedDwBlocks * kGemmNR];
          RowToF32(row, dout + (t0 + t) * OC + o_first, width);
          for (size_t b = b0; b < b1; ++b) {
            const size_t j0 = (b - b0) * NR, nb = std::min(NR, width - j0);
            std::copy(row + j0, row + j0 + nb, Bp + (b - b0) * tn * NR + t * NR);
          }
        }
        for (size_t cp0 = 0; cp0 < cpanels; cp0 += chunk) {
          const size_t cp1 = std::min(cpanels, cp0 + chunk);
          for (size_t b = b0; b < b1; ++b) {
            const size_t o0 = b * NR, nb = std::min(NR, OC - o0);
            for (size_t cp = cp0; cp < cp1; ++cp) {
              const size_t c0 = cp * MR;
              GemmTileAny<BLayout::kRows>(std::min(MR, C - c0), nb, tn, A + cp * panel, MR,
                                          Bp + (b - b0) * tn * NR, NR, dweight + o0 * C + c0, C,
                                          true);
            }
          }
        }
      }
#pragma omp barrier
    }
  }
  errors.rethrow();
}

// The sizing entries of the two (simd/scratch.h), for an fp32 dout or a converted one.
inline ScratchUse PackedBackwardInputScratch(size_t N, size_t C, size_t OC, bool wide_dout,
                                             int threads) {
  (void)N;
  const size_t MR = GemmMR(), kl = std::min(kPackedDinpKc, OC);
  ScratchUse use;
  use.ask_each(ScratchSlot::kGemmPanel,
               PackedMostChannelPanels((C + MR - 1) / MR, threads) * kl * MR);
  if (wide_dout) use.ask_each(ScratchSlot::kBf16B, PackedDinpChunk(kl) * kGemmNR * kl);
  return use;
}
inline ScratchUse PackedBackwardWeightScratch(size_t N, size_t C) {
  return ScratchUse()
      .ask(ScratchSlot::kGemmPack, PanelFloats(GemmMR(), C, std::min(kPackedDwKc, N)))
      .ask_each(ScratchSlot::kGemmPanel, PackedDwBlockFloats(N));
}

}  // namespace matmul_detail
}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();

#endif  // LLMCPU_SIMD_HWY_MATMUL_PACKED_INL_H_
