// The pieces that bf16_attention.cpp (forward) and bf16_attention_backward.cpp share: the register
// tile on VDPBF16PS, the packing of a head's rows into its operand layouts, exp on 16 lanes, and the
// carving of a thread's scratch. Internal to simd/x86/; every function with AVX-512 code carries the
// target attribute (the files are compiled for the baseline ISA).
//
// The tile is bf16_gemm.cpp's: up to 64 rows (MV vectors of 16 fp32 lanes) by up to 6 columns,
//   C(m, j) (+)= sum_p A[p][m][0] B_j[2p] + A[p][m][1] B_j[2p+1]
// with A a panel of 64 lanes packed in pairs (pair p at A + p*128: one 64-byte load per vector) and
// B_j's pairs at B + j*ldb + p*ldp (one 32-bit broadcast per pair: ldp = 2 for a bf16 row, or
// ldb = 2 and ldp = 128 for the lanes of a panel packed along its rows). Every operand
// here is zero-padded to whole pairs (odd D, odd T), so no half pair is needed, and only the MV
// vectors a block needs are computed (the causal diagonal, short tails).
// Not here: the blocks' order and the softmax (the two .cpp files).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "simd/bf16.h"
#include "simd/workspace.h"

#define LLMCPU_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace llmcpu::x86::attention {

constexpr size_t kLanes = 64;            // rows of a panel (4 vectors)
constexpr size_t kPair = 2 * kLanes;     // bf16 values per pair step of a panel
constexpr size_t kCols = 6;              // columns of a tile
inline size_t RoundUp(size_t n, size_t m) { return (n + m - 1) / m * m; }

template <size_t MV, size_t NR>
LLMCPU_AVX512BF16 __attribute__((noinline)) void Tile(size_t pairs, const bf16* A, const bf16* B,
                                                      size_t ldb, size_t ldp, float* C, size_t ldc,
                                                      size_t m_valid, bool accumulate) {
  __m512 c[MV][NR];
#pragma GCC unroll 4
  for (size_t v = 0; v < MV; ++v) {
#pragma GCC unroll 6
    for (size_t j = 0; j < NR; ++j) c[v][j] = _mm512_setzero_ps();
  }
  for (size_t p = 0; p < pairs; ++p) {
    const bf16* a = A + p * kPair;
    __m512bh av[MV];
#pragma GCC unroll 4
    for (size_t v = 0; v < MV; ++v) av[v] = (__m512bh)_mm512_loadu_si512(a + 32 * v);
#pragma GCC unroll 6
    for (size_t j = 0; j < NR; ++j) {
      int32_t bits;
      std::memcpy(&bits, B + j * ldb + p * ldp, sizeof bits);
      const __m512bh b = (__m512bh)_mm512_set1_epi32(bits);
#pragma GCC unroll 4
      for (size_t v = 0; v < MV; ++v) c[v][j] = _mm512_dpbf16_ps(c[v][j], av[v], b);
    }
  }
#pragma GCC unroll 4
  for (size_t v = 0; v < MV; ++v) {
    const size_t first = v * 16;
    const size_t n = m_valid <= first ? 0 : std::min<size_t>(16, m_valid - first);
    const __mmask16 mask = __mmask16((1u << n) - 1u);
#pragma GCC unroll 6
    for (size_t j = 0; j < NR; ++j) {
      float* out = C + j * ldc + first;
      __m512 r = c[v][j];
      if (accumulate) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mask, out));
      _mm512_mask_storeu_ps(out, mask, r);
    }
  }
}

using TileFn = void (*)(size_t, const bf16*, const bf16*, size_t, size_t, float*, size_t, size_t,
                        bool);

template <size_t MV>
constexpr TileFn kTilesOf[kCols] = {&Tile<MV, 1>, &Tile<MV, 2>, &Tile<MV, 3>,
                                    &Tile<MV, 4>, &Tile<MV, 5>, &Tile<MV, 6>};

// The tile of rows [0, rows) (rows <= 64: ceil(rows / 16) vectors computed, rows stored) by nr
// columns (1..6), over `pairs` pairs.
inline void TileAny(size_t rows, size_t nr, size_t pairs, const bf16* A, const bf16* B, size_t ldb,
                    size_t ldp, float* C, size_t ldc, bool accumulate) {
  const size_t mv = (rows + 15) / 16;
  const TileFn fn = mv == 1 ? kTilesOf<1>[nr - 1]
                  : mv == 2 ? kTilesOf<2>[nr - 1]
                  : mv == 3 ? kTilesOf<3>[nr - 1]
                            : kTilesOf<4>[nr - 1];
  fn(pairs, A, B, ldb, ldp, C, ldc, rows, accumulate);
}

