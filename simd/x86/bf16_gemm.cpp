// bf16 GEMMs on AVX512-BF16 (see bf16_gemm.h). One register-tile kernel serves the three products
// of a linear layer. A tile is 64 rows (4 vectors of 16 fp32 lanes) by up to 6 columns:
//   C(m, j) (+)= sum_p A[p][m][0] B_j[2p] + A[p][m][1] B_j[2p+1]
// A is a panel packed in pairs (64 lanes x 2 bf16 per pair p: one 64-byte load per vector feeds
// VDPBF16PS), B_j a bf16 row with K contiguous values (one 32-bit broadcast per pair), C fp32 at
// C[m + j*ldc]. An odd K ends with a half pair whose missing half is zero on both sides.
//   forward  out (N,OC):   rows = tokens,   A = inp packed,      B_j = weight row j (K = C);
//                          the tile is written to out through a transpose, with the bias.
//   dinp (N,C):            rows = channels, A = weight packed,   B_j = bf16(dout) row j (K = OC),
//                          K cut in slices so a slice of the packed weight stays in L2.
//   dweight (OC,C) +=      rows = channels, A = inp packed,      B_j = bf16(dout)^T row j (K = N),
//                          interleaved from dinp's bf16(dout) when dinp is asked for too.
// Cache blocking (fixed sizes, never the thread count's): the forward runs the panels in chunks
// that stay in a core's L2 (kL2Bytes) while each thread runs its blocks of output channels over
// them, so the weight is read once per chunk and each panel once from memory; dinp cuts K (the
// output channels) in slices of kKcPairs pairs; dweight cuts K (the tokens) in slices of kDwKcPairs
// pairs and runs the channel panels in L2-sized chunks the same way, with bf16(dout) packed in
// blocks of kNR columns so that a tile's operand is contiguous.
// Every output sums its K in order (slice by slice) whatever the thread count; threads own disjoint
// outputs, so no atomics and no dependence on the thread count. Operands are packed per call into
// the calling thread's scratch (grow-only: after the first step nothing is allocated).
// The functions with AVX-512 code carry target attributes; the file is compiled for the baseline
// ISA, so no AVX-512 instruction runs unless the CPU check in bf16_dispatch.cpp passed.
#include "simd/x86/bf16_gemm.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "simd/column_sums.h"
#include "simd/isa_cap.h"
#include "simd/workspace.h"
#include "simd/x86/tile_store-inl.h"

