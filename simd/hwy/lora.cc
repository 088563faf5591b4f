// LoRA's low-rank passes, vectorized (the math and the summation order of simd/scalar/lora.h):
//   lora_rank_update       out[n,c] += scale * sum_{k<r} u[n,k] w[k,c]     w (r, cols)
//   lora_project           out[n,k]  = scale * sum_{c<cols} d[n,c] b[c,k]   b (cols, r)
//   lora_outer_accumulate  acc[c,k] += scale * sum_{n<N} d[n,c] u[n,k]     acc (cols, r)
// Each is one pass over the N x cols block with r small, so memory-bound: the small operand (w, b,
// the sums of acc) stays in cache, and each vectorizes along a contiguous dimension:
// - rank update: along c. Register tiles of 4 rows x 2 vectors (each w vector feeds 4 rows); w in
//   column blocks of at most 128 KiB, reused from L2 by the 16 rows of a panel; (panel, block)
//   jobs over threads, so a few long rows spread over the team too. (Blocks of w small enough for
//   L1 cut the rows into short pieces the hardware prefetcher follows badly: slower.)
// - project: along k, d[n,c] broadcast. Register tiles of 4 rows x 2 vectors of k; for r below the
//   vector width the one vector is masked (lanes idle, but each d row is still read once: summing
//   along c instead would need b transposed, as b's columns are r floats apart). b streams from L2
//   once per 4 rows. Row tiles over threads.
// - outer accumulate: along k, d[n,c] broadcast. Register tiles of 8 columns x 1 vector or 4 x 2
//   over blocks of rows whose u rows stay in L1; a tile's sums wait in a 16 KiB stack buffer
//   between row blocks (stored and reloaded exactly, so the order stays n = 0..N-1). Column tiles
//   over threads, narrowed to the team's share.
// Whatever the tiling, blocking or thread count, an element's arithmetic is the same: its sum in
// index order in one accumulator of fused multiply-adds, then scale * sum + old in one fused
// multiply-add (project: scale * sum). The bf16 table's rank update is the same code with the old
// value widened at the load and the result rounded at the store.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/lora.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "simd/bf16.h"
#include "simd/hwy/bf16-inl.h"
#include "simd/hwy/common-inl.h"
#include "simd/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace {

inline constexpr size_t kPanelRows = 16;        // rows of one rank-update job
inline constexpr size_t kWBlockFloats = 32768;  // 128 KiB: a rank update's block of w (in L2)
inline constexpr size_t kBlockFloats = 4096;    // 16 KiB: an outer tile's sums, its block of u
inline constexpr size_t kOuterMaxK = 256;       // k per outer tile (more: several tiles)
// Software prefetch, in elements ahead along a row: the rank update's out (loaded only after a
// tile's sums, too late for the hardware to fetch it in time; with the L2-sized blocks of w it made
// the update 1.4-1.5x as fast at N = 4096, r = 16 and 64, cols = 1536 on 2 Zen 4 cores), the
// projection's d (every 16 columns) and the outer accumulation's d (the next cache line of the row,
// read by the next tile of columns; 1.2x at r = 64).
inline constexpr size_t kUpdateAhead = 32, kProjectAhead = 128, kOuterAhead = 16;

HWY_INLINE size_t RoundUp(size_t x, size_t m) { return (x + m - 1) / m * m; }

// Prefetches the cache line `ahead` elements past p. That may lie past the end of the buffer (a
// prefetch is a hint that never faults), so its address is made as an integer, not by pointer
// arithmetic.
template <typename T>
HWY_INLINE void PrefetchAhead(const T* p, size_t ahead) {
  hwy::Prefetch(reinterpret_cast<const T*>(reinterpret_cast<uintptr_t>(p) + ahead * sizeof(T)));
}

// ---- lora_rank_update ----

