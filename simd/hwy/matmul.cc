// Fully connected layer (nn.Linear layout), vectorized: the math of simd/scalar/matmul.h,
//   out[n,o] = bias[o] + sum_i inp[n,i] W[o,i];  dinp = dout W;  dW += dout^T inp;
//   dbias += sum_n dout
// as three column-major GEMMs (A(m,k) = A[m + k*lda], see gemm-inl.h) over the tensors in place:
//   forward  out^T (N x OC) = inp^T (N x C, packed)  * W^T (C x OC: W's rows as columns, ldb=C)
//   dinp^T   (C x N)        = W^T (C x OC, lda=C)    * dout^T (OC x N: dout's rows as columns)
//   dW^T     (C x OC)      += inp^T (C x N, lda=C)   * dout (N x OC: row k = token k, ldb=OC)
// This file copies no weight: only activations are packed (inp into token panels for the forward
// pass, inp and dout into panels for dW on the Highway path), in per-thread scratch that grows to
// the largest shape once. The forward pass writes each output tile through a small transpose.
// Threads own disjoint output blocks and every sum runs over its reduction dimension in a fixed
// order, so results do not depend on the thread count (and no atomics are needed).
// Each block product runs on the Highway micro-kernel or, on x86 builds with libxsmm, on libxsmm's
// JIT kernels: two tables, same driver, same layouts. The AVX-512 libxsmm table runs its backward
// pass on the AVX-512 register tile of simd/x86/f32_gemm.h instead (below). (oneDNN's sgemm was as
// fast for dinp, but it allocates its packing buffers on every call, and a step must allocate
// nothing after planning.)
// Not here: the kernel table (simd/hwy/table.cc), the libxsmm kernel cache (simd/gemm/xsmm.cpp).
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

// Block sizes. Forward: a block is one token panel (MR tokens, all C) times kFwdCols outputs, its
// K run in slices of at most kFwdKc channels, summed in order into the block's tile.
// Backward dinp: K (= OC) is cut in kKc slices so that the W slice of a block of channels stays in
// L2 while all tokens pass over it. dW: the whole token dimension is one reduction (the Highway
// path packs its operands, see BackwardWeightPacked).
struct HwyGemm {
  static size_t FwdRows() { return GemmMR(); }  // tokens per forward panel: one tile's rows
  static constexpr size_t kFwdCols = kGemmNR;   // outputs per forward block
  static constexpr size_t kFwdKc = std::numeric_limits<size_t>::max();  // K in one piece
  static constexpr size_t kDinpRows = 128;      // channels per dinp block
  static constexpr size_t kDinpCols = kGemmNR;  // tokens per dinp block
  static void Block(BLayout layout, size_t m, size_t n, size_t k, const float* A, size_t lda,
                    const float* B, size_t ldb, float* C, size_t ldc, bool accumulate) {
    if (layout == BLayout::kCols) {
      GemmBlock<BLayout::kCols>(m, n, k, A, lda, B, ldb, C, ldc, accumulate);
    } else {
      GemmBlock<BLayout::kRows>(m, n, k, A, lda, B, ldb, C, ldc, accumulate);
    }
  }
};

#if LLMCPU_HAVE_LIBXSMM && HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#define LLMCPU_MATMUL_XSMM 1
struct XsmmGemm {
  static size_t FwdRows() { return 64; }
  static constexpr size_t kFwdCols = 64;
  // A token panel's K slice (64 x 768 floats, 192 KiB) stays in L2 beside the block's weight rows;
  // a whole panel at C = 3072 (768 KiB) did not (fc proj's forward 1-6% faster at N = 256, 9% at
  // N = 4096).
  static constexpr size_t kFwdKc = 768;
  static constexpr size_t kDinpRows = 64;
  static constexpr size_t kDinpCols = 32;
  static constexpr size_t kDwRows = 64;
  static constexpr size_t kDwCols = 64;
  // A block libxsmm cannot make a kernel for (or whose sizes do not fit its int arguments) runs on
  // the Highway micro-kernel: same layouts, and a fixed choice per shape, so results still do not
  // depend on the thread count.
  static void Block(BLayout layout, size_t m, size_t n, size_t k, const float* A, size_t lda,
                    const float* B, size_t ldb, float* C, size_t ldc, bool accumulate) {
    constexpr size_t kMax = size_t(std::numeric_limits<int>::max());
    const bool fits = std::max({m, n, k, lda, ldb, ldc}) <= kMax;
    if (fits && xsmm::block(layout == BLayout::kRows, int(m), int(n), int(k), A, int(lda), B,
                            int(ldb), C, int(ldc), accumulate)) {
      return;
    }
    HwyGemm::Block(layout, m, n, k, A, lda, B, ldb, C, ldc, accumulate);
  }
};
#endif