#define LLMCPU_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace llmcpu::x86 {
namespace {

constexpr size_t kMR = kTileRows;        // rows per tile: 4 vectors of 16 lanes
constexpr size_t kNR = kTileCols;        // columns per tile
constexpr size_t kPair = 2 * kMR;        // bf16 values per packed pair step of a panel
constexpr size_t kKcPairs = 512;         // dinp: pairs per K slice (128 KiB of weight per panel)
constexpr size_t kDwKcPairs = 512;       // dweight: token pairs per slice (128 KiB per panel)
constexpr size_t kL2Bytes = 576 * 1024;  // packed panels kept in a core's L2 (1-2 MiB) at a time
constexpr size_t kL3Bytes = size_t(8) << 20;  // a weight the L3 keeps between panels

// The scratch of the three products, in bf16 values, for the kernels below and their sizing
// entries alike: `rows` rows in panels of kMR packed in pairs along K (the last panel zero-padded),
// and dout's N x OC, rounded or (for dW) with its token rows interleaved in pairs.
size_t PanelValues(size_t rows, size_t K) { return (rows + kMR - 1) / kMR * ((K + 1) / 2 * kPair); }
size_t InterleavedValues(size_t N, size_t OC) {
  return (N + 1) / 2 * 2 * ((OC + kNR - 1) / kNR * kNR);
}

size_t Bf16Floats(size_t count) { return (count + 1) / 2; }  // thread_scratch counts floats

bf16* bf16_scratch(ScratchSlot slot, size_t count) {
  return reinterpret_cast<bf16*>(thread_scratch(slot, Bf16Floats(count)));
}

// B_j's pair p is at B + j*ldb + p*ldp: ldp = 2 for a bf16 row with K contiguous values, or
// ldb = 2 and ldp = 2*kNR for a block of rows interleaved in pairs (InterleaveRowPairs).
template <size_t NR, class Store>
LLMCPU_AVX512BF16 __attribute__((noinline)) void Tile(size_t K, const bf16* A, const bf16* B,
                                                      size_t ldb, size_t ldp, const Store& store) {
  store.template prefetch<NR>();
  __m512 c[4][NR];
  ZeroTile(c);
  const size_t pairs = K / 2;
  for (size_t p = 0; p < pairs; ++p) {
    const bf16* a = A + p * kPair;
    const __m512bh a0 = (__m512bh)_mm512_loadu_si512(a);
    const __m512bh a1 = (__m512bh)_mm512_loadu_si512(a + 32);
    const __m512bh a2 = (__m512bh)_mm512_loadu_si512(a + 64);
    const __m512bh a3 = (__m512bh)_mm512_loadu_si512(a + 96);
#pragma GCC unroll 6
    for (size_t j = 0; j < NR; ++j) {
      int32_t bits;
      std::memcpy(&bits, B + j * ldb + p * ldp, sizeof bits);
      const __m512bh b = (__m512bh)_mm512_set1_epi32(bits);
      c[0][j] = _mm512_dpbf16_ps(c[0][j], a0, b);
      c[1][j] = _mm512_dpbf16_ps(c[1][j], a1, b);
      c[2][j] = _mm512_dpbf16_ps(c[2][j], a2, b);
      c[3][j] = _mm512_dpbf16_ps(c[3][j], a3, b);
    }
  }
  if (K & 1) {  // the half pair: A's second halves are zero, B's is set to zero here
    const bf16* a = A + pairs * kPair;
    const __m512bh a0 = (__m512bh)_mm512_loadu_si512(a);
    const __m512bh a1 = (__m512bh)_mm512_loadu_si512(a + 32);
    const __m512bh a2 = (__m512bh)_mm512_loadu_si512(a + 64);
    const __m512bh a3 = (__m512bh)_mm512_loadu_si512(a + 96);
#pragma GCC unroll 6
    for (size_t j = 0; j < NR; ++j) {
      const __m512bh b = (__m512bh)_mm512_set1_epi32(int32_t(B[j * ldb + pairs * ldp]));
      c[0][j] = _mm512_dpbf16_ps(c[0][j], a0, b);
      c[1][j] = _mm512_dpbf16_ps(c[1][j], a1, b);
      c[2][j] = _mm512_dpbf16_ps(c[2][j], a2, b);
      c[3][j] = _mm512_dpbf16_ps(c[3][j], a3, b);
    }
  }
  store.template write<NR>(c);
}

template <class Store>
void TileAny(size_t nr, size_t K, const bf16* A, const bf16* B, size_t ldb, size_t ldp,
             const Store& store) {
  WithTileCols(nr, [&](auto NR) { Tile<decltype(NR)::value>(K, A, B, ldb, ldp, store); });
}

void TileAny(size_t nr, size_t K, const bf16* A, const bf16* B, size_t ldb, size_t ldp, float* C,
             size_t ldc, size_t m_valid, bool accumulate) {
  TileAny(nr, K, A, B, ldb, ldp, ColumnStore{C, ldc, m_valid, accumulate});
}

// out[i] = bf16(in[i]) for i in [begin, end).
LLMCPU_AVX512BF16 __attribute__((noinline)) void RoundRange(bf16* out, const float* in,
                                                            size_t begin, size_t end) {
  size_t i = begin;
  for (; i + 16 <= end; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_cvtepi32_epi16(RoundBf16(_mm512_loadu_ps(in + i))));
  }
  for (; i < end; ++i) out[i] = float_to_bf16(in[i]);
}

// 16 values of a row as the low halves of 16 32-bit lanes: fp32 rounded to bf16, or bf16 as is.
LLMCPU_AVX512BF16 inline __m512i LowHalves(const float* x) { return RoundBf16(_mm512_loadu_ps(x)); }
LLMCPU_AVX512BF16 inline __m512i LowHalves(const bf16* x) {
  return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
}
inline uint32_t LowHalf(float x) { return float_to_bf16(x); }
inline uint32_t LowHalf(bf16 x) { return x; }