// Rows [0, kRows) of a tile at kVecs vectors of columns (kTail: one vector of `lanes` columns):
// s = sum_k u[i,k] w[k,c] in order, then out = scale s + out. w points at column c of row 0.
template <size_t kRows, size_t kVecs, bool kTail, typename Out>
HWY_INLINE void RankUpdateVectors(Out* HWY_RESTRICT out, size_t ld_out, const float* HWY_RESTRICT u,
                                  size_t ld_u, const float* HWY_RESTRICT w, size_t cols, size_t r,
                                  VF vscale, size_t lanes) {
  static_assert(kRows >= 1 && kRows <= 4 && (kVecs == 1 || (kVecs == 2 && !kTail)));
  const DF d;
  const size_t L = hn::Lanes(d);
  VF a00 = hn::Zero(d), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
  for (size_t k = 0; k < r; ++k) {
    const float* HWY_RESTRICT wk = w + k * cols;
    const VF w0 = kTail ? LoadN(d, wk, lanes) : hn::LoadU(d, wk);
    VF w1 = w0;
    if constexpr (kVecs == 2) w1 = hn::LoadU(d, wk + L);
#define LLMCPU_LORA_ROW(I)                                             \
  do {                                                                 \
    if constexpr (kRows > I) {                                         \
      const VF ui = hn::Set(d, u[I * ld_u + k]);                       \
      a##I##0 = hn::MulAdd(ui, w0, a##I##0);                           \
      if constexpr (kVecs == 2) a##I##1 = hn::MulAdd(ui, w1, a##I##1); \
    }                                                                  \
  } while (0)
    LLMCPU_LORA_ROW(0);
    LLMCPU_LORA_ROW(1);
    LLMCPU_LORA_ROW(2);
    LLMCPU_LORA_ROW(3);
#undef LLMCPU_LORA_ROW
  }
#define LLMCPU_LORA_STORE(I)                                                       \
  do {                                                                             \
    if constexpr (kRows > I) {                                                     \
      Out* HWY_RESTRICT y = out + I * ld_out;                                      \
      if constexpr (kTail) {                                                       \
        StoreOutN(hn::MulAdd(vscale, a##I##0, LoadInN(d, y, lanes)), d, y, lanes); \
      } else {                                                                     \
        StoreOut(hn::MulAdd(vscale, a##I##0, LoadIn(d, y)), d, y);                 \
        if constexpr (kVecs == 2) {                                                \
          StoreOut(hn::MulAdd(vscale, a##I##1, LoadIn(d, y + L)), d, y + L);       \
        }                                                                          \
      }                                                                            \
    }                                                                              \
  } while (0)
  LLMCPU_LORA_STORE(0);
  LLMCPU_LORA_STORE(1);
  LLMCPU_LORA_STORE(2);
  LLMCPU_LORA_STORE(3);
#undef LLMCPU_LORA_STORE
}

// kRows rows, columns [c0, c1).
template <size_t kRows, typename Out>
HWY_INLINE void RankUpdateRows(Out* out, size_t ld_out, const float* u, size_t ld_u, const float* w,
                               size_t cols, size_t r, VF vscale, size_t c0, size_t c1) {
  const size_t L = hn::Lanes(DF());
  size_t c = c0;
  for (; c + 2 * L <= c1; c += 2 * L) {
    for (size_t i = 0; i < kRows; ++i) {
      PrefetchAhead(out + i * ld_out + c, kUpdateAhead);
      PrefetchAhead(out + i * ld_out + c, kUpdateAhead + L);
    }
    RankUpdateVectors<kRows, 2, false>(out + c, ld_out, u, ld_u, w + c, cols, r, vscale, L);
  }
  if (c + L <= c1) {
    RankUpdateVectors<kRows, 1, false>(out + c, ld_out, u, ld_u, w + c, cols, r, vscale, L);
    c += L;
  }
  if (c < c1) {
    RankUpdateVectors<kRows, 1, true>(out + c, ld_out, u, ld_u, w + c, cols, r, vscale, c1 - c);
  }
}

template <typename Out>
void RankUpdate(Out* out, size_t ld_out, const float* u, size_t ld_u, const float* w, size_t N,
                int r_, int cols_, float scale) {
  const size_t r = size_t(r_), cols = size_t(cols_);
  if (N == 0 || cols == 0) return;
  // Columns per job: a block of w of at most kWBlockFloats, in whole pairs of vectors.
  const size_t pair = 2 * hn::Lanes(DF());
  const size_t block = std::max(pair, kWBlockFloats / std::max<size_t>(r, 1) / pair * pair);
  const size_t blocks = (cols + block - 1) / block, panels = (N + kPanelRows - 1) / kPanelRows;
#pragma omp parallel for schedule(static)
  for (size_t job = 0; job < panels * blocks; ++job) {
    const size_t n1 = std::min(N, (job / blocks + 1) * kPanelRows);
    const size_t c0 = job % blocks * block, c1 = std::min(cols, c0 + block);
    const VF vscale = hn::Set(DF(), scale);
    size_t n = job / blocks * kPanelRows;
    for (; n + 4 <= n1; n += 4) {
      RankUpdateRows<4>(out + n * ld_out, ld_out, u + n * ld_u, ld_u, w, cols, r, vscale, c0, c1);
    }
    Out* y = out + n * ld_out;
    const float* un = u + n * ld_u;
    if (n1 - n == 3) RankUpdateRows<3>(y, ld_out, un, ld_u, w, cols, r, vscale, c0, c1);
    if (n1 - n == 2) RankUpdateRows<2>(y, ld_out, un, ld_u, w, cols, r, vscale, c0, c1);
    if (n1 - n == 1) RankUpdateRows<1>(y, ld_out, un, ld_u, w, cols, r, vscale, c0, c1);
  }
}

// ---- lora_project ----

// Rows [0, kRows) of a tile at kVecs vectors of k, the last of `lanes` lanes when kMasked:
// s = sum_c d[i,c] b[c,k] in order, then out = scale s. b and out point at the tile's first k.
template <size_t kRows, size_t kVecs, bool kMasked>
HWY_INLINE void ProjectVectors(float* HWY_RESTRICT out, size_t ld_out, const float* HWY_RESTRICT dm,
                               size_t ld_d, const float* HWY_RESTRICT b, size_t cols, size_t r,
                               VF vscale, size_t lanes) {
  static_assert(kRows >= 1 && kRows <= 4 && (kVecs == 1 || kVecs == 2));
  const DF d;
  const size_t L = hn::Lanes(d);
  VF a00 = hn::Zero(d), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
  for (size_t c = 0; c < cols; ++c) {
    if (c % 16 == 0) {
      for (size_t i = 0; i < kRows; ++i) PrefetchAhead(dm + i * ld_d + c, kProjectAhead);
    }
    const float* HWY_RESTRICT bc = b + c * r;
    const VF b0 = (kMasked && kVecs == 1) ? LoadN(d, bc, lanes) : hn::LoadU(d, bc);
    VF b1 = b0;
    if constexpr (kVecs == 2) b1 = kMasked ? LoadN(d, bc + L, lanes) : hn::LoadU(d, bc + L);
#define LLMCPU_LORA_ROW(I)                                             \
  do {                                                                 \
    if constexpr (kRows > I) {                                         \
      const VF di = hn::Set(d, dm[I * ld_d + c]);                      \
      a##I##0 = hn::MulAdd(di, b0, a##I##0);                           \
      if constexpr (kVecs == 2) a##I##1 = hn::MulAdd(di, b1, a##I##1); \
    }                                                                  \
  } while (0)
    LLMCPU_LORA_ROW(0);
    LLMCPU_LORA_ROW(1);
    LLMCPU_LORA_ROW(2);
    LLMCPU_LORA_ROW(3);
#undef LLMCPU_LORA_ROW
  }
#define LLMCPU_LORA_STORE(I)                                 \
  do {                                                       \
    if constexpr (kRows > I) {                               \
      float* HWY_RESTRICT y = out + I * ld_out;              \
      if constexpr (kVecs == 1) {                            \
        if constexpr (kMasked) {                             \
          StoreN(hn::Mul(vscale, a##I##0), d, y, lanes);     \
        } else {                                             \
          hn::StoreU(hn::Mul(vscale, a##I##0), d, y);        \
        }                                                    \
      } else {                                               \
        hn::StoreU(hn::Mul(vscale, a##I##0), d, y);          \
        if constexpr (kMasked) {                             \
          StoreN(hn::Mul(vscale, a##I##1), d, y + L, lanes); \
        } else {                                             \
          hn::StoreU(hn::Mul(vscale, a##I##1), d, y + L);    \
        }                                                    \
      }                                                      \
    }                                                        \
  } while (0)
  LLMCPU_LORA_STORE(0);
  LLMCPU_LORA_STORE(1);
  LLMCPU_LORA_STORE(2);
  LLMCPU_LORA_STORE(3);
#undef LLMCPU_LORA_STORE
}

// kRows rows, every k: pairs of vectors, then what is left (masked where ragged).
template <size_t kRows>
HWY_INLINE void ProjectRows(float* out, size_t ld_out, const float* dm, size_t ld_d, const float* b,
                            size_t cols, size_t r, VF vscale) {
  const size_t L = hn::Lanes(DF());
  size_t k = 0;
  for (; k + 2 * L <= r; k += 2 * L) {
    ProjectVectors<kRows, 2, false>(out + k, ld_out, dm, ld_d, b + k, cols, r, vscale, L);
  }
  const size_t rest = r - k;
  if (rest > L) {
    ProjectVectors<kRows, 2, true>(out + k, ld_out, dm, ld_d, b + k, cols, r, vscale, rest - L);
  } else if (rest == L) {
    ProjectVectors<kRows, 1, false>(out + k, ld_out, dm, ld_d, b + k, cols, r, vscale, L);
  } else if (rest > 0) {
    ProjectVectors<kRows, 1, true>(out + k, ld_out, dm, ld_d, b + k, cols, r, vscale, rest);
  }
}

void Project(float* out, size_t ld_out, const float* dm, size_t ld_d, const float* b, size_t N,
             int cols_, int r_, float scale) {
  const size_t cols = size_t(cols_), r = size_t(r_);
  if (r == 0) return;
  const size_t tiles = (N + 3) / 4;
#pragma omp parallel for schedule(static)
  for (size_t t = 0; t < tiles; ++t) {
    const size_t n = 4 * t, rows = std::min<size_t>(4, N - n);
    float* y = out + n * ld_out;
    const float* dn = dm + n * ld_d;
    const VF vscale = hn::Set(DF(), scale);
    if (rows == 4) ProjectRows<4>(y, ld_out, dn, ld_d, b, cols, r, vscale);
    if (rows == 3) ProjectRows<3>(y, ld_out, dn, ld_d, b, cols, r, vscale);
    if (rows == 2) ProjectRows<2>(y, ld_out, dn, ld_d, b, cols, r, vscale);
    if (rows == 1) ProjectRows<1>(y, ld_out, dn, ld_d, b, cols, r, vscale);
  }
}

// ---- lora_outer_accumulate ----

// Sums (rows ls floats apart) of kC columns x kV vectors of k, the last of `lanes` lanes when
// kMasked: s[j,k] += d[n,j] u[n,k] for n = 0..rows-1 in order. dm points at the first column, u at
// the first k; s is padded to whole vectors (the masked lanes add zeros there).
template <size_t kC, size_t kV, bool kMasked>
HWY_INLINE void OuterVectors(float* HWY_RESTRICT sums, size_t ls, const float* HWY_RESTRICT dm,
                             size_t ld_d, const float* HWY_RESTRICT u, size_t ld_u, size_t rows,
                             size_t lanes) {
  static_assert((kC == 1 || kC == 4 || (kC == 8 && kV == 1)) && (kV == 1 || kV == 2));
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF z = hn::Zero(d);
  VF s00 = z, s10 = z, s20 = z, s30 = z, s40 = z, s50 = z, s60 = z, s70 = z;
  VF s01 = z, s11 = z, s21 = z, s31 = z, s41 = z, s51 = z, s61 = z, s71 = z;
#define LLMCPU_LORA_LOAD(J)                                             \
  do {                                                                  \
    if constexpr (kC > J) {                                             \
      s##J##0 = hn::LoadU(d, sums + J * ls);                            \
      if constexpr (kV == 2) s##J##1 = hn::LoadU(d, sums + J * ls + L); \
    }                                                                   \
  } while (0)
  LLMCPU_LORA_LOAD(0);
  LLMCPU_LORA_LOAD(1);
  LLMCPU_LORA_LOAD(2);
  LLMCPU_LORA_LOAD(3);
  LLMCPU_LORA_LOAD(4);
  LLMCPU_LORA_LOAD(5);
  LLMCPU_LORA_LOAD(6);
  LLMCPU_LORA_LOAD(7);
#undef LLMCPU_LORA_LOAD
  for (size_t n = 0; n < rows; ++n) {
    const float* HWY_RESTRICT un = u + n * ld_u;
    const float* HWY_RESTRICT dn = dm + n * ld_d;
    PrefetchAhead(dn, kOuterAhead);
    const VF u0 = (kMasked && kV == 1) ? LoadN(d, un, lanes) : hn::LoadU(d, un);
    VF u1 = u0;
    if constexpr (kV == 2) u1 = kMasked ? LoadN(d, un + L, lanes) : hn::LoadU(d, un + L);
#define LLMCPU_LORA_COLUMN(J)                                       \
  do {                                                              \
    if constexpr (kC > J) {                                         \
      const VF dj = hn::Set(d, dn[J]);                              \
      s##J##0 = hn::MulAdd(dj, u0, s##J##0);                        \
      if constexpr (kV == 2) s##J##1 = hn::MulAdd(dj, u1, s##J##1); \
    }                                                               \
  } while (0)
    LLMCPU_LORA_COLUMN(0);
    LLMCPU_LORA_COLUMN(1);
    LLMCPU_LORA_COLUMN(2);
    LLMCPU_LORA_COLUMN(3);
    LLMCPU_LORA_COLUMN(4);
    LLMCPU_LORA_COLUMN(5);
    LLMCPU_LORA_COLUMN(6);
    LLMCPU_LORA_COLUMN(7);
#undef LLMCPU_LORA_COLUMN
  }
#define LLMCPU_LORA_SAVE(J)                                             \
  do {                                                                  \
    if constexpr (kC > J) {                                             \
      hn::StoreU(s##J##0, d, sums + J * ls);                            \
      if constexpr (kV == 2) hn::StoreU(s##J##1, d, sums + J * ls + L); \
    }                                                                   \
  } while (0)
  LLMCPU_LORA_SAVE(0);
  LLMCPU_LORA_SAVE(1);
  LLMCPU_LORA_SAVE(2);
  LLMCPU_LORA_SAVE(3);
  LLMCPU_LORA_SAVE(4);
  LLMCPU_LORA_SAVE(5);
  LLMCPU_LORA_SAVE(6);
  LLMCPU_LORA_SAVE(7);
#undef LLMCPU_LORA_SAVE
}

// nc columns of sums at kV vectors of k: 8 columns at a time with one vector, else 4, then one.
template <size_t kV, bool kMasked>
HWY_INLINE void OuterColumns(float* s, size_t ls, const float* dm, size_t ld_d, const float* u,
                             size_t ld_u, size_t rows, size_t nc, size_t lanes) {
  size_t j = 0;
  if constexpr (kV == 1) {
    for (; j + 8 <= nc; j += 8) {
      OuterVectors<8, 1, kMasked>(s + j * ls, ls, dm + j, ld_d, u, ld_u, rows, lanes);
    }
  }
  for (; j + 4 <= nc; j += 4) {
    OuterVectors<4, kV, kMasked>(s + j * ls, ls, dm + j, ld_d, u, ld_u, rows, lanes);
  }
  for (; j < nc; ++j) {
    OuterVectors<1, kV, kMasked>(s + j * ls, ls, dm + j, ld_d, u, ld_u, rows, lanes);
  }
}

// One block of rows into the sums of nc columns x tk k: pairs of vectors of k, then the rest.
void OuterRowBlock(float* s, size_t ls, const float* dm, size_t ld_d, const float* u, size_t ld_u,
                   size_t rows, size_t nc, size_t tk) {
  const size_t L = hn::Lanes(DF());
  size_t k = 0;
  for (; k + 2 * L <= tk; k += 2 * L) {
    OuterColumns<2, false>(s + k, ls, dm, ld_d, u + k, ld_u, rows, nc, L);
  }
  const size_t rest = tk - k;
  if (rest > L) {
    OuterColumns<2, true>(s + k, ls, dm, ld_d, u + k, ld_u, rows, nc, rest - L);
  } else if (rest == L) {
    OuterColumns<1, false>(s + k, ls, dm, ld_d, u + k, ld_u, rows, nc, L);
  } else if (rest > 0) {
    OuterColumns<1, true>(s + k, ls, dm, ld_d, u + k, ld_u, rows, nc, rest);
  }
}

// How the outer accumulation is cut: tiles of tc columns x tk k (the sums of one fit
// kBlockFloats), rows in blocks whose u rows fit kBlockFloats. Only the schedule: an element's
// arithmetic does not depend on it.
struct OuterTiles {
  size_t tk, ls, tc, rows;
  size_t ctiles, ktiles;
};

OuterTiles CutOuter(size_t cols, size_t r, size_t threads) {
  OuterTiles t;
  t.tk = std::min(r, kOuterMaxK);
  t.ls = RoundUp(t.tk, hn::Lanes(DF()));
  // At most the sums buffer; at most the team's share of the columns, in whole cache lines.
  const size_t share = RoundUp((cols + threads - 1) / threads, 16);
  t.tc = std::max<size_t>(1, std::min(kBlockFloats / t.ls, share));
  t.rows = std::max<size_t>(1, kBlockFloats / t.ls);
  t.ctiles = (cols + t.tc - 1) / t.tc;
  t.ktiles = (r + t.tk - 1) / t.tk;
  return t;
}

// acc[c,k] += scale s[c,k] for the tile's nc columns x tk k; acc points at the tile's first one.
void OuterFinish(float* acc, size_t r, const float* s, size_t ls, size_t nc, size_t tk,
                 float scale) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF vscale = hn::Set(d, scale);
  for (size_t j = 0; j < nc; ++j) {
    float* HWY_RESTRICT a = acc + j * r;
    const float* HWY_RESTRICT sj = s + j * ls;
    size_t k = 0;
    for (; k + L <= tk; k += L) {
      hn::StoreU(hn::MulAdd(vscale, hn::LoadU(d, sj + k), hn::LoadU(d, a + k)), d, a + k);
    }
    if (k < tk) {
      StoreN(hn::MulAdd(vscale, hn::LoadU(d, sj + k), LoadN(d, a + k, tk - k)), d, a + k, tk - k);
    }
  }
}

void OuterAccumulate(float* acc, const float* dm, size_t ld_d, const float* u, size_t ld_u,
                     size_t N, int cols_, int r_, float scale) {
  const size_t cols = size_t(cols_), r = size_t(r_);
  if (cols == 0 || r == 0) return;
  const OuterTiles t = CutOuter(cols, r, size_t(omp_get_max_threads()));
#pragma omp parallel for schedule(static)
  for (size_t job = 0; job < t.ctiles * t.ktiles; ++job) {
    const size_t c0 = job / t.ktiles * t.tc, k0 = job % t.ktiles * t.tk;
    const size_t nc = std::min(cols, c0 + t.tc) - c0, tk = std::min(r, k0 + t.tk) - k0;
    HWY_ALIGN float s[kBlockFloats];
    std::fill(s, s + nc * t.ls, 0.0f);
    for (size_t n0 = 0; n0 < N; n0 += t.rows) {
      OuterRowBlock(s, t.ls, dm + n0 * ld_d + c0, ld_d, u + n0 * ld_u + k0, ld_u,
                    std::min(t.rows, N - n0), nc, tk);
    }
    OuterFinish(acc + c0 * r + k0, r, s, t.ls, nc, tk, scale);
  }
}

}  // namespace

void FillLora(KernelTable& t) {
  t.lora_rank_update = &RankUpdate<float>;
  t.lora_project = &Project;
  t.lora_outer_accumulate = &OuterAccumulate;
}

void FillLoraBf16(Bf16Kernels& t) { t.lora_rank_update = &RankUpdate<bf16>; }

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