constexpr size_t kKc = 256;                                        // dinp: reduction slice
constexpr size_t kDwTokens = 512;                                  // dW (libxsmm): token slice
constexpr size_t kFwdMaxRows = kGemmMaxMR > 64 ? kGemmMaxMR : 64;  // largest FwdRows()

// Floats of `rows` rows packed in panels of MR (the last one padded with zeros) by K: the
// forward pass's token panels (rows = N, K = C) and dW's channel panels (rows = C, K = N). The
// kernels and their sizing entries (MatmulScratch below) both take their scratch from here.
size_t PanelFloats(size_t MR, size_t rows, size_t K) { return (rows + MR - 1) / MR * MR * K; }

// Software prefetch of the operand the next block will read, spread over the current block's
// steps (part of parts): rows [r0, r1) of `rows` rows of `cols` floats at stride ld. The operands
// that arrive from DRAM with a large stride (the next W panel, the next dout columns of dW) defeat
// the hardware prefetchers; issued a block ahead they arrive while this block computes.
void PrefetchRows(const float* base, size_t rows, size_t ld, size_t cols, size_t part,
                  size_t parts) {
  constexpr size_t kLineFloats = 64 / sizeof(float);
  const size_t r0 = rows * part / parts, r1 = rows * (part + 1) / parts;
  for (size_t r = r0; r < r1; ++r) {
    const float* row = base + r * ld;
    for (size_t c = 0; c < cols; c += kLineFloats) hwy::Prefetch(row + c);
    hwy::Prefetch(row + cols - 1);
  }
}

// Token panel p of inp (N x C) transposed: P[k*MR + r] = inp[(p*MR + r)*C + k], rows past N zero.
void PackTokenPanel(float* HWY_RESTRICT P, const float* HWY_RESTRICT inp, size_t p, size_t MR,
                    size_t N, size_t C) {
  constexpr size_t kChunk = 64;
  for (size_t k0 = 0; k0 < C; k0 += kChunk) {
    const size_t k1 = std::min(C, k0 + kChunk);
    for (size_t r = 0; r < MR; ++r) {
      const size_t n = p * MR + r;
      if (n < N) {
        const float* HWY_RESTRICT x = inp + n * C;
        for (size_t k = k0; k < k1; ++k) P[k * MR + r] = x[k];
      } else {
        for (size_t k = k0; k < k1; ++k) P[k * MR + r] = 0.0f;
      }
    }
  }
}

template <class G>
void ForwardT(float* out, const float* inp, const float* weight, const float* bias, size_t N,
              int C_, int OC_) {
  const size_t C = size_t(C_), OC = size_t(OC_);
  const size_t MR = G::FwdRows();
  const size_t panels = (N + MR - 1) / MR;
  float* packed = thread_scratch(ScratchSlot::kGemmPack, PanelFloats(MR, N, C));
  const size_t blocks = (OC + G::kFwdCols - 1) / G::kFwdCols;
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const Range pr = split_range(panels, tid, nt);
    for (size_t p = pr.begin; p < pr.end; ++p)
      PackTokenPanel(packed + p * MR * C, inp, p, MR, N, C);
#pragma omp barrier
    HWY_ALIGN float tile[kFwdMaxRows * G::kFwdCols];
    const Range br = split_range(blocks, tid, nt);
    for (size_t b = br.begin; b < br.end; ++b) {
      const size_t o0 = b * G::kFwdCols, nb = std::min(G::kFwdCols, OC - o0);
      const size_t next_o0 = o0 + G::kFwdCols;
      const size_t next_nb = b + 1 < br.end ? std::min(G::kFwdCols, OC - next_o0) : 0;
      for (size_t p = 0; p < panels; ++p) {
        if (next_nb) PrefetchRows(weight + next_o0 * C, next_nb, C, C, p, panels);
        for (size_t kc = 0, kl = 0; kc < C; kc += kl) {
          kl = std::min(G::kFwdKc, C - kc);
          G::Block(BLayout::kCols, MR, nb, kl, packed + p * MR * C + kc * MR, MR,
                   weight + o0 * C + kc, C, tile, MR, kc > 0);
        }
        const size_t n0 = p * MR, mr = std::min(MR, N - n0);
        for (size_t r = 0; r < mr; ++r) {
          float* HWY_RESTRICT y = out + (n0 + r) * OC + o0;
          if (bias) {
            for (size_t j = 0; j < nb; ++j) y[j] = tile[r + j * MR] + bias[o0 + j];
          } else {
            for (size_t j = 0; j < nb; ++j) y[j] = tile[r + j * MR];
          }
        }
      }
    }
  }
}