// Rows 2p and 2p+1 of X (rows x width, row-major; fp32 rounded to bf16, or bf16 already rounded)
// interleaved in pairs, in blocks of kNR columns so that a tile's operand is contiguous, pairs p in
// [p_begin, p_end):
//   P[(b*pairs + p)*2*kNR + 2j + h] = bf16(X[(2p+h)*width + b*kNR + j])
// with pairs = (rows+1)/2, zero past the last row or column. A block's pairs lie together in P and
// blocks lie pairs x 24 bytes apart, so pairs go in runs of kRun: each block then gets 192 bytes
// written contiguously, not a 24-byte piece on another page for every pair (3-5% of the lm_head's
// backward at T=1024).
template <class T>
LLMCPU_AVX512BF16 __attribute__((noinline)) void InterleaveRowPairs(bf16* P, const T* X,
                                                                    size_t rows, size_t width,
                                                                    size_t p_begin, size_t p_end) {
  constexpr size_t kSpan = 16 * kNR / 2;  // 48 columns: 3 vectors, 8 whole blocks
  constexpr size_t kRun = 8;
  const size_t pairs = (rows + 1) / 2, blocks = (width + kNR - 1) / kNR;
  uint32_t* base = reinterpret_cast<uint32_t*>(P);
  auto at = [&](size_t b, size_t p) { return base + (b * pairs + p) * kNR; };
  auto second = [&](size_t p) { return 2 * p + 1 < rows ? X + (2 * p + 1) * width : nullptr; };
  alignas(64) uint32_t span[kRun][kSpan];
  for (size_t p0 = p_begin; p0 < p_end; p0 += kRun) {
    const size_t run = std::min(kRun, p_end - p0);
    size_t c = 0;
    for (; c + kSpan <= width; c += kSpan) {
      for (size_t i = 0; i < run; ++i) {
        const T* x0 = X + 2 * (p0 + i) * width;
        const T* x1 = second(p0 + i);
        for (size_t v = 0; v < kSpan; v += 16) {
          const __m512i a = LowHalves(x0 + c + v);
          const __m512i b = x1 ? LowHalves(x1 + c + v) : _mm512_setzero_si512();
          _mm512_store_si512(span[i] + v, _mm512_or_si512(a, _mm512_slli_epi32(b, 16)));
        }
      }
      for (size_t q = 0; q < kSpan / kNR; ++q) {
        uint32_t* out = at(c / kNR + q, p0);
        for (size_t i = 0; i < run; ++i) {
          std::memcpy(out + i * kNR, span[i] + q * kNR, kNR * sizeof(uint32_t));
        }
      }
    }
    for (size_t p = p0; p < p0 + run; ++p) {
      const T* x0 = X + 2 * p * width;
      const T* x1 = second(p);
      for (size_t cc = c; cc < blocks * kNR; ++cc) {
        at(cc / kNR, p)[cc % kNR] =
            cc >= width ? 0u : LowHalf(x0[cc]) | (x1 ? LowHalf(x1[cc]) << 16 : 0u);
      }
    }
  }
}

