// The register-tile GEMM micro-kernel, written once with Highway and compiled for every target (this
// header is re-included per target by foreach_target.h, hence no #pragma once).
//
// Column-major, like BLAS and libxsmm: one call computes a tile of MR x NR outputs,
//   C(m, j) (+)= sum_{k<K} A(m, k) * B(k, j),     m < MR = 2 vectors, j < NR,
// with A(m, k) = A[m + k*lda]  (MR contiguous floats per k: broadcast-free vector loads)
// and  B(k, j) = B[k + j*ldb]  (BLayout::kCols: column j is contiguous in k)
//   or B(k, j) = B[k*ldb + j]  (BLayout::kRows: row k is contiguous in j),
//      C(m, j) = C[m + j*ldc].
// The three products of a linear layer and the small products inside attention all map onto this
// form without copying a weight (see simd/hwy/matmul.cc). The sum over k runs in order 0..K-1 in
// every lane: a result depends only on the inputs and on the blocking of K, never on threads.
// Not here: blocking, packing and threads (the callers), libxsmm (simd/gemm/).

#if defined(LLMCPU_SIMD_HWY_GEMM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LLMCPU_SIMD_HWY_GEMM_INL_H_
#undef LLMCPU_SIMD_HWY_GEMM_INL_H_
#else
#define LLMCPU_SIMD_HWY_GEMM_INL_H_
#endif

#include <stddef.h>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using GemmD = hn::ScalableTag<float>;
using GemmV = hn::Vec<GemmD>;

// Columns per tile: 2*NR accumulators + 2 A vectors + 1 broadcast must fit the register file
// (16 vector registers up to AVX2, 32 on AVX-512, NEON and SVE).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
inline constexpr size_t kGemmNR = 6;
#elif HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
inline constexpr size_t kGemmNR = 4;
#else
inline constexpr size_t kGemmNR = 12;
#endif
// Largest MR on any vector length of this target, for stack tiles.
inline constexpr size_t kGemmMaxMR = 2 * HWY_MAX_BYTES / sizeof(float);

// Rows per tile (two vectors); a run-time value on scalable targets (SVE).
HWY_INLINE size_t GemmMR() { return 2 * hn::Lanes(GemmD()); }

enum class BLayout { kCols, kRows };

namespace gemm_detail {

// Stores (or adds into) C for one column: rows [0, m_valid) of the two vectors.
template <bool kMaskM>
HWY_INLINE void StoreColumn(GemmV c0, GemmV c1, float* HWY_RESTRICT c, bool accumulate,
                            size_t m_valid) {
  const GemmD d;
  const size_t L = hn::Lanes(d);
  if constexpr (kMaskM) {
    const auto m0 = hn::FirstN(d, m_valid);
    const auto m1 = hn::FirstN(d, m_valid > L ? m_valid - L : 0);
    if (accumulate) {
      c0 = hn::Add(c0, hn::MaskedLoad(m0, d, c));
      c1 = hn::Add(c1, hn::MaskedLoad(m1, d, c + L));
    }
    hn::BlendedStore(c0, m0, d, c);
    hn::BlendedStore(c1, m1, d, c + L);
  } else {
    if (accumulate) {
      c0 = hn::Add(c0, hn::LoadU(d, c));
      c1 = hn::Add(c1, hn::LoadU(d, c + L));
    }
    hn::StoreU(c0, d, c);
    hn::StoreU(c1, d, c + L);
  }
}

}  // namespace gemm_detail

