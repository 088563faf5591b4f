// The blocked drivers of a linear layer's three GEMMs, written once for fp32 operands and for bf16
// ones widened exactly to fp32 inside the packing (the fp32 table, simd/hwy/matmul.cc, and the
// portable bf16 table, simd/hwy/bf16_matmul.cc). Column-major blocks (gemm-inl.h's form):
//   forward  out^T (N x OC) = inp^T (N x C, packed)  * W^T (C x OC: W's rows as columns, ldb=C)
//   dinp^T   (C x N)        = W^T (C x OC, lda=C)    * dout^T (OC x N: dout's rows as columns)
//   dW^T     (C x OC)      += inp^T (C x N, lda=C)   * dout (N x OC: row k = token k, ldb=OC)
// fp32 operands are read in place, except the activations the drivers pack (the forward's token
// panels, and on the Highway path dW's channel panels and dout columns). A bf16 operand is
// widened where a block first reads it, into per-thread scratch that holds one block (a weight's
// block of output channels or K slice, a block of dout), or into the panels the fp32 operand is
// packed into anyway: no widened copy of a whole weight exists, and a widened product is the fp32
// product of the same values (products of bf16 values are exact in fp32), at the fp32 GEMM's speed.
// Each block product runs on the Highway micro-kernel (HwyGemm) or on libxsmm's JIT kernels
// (XsmmGemm): same driver, same layouts. Threads own disjoint output blocks and every sum runs
// over its reduction dimension in a fixed order, so results do not depend on the thread count.
// Re-included per target by foreach_target.h (no #pragma once).
// Not here: the table entries and their sizing (matmul.cc, bf16_matmul.cc), the register tile
// (gemm-inl.h), the libxsmm kernel cache (simd/gemm/xsmm.cpp).

#if defined(LLMCPU_SIMD_HWY_MATMUL_DRIVERS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LLMCPU_SIMD_HWY_MATMUL_DRIVERS_INL_H_
#undef LLMCPU_SIMD_HWY_MATMUL_DRIVERS_INL_H_
#else
#define LLMCPU_SIMD_HWY_MATMUL_DRIVERS_INL_H_
#endif

