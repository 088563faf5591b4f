// The register-tile GEMM micro-kernel, written once with Highway and compiled for every target
// (this header is re-included per target by foreach_target.h, hence no #pragma once).
//
// Column-major, like BLAS and libxsmm: one call computes a tile of MR x NR outputs,
//   C(m, j) (+)= sum_{k<K} A(m, k) * B(k, j),     m < MR = kGemmMV vectors, j < NR,
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
#include "simd/hwy/tail-inl.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using GemmD = hn::ScalableTag<float>;
using GemmV = hn::Vec<GemmD>;

// Tile shape: kGemmMV vectors of rows by kGemmNR columns. MV*NR accumulators + MV A vectors + 1
// broadcast must fit the register file: 16 vector registers up to AVX2 (2 x 6), 32 on AVX-512, NEON
// and SVE (4 x 6: per step 4 loads and 6 broadcasts feed 24 FMAs, against 2 + 12 for a 2 x 12 tile,
// and each row of A is read 4 vectors at a time; see bench/RESULTS.md for the GEMM figures).
#if (HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3) || HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
inline constexpr size_t kGemmMV = 2;
#else
inline constexpr size_t kGemmMV = 4;
#endif
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
inline constexpr size_t kGemmNR = 4;
#else
inline constexpr size_t kGemmNR = 6;
#endif
// Largest MR on any vector length of this target, for stack tiles.
inline constexpr size_t kGemmMaxMR = kGemmMV * HWY_MAX_BYTES / sizeof(float);

// Rows per tile; a run-time value on scalable targets (SVE).
HWY_INLINE size_t GemmMR() { return kGemmMV * hn::Lanes(GemmD()); }

enum class BLayout { kCols, kRows };

namespace gemm_detail {

// How many of rows [0, m_valid) fall in vector v of a tile.
HWY_INLINE size_t RowsIn(size_t v, size_t m_valid) {
  const size_t L = hn::Lanes(GemmD()), first = v * L;
  return m_valid <= first ? 0 : (m_valid - first < L ? m_valid - first : L);
}

// Column j of C, vector v: store or add into, rows [0, m_valid) only when kMaskM.
template <bool kMaskM>
HWY_INLINE void StoreVector(GemmV c, float* HWY_RESTRICT p, size_t v, bool accumulate,
                            size_t m_valid) {
  const GemmD d;
  if constexpr (kMaskM) {
    const size_t n = RowsIn(v, m_valid);
    if (accumulate) c = hn::Add(c, LoadN(d, p, n));
    StoreN(c, d, p, n);
  } else {
    if (accumulate) c = hn::Add(c, hn::LoadU(d, p));
    hn::StoreU(c, d, p);
  }
}

// Where column J of B is at step k: kCols, pointer J/3 plus (J%3) columns; kRows, row k plus J.
template <size_t J, BLayout kB>
HWY_INLINE const float* Column(const float* b0, const float* b1, size_t ldb) {
  if constexpr (kB == BLayout::kRows) return b0 + J;
  return (J < 3 ? b0 : b1) + (J % 3) * ldb;
}

}  // namespace gemm_detail

