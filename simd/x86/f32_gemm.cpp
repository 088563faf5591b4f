// fp32 GEMMs on AVX-512 FMA (see f32_gemm.h): the dinp and dweight products of a linear layer on
// one register tile, 64 rows (4 vectors of 16 lanes) by up to 6 columns:
//   C(m, j) (+)= sum_k A[k*64 + m] B_j[k*ldp]
// A a panel packed with its 64 rows contiguous per k, B_j a column of the other operand read by
// 32-bit broadcasts, C fp32 at C[m + j*ldc] (simd/x86/tile_store-inl.h).
//   dinp (N,C):       rows = channels, A = weight packed, B_j = dout row j (K = OC, contiguous),
//                     K cut in slices: each thread packs the slice of its channel panels, then runs
//                     the tokens over them in chunks whose rows of the slice stay in L2.
//   dweight (OC,C) += rows = channels, A = inp packed,    B_j = dout column j (K = N), packed
//                     per block of 6 columns so that a tile's operand is contiguous; the tokens in
//                     slices, the channel panels in L2-sized chunks.
// The blocking of the bf16 GEMMs (bf16_gemm.cpp) with fixed sizes, never the thread count's. Every
// output sums its K in order (slice by slice) whatever the thread count; threads own disjoint
// outputs, so no atomics and no dependence on the thread count. Operands are packed per call into
// thread scratch (grow-only: after the first step nothing is allocated).
// The functions with AVX-512 code carry target attributes; the file is compiled for the baseline
// ISA, so no AVX-512 instruction runs unless the caller checked the CPU (the AVX-512 tables).
#include "simd/x86/f32_gemm.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "simd/workspace.h"
#include "simd/x86/tile_store-inl.h"

namespace llmcpu::x86 {
namespace {

constexpr size_t kMR = kTileRows;  // rows per tile: 4 vectors of 16 lanes
constexpr size_t kNR = kTileCols;  // columns per tile
constexpr size_t kDinpKc = 1024;   // dinp: output channels per K slice (256 KiB per panel)
constexpr size_t kDinpChunkBytes = 600 * 1024;  // dinp: dout rows of a K slice kept in L2
constexpr size_t kDwKc = 512;                   // dweight: tokens per slice (128 KiB per panel)
// dweight: channel panels of a token slice kept in a core's L2 (1 MiB on Zen 4 and 5) at a time:
// all twelve of C = 768 at 256 tokens.
constexpr size_t kDwL2Bytes = 800 * 1024;

size_t PanelFloats(size_t rows, size_t K) { return (rows + kMR - 1) / kMR * kMR * K; }

template <size_t NR, class Store>
LLMCPU_AVX512 __attribute__((noinline)) void Tile(size_t K, const float* A, const float* B,
                                                  size_t ldb, size_t ldp, const Store& store) {
  store.template prefetch<NR>();
  __m512 c[4][NR];
  ZeroTile(c);
  for (size_t k = 0; k < K; ++k) {
    const float* a = A + k * kMR;
    const __m512 a0 = _mm512_loadu_ps(a);
    const __m512 a1 = _mm512_loadu_ps(a + 16);
    const __m512 a2 = _mm512_loadu_ps(a + 32);
    const __m512 a3 = _mm512_loadu_ps(a + 48);
#pragma GCC unroll 6
    for (size_t j = 0; j < NR; ++j) {
      const __m512 b = _mm512_set1_ps(B[j * ldb + k * ldp]);
      c[0][j] = _mm512_fmadd_ps(a0, b, c[0][j]);
      c[1][j] = _mm512_fmadd_ps(a1, b, c[1][j]);
      c[2][j] = _mm512_fmadd_ps(a2, b, c[2][j]);
      c[3][j] = _mm512_fmadd_ps(a3, b, c[3][j]);
    }
  }
  store.template write<NR>(c);
}

template <class Store>
void TileAny(size_t nr, size_t K, const float* A, const float* B, size_t ldb, size_t ldp,
             const Store& store) {
  WithTileCols(nr, [&](auto NR) { Tile<decltype(NR)::value>(K, A, B, ldb, ldp, store); });
}

// Panel of columns [c0, c0+64) of X (K x cols, row-major, ld), rows [k0, k1): P[k*64 + r] =
// X[k*ld + c0 + r], zero past the last column.
LLMCPU_AVX512 __attribute__((noinline)) void PackColumnPanel(float* P, const float* X, size_t c0,
                                                             size_t cols, size_t ld, size_t k0,
                                                             size_t k1) {
  const size_t m = std::min(kMR, cols - c0);
  for (size_t k = k0; k < k1; ++k) {
    const float* x = X + k * ld + c0;
    for (size_t r = 0; r < kMR; r += 16) {
      const size_t n = r < m ? std::min<size_t>(16, m - r) : 0;
      _mm512_storeu_ps(P + k * kMR + r, _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1u), x + r));
    }
  }
}

// dinp's channel panels: a thread's share, or all of them where they are fewer than the threads
// (the threads then split the tokens); and the most panels a thread packs, which each thread's
// scratch holds (one size for the whole team, as the sizing entry says).
Range ChannelPanels(size_t cpanels, int tid, int nt) {
  return cpanels >= size_t(nt) ? split_range(cpanels, tid, nt) : Range{0, cpanels};
}
size_t MostChannelPanels(size_t cpanels, int nt) {
  return cpanels >= size_t(nt) ? (cpanels + size_t(nt) - 1) / size_t(nt) : cpanels;
}

}  // namespace