#include <omp.h>
#include <stddef.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "simd/bf16.h"
#include "simd/hwy/bf16-inl.h"
#include "simd/hwy/gemm-inl.h"
#include "simd/workspace.h"
#if LLMCPU_HAVE_LIBXSMM
#include "simd/gemm/xsmm.h"
#endif

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace matmul_detail {

// Block sizes. Forward: a block is one token panel (MR tokens, all C) times kFwdCols outputs, its
// K run in slices of at most kFwdKc channels, summed in order into the block's tile.
// Backward dinp: K (= OC) is cut in kKc slices so that the W slice of a block of channels stays in
// L2 while all tokens pass over it. dW: the whole token dimension is one reduction (the Highway
// path packs its operands, see BackwardWeightPacked).
struct HwyGemm {
  static size_t FwdRows() { return GemmMR(); }  // tokens per forward panel: one tile's rows
  static constexpr size_t kFwdCols = kGemmNR;   // outputs per forward block
  static constexpr size_t kFwdKc = std::numeric_limits<size_t>::max();  // K in one piece
  static constexpr size_t kDinpRows = 128;                              // channels per dinp block
  static constexpr size_t kDinpCols = kGemmNR;                          // tokens per dinp block
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
  // The kernels are generated for this target's instruction set, whatever the CPU's best.
  static constexpr xsmm::Isa kIsa = HWY_TARGET <= HWY_AVX3 ? xsmm::Isa::kAvx512 : xsmm::Isa::kAvx2;
  static bool Available() { return xsmm::available(kIsa); }
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
    if (fits && xsmm::block(kIsa, layout == BLayout::kRows, int(m), int(n), int(k), A, int(lda), B,
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

// An fp32 operand that enters the product rounded to bf16 (dout in the bf16 backward pass, as
// autocast rounds it): the fp32 values, read through this type so that the drivers round them
// where they would widen a bf16 operand, without a rounded copy of the whole operand.
struct RoundedF32 {
  float value;
};
static_assert(sizeof(RoundedF32) == sizeof(float), "a RoundedF32 array is the float array");

// An operand converted where a block reads it (bf16 widened, or fp32 rounded through bf16).
template <class T>
inline constexpr bool kWide = std::is_same_v<T, bf16> || std::is_same_v<T, RoundedF32>;

// Floats of `rows` rows packed in panels of MR (the last one padded with zeros) by K: the
// forward pass's token panels (rows = N, K = C) and dW's channel panels (rows = C, K = N). The
// kernels and their sizing entries both take their scratch from here.
inline size_t PanelFloats(size_t MR, size_t rows, size_t K) {
  return (rows + MR - 1) / MR * MR * K;
}

// x[0, n) as fp32: copied, or bf16 widened exactly.
HWY_INLINE void RowToF32(float* HWY_RESTRICT y, const float* HWY_RESTRICT x, size_t n) {
  std::memcpy(y, x, n * sizeof(float));
}
HWY_INLINE void RowToF32(float* HWY_RESTRICT y, const bf16* HWY_RESTRICT x, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(LoadBf16(d, x + i), d, y + i);
  for (; i < n; ++i) y[i] = bf16_to_float(x[i]);
}
HWY_INLINE void RowToF32(float* HWY_RESTRICT y, const RoundedF32* HWY_RESTRICT xr, size_t n) {
  const float* HWY_RESTRICT x = &xr->value;
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + L <= n; i += L) {
    hn::StoreU(hn::BitCast(d, hn::ShiftLeft<16>(Bf16Bits(d, hn::LoadU(d, x + i)))), d, y + i);
  }
  for (; i < n; ++i) y[i] = bf16_to_float(float_to_bf16(x[i]));
}

// A block of a row-major matrix as fp32, for a block product to read: the matrix itself when it
// is fp32, else rows [r0, r0 + rows) by columns [c0, c0 + cols) widened into buf (cols apart).
struct F32Block {
  const float* p;
  size_t ld;
};
template <class T>
HWY_INLINE F32Block AsF32(const T* X, size_t ld, size_t r0, size_t rows, size_t c0, size_t cols,
                          float* HWY_RESTRICT buf) {
  if constexpr (!kWide<T>) {
    (void)rows, (void)cols, (void)buf;
    return {X + r0 * ld + c0, ld};
  } else {
    for (size_t r = 0; r < rows; ++r) RowToF32(buf + r * cols, X + (r0 + r) * ld + c0, cols);
    return {buf, cols};
  }
}

// Software prefetch of the operand the next block will read, spread over the current block's
// steps (part of parts): rows [r0, r1) of `rows` rows of `cols` values at stride ld. The operands
// that arrive from DRAM with a large stride (the next W panel, the next dout columns of dW) defeat
// the hardware prefetchers; issued a block ahead they arrive while this block computes.
template <class T>
void PrefetchRows(const T* base, size_t rows, size_t ld, size_t cols, size_t part, size_t parts) {
  constexpr size_t kLine = 64 / sizeof(T);
  const size_t r0 = rows * part / parts, r1 = rows * (part + 1) / parts;
  for (size_t r = r0; r < r1; ++r) {
    const T* row = base + r * ld;
    for (size_t c = 0; c < cols; c += kLine) hwy::Prefetch(row + c);
    hwy::Prefetch(row + cols - 1);
  }
}

// Token panel p of inp (N x C) transposed: P[k*MR + r] = inp[(p*MR + r)*C + k], rows past N zero.
template <class T>
void PackTokenPanel(float* HWY_RESTRICT P, const T* HWY_RESTRICT inp, size_t p, size_t MR, size_t N,
                    size_t C) {
  constexpr size_t kChunk = 64;
  for (size_t k0 = 0; k0 < C; k0 += kChunk) {
    const size_t k1 = std::min(C, k0 + kChunk);
    for (size_t r = 0; r < MR; ++r) {
      const size_t n = p * MR + r;
      if (n < N) {
        const T* HWY_RESTRICT x = inp + n * C;
        for (size_t k = k0; k < k1; ++k) P[k * MR + r] = float(x[k]);
      } else {
        for (size_t k = k0; k < k1; ++k) P[k * MR + r] = 0.0f;
      }
    }
  }
}
template <>
inline void PackTokenPanel(float* HWY_RESTRICT P, const bf16* HWY_RESTRICT inp, size_t p, size_t MR,
                           size_t N, size_t C) {
  constexpr size_t kChunk = 64;
  HWY_ALIGN float row[kChunk];
  for (size_t k0 = 0; k0 < C; k0 += kChunk) {
    const size_t k1 = std::min(C, k0 + kChunk);
    for (size_t r = 0; r < MR; ++r) {
      const size_t n = p * MR + r;
      if (n < N) {
        RowToF32(row, inp + n * C + k0, k1 - k0);
        for (size_t k = k0; k < k1; ++k) P[k * MR + r] = row[k - k0];
      } else {
        for (size_t k = k0; k < k1; ++k) P[k * MR + r] = 0.0f;
      }
    }
  }
}

// A block's tile (MR tokens by nb output channels, column-major: tile[r + j*MR]) to its mr rows
// of out (ld apart), with the bias: fp32 as is, or rounded once to bf16 (the bits of the fp32
// output's rounding), the tile's columns rounded with vectors into a bf16 tile first and then
// copied row by row. MR is a whole number of vectors, and every row of the tile was computed.
template <size_t kCols>
HWY_INLINE void StoreForwardTile(float* HWY_RESTRICT out, size_t ld, const float* HWY_RESTRICT tile,
                                 size_t MR, size_t mr, const float* bias, size_t nb) {
  for (size_t r = 0; r < mr; ++r) {
    float* HWY_RESTRICT y = out + r * ld;
    if (bias) {
      for (size_t j = 0; j < nb; ++j) y[j] = tile[r + j * MR] + bias[j];
    } else {
      for (size_t j = 0; j < nb; ++j) y[j] = tile[r + j * MR];
    }
  }
}
template <size_t kCols>
HWY_INLINE void StoreForwardTile(bf16* HWY_RESTRICT out, size_t ld, const float* HWY_RESTRICT tile,
                                 size_t MR, size_t mr, const float* bias, size_t nb) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  HWY_ALIGN bf16 rounded[kFwdMaxRows * kCols];
  for (size_t j = 0; j < nb; ++j) {
    const float* HWY_RESTRICT col = tile + j * MR;
    bf16* HWY_RESTRICT rc = rounded + j * MR;
    if (bias) {
      const auto b = hn::Set(d, bias[j]);
      for (size_t r = 0; r < MR; r += L) StoreBf16(hn::Add(hn::LoadU(d, col + r), b), d, rc + r);
    } else {
      for (size_t r = 0; r < MR; r += L) StoreBf16(hn::LoadU(d, col + r), d, rc + r);
    }
  }
  for (size_t r = 0; r < mr; ++r) {
    bf16* HWY_RESTRICT y = out + r * ld;
    for (size_t j = 0; j < nb; ++j) y[j] = rounded[r + j * MR];
  }
}

// out (N x OC) = inp (N x C) W^T + bias. Token panels packed (and widened) once into the calling
// thread's kGemmPack scratch, shared by the team; threads take blocks of kFwdCols output channels.
// A bf16 weight's block is widened once into the thread's kBf16A scratch (kFwdCols x C floats) and
// read by every panel; an fp32 weight is read in place, the next block prefetched.
template <class G, class T, class OutT>
void ForwardT(OutT* out, const T* inp, const T* weight, const float* bias, size_t N, int C_,
              int OC_) {
  const size_t C = size_t(C_), OC = size_t(OC_);
  const size_t MR = G::FwdRows();
  const size_t panels = (N + MR - 1) / MR;
  float* packed = thread_scratch(ScratchSlot::kGemmPack, PanelFloats(MR, N, C));
  const size_t blocks = (OC + G::kFwdCols - 1) / G::kFwdCols;
  TeamErrors errors;  // a thread's scratch may not be had: thrown after the region
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const Range pr = split_range(panels, tid, nt);
    for (size_t p = pr.begin; p < pr.end; ++p)
      PackTokenPanel(packed + p * MR * C, inp, p, MR, N, C);
    float* wbuf = nullptr;
    if constexpr (kWide<T>) {
      errors.run([&] { wbuf = thread_scratch(ScratchSlot::kBf16A, G::kFwdCols * C); });
    }
#pragma omp barrier
    HWY_ALIGN float tile[kFwdMaxRows * G::kFwdCols];
    const Range br = split_range(blocks, tid, nt);
    for (size_t b = br.begin; b < br.end && !(kWide<T> && !wbuf); ++b) {
      const size_t o0 = b * G::kFwdCols, nb = std::min(G::kFwdCols, OC - o0);
      const F32Block w = AsF32(weight, C, o0, nb, 0, C, wbuf);
      const size_t next_o0 = o0 + G::kFwdCols;
      const size_t next_nb = b + 1 < br.end ? std::min(G::kFwdCols, OC - next_o0) : 0;
      for (size_t p = 0; p < panels; ++p) {
        if (next_nb) PrefetchRows(weight + next_o0 * C, next_nb, C, C, p, panels);
        for (size_t kc = 0, kl = 0; kc < C; kc += kl) {
          kl = std::min(G::kFwdKc, C - kc);
          G::Block(BLayout::kCols, MR, nb, kl, packed + p * MR * C + kc * MR, MR, w.p + kc, w.ld,
                   tile, MR, kc > 0);
        }
        const size_t n0 = p * MR, mr = std::min(MR, N - n0);
        StoreForwardTile<G::kFwdCols>(out + n0 * OC + o0, OC, tile, MR, mr,
                                      bias ? bias + o0 : nullptr, nb);
      }
    }
  }
  errors.rethrow();
}

// dinp (N x C) = dout (N x OC) W (OC x C), as dinp^T = W^T dout^T with K = OC cut in kKc slices.
// The blocks lie on a fixed grid (channels by kDinpRows, tokens in balanced blocks of at most
// kDinpCols) and threads take whole blocks, so a block's shape, and with it libxsmm's kernel and
// order of sums, never depends on the thread count. Converted operands: a block's bf16 W slice
// (kKc x kDinpRows) is widened once into the thread's kBf16A scratch and read by all its token
// blocks, each token block's rounded dout slice (kDinpCols x kKc) into its kBf16B scratch.
template <class G, class Td, class Tw>
void BackwardInputT(float* dinp, const Td* dout, const Tw* weight, size_t N, size_t C, size_t OC) {
  const size_t row_blocks = (C + G::kDinpRows - 1) / G::kDinpRows;
  const size_t col_blocks = (N + G::kDinpCols - 1) / G::kDinpCols;
  TeamErrors errors;
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const int rows = grid_rows(nt, row_blocks), cols = nt / rows;
    const Range rb = split_range(row_blocks, tid % rows, rows);
    const Range cb = split_range(col_blocks, tid / rows, cols);
    const size_t steps = cb.end - cb.begin;
    float *wbuf = nullptr, *dbuf = nullptr;
    const bool ready = errors.run([&] {
      if constexpr (kWide<Tw>) wbuf = thread_scratch(ScratchSlot::kBf16A, kKc * G::kDinpRows);
      if constexpr (kWide<Td>) dbuf = thread_scratch(ScratchSlot::kBf16B, G::kDinpCols * kKc);
    });
    for (size_t kc = 0; ready && kc < OC; kc += kKc) {
      const size_t kl = std::min(kKc, OC - kc);
      for (size_t ib = rb.begin; ib < rb.end; ++ib) {
        const size_t i0 = ib * G::kDinpRows, mi = std::min(G::kDinpRows, C - i0);
        const F32Block w = AsF32(weight, C, kc, kl, i0, mi, wbuf);
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
          const F32Block d = AsF32(dout, OC, n0, nn, kc, kl, dbuf);
          G::Block(BLayout::kCols, mi, nn, kl, w.p, w.ld, d.p, d.ld, dinp + n0 * C + i0, C, kc > 0);
        }
      }
    }
  }
  errors.rethrow();
}