// One MR x NR tile. kMaskM: only rows [0, m_valid) of A are read and of C written (ragged M);
// otherwise all MR rows are used. accumulate: C += A B, else C = A B. The accumulators are named
// variables, not an array, so that sizeless SVE vectors work too; unused ones are never touched.
template <size_t NR, BLayout kB, bool kMaskM>
HWY_INLINE void GemmTile(size_t K, const float* HWY_RESTRICT A, size_t lda,
                         const float* HWY_RESTRICT B, size_t ldb, float* HWY_RESTRICT C, size_t ldc,
                         bool accumulate, size_t m_valid) {
  static_assert(NR >= 1 && NR <= 6, "tile width is 1..6 columns");
  static_assert(kGemmMV == 2 || kGemmMV == 4, "tile height is 2 or 4 vectors");
  constexpr size_t MV = kGemmMV;
  const GemmD d;
  const size_t L = hn::Lanes(d);
  using gemm_detail::RowsIn;
  // Accumulator cVJ: vector V (rows V*L..), column J.
  GemmV c00 = hn::Zero(d), c01 = c00, c02 = c00, c03 = c00, c04 = c00, c05 = c00;
  GemmV c10 = c00, c11 = c00, c12 = c00, c13 = c00, c14 = c00, c15 = c00;
  GemmV c20 = c00, c21 = c00, c22 = c00, c23 = c00, c24 = c00, c25 = c00;
  GemmV c30 = c00, c31 = c00, c32 = c00, c33 = c00, c34 = c00, c35 = c00;
  // kCols: two column pointers, each reaching three columns with a scaled index (j%3)*ldb, so the
  // loop needs few general registers; kRows: one pointer to row k.
  constexpr bool kCols = kB == BLayout::kCols;
  const float* HWY_RESTRICT b0 = B;
  const float* HWY_RESTRICT b1 = (kCols && NR > 3) ? B + 3 * ldb : B;
  for (size_t k = 0; k < K; ++k) {
    GemmV a0, a1, a2 = hn::Zero(d), a3 = a2;
    if constexpr (kMaskM) {
      a0 = LoadN(d, A, RowsIn(0, m_valid));
      a1 = LoadN(d, A + L, RowsIn(1, m_valid));
      if constexpr (MV == 4) {
        a2 = LoadN(d, A + 2 * L, RowsIn(2, m_valid));
        a3 = LoadN(d, A + 3 * L, RowsIn(3, m_valid));
      }
    } else {
      a0 = hn::LoadU(d, A);
      a1 = hn::LoadU(d, A + L);
      if constexpr (MV == 4) {
        a2 = hn::LoadU(d, A + 2 * L);
        a3 = hn::LoadU(d, A + 3 * L);
      }
    }
    A += lda;
#define LLMCPU_GEMM_COLUMN(J)                                             \
  if constexpr (NR > J) {                                                 \
    const GemmV b = hn::Set(d, *gemm_detail::Column<J, kB>(b0, b1, ldb)); \
    c0##J = hn::MulAdd(a0, b, c0##J);                                     \
    c1##J = hn::MulAdd(a1, b, c1##J);                                     \
    if constexpr (MV == 4) {                                              \
      c2##J = hn::MulAdd(a2, b, c2##J);                                   \
      c3##J = hn::MulAdd(a3, b, c3##J);                                   \
    }                                                                     \
  }
    LLMCPU_GEMM_COLUMN(0)
    LLMCPU_GEMM_COLUMN(1)
    LLMCPU_GEMM_COLUMN(2)
    LLMCPU_GEMM_COLUMN(3)
    LLMCPU_GEMM_COLUMN(4)
    LLMCPU_GEMM_COLUMN(5)
#undef LLMCPU_GEMM_COLUMN
    if constexpr (kCols) {
      ++b0, ++b1;
    } else {
      b0 += ldb;
    }
  }
  using gemm_detail::StoreVector;
#define LLMCPU_GEMM_STORE(J)                                          \
  if constexpr (NR > J) {                                             \
    float* HWY_RESTRICT cj = C + (J)*ldc;                             \
    StoreVector<kMaskM>(c0##J, cj, 0, accumulate, m_valid);           \
    StoreVector<kMaskM>(c1##J, cj + L, 1, accumulate, m_valid);       \
    if constexpr (MV == 4) {                                          \
      StoreVector<kMaskM>(c2##J, cj + 2 * L, 2, accumulate, m_valid); \
      StoreVector<kMaskM>(c3##J, cj + 3 * L, 3, accumulate, m_valid); \
    }                                                                 \
  }
  LLMCPU_GEMM_STORE(0)
  LLMCPU_GEMM_STORE(1)
  LLMCPU_GEMM_STORE(2)
  LLMCPU_GEMM_STORE(3)
  LLMCPU_GEMM_STORE(4)
  LLMCPU_GEMM_STORE(5)
#undef LLMCPU_GEMM_STORE
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

// C(m x n) (+)= A(m x k) B(k x n) over any m, n: tiles of MR rows and at most kGemmNR columns,
// columns outer so that the B columns of a tile stay in L1 while A streams. The column tiles have
// balanced widths (n = 64 with 12-wide tiles: 10 or 11 each, not 5 x 12 + 4), since a narrow tile
// has too few accumulators to hide the FMA latency.
template <BLayout kB>
HWY_INLINE void GemmBlock(size_t m, size_t n, size_t K, const float* HWY_RESTRICT A, size_t lda,
                          const float* HWY_RESTRICT B, size_t ldb, float* HWY_RESTRICT C,
                          size_t ldc, bool accumulate) {
  const size_t MR = GemmMR();
  const size_t tiles = (n + kGemmNR - 1) / kGemmNR;
  for (size_t jt = 0; jt < tiles; ++jt) {
    const size_t j = n * jt / tiles, nr = n * (jt + 1) / tiles - j;
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