// exp(x) on 16 lanes for x <= 88 (softmax arguments are <= 0 up to rounding): x = n ln2 + r with
// |r| <= ln2/2 (ln2 in two parts, Cody and Waite), e^r = 1 + r + r^2 poly(r) with Highway's degree-5
// coefficients (hwy/contrib/math), and 2^n applied by VSCALEFPS (one rounding, gradual underflow).
// Below -104 the result is 0. Held to kExpUlps by tests/simd/test_bf16_attention.cpp.
LLMCPU_AVX512BF16 inline __m512 Exp(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.442695040888963407f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693145751953125f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-1.428606765330187045e-6f), r);
  __m512 q = _mm512_set1_ps(0.000198527617612853646278381f);
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.00139304355252534151077271f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.00833336077630519866943359f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.0416664853692054748535156f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.166666671633720397949219f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.5f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(q, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

// tanh(x) on 16 lanes (the soft-cap of attention_options.h), within kTanhUlps of tanh: for
// |x| < 0.625 Cephes' odd polynomial x + x^3 P(x^2) (tanhf.c), else sign(x) (1 - e) / (1 + e) with
// e = exp(-2|x|) <= 0.29, where 1 - e has no cancellation. Held by
// tests/simd/test_bf16_attention.cpp.
LLMCPU_AVX512BF16 inline __m512 Tanh(__m512 x) {
  const __m512 ax = _mm512_abs_ps(x), s = _mm512_mul_ps(x, x), one = _mm512_set1_ps(1.0f);
  __m512 p = _mm512_set1_ps(-5.70498872745e-3f);
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(2.06390887954e-2f));
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(-5.37397155531e-2f));
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(1.33314422036e-1f));
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(-3.33332819422e-1f));
  const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, s), x, x);
  const __m512 e = Exp(_mm512_mul_ps(ax, _mm512_set1_ps(-2.0f)));
  const __m512 large = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
  const __m512 sign = _mm512_and_ps(x, _mm512_set1_ps(-0.0f));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.625f), _CMP_LT_OQ),
                              _mm512_or_ps(large, sign), small);
}

// Lanes i of the 16 from key u with lo <= u + i < n set: the keys a query row sees.
inline __mmask16 KeysIn(size_t u, size_t lo, size_t n) {
  const size_t a = lo > u ? std::min<size_t>(16, lo - u) : 0;
  const size_t b = n > u ? std::min<size_t>(16, n - u) : 0;
  return a >= b ? __mmask16(0) : __mmask16(((1u << b) - 1u) & ~((1u << a) - 1u));
}

// 16 fp32 lanes rounded to bf16 (nearest, ties to even; VCVTNEPS2BF16 flushes subnormals to zero).
LLMCPU_AVX512BF16 inline __m256i ToBf16(__m512 v) { return (__m256i)_mm512_cvtneps_pbh(v); }

// 16 bf16 values widened exactly to fp32.
LLMCPU_AVX512BF16 inline __m512 Widen(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Lanes of a and b rounded to bf16 and interleaved: (a_0, b_0, a_1, b_1, ...), one pair per lane.
LLMCPU_AVX512BF16 inline __m512i InterleaveBf16(__m512 a, __m512 b) {
  const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(b, a);  // a in the low half, b in the high
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                       23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(idx, both);
}

// Panels of rows along their values (the keys of S^T = K Q^T, the values of dP^T = V dO^T): rows
// [0, rows) of X (n values each, at X + r*ld) in panels of 64 rows, pairs along the n values:
// P[panel*ppanel + p*128 + 2r + h] = X[(64 panel + r)*ld + 2p + h], ppanel = pairs*128 with
// pairs = ceil(n/2); zero past the last row (to whole panels) and past n. A pair of values is one
// 32-bit word, so a panel is a transpose of words: 16 rows per gather.
LLMCPU_AVX512BF16 inline void PackAlongValues(bf16* P, const bf16* X, size_t ld, size_t rows,
                                              size_t n) {
  const size_t pairs = (n + 1) / 2, panels = (rows + kLanes - 1) / kLanes;
  const __m512i offsets = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
      _mm512_set1_epi32(int(ld * sizeof(bf16))));
  for (size_t pn = 0; pn < panels; ++pn) {
    uint32_t* panel = reinterpret_cast<uint32_t*>(P + pn * pairs * kPair);
    for (size_t r0 = pn * kLanes; r0 < (pn + 1) * kLanes; r0 += 16) {
      const size_t valid = r0 < rows ? std::min<size_t>(16, rows - r0) : 0;
      const __mmask16 mask = __mmask16((1u << valid) - 1u);
      const bf16* x = X + std::min(r0, rows > 0 ? rows - 1 : 0) * ld;
      uint32_t* out = panel + (r0 - pn * kLanes);
      for (size_t p = 0; p < n / 2; ++p) {
        _mm512_storeu_si512(out + p * kLanes, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(),
                                                                          mask, offsets, x + 2 * p,
                                                                          1));
      }
      if (n & 1) {  // the last value alone: never read past it
        for (size_t r = 0; r < 16; ++r) out[(pairs - 1) * kLanes + r] = r < valid ? x[r * ld + n - 1] : 0u;
      }
    }
  }
}