// Panel of rows [r0, r0+64) of X (rows x K, row-major, ld) packed in pairs along K:
// P[p*128 + 2r + h] = X[(r0+r)*ld + 2p + h], zero past the last row or K. A pair is one 32-bit
// value, so each step gathers one pair from each of 16 rows (masked past the last row).
LLMCPU_AVX512BF16 __attribute__((noinline)) void PackRowPanel(bf16* P, const bf16* X, size_t r0,
                                                              size_t rows, size_t K, size_t ld) {
  const size_t pairs = (K + 1) / 2;
  if (ld * sizeof(bf16) * 16 < (size_t(1) << 31)) {  // byte offsets of 16 rows fit an int32
    const __m512i offsets =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(int(ld * sizeof(bf16))));
    for (size_t v = 0; v < kMR; v += 16) {
      const size_t valid = r0 + v >= rows ? 0 : std::min<size_t>(16, rows - r0 - v);
      const __mmask16 mask = __mmask16((1u << valid) - 1u);
      const bf16* x = X + (r0 + v) * ld;
      for (size_t p = 0; p < K / 2; ++p) {
        const __m512i pair =
            _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, offsets, x + 2 * p, 1);
        _mm512_storeu_si512(P + p * kPair + 2 * v, pair);
      }
      if (K & 1) {  // the half pair: the last value of each row, zero beside it
        for (size_t r = 0; r < 16; ++r) {
          P[(pairs - 1) * kPair + 2 * (v + r)] = r < valid ? x[r * ld + K - 1] : bf16(0);
          P[(pairs - 1) * kPair + 2 * (v + r) + 1] = 0;
        }
      }
    }
    return;
  }
  for (size_t r = 0; r < kMR; ++r) {
    bf16* out = P + 2 * r;
    if (r0 + r >= rows) {
      for (size_t p = 0; p < pairs; ++p) out[p * kPair] = out[p * kPair + 1] = 0;
      continue;
    }
    const bf16* x = X + (r0 + r) * ld;
    for (size_t p = 0; p < K / 2; ++p) {
      out[p * kPair] = x[2 * p];
      out[p * kPair + 1] = x[2 * p + 1];
    }
    if (K & 1) {
      out[(pairs - 1) * kPair] = x[K - 1];
      out[(pairs - 1) * kPair + 1] = 0;
    }
  }
}

// Panel of columns [c0, c0+64) of X (K x cols, row-major, ld) packed in pairs along K (rows):
// P[p*128 + 2r + h] = X[(2p+h)*ld + c0 + r], zero past the last column or K.
LLMCPU_AVX512BF16 __attribute__((noinline)) void PackColumnPanel(bf16* P, const bf16* X, size_t c0,
                                                                 size_t cols, size_t K, size_t ld,
                                                                 size_t p_begin, size_t p_end) {
  const size_t m = std::min(kMR, cols - c0);
  for (size_t p = p_begin; p < p_end; ++p) {
    uint32_t* out = reinterpret_cast<uint32_t*>(P + p * kPair);
    const bf16* x0 = X + 2 * p * ld + c0;
    const bf16* x1 = 2 * p + 1 < K ? x0 + ld : nullptr;
    for (size_t r = 0; r < kMR; r += 16) {
      const size_t n = r < m ? std::min<size_t>(16, m - r) : 0;
      const __mmask16 mask = __mmask16((1u << n) - 1u);
      const __m512i a = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, x0 + r));
      const __m512i b = x1 ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, x1 + r))
                           : _mm512_setzero_si512();
      _mm512_storeu_si512(out + r, _mm512_or_si512(a, _mm512_slli_epi32(b, 16)));
    }
  }
}

}  // namespace

bool has_avx512_bf16() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512bf16") && isa_allows(IsaCap::kAvx512Bf16);
  return yes;
}

namespace {

template <class O>
void MatmulForward(O* out, const bf16* inp, const bf16* weight, const float* bias, size_t N, int C_,
                   int OC_) {
  const size_t C = size_t(C_), OC = size_t(OC_);
  const size_t pairs = (C + 1) / 2, panel = pairs * kPair;
  const size_t panels = (N + kMR - 1) / kMR;
  bf16* A = bf16_scratch(ScratchSlot::kBf16A, PanelValues(N, C));
  const size_t blocks = (OC + kNR - 1) / kNR;
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const Range pr = split_range(panels, tid, nt);
    for (size_t p = pr.begin; p < pr.end; ++p) PackRowPanel(A + p * panel, inp, p * kMR, N, C, C);
#pragma omp barrier
    // Panels in chunks that stay in L2 while each thread runs its share of the blocks over them.
    // A weight that the L3 holds is read once per panel, each block after the other along the
    // panel's rows (the output written row by row); a larger one (the lm_head's) once per chunk,
    // each block over the chunk's panels.
    const size_t chunk = std::max<size_t>(1, kL2Bytes / (panel * sizeof(bf16)));
    const bool weight_in_l3 = OC * C * sizeof(bf16) <= kL3Bytes;
    const Range br = split_range(blocks, tid, nt);
    auto tile = [&](size_t p, size_t b) {
      const size_t n0 = p * kMR, o0 = b * kNR;
      TileAny(
          std::min(kNR, OC - o0), C, A + p * panel, weight + o0 * C, C, 2,
          RowStore<O>{out + n0 * OC + o0, OC, bias ? bias + o0 : nullptr, std::min(kMR, N - n0)});
    };
    for (size_t p0 = 0; p0 < panels; p0 += chunk) {
      const size_t p1 = std::min(panels, p0 + chunk);
      if (weight_in_l3) {
        for (size_t p = p0; p < p1; ++p) {
          for (size_t b = br.begin; b < br.end; ++b) tile(p, b);
        }
      } else {
        for (size_t b = br.begin; b < br.end; ++b) {
          for (size_t p = p0; p < p1; ++p) tile(p, b);
        }
      }
    }
  }
}

}  // namespace