// One MR x NR tile. kMaskM: only rows [0, m_valid) of A are read and of C written (ragged M);
// otherwise m_valid is ignored and all MR rows are used. accumulate: C += product, else C = product.
// The accumulators are named variables, not an array, so that sizeless SVE vectors work too.
template <size_t NR, BLayout kB, bool kMaskM>
HWY_INLINE void GemmTile(size_t K, const float* HWY_RESTRICT A, size_t lda,
                         const float* HWY_RESTRICT B, size_t ldb, float* HWY_RESTRICT C, size_t ldc,
                         bool accumulate, size_t m_valid) {
  static_assert(NR >= 1 && NR <= 12, "tile width is 1..12 columns");
  const GemmD d;
  const size_t L = hn::Lanes(d);
  const auto m0 = hn::FirstN(d, kMaskM ? m_valid : L);
  const auto m1 = hn::FirstN(d, kMaskM ? (m_valid > L ? m_valid - L : 0) : L);
  GemmV c00 = hn::Zero(d), c01 = c00, c02 = c00, c03 = c00, c04 = c00, c05 = c00;
  GemmV c06 = c00, c07 = c00, c08 = c00, c09 = c00, c0a = c00, c0b = c00;
  GemmV c10 = c00, c11 = c00, c12 = c00, c13 = c00, c14 = c00, c15 = c00;
  GemmV c16 = c00, c17 = c00, c18 = c00, c19 = c00, c1a = c00, c1b = c00;
  // kCols: four column pointers, each reaching three columns with a scaled index (j%3)*ldb, so the
  // loop needs few general registers; kRows: one pointer to row k.
  constexpr bool kCols = kB == BLayout::kCols;
  const float* HWY_RESTRICT b0 = B;
  const float* HWY_RESTRICT b1 = (kCols && NR > 3) ? B + 3 * ldb : B;
  const float* HWY_RESTRICT b2 = (kCols && NR > 6) ? B + 6 * ldb : B;
  const float* HWY_RESTRICT b3 = (kCols && NR > 9) ? B + 9 * ldb : B;
  for (size_t k = 0; k < K; ++k) {
    GemmV a0, a1;
    if constexpr (kMaskM) {
      a0 = hn::MaskedLoad(m0, d, A);
      a1 = hn::MaskedLoad(m1, d, A + L);
    } else {
      a0 = hn::LoadU(d, A);
      a1 = hn::LoadU(d, A + L);
    }
    A += lda;
#define LLMCPU_GEMM_COLUMN(J, V0, V1)                                                      \
  if constexpr (NR > J) {                                                                  \
    const float* HWY_RESTRICT bj = (kB == BLayout::kCols) ? ((J) / 3 == 0   ? b0           \
                                                             : (J) / 3 == 1 ? b1           \
                                                             : (J) / 3 == 2 ? b2           \
                                                                            : b3) +        \
                                                                   ((J) % 3) * ldb         \
                                                          : b0 + (J);                      \
    const GemmV b = hn::Set(d, *bj);                                                       \
    V0 = hn::MulAdd(a0, b, V0);                                                            \
    V1 = hn::MulAdd(a1, b, V1);                                                            \
  }
    LLMCPU_GEMM_COLUMN(0, c00, c10)
    LLMCPU_GEMM_COLUMN(1, c01, c11)
    LLMCPU_GEMM_COLUMN(2, c02, c12)
    LLMCPU_GEMM_COLUMN(3, c03, c13)
    LLMCPU_GEMM_COLUMN(4, c04, c14)
    LLMCPU_GEMM_COLUMN(5, c05, c15)
    LLMCPU_GEMM_COLUMN(6, c06, c16)
    LLMCPU_GEMM_COLUMN(7, c07, c17)
    LLMCPU_GEMM_COLUMN(8, c08, c18)
    LLMCPU_GEMM_COLUMN(9, c09, c19)
    LLMCPU_GEMM_COLUMN(10, c0a, c1a)
    LLMCPU_GEMM_COLUMN(11, c0b, c1b)
#undef LLMCPU_GEMM_COLUMN
    if constexpr (kB == BLayout::kCols) {
      ++b0, ++b1, ++b2, ++b3;
    } else {
      b0 += ldb;
    }
  }
  using gemm_detail::StoreColumn;
  StoreColumn<kMaskM>(c00, c10, C, accumulate, m_valid);
  if constexpr (NR > 1) StoreColumn<kMaskM>(c01, c11, C + 1 * ldc, accumulate, m_valid);
  if constexpr (NR > 2) StoreColumn<kMaskM>(c02, c12, C + 2 * ldc, accumulate, m_valid);
  if constexpr (NR > 3) StoreColumn<kMaskM>(c03, c13, C + 3 * ldc, accumulate, m_valid);
  if constexpr (NR > 4) StoreColumn<kMaskM>(c04, c14, C + 4 * ldc, accumulate, m_valid);
  if constexpr (NR > 5) StoreColumn<kMaskM>(c05, c15, C + 5 * ldc, accumulate, m_valid);
  if constexpr (NR > 6) StoreColumn<kMaskM>(c06, c16, C + 6 * ldc, accumulate, m_valid);
  if constexpr (NR > 7) StoreColumn<kMaskM>(c07, c17, C + 7 * ldc, accumulate, m_valid);
  if constexpr (NR > 8) StoreColumn<kMaskM>(c08, c18, C + 8 * ldc, accumulate, m_valid);
  if constexpr (NR > 9) StoreColumn<kMaskM>(c09, c19, C + 9 * ldc, accumulate, m_valid);
  if constexpr (NR > 10) StoreColumn<kMaskM>(c0a, c1a, C + 10 * ldc, accumulate, m_valid);
  if constexpr (NR > 11) StoreColumn<kMaskM>(c0b, c1b, C + 11 * ldc, accumulate, m_valid);
}