// Panels of the values along the rows (V^T in O^T = V^T P^T, K^T in dQ^T = K^T dS^T, and the Q,
// dO read as B by dK, dV): the n values of X's rows in panels of 64, pairs along the rows [0, rows)
// (zero-padded to `pairs` pairs): P[panel*ppanel + p*128 + 2i + h] = X[(2p + h)*ld + 64 panel + i],
// ppanel = pairs*128.
LLMCPU_AVX512BF16 inline void PackAlongRows(bf16* P, const bf16* X, size_t ld, size_t rows,
                                            size_t n, size_t pairs) {
  const size_t panels = (n + kLanes - 1) / kLanes;
  for (size_t pn = 0; pn < panels; ++pn) {
    for (size_t p = 0; p < pairs; ++p) {
      uint32_t* out = reinterpret_cast<uint32_t*>(P + pn * pairs * kPair + p * kPair);
      const bf16* x0 = 2 * p < rows ? X + 2 * p * ld : nullptr;
      const bf16* x1 = 2 * p + 1 < rows ? X + (2 * p + 1) * ld : nullptr;
      for (size_t i = 0; i < kLanes; i += 16) {
        const size_t c = pn * kLanes + i;
        const size_t valid = c < n ? std::min<size_t>(16, n - c) : 0;
        const __mmask16 mask = __mmask16((1u << valid) - 1u);
        const __m512i a =
            x0 ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, x0 + c)) : _mm512_setzero_si512();
        const __m512i b =
            x1 ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, x1 + c)) : _mm512_setzero_si512();
        _mm512_storeu_si512(out + i, _mm512_or_si512(a, _mm512_slli_epi32(b, 16)));
      }
    }
  }
}

// Rows copied with zero padding: Y[t*ldy + i] = X[t*ldx + i] for i < n, 0 for n <= i < ldy. The
// rows of a head lie a whole qkv row apart (a page or more: no hardware prefetch follows them), so
// the rows a few ahead are prefetched; the packing then reads the contiguous copy.
LLMCPU_AVX512BF16 inline void CopyRows(bf16* Y, size_t ldy, const bf16* X, size_t ldx,
                                       size_t rows, size_t n) {
  constexpr size_t kAhead = 8;
  for (size_t t = 0; t < rows; ++t) {
    if (t + kAhead < rows) {
      __builtin_prefetch(X + (t + kAhead) * ldx);
      __builtin_prefetch(X + (t + kAhead) * ldx + n - 1);
    }
    for (size_t i = 0; i < ldy; i += 32) {
      const size_t valid = i < n ? std::min<size_t>(32, n - i) : 0;
      const __mmask32 load = valid == 32 ? ~__mmask32(0) : (__mmask32(1) << valid) - 1;
      const __mmask32 store = ldy - i >= 32 ? ~__mmask32(0) : (__mmask32(1) << (ldy - i)) - 1;
      _mm512_mask_storeu_epi16(Y + t * ldy + i, store, _mm512_maskz_loadu_epi16(load, X + t * ldx + i));
    }
  }
}

// A thread's scratch carved into regions of whole 64-byte lines (counted in floats, as
// thread_scratch counts them); the same walk sizes the scratch and lays it out.
class Carve {
 public:
  explicit Carve(float* base = nullptr) : base_(base) {}
  float* floats(size_t n) { return reinterpret_cast<float*>(take(n * sizeof(float))); }
  bf16* halves(size_t n) { return reinterpret_cast<bf16*>(take(n * sizeof(bf16))); }
  size_t used_floats() const { return bytes_ / sizeof(float); }

 private:
  char* take(size_t bytes) {
    char* p = base_ ? reinterpret_cast<char*>(base_) + bytes_ : nullptr;
    bytes_ += RoundUp(bytes, 64);
    return p;
  }
  float* base_;
  size_t bytes_ = 0;
};

}  // namespace llmcpu::x86::attention
