// The forward GEMM of a linear layer, out (N x OC) = inp (N x C) W^T + bias, written once for fp32
// operands and for bf16 ones widened exactly to fp32 where they are packed or first read (the fp32
// table, simd/hwy/matmul.cc, and the portable bf16 tables, simd/hwy/bf16_matmul.cc), and what the
// backward pass (matmul_packed-inl.h) shares with it: the operand conversions (bf16 widened, an
// fp32 dout rounded through bf16 as RoundedF32) and their block views. Column-major blocks
// (gemm-inl.h's form): out^T (N x OC) = inp^T (N x C, packed in token panels) * W^T (C x OC: W's
// rows as columns, ldb = C), each tile written to out through a small transpose, with the bias,
// in fp32 or rounded once to bf16. An fp32 weight is read in place; a bf16 one is widened a block
// of output channels at a time into per-thread scratch: no widened copy of a whole weight exists,
// and a widened product is the fp32 product of the same values (products of bf16 values are exact
// in fp32), at the fp32 GEMM's speed. Each block product runs on the Highway micro-kernel
// (HwyGemm) or on libxsmm's kernels (XsmmGemm): same driver, same layouts. Threads own disjoint
// output blocks and every sum runs over its reduction dimension in a fixed order, so results do not
// depend on the thread count. Re-included per target by foreach_target.h (no #pragma once).
// Not here: the backward pass (matmul_packed-inl.h), the table entries and their sizing
// (matmul.cc, bf16_matmul.cc), the register tile (gemm-inl.h), libxsmm's kernels
// (simd/gemm/xsmm.cpp).

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

// Block sizes of the forward pass: a block is one token panel (MR tokens, all C) times kFwdCols
// outputs, its K run in slices of at most kFwdKc channels, summed in order into the block's tile.
struct HwyGemm {
  static size_t FwdRows() { return GemmMR(); }  // tokens per forward panel: one tile's rows
  static constexpr size_t kFwdCols = kGemmNR;   // outputs per forward block
  static constexpr size_t kFwdKc = std::numeric_limits<size_t>::max();  // K in one piece
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
  // Tokens per forward panel: 32 on AVX2, where libxsmm's 32 x 64 blocks ran GPT-2 124M's forward
  // GEMMs 3-14% faster than 64 x 64 (B=4, T=64; at N = 4096 the lm_head 9-13%) and 16 or 48 rows
  // 25-38% slower; 64 on AVX-512, where 32 was no faster.
  static size_t FwdRows() { return kIsa == xsmm::Isa::kAvx2 ? 32 : 64; }
  static constexpr size_t kFwdCols = 64;
  // A token panel's K slice (64 x 768 floats, 192 KiB; half that on AVX2) stays in L2 beside the
  // block's weight rows; a whole 64-token panel at C = 3072 (768 KiB) did not (fc proj's forward
  // 1-6% faster at N = 256, 9% at N = 4096).
  static constexpr size_t kFwdKc = 768;
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
  // The tail with one vector too: the backward pass packs dout in rows of NR < L values.
  if (i < n) {
    const auto v = hn::BitCast(d, hn::ShiftLeft<16>(Bf16Bits(d, LoadN(d, x + i, n - i))));
    StoreN(v, d, y + i, n - i);
  }
}