// dinp (N x C) = dout (N x OC) W (OC x C), as dinp^T = W^T dout^T with K = OC cut in kKc slices.
// The blocks lie on a fixed grid (channels by kDinpRows, tokens in balanced blocks of at most
// kDinpCols) and threads take
// whole blocks, so a block's shape, and with it libxsmm's kernel and order of sums, never depends
// on the thread count.
template <class G>
void BackwardInputT(float* dinp, const float* dout, const float* weight, size_t N, size_t C,
                    size_t OC) {
  const size_t row_blocks = (C + G::kDinpRows - 1) / G::kDinpRows;
  const size_t col_blocks = (N + G::kDinpCols - 1) / G::kDinpCols;
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const int rows = grid_rows(nt, row_blocks), cols = nt / rows;
    const Range rb = split_range(row_blocks, tid % rows, rows);
    const Range cb = split_range(col_blocks, tid / rows, cols);
    const size_t steps = cb.end - cb.begin;
    for (size_t kc = 0; kc < OC; kc += kKc) {
      const size_t kl = std::min(kKc, OC - kc);
      for (size_t ib = rb.begin; ib < rb.end; ++ib) {
        const size_t i0 = ib * G::kDinpRows, mi = std::min(G::kDinpRows, C - i0);
        // The next W slice: this K slice's next channel block, else the next K slice's first.
        const bool more_i = ib + 1 < rb.end;
        const size_t next_k = more_i ? kc : kc + kKc;
        const size_t next_i = (more_i ? ib + 1 : rb.begin) * G::kDinpRows;
        const size_t next_kl = next_k < OC ? std::min(kKc, OC - next_k) : 0;
        const size_t next_mi = next_i < C ? std::min(G::kDinpRows, C - next_i) : 0;
        for (size_t jb = cb.begin; jb < cb.end; ++jb) {
          // Balanced widths (256 tokens: 11 or 12 each, not 21 x 12 + 4): no narrow tail tile.
          const size_t n0 = N * jb / col_blocks, nn = N * (jb + 1) / col_blocks - n0;
          if (next_kl && next_mi) {
            PrefetchRows(weight + next_k * C + next_i, next_kl, C, next_mi, jb - cb.begin, steps);
          }
          G::Block(BLayout::kCols, mi, nn, kl, weight + kc * C + i0, C, dout + n0 * OC + kc, OC,
                   dinp + n0 * C + i0, C, kc > 0);
        }
      }
    }
  }
}

// dW (OC x C) += dout^T inp, as dW^T += inp^T dout (libxsmm), the N tokens cut in slices of
// kDwTokens: a slice of inp (kDwTokens x C) stays in cache while a thread runs its output blocks
// over it, instead of all of inp streaming from memory once per block. Each output sums its
// tokens slice after slice, in the same order for any thread count.
template <class G>
void BackwardWeightT(float* dweight, const float* dout, const float* inp, size_t N, size_t C,
                     size_t OC) {
  const size_t blocks = (OC + G::kDwCols - 1) / G::kDwCols;
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const Range br = split_range(blocks, tid, nt);
    const size_t chunks = (C + G::kDwRows - 1) / G::kDwRows;
    for (size_t t0 = 0; t0 < N; t0 += kDwTokens) {
      const size_t tn = std::min(kDwTokens, N - t0);
      const float* in = inp + t0 * C;
      const float* d = dout + t0 * OC;
      for (size_t b = br.begin; b < br.end; ++b) {
        const size_t o0 = b * G::kDwCols, nb = std::min(G::kDwCols, OC - o0);
        const size_t next_o0 = o0 + G::kDwCols;
        const size_t next_nb = b + 1 < br.end ? std::min(G::kDwCols, OC - next_o0) : 0;
        for (size_t i0 = 0; i0 < C; i0 += G::kDwRows) {
          const size_t mi = std::min(G::kDwRows, C - i0);
          if (next_nb) PrefetchRows(d + next_o0, tn, OC, next_nb, i0 / G::kDwRows, chunks);
          G::Block(BLayout::kRows, mi, nb, tn, in + i0, C, d + o0, OC, dweight + o0 * C + i0, C,
                   true);
        }
      }
    }
  }
}

// One output block's dout columns in BackwardWeightPacked: N tokens by NR.
size_t DoutPanelFloats(size_t N) { return N * kGemmNR; }