void f32_matmul_backward_input(float* dinp, const float* dout, const float* weight, size_t N,
                               int C_, int OC_) {
  const size_t C = size_t(C_), OC = size_t(OC_);
  const size_t cpanels = (C + kMR - 1) / kMR, groups = (N + kNR - 1) / kNR;  // groups: kNR tokens
  const size_t slice = std::min(kDinpKc, OC) * kMR;  // floats of a panel's K slice
  const size_t chunk = std::max<size_t>(1, kDinpChunkBytes / (slice / kMR * kNR * sizeof(float)));
  TeamErrors errors;  // a thread's scratch may not be had: thrown after the region
#pragma omp parallel
  errors.run([&] {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const Range cr = ChannelPanels(cpanels, tid, nt);
    const Range gr = cpanels >= size_t(nt) ? Range{0, groups} : split_range(groups, tid, nt);
    float* A = thread_scratch(ScratchSlot::kGemmPanel, MostChannelPanels(cpanels, nt) * slice);
    for (size_t kc = 0; kc < OC; kc += kDinpKc) {
      const size_t kl = std::min(kDinpKc, OC - kc);
      // P[k*64 + r] = W[(kc+k)*C + c0 + r]: the packer indexes rows from 0, so the panel's base
      // is moved back by kc rows.
      for (size_t cp = cr.begin; cp < cr.end; ++cp) {
        PackColumnPanel(A + (cp - cr.begin) * slice - kc * kMR, weight, cp * kMR, C, C, kc,
                        kc + kl);
      }
      for (size_t g0 = gr.begin; g0 < gr.end; g0 += chunk) {
        const size_t g1 = std::min(gr.end, g0 + chunk);
        for (size_t cp = cr.begin; cp < cr.end; ++cp) {
          const size_t c0 = cp * kMR;
          for (size_t g = g0; g < g1; ++g) {
            const size_t n0 = g * kNR;
            TileAny(std::min(kNR, N - n0), kl, A + (cp - cr.begin) * slice, dout + n0 * OC + kc, OC,
                    1, ColumnStore{dinp + n0 * C + c0, C, std::min(kMR, C - c0), kc > 0});
          }
        }
      }
    }
  });
  errors.rethrow();
}

void f32_matmul_backward_weight(float* dweight, const float* dout, const float* inp, size_t N,
                                int C_, int OC_) {
  const size_t C = size_t(C_), OC = size_t(OC_);
  const size_t cpanels = (C + kMR - 1) / kMR, panel = kMR * N;
  float* A = thread_scratch(ScratchSlot::kGemmPack, PanelFloats(C, N));
  const size_t blocks = (OC + kNR - 1) / kNR;
  TeamErrors errors;  // a thread's scratch may not be had: thrown after the region
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const Range tr = split_range(N, tid, nt);
    for (size_t cp = 0; cp < cpanels; ++cp) {
      PackColumnPanel(A + cp * panel, inp, cp * kMR, C, C, tr.begin, tr.end);
    }
    float* Bp = nullptr;
    errors.run([&] { Bp = thread_scratch(ScratchSlot::kGemmPanel, std::min(kDwKc, N) * kNR); });
#pragma omp barrier
    // Tokens in slices, channel panels in chunks whose slices stay in L2 while each thread runs its
    // blocks over them; every output still sums its tokens in order, slice by slice. A block's dout
    // columns are packed per slice and chunk (a few KiB, read from memory once per slice).
    const Range br = split_range(blocks, tid, nt);
    const size_t slice_bytes = std::min(kDwKc, N) * kMR * sizeof(float);
    const size_t chunk = std::max<size_t>(1, kDwL2Bytes / slice_bytes);
    for (size_t t0 = 0; Bp && t0 < N; t0 += kDwKc) {
      const size_t tn = std::min(kDwKc, N - t0);
      for (size_t cp0 = 0; cp0 < cpanels; cp0 += chunk) {
        const size_t cp1 = std::min(cpanels, cp0 + chunk);
        for (size_t b = br.begin; b < br.end; ++b) {
          const size_t o0 = b * kNR, nb = std::min(kNR, OC - o0);
          for (size_t t = 0; t < tn; ++t) {
            std::memcpy(Bp + t * kNR, dout + (t0 + t) * OC + o0, nb * sizeof(float));
          }
          for (size_t cp = cp0; cp < cp1; ++cp) {
            const size_t c0 = cp * kMR;
            TileAny(nb, tn, A + cp * panel + t0 * kMR, Bp, 1, kNR,
                    ColumnStore{dweight + o0 * C + c0, C, std::min(kMR, C - c0), true});
          }
        }
      }
    }
  }
  errors.rethrow();
}

ScratchUse f32_matmul_backward_input_scratch(size_t /*N*/, int C, int OC, int threads) {
  const size_t cpanels = (size_t(C) + kMR - 1) / kMR;
  return ScratchUse().ask_each(ScratchSlot::kGemmPanel, MostChannelPanels(cpanels, threads) *
                                                            std::min(kDinpKc, size_t(OC)) * kMR);
}

ScratchUse f32_matmul_backward_weight_scratch(size_t N, int C, int /*OC*/) {
  return ScratchUse()
      .ask(ScratchSlot::kGemmPack, PanelFloats(size_t(C), N))
      .ask_each(ScratchSlot::kGemmPanel, std::min(kDwKc, N) * kNR);
}

}  // namespace llmcpu::x86
