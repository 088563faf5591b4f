// What the AVX-512 register tiles of bf16_gemm.cpp and f32_gemm.cpp share: a tile is 64 rows (4
// vectors of 16 fp32 lanes) by up to 6 columns of fp32 sums, zeroed (ZeroTile), its column count
// made a template argument (WithTileCols), and written column by column (ColumnStore) or row by
// row through a transpose (RowStore, with the fp32 -> bf16 rounding of RowStore<bf16>). Included by
// those two files only; the functions carry AVX-512 target attributes and run only where the
// caller checked the CPU.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "simd/bf16.h"

// GCC 12 warns about the intentionally undefined upper lanes inside its own AVX-512 intrinsics
// (_mm512_cvtepi32_epi16 and friends) once they are inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define LLMCPU_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

namespace llmcpu::x86 {
namespace {

constexpr size_t kTileRows = 64;  // 4 vectors of 16 lanes
constexpr size_t kTileCols = 6;

// The tile's sums, all zero.
template <size_t NR>
LLMCPU_AVX512 inline void ZeroTile(__m512 (&c)[4][NR]) {
#pragma GCC unroll 4
  for (size_t v = 0; v < 4; ++v) {
#pragma GCC unroll 6
    for (size_t j = 0; j < NR; ++j) c[v][j] = _mm512_setzero_ps();
  }
}

// f(std::integral_constant<size_t, nr>{}) for a tile of nr columns (1 to kTileCols; a tile is
// compiled per column count).
template <class F>
void WithTileCols(size_t nr, F&& f) {
  switch (nr) {
    case 6:
      return f(std::integral_constant<size_t, 6>{});
    case 5:
      return f(std::integral_constant<size_t, 5>{});
    case 4:
      return f(std::integral_constant<size_t, 4>{});
    case 3:
      return f(std::integral_constant<size_t, 3>{});
    case 2:
      return f(std::integral_constant<size_t, 2>{});
    default:
      return f(std::integral_constant<size_t, 1>{});
  }
}

// fp32 -> bf16 bits of 16 lanes (in the low halves of 32-bit lanes), as float_to_bf16.
LLMCPU_AVX512 inline __m512i RoundBf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i hi = _mm512_srli_epi32(u, 16);
  const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(abs, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __m512i finite = _mm512_or_si512(rounded, _mm512_and_si512(hi, _mm512_set1_epi32(0x8000)));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_mov_epi32(finite, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
}

// Where a tile's 64 x NR sums go. ColumnStore: column j to C + j*ldc (64 lanes contiguous, the
// first m_valid), added to what is there when accumulating. RowStore: row r to out + r*ld (NR
// values contiguous, the first `rows` rows) with the bias, in fp32 or rounded once to bf16 (the
// forward's output, tokens by output channels): eight rows at a time are transposed in registers.
struct ColumnStore {
  float* C;
  size_t ldc, m_valid;
  bool accumulate;

  // The sums to be added are fetched while the tile computes (they are rarely in cache: the
  // lm_head's dweight alone is 150 MB).
  template <size_t NR>
  inline void prefetch() const {
    if (!accumulate) return;
    for (size_t j = 0; j < NR; ++j) {
      for (size_t m = 0; m < m_valid; m += 16) __builtin_prefetch(C + j * ldc + m, 1, 3);
    }
  }

  template <size_t NR>
  LLMCPU_AVX512 inline void write(const __m512 (&c)[4][NR]) const {
#pragma GCC unroll 4
    for (size_t v = 0; v < 4; ++v) {
      const size_t first = v * 16;
      const size_t n = m_valid <= first ? 0 : std::min<size_t>(16, m_valid - first);
      const __mmask16 mask = __mmask16((1u << n) - 1u);
#pragma GCC unroll 6
      for (size_t j = 0; j < NR; ++j) {
        float* p = C + j * ldc + first;
        __m512 r = c[v][j];
        if (accumulate) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mask, p));
        _mm512_mask_storeu_ps(p, mask, r);
      }
    }
  }
};

template <class O>
struct RowStore {
  O* out;
  size_t ld;
  const float* bias;  // at the tile's first column, or null
  size_t rows;

  // out[r][j] = col[j][r] + bias[j] (+ 0 without a bias, as the scalar kernels) for 8 rows.
  template <size_t NR>
  LLMCPU_AVX512 inline void rows8(O* y, const __m256 (&col)[8], __m256 b, size_t n) const {
    __m256 t[8], u[8], row[8];
#pragma GCC unroll 4
    for (size_t j = 0; j < 8; j += 2) {
      t[j] = _mm256_unpacklo_ps(col[j], col[j + 1]);
      t[j + 1] = _mm256_unpackhi_ps(col[j], col[j + 1]);
    }
#pragma GCC unroll 2
    for (size_t j = 0; j < 8; j += 4) {
      u[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44);
      u[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xee);
      u[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44);
      u[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xee);
    }
#pragma GCC unroll 4
    for (size_t j = 0; j < 4; ++j) {
      row[j] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x20);
      row[j + 4] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x31);
    }
    constexpr __mmask8 mask = __mmask8((1u << NR) - 1u);
#pragma GCC unroll 8
    for (size_t r = 0; r < 8; ++r) {
      if (r >= n) break;
      const __m256 v = _mm256_add_ps(row[r], b);
      if constexpr (std::is_same_v<O, float>) {
        if constexpr (NR == 6) {  // three 8-byte stores: never across a cache line
          const __m128 lo = _mm256_castps256_ps128(v);
          _mm_storel_pi(reinterpret_cast<__m64*>(y + r * ld), lo);
          _mm_storeh_pi(reinterpret_cast<__m64*>(y + r * ld + 2), lo);
          _mm_storel_pi(reinterpret_cast<__m64*>(y + r * ld + 4), _mm256_extractf128_ps(v, 1));
        } else {
          _mm256_mask_storeu_ps(y + r * ld, mask, v);
        }
      } else {
        const __m128i h =
            _mm256_castsi256_si128(_mm512_cvtepi32_epi16(RoundBf16(_mm512_castps256_ps512(v))));
        _mm_mask_storeu_epi16(y + r * ld, mask, h);
      }
    }
  }

  template <size_t NR>
  inline void prefetch() const {}

  template <size_t NR>
  LLMCPU_AVX512 inline void write(const __m512 (&c)[4][NR]) const {
    constexpr __mmask8 mask = __mmask8((1u << NR) - 1u);
    const __m256 b = bias ? _mm256_maskz_loadu_ps(mask, bias) : _mm256_setzero_ps();
#pragma GCC unroll 4
    for (size_t v = 0; v < 4; ++v) {
      if (16 * v >= rows) break;
      __m256 lo[8], hi[8];
#pragma GCC unroll 8
      for (size_t j = 0; j < 8; ++j) {
        lo[j] = j < NR ? _mm512_castps512_ps256(c[v][j]) : _mm256_setzero_ps();
        hi[j] = j < NR ? _mm512_extractf32x8_ps(c[v][j], 1) : _mm256_setzero_ps();
      }
      rows8<NR>(out + 16 * v * ld, lo, b, std::min<size_t>(8, rows - 16 * v));
      if (16 * v + 8 < rows)
        rows8<NR>(out + (16 * v + 8) * ld, hi, b, std::min<size_t>(8, rows - 16 * v - 8));
    }
  }
};

}  // namespace
}  // namespace llmcpu::x86