namespace gemm_detail {

template <size_t NR, BLayout kB, bool kMaskM>
HWY_INLINE void GemmTileUpTo(size_t nr, size_t K, const float* HWY_RESTRICT A, size_t lda,
                             const float* HWY_RESTRICT B, size_t ldb, float* HWY_RESTRICT C,
                             size_t ldc, bool accumulate, size_t m_valid) {
  if constexpr (NR == 1) {
    GemmTile<1, kB, kMaskM>(K, A, lda, B, ldb, C, ldc, accumulate, m_valid);
  } else {
    if (nr == NR) return GemmTile<NR, kB, kMaskM>(K, A, lda, B, ldb, C, ldc, accumulate, m_valid);
    GemmTileUpTo<NR - 1, kB, kMaskM>(nr, K, A, lda, B, ldb, C, ldc, accumulate, m_valid);
  }
}

}  // namespace gemm_detail

// A tile of nr <= kGemmNR columns and m_valid <= MR rows (full tiles take the fast path).
template <BLayout kB>
HWY_INLINE void GemmTileAny(size_t m_valid, size_t nr, size_t K, const float* HWY_RESTRICT A,
                            size_t lda, const float* HWY_RESTRICT B, size_t ldb,
                            float* HWY_RESTRICT C, size_t ldc, bool accumulate) {
  const bool full_m = m_valid == GemmMR();
  if (nr == kGemmNR && full_m) {
    GemmTile<kGemmNR, kB, false>(K, A, lda, B, ldb, C, ldc, accumulate, m_valid);
  } else if (full_m) {
    gemm_detail::GemmTileUpTo<kGemmNR, kB, false>(nr, K, A, lda, B, ldb, C, ldc, accumulate,
                                                  m_valid);
  } else {
    gemm_detail::GemmTileUpTo<kGemmNR, kB, true>(nr, K, A, lda, B, ldb, C, ldc, accumulate,
                                                 m_valid);
  }
}

// C(m x n) (+)= A(m x k) B(k x n) over any m, n: tiles of MR x kGemmNR, columns outer so that the
// B columns of a tile stay in L1 while A streams.
template <BLayout kB>
HWY_INLINE void GemmBlock(size_t m, size_t n, size_t K, const float* HWY_RESTRICT A, size_t lda,
                          const float* HWY_RESTRICT B, size_t ldb, float* HWY_RESTRICT C,
                          size_t ldc, bool accumulate) {
  const size_t MR = GemmMR();
  for (size_t j = 0; j < n; j += kGemmNR) {
    const size_t nr = n - j < kGemmNR ? n - j : kGemmNR;
    const float* Bj = B + (kB == BLayout::kCols ? j * ldb : j);
    for (size_t i = 0; i < m; i += MR) {
      const size_t mr = m - i < MR ? m - i : MR;
      GemmTileAny<kB>(mr, nr, K, A + i, lda, Bj, ldb, C + i + j * ldc, ldc, accumulate);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();

#endif  // LLMCPU_SIMD_HWY_GEMM_INL_H_