// dW with the Highway micro-kernel: both operands packed so that every step of a tile reads
// contiguous memory (the strided rows of inp and dout cost the AVX2 tile up to half its speed).
// inp is packed once per call into channel panels P[p][k][r] = inp[k*C + p*MR + r] (zero past C),
// in the calling thread's scratch and shared by the team; each thread packs the dout columns of
// its current output block, B[k*NR + j] = dout[k*OC + o0 + j]. Both are activations, no weight is
// copied. Each tile sums all N tokens in order, then adds into dW.
void BackwardWeightPacked(float* dweight, const float* dout, const float* inp, size_t N, size_t C,
                          size_t OC) {
  const size_t MR = GemmMR(), NR = kGemmNR;
  const size_t panels = (C + MR - 1) / MR;
  float* packed = thread_scratch(ScratchSlot::kGemmPack, PanelFloats(MR, C, N));
  const size_t blocks = (OC + NR - 1) / NR;
  // The per-thread scratch may not be had: the error is kept and thrown after the region.
  TeamErrors errors;
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const Range pr = split_range(panels, tid, nt);
    for (size_t p = pr.begin; p < pr.end; ++p) {
      const size_t i0 = p * MR, mr = std::min(MR, C - i0);
      float* HWY_RESTRICT P = packed + p * MR * N;
      for (size_t k = 0; k < N; ++k) {
        std::memcpy(P + k * MR, inp + k * C + i0, mr * sizeof(float));
        std::fill(P + k * MR + mr, P + (k + 1) * MR, 0.0f);
      }
    }
    float* Bp = nullptr;
    errors.run([&] { Bp = thread_scratch(ScratchSlot::kGemmPanel, DoutPanelFloats(N)); });
#pragma omp barrier
    const Range br = split_range(blocks, tid, nt);
    for (size_t b = br.begin; Bp && b < br.end; ++b) {  // no scratch: the error is kept
      const size_t o0 = b * NR, nb = std::min(NR, OC - o0);
      for (size_t k = 0; k < N; ++k) {
        std::memcpy(Bp + k * NR, dout + k * OC + o0, nb * sizeof(float));
      }
      if (b + 1 < br.end) {  // the next block's dout columns: a strided walk the hardware misses
        PrefetchRows(dout + o0 + NR, N, OC, std::min(NR, OC - o0 - NR), 0, 1);
      }
      for (size_t p = 0; p < panels; ++p) {
        GemmTileAny<BLayout::kRows>(std::min(MR, C - p * MR), nb, N, packed + p * MR * N, MR, Bp,
                                    NR, dweight + o0 * C + p * MR, C, true);
      }
    }
  }
  errors.rethrow();
}

template <class G>
void Forward(float* out, const float* inp, const float* weight, const float* bias, size_t N, int C,
             int OC) {
  ForwardT<G>(out, inp, weight, bias, N, C, OC);
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
  BackwardInputT<G>(dinp, dout, weight, N, C, OC);
}

template <class G>
void BackwardWeight(float* dweight, const float* dout, const float* inp, size_t N, size_t C,
                    size_t OC) {
#ifdef LLMCPU_F32_TILE
  if constexpr (std::is_same_v<G, XsmmGemm>) {
    return x86::f32_matmul_backward_weight(dweight, dout, inp, N, int(C), int(OC));
  }
#endif
  if constexpr (std::is_same_v<G, HwyGemm>) {
    BackwardWeightPacked(dweight, dout, inp, N, C, OC);
  } else {
    BackwardWeightT<G>(dweight, dout, inp, N, C, OC);
  }
}

template <class G>
void Backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
              const float* weight, size_t N, int C, int OC) {
  if (dinp) BackwardInput<G>(dinp, dout, weight, N, size_t(C), size_t(OC));
  BackwardWeight<G>(dweight, dout, inp, N, size_t(C), size_t(OC));
  if (dbias) BackwardBias(dbias, dout, N, size_t(OC));
}

// The sizing entries (KernelTable::matmul_*_scratch): the forward pass packs the tokens in the
// calling thread's scratch; the backward pass of the Highway GEMM packs inp's channel panels there
// and each thread one block of dout columns; libxsmm's blocks read dinp's and dW's operands in
// place, the AVX-512 tile packs them (its own entries), and BackwardBias takes no scratch.
template <class G>
ScratchUse ForwardScratch(size_t N, int C, int /*OC*/, bool /*bias*/, int /*threads*/) {
  return ScratchUse().ask(ScratchSlot::kGemmPack, PanelFloats(G::FwdRows(), N, size_t(C)));
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
  (void)OC, (void)dinp, (void)threads;
  if constexpr (std::is_same_v<G, HwyGemm>) {
    use.ask(ScratchSlot::kGemmPack, PanelFloats(GemmMR(), size_t(C), N))
        .ask_each(ScratchSlot::kGemmPanel, DoutPanelFloats(N));
  }
  return use;
}

}  // namespace

// Fills the matmul entries; use_xsmm picks libxsmm block kernels where this build has them and the
// target is an x86 SIMD one (AVX2 or better). Returns whether libxsmm is used.
bool FillMatmul(KernelTable& t, bool use_xsmm) {
#ifdef LLMCPU_MATMUL_XSMM
  if (use_xsmm && xsmm::available()) {
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