#ifdef LLMCPU_MATMUL_XSMM
// dW (OC x C) += dout^T inp, as dW^T += inp^T dout (libxsmm), the N tokens cut in slices of
// kDwTokens: a slice of inp (kDwTokens x C) stays in cache while a thread runs its output blocks
// over it, instead of all of inp streaming from memory once per block. Each output sums its
// tokens slice after slice, in the same order for any thread count. A bf16 inp is widened once
// into the calling thread's kGemmPack scratch (the forward's token panels hold as much), shared
// by the team; a rounded dout's block (a slice's tokens by kDwCols) into the thread's kBf16B
// scratch.
template <class G, class Td, class T>
void BackwardWeightT(float* dweight, const Td* dout, const T* inp_in, size_t N, size_t C,
                     size_t OC) {
  const size_t blocks = (OC + G::kDwCols - 1) / G::kDwCols;
  const float* inp = nullptr;
  float* wide = nullptr;
  if constexpr (kWide<T>) {
    wide = thread_scratch(ScratchSlot::kGemmPack, N * C);
    inp = wide;
  } else {
    inp = inp_in;
  }
  TeamErrors errors;
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    float* dbuf = nullptr;
    bool ready = true;
    if constexpr (kWide<T>) {
      const Range rr = split_range(N, tid, nt);
      for (size_t n = rr.begin; n < rr.end; ++n) RowToF32(wide + n * C, inp_in + n * C, C);
#pragma omp barrier
    }
    if constexpr (kWide<Td>) {
      ready = errors.run(
          [&] { dbuf = thread_scratch(ScratchSlot::kBf16B, std::min(kDwTokens, N) * G::kDwCols); });
    }
    const Range br = split_range(blocks, tid, nt);
    const size_t chunks = (C + G::kDwRows - 1) / G::kDwRows;
    for (size_t t0 = 0; ready && t0 < N; t0 += kDwTokens) {
      const size_t tn = std::min(kDwTokens, N - t0);
      const float* in = inp + t0 * C;
      for (size_t b = br.begin; b < br.end; ++b) {
        const size_t o0 = b * G::kDwCols, nb = std::min(G::kDwCols, OC - o0);
        const size_t next_o0 = o0 + G::kDwCols;
        const size_t next_nb = b + 1 < br.end ? std::min(G::kDwCols, OC - next_o0) : 0;
        const F32Block d = AsF32(dout, OC, t0, tn, o0, nb, dbuf);
        for (size_t i0 = 0; i0 < C; i0 += G::kDwRows) {
          const size_t mi = std::min(G::kDwRows, C - i0);
          if (next_nb) {
            PrefetchRows(dout + t0 * OC + next_o0, tn, OC, next_nb, i0 / G::kDwRows, chunks);
          }
          G::Block(BLayout::kRows, mi, nb, tn, in + i0, C, d.p, d.ld, dweight + o0 * C + i0, C,
                   true);
        }
      }
    }
  }
  errors.rethrow();
}
#endif