void bf16_matmul_forward(float* out, const bf16* inp, const bf16* weight, const float* bias,
                         size_t N, int C, int OC) {
  MatmulForward(out, inp, weight, bias, N, C, OC);
}

void bf16_matmul_forward_bf16(bf16* out, const bf16* inp, const bf16* weight, const float* bias,
                              size_t N, int C, int OC) {
  MatmulForward(out, inp, weight, bias, N, C, OC);
}

namespace {

// dinp (N x C) = bf16(dout) W: the weight packed by channel panels, pairs along OC. Returns
// bf16(dout) (N x OC, in the calling thread's scratch), which dweight then reads instead of dout.
const bf16* BackwardInput(float* dinp, const float* dout, const bf16* weight, size_t N, size_t C,
                          size_t OC) {
  const size_t cpanels = (C + kMR - 1) / kMR;
  const size_t pairs = (OC + 1) / 2, panel = pairs * kPair;
  bf16* A = bf16_scratch(ScratchSlot::kBf16A, PanelValues(C, OC));
  bf16* D = bf16_scratch(ScratchSlot::kBf16B, N * OC);
  const size_t groups = (N + kNR - 1) / kNR;  // tokens, kNR at a time
  // Groups in chunks whose rows of the K slice stay in L2 while the thread's channel panels run
  // over them: bf16(dout) is read once per K slice, not once per panel.
  const size_t chunk =
      std::max<size_t>(1, kL2Bytes / (std::min(kKcPairs, pairs) * 2 * kNR * sizeof(bf16)));
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const Range dr = split_range(N * OC, tid, nt);
    RoundRange(D, dout, dr.begin, dr.end);
    for (size_t cp = 0; cp < cpanels; ++cp) {
      const Range pr = split_range(pairs, tid, nt);
      PackColumnPanel(A + cp * panel, weight, cp * kMR, C, OC, C, pr.begin, pr.end);
    }
#pragma omp barrier
    // Threads split the channel panels, or the token groups where panels are too few.
    const bool by_panel = cpanels >= size_t(nt);
    const Range cr = by_panel ? split_range(cpanels, tid, nt) : Range{0, cpanels};
    const Range gr = by_panel ? Range{0, groups} : split_range(groups, tid, nt);
    for (size_t kc = 0; kc < pairs; kc += kKcPairs) {
      const size_t kvals = std::min(2 * kKcPairs, OC - 2 * kc);
      for (size_t g0 = gr.begin; g0 < gr.end; g0 += chunk) {
        const size_t g1 = std::min(gr.end, g0 + chunk);
        for (size_t cp = cr.begin; cp < cr.end; ++cp) {
          const size_t c0 = cp * kMR;
          for (size_t g = g0; g < g1; ++g) {
            const size_t n0 = g * kNR, nb = std::min(kNR, N - n0);
            TileAny(nb, kvals, A + cp * panel + kc * kPair, D + n0 * OC + 2 * kc, OC, 2,
                    dinp + n0 * C + c0, C, std::min(kMR, C - c0), kc > 0);
          }
        }
      }
    }
  }
  return D;
}

}  // namespace