// x[0, n) as fp32 where n is a whole number of vectors (a panel's row): vector loads and stores,
// where RowToF32's memcpy of a variable size becomes a loop of 8-byte moves.
HWY_INLINE void RowVectorsToF32(float* HWY_RESTRICT y, const float* HWY_RESTRICT x, size_t n) {
  const hn::ScalableTag<float> d;
  for (size_t i = 0; i < n; i += hn::Lanes(d)) hn::StoreU(hn::LoadU(d, x + i), d, y + i);
}
template <class T>
HWY_INLINE void RowVectorsToF32(float* HWY_RESTRICT y, const T* HWY_RESTRICT x, size_t n) {
  RowToF32(y, x, n);
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

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#define LLMCPU_MATMUL_TRANSPOSE8 1
// An 8 x 8 transpose on 256-bit vectors, in three rounds of interleaves (32-bit, 64-bit, halves):
// rows[i] = {c[0][i], c[1][i], ..., c[7][i]}.
template <class D8>
HWY_INLINE void Transpose8(D8 d, const hn::Vec<D8>* c, hn::Vec<D8>* rows) {
  using V = hn::Vec<D8>;
  const hn::Repartition<double, D8> d64;
  const auto lo64 = [&](V a, V b) {
    return hn::BitCast(d, hn::InterleaveLower(d64, hn::BitCast(d64, a), hn::BitCast(d64, b)));
  };
  const auto hi64 = [&](V a, V b) {
    return hn::BitCast(d, hn::InterleaveUpper(d64, hn::BitCast(d64, a), hn::BitCast(d64, b)));
  };
  V p[8];  // pairs of columns: p[2i] rows 0,1 | 4,5 of columns 2i, 2i+1; p[2i+1] rows 2,3 | 6,7
  for (size_t i = 0; i < 4; ++i) {
    p[2 * i] = hn::InterleaveLower(d, c[2 * i], c[2 * i + 1]);
    p[2 * i + 1] = hn::InterleaveUpper(d, c[2 * i], c[2 * i + 1]);
  }
  // q[r + 4h]: row r (and r + 4) of columns 4h..4h+3.
  const V q0 = lo64(p[0], p[2]), q1 = hi64(p[0], p[2]), q2 = lo64(p[1], p[3]),
          q3 = hi64(p[1], p[3]);
  const V q4 = lo64(p[4], p[6]), q5 = hi64(p[4], p[6]), q6 = lo64(p[5], p[7]),
          q7 = hi64(p[5], p[7]);
  rows[0] = hn::ConcatLowerLower(d, q4, q0);
  rows[1] = hn::ConcatLowerLower(d, q5, q1);
  rows[2] = hn::ConcatLowerLower(d, q6, q2);
  rows[3] = hn::ConcatLowerLower(d, q7, q3);
  rows[4] = hn::ConcatUpperUpper(d, q4, q0);
  rows[5] = hn::ConcatUpperUpper(d, q5, q1);
  rows[6] = hn::ConcatUpperUpper(d, q6, q2);
  rows[7] = hn::ConcatUpperUpper(d, q7, q3);
}
#endif

HWY_INLINE float ScalarF32(float x) { return x; }
HWY_INLINE float ScalarF32(bf16 x) { return bf16_to_float(x); }

// Token panel p of inp (N x C) transposed: P[k*MR + r] = inp[(p*MR + r)*C + k], rows past N zero.
// On x86, eight channels of eight tokens at a time through an 8 x 8 transpose (a bf16 inp widened
// as it is loaded): element by element, the pack took 6% of the forward time at OC = 768.
template <class T>
void PackTokenPanel(float* HWY_RESTRICT P, const T* HWY_RESTRICT inp, size_t p, size_t MR, size_t N,
                    size_t C) {
  const size_t n0 = p * MR, rows = N > n0 ? std::min(MR, N - n0) : 0;
  size_t k0 = 0;
#ifdef LLMCPU_MATMUL_TRANSPOSE8
  const hn::FixedTag<float, 8> d8;
  for (; k0 + 8 <= C; k0 += 8) {
    for (size_t r0 = 0; r0 < MR; r0 += 8) {
      hn::Vec<decltype(d8)> tokens[8], channels[8];
      for (size_t j = 0; j < 8; ++j) {
        tokens[j] = r0 + j < rows ? LoadIn(d8, inp + (n0 + r0 + j) * C + k0) : hn::Zero(d8);
      }
      Transpose8(d8, tokens, channels);
      for (size_t i = 0; i < 8; ++i) hn::StoreU(channels[i], d8, P + (k0 + i) * MR + r0);
    }
  }
#endif
  constexpr size_t kChunk = 64;
  for (; k0 < C; k0 += kChunk) {
    const size_t k1 = std::min(C, k0 + kChunk);
    for (size_t r = 0; r < MR; ++r) {
      if (r < rows) {
        const T* HWY_RESTRICT x = inp + (n0 + r) * C;
        for (size_t k = k0; k < k1; ++k) P[k * MR + r] = ScalarF32(x[k]);
      } else {
        for (size_t k = k0; k < k1; ++k) P[k * MR + r] = 0.0f;
      }
    }
  }
}

// A block's tile (MR tokens by nb output channels, column-major: tile[r + j*MR]) to its mr rows
// of out (ld apart), with the bias: fp32 as is, or rounded once to bf16 (the bits of the fp32
// output's rounding). On x86 a wide tile (libxsmm's 64 columns) goes out eight columns at a time
// through 8 x 8 transposes, a row of eight channels per store: element by element, the
// transposing store took 6% of the lm_head's forward time on AVX2. Columns left over (and the
// narrow tiles of the Highway micro-kernel) go element by element: fp32 directly; bf16 rounded a
// column at a time into a bf16 tile with vectors first and then copied row by row. MR is a whole
// number of vectors, and every row of the tile was computed.
template <size_t kCols, class OutT>
HWY_INLINE void StoreForwardTile(OutT* HWY_RESTRICT out, size_t ld, const float* HWY_RESTRICT tile,
                                 size_t MR, size_t mr, const float* bias, size_t nb) {
  size_t j0 = 0;
#ifdef LLMCPU_MATMUL_TRANSPOSE8
  if constexpr (kCols >= 8) {
    const hn::FixedTag<float, 8> d8;
    for (; j0 + 8 <= nb; j0 += 8) {
      for (size_t r0 = 0; r0 < mr; r0 += 8) {
        hn::Vec<decltype(d8)> cols[8], rows[8];
        for (size_t j = 0; j < 8; ++j) cols[j] = hn::LoadU(d8, tile + (j0 + j) * MR + r0);
        Transpose8(d8, cols, rows);
        const size_t n = std::min<size_t>(8, mr - r0);
        if (bias) {
          const auto b = hn::LoadU(d8, bias + j0);
          for (size_t i = 0; i < n; ++i)
            StoreOut(hn::Add(rows[i], b), d8, out + (r0 + i) * ld + j0);
        } else {
          for (size_t i = 0; i < n; ++i) StoreOut(rows[i], d8, out + (r0 + i) * ld + j0);
        }
      }
    }
  }
#endif
  if (j0 == nb) return;
  if constexpr (std::is_same_v<OutT, float>) {
    for (size_t r = 0; r < mr; ++r) {
      float* HWY_RESTRICT y = out + r * ld;
      if (bias) {
        for (size_t j = j0; j < nb; ++j) y[j] = tile[r + j * MR] + bias[j];
      } else {
        for (size_t j = j0; j < nb; ++j) y[j] = tile[r + j * MR];
      }
    }
  } else {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    HWY_ALIGN bf16 rounded[kFwdMaxRows * kCols];
    for (size_t j = j0; j < nb; ++j) {
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
      for (size_t j = j0; j < nb; ++j) y[j] = rounded[r + j * MR];
    }
  }
}

// Token panels the forward pass packs at a time: a chunk of at least kFwdWideTokens tokens, so
// that each weight block meets panels that are still in cache (a 1.5 MiB chunk at C = 768, where
// all of inp at B=4, T=1024 is 12 MiB: the fp32 forward GEMMs of GPT-2 124M at N = 4096 on AVX2
// 8-18% faster, the lm_head's 2051 -> 1680 ms) and the packed panels take a slice's scratch (6 MiB
// at C = 3072, not 50 MiB), at the cost of reading (or widening) each weight block once per chunk.
constexpr size_t kFwdWideTokens = 512;
template <class G>
size_t FwdChunkPanels(size_t N) {
  const size_t MR = G::FwdRows(), panels = (N + MR - 1) / MR;
  return std::min(panels, (kFwdWideTokens + MR - 1) / MR);
}

// A bf16 weight that more than one chunk meets, of at most kFwdOnceFloats floats widened (16 MiB:
// every GPT-2 124M weight but the lm_head), is widened once per call, each thread its own blocks'
// rows, instead of once per chunk.
constexpr size_t kFwdOnceFloats = size_t(4) << 20;
template <class G, class T>
bool FwdWidenOnce(size_t N, size_t C, size_t OC) {
  if constexpr (!kWide<T>) return false;
  const size_t panels = (N + G::FwdRows() - 1) / G::FwdRows();
  return FwdChunkPanels<G>(N) < panels && OC * C <= kFwdOnceFloats;
}
// The widened weight rows one thread of `threads` holds (kBf16A): one block's, or all of its own.
template <class G, class T>
size_t FwdWeightFloats(size_t N, size_t C, size_t OC, size_t threads) {
  if (!FwdWidenOnce<G, T>(N, C, OC)) return G::kFwdCols * C;
  const size_t blocks = (OC + G::kFwdCols - 1) / G::kFwdCols;
  return (blocks + threads - 1) / threads * G::kFwdCols * C;
}

// out (N x OC) = inp (N x C) W^T + bias. Token panels packed (and widened) a chunk at a time into
// the calling thread's kGemmPack scratch, shared by the team; threads take blocks of kFwdCols
// output channels. A bf16 weight's block is widened into the thread's kBf16A scratch (kFwdCols x
// C floats) and read by every panel of the chunk, or all of the thread's blocks once per call
// (FwdWidenOnce); an fp32 weight is read in place, the next block prefetched.
template <class G, class T, class OutT>
void ForwardT(OutT* out, const T* inp, const T* weight, const float* bias, size_t N, int C_,
              int OC_) {
  const size_t C = size_t(C_), OC = size_t(OC_);
  const size_t MR = G::FwdRows();
  const size_t panels = (N + MR - 1) / MR, chunk = FwdChunkPanels<G>(N);
  float* packed = thread_scratch(ScratchSlot::kGemmPack, PanelFloats(MR, chunk * MR, C));
  const size_t blocks = (OC + G::kFwdCols - 1) / G::kFwdCols;
  const bool once = FwdWidenOnce<G, T>(N, C, OC);
  TeamErrors errors;  // a thread's scratch may not be had: thrown after the region
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const Range br = split_range(blocks, tid, nt);
    float* wbuf = nullptr;
    if constexpr (kWide<T>) {
      const size_t floats = (once ? std::max<size_t>(1, br.end - br.begin) : 1) * G::kFwdCols * C;
      errors.run([&] { wbuf = thread_scratch(ScratchSlot::kBf16A, floats); });
    }
    HWY_ALIGN float tile[kFwdMaxRows * G::kFwdCols];
    // Every thread meets the barriers, its work or not (a thread without scratch computes nothing).
    for (size_t p0 = 0; p0 < panels; p0 += chunk) {
      const size_t p1 = std::min(panels, p0 + chunk);
      const Range pr = split_range(p1 - p0, tid, nt);
      for (size_t p = p0 + pr.begin; p < p0 + pr.end; ++p)
        PackTokenPanel(packed + (p - p0) * MR * C, inp, p, MR, N, C);
#pragma omp barrier
      for (size_t b = br.begin; b < br.end && !(kWide<T> && !wbuf); ++b) {
        const size_t o0 = b * G::kFwdCols, nb = std::min(G::kFwdCols, OC - o0);
        // Widened by an earlier chunk of this call: neither widened nor its next block prefetched.
        const bool widened = once && p0 > 0;
        float* own = once ? wbuf + (b - br.begin) * G::kFwdCols * C : wbuf;
        const F32Block w = widened ? F32Block{own, C} : AsF32(weight, C, o0, nb, 0, C, own);
        const size_t next_o0 = o0 + G::kFwdCols;
        const size_t next_nb = b + 1 < br.end && !widened ? std::min(G::kFwdCols, OC - next_o0) : 0;
        for (size_t p = p0; p < p1; ++p) {
          if (next_nb) PrefetchRows(weight + next_o0 * C, next_nb, C, C, p - p0, p1 - p0);
          for (size_t kc = 0, kl = 0; kc < C; kc += kl) {
            kl = std::min(G::kFwdKc, C - kc);
            G::Block(BLayout::kCols, MR, nb, kl, packed + (p - p0) * MR * C + kc * MR, MR, w.p + kc,
                     w.ld, tile, MR, kc > 0);
          }
          const size_t n0 = p * MR, mr = std::min(MR, N - n0);
          StoreForwardTile<G::kFwdCols>(out + n0 * OC + o0, OC, tile, MR, mr,
                                        bias ? bias + o0 : nullptr, nb);
        }
      }
#pragma omp barrier
    }
  }
  errors.rethrow();
}

}  // namespace matmul_detail
}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();

#undef LLMCPU_MATMUL_TRANSPOSE8

#endif  // LLMCPU_SIMD_HWY_MATMUL_DRIVERS_INL_H_