// One output block's dout columns in BackwardWeightPacked: N tokens by NR.
inline size_t DoutPanelFloats(size_t N) { return N * kGemmNR; }

// dW with the Highway micro-kernel: both operands packed (and widened) so that every step of a
// tile reads contiguous memory (the strided rows of inp and dout cost the AVX2 tile up to half its
// speed). inp is packed once per call into channel panels P[p][k][r] = inp[k*C + p*MR + r] (zero
// past C), in the calling thread's scratch and shared by the team; each thread packs the dout
// columns of its current output block, B[k*NR + j] = dout[k*OC + o0 + j]. Both are activations,
// no weight is copied. Each tile sums all N tokens in order, then adds into dW.
template <class Td, class T>
void BackwardWeightPacked(float* dweight, const Td* dout, const T* inp, size_t N, size_t C,
                          size_t OC) {
  const size_t MR = GemmMR(), NR = kGemmNR;
  const size_t panels = (C + MR - 1) / MR;
  float* packed = thread_scratch(ScratchSlot::kGemmPack, PanelFloats(MR, C, N));
  const size_t blocks = (OC + NR - 1) / NR;
  TeamErrors errors;  // the per-thread scratch may not be had: thrown after the region
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const Range pr = split_range(panels, tid, nt);
    for (size_t p = pr.begin; p < pr.end; ++p) {
      const size_t i0 = p * MR, mr = std::min(MR, C - i0);
      float* HWY_RESTRICT P = packed + p * MR * N;
      for (size_t k = 0; k < N; ++k) {
        RowToF32(P + k * MR, inp + k * C + i0, mr);
        std::fill(P + k * MR + mr, P + (k + 1) * MR, 0.0f);
      }
    }
    float* Bp = nullptr;
    errors.run([&] { Bp = thread_scratch(ScratchSlot::kGemmPanel, DoutPanelFloats(N)); });
#pragma omp barrier
    const Range br = split_range(blocks, tid, nt);
    for (size_t b = br.begin; Bp && b < br.end; ++b) {  // no scratch: the error is kept
      const size_t o0 = b * NR, nb = std::min(NR, OC - o0);
      for (size_t k = 0; k < N; ++k) RowToF32(Bp + k * NR, dout + k * OC + o0, nb);
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

}  // namespace matmul_detail
}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();

#endif  // LLMCPU_SIMD_HWY_MATMUL_DRIVERS_INL_H_