void bf16_matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const bf16* inp, const bf16* weight, size_t N, int C_, int OC_) {
  const size_t C = size_t(C_), OC = size_t(OC_);
  const size_t cpanels = (C + kMR - 1) / kMR;
  // bf16(dout) once: dinp rounds it, and dweight interleaves those bits (half the bytes to read).
  const bf16* rounded = dinp ? BackwardInput(dinp, dout, weight, N, C, OC) : nullptr;
  if (!dweight) {  // a frozen weight: the input's gradient only
    if (dbias) add_column_sums(dbias, dout, N, OC);
    return;
  }
  // dweight += bf16(dout)^T inp: inp packed by channel panels, pairs along the tokens.
  const size_t pairs = (N + 1) / 2, panel = pairs * kPair;
  bf16* A = bf16_scratch(ScratchSlot::kBf16C, PanelValues(C, N));
  // bf16(dout) with token rows interleaved in pairs, in blocks of kNR columns: B_j's pair p is
  // (d[2p][o0+j], d[2p+1][o0+j]), the block's pairs contiguous.
  bf16* DP = bf16_scratch(ScratchSlot::kBf16A, InterleavedValues(N, OC));
  const size_t blocks = (OC + kNR - 1) / kNR;
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    for (size_t cp = 0; cp < cpanels; ++cp) {
      const Range pr = split_range(pairs, tid, nt);
      PackColumnPanel(A + cp * panel, inp, cp * kMR, C, N, C, pr.begin, pr.end);
    }
    const Range pr = split_range(pairs, tid, nt);
    if (rounded) {
      InterleaveRowPairs(DP, rounded, N, OC, pr.begin, pr.end);
    } else {
      InterleaveRowPairs(DP, dout, N, OC, pr.begin, pr.end);
    }
#pragma omp barrier
    // Tokens in slices, channel panels in chunks whose slices stay in L2 while each thread runs
    // its blocks over them; every output still sums its tokens in order, slice by slice.
    const Range br = split_range(blocks, tid, nt);
    const size_t slice_bytes = std::min(kDwKcPairs, pairs) * kPair * sizeof(bf16);
    const size_t chunk = std::max<size_t>(1, kL2Bytes / slice_bytes);
    for (size_t kc = 0; kc < pairs; kc += kDwKcPairs) {
      const size_t kvals = std::min(2 * kDwKcPairs, N - 2 * kc);
      for (size_t cp0 = 0; cp0 < cpanels; cp0 += chunk) {
        const size_t cp1 = std::min(cpanels, cp0 + chunk);
        for (size_t b = br.begin; b < br.end; ++b) {
          const size_t o0 = b * kNR, nb = std::min(kNR, OC - o0);
          for (size_t cp = cp0; cp < cp1; ++cp) {
            const size_t c0 = cp * kMR;
            TileAny(nb, kvals, A + cp * panel + kc * kPair, DP + (b * pairs + kc) * 2 * kNR, 2,
                    2 * kNR, dweight + o0 * C + c0, C, std::min(kMR, C - c0), true);
          }
        }
      }
    }
  }
  if (dbias) add_column_sums(dbias, dout, N, OC);
}

ScratchUse bf16_matmul_forward_scratch(size_t N, int C, int /*OC*/, bool /*bias*/,
                                       int /*threads*/) {
  return ScratchUse().ask(ScratchSlot::kBf16A, Bf16Floats(PanelValues(N, size_t(C))));
}

ScratchUse bf16_matmul_backward_scratch(size_t N, int C_, int OC_, bool dinp, bool dbias,
                                        int threads) {
  const size_t C = size_t(C_), OC = size_t(OC_);
  ScratchUse use;
  if (dinp) {
    use.ask(ScratchSlot::kBf16A, Bf16Floats(PanelValues(C, OC)))
        .ask(ScratchSlot::kBf16B, Bf16Floats(N * OC));
  }
  use.ask(ScratchSlot::kBf16C, Bf16Floats(PanelValues(C, N)))
      .ask(ScratchSlot::kBf16A, Bf16Floats(InterleavedValues(N, OC)));
  if (dbias) use.merge(column_sums_scratch(OC, threads));
  return use;
}

}  // namespace llmcpu::x86
