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
//   dweight (OC,C) +=      rows = channels, A = inp packed,      B_j = bf16(dout)^T row j (K = N).
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

#include "simd/workspace.h"

#define LLMCPU_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace llmcpu::x86 {
namespace {

constexpr size_t kMR = 64;     // rows per tile: 4 vectors of 16 lanes
constexpr size_t kNR = 6;      // columns per tile
constexpr size_t kPair = 2 * kMR;  // bf16 values per packed pair step of a panel
constexpr size_t kKcPairs = 256;   // dinp: pairs per K slice (64 KiB of packed weight per panel)

bf16* bf16_scratch(ScratchSlot slot, size_t count) {
  return reinterpret_cast<bf16*>(thread_scratch(slot, (count + 1) / 2));
}

template <size_t NR>
LLMCPU_AVX512BF16 __attribute__((noinline)) void Tile(size_t K, const bf16* A, const bf16* B,
                                                      size_t ldb, float* C, size_t ldc,
                                                      size_t m_valid, bool accumulate) {
  __m512 c[4][NR];
#pragma GCC unroll 4
  for (size_t v = 0; v < 4; ++v) {
#pragma GCC unroll 6
    for (size_t j = 0; j < NR; ++j) c[v][j] = _mm512_setzero_ps();
  }
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
      std::memcpy(&bits, B + j * ldb + 2 * p, sizeof bits);
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
      const __m512bh b = (__m512bh)_mm512_set1_epi32(int32_t(B[j * ldb + K - 1]));
      c[0][j] = _mm512_dpbf16_ps(c[0][j], a0, b);
      c[1][j] = _mm512_dpbf16_ps(c[1][j], a1, b);
      c[2][j] = _mm512_dpbf16_ps(c[2][j], a2, b);
      c[3][j] = _mm512_dpbf16_ps(c[3][j], a3, b);
    }
  }
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

void TileAny(size_t nr, size_t K, const bf16* A, const bf16* B, size_t ldb, float* C, size_t ldc,
             size_t m_valid, bool accumulate) {
  switch (nr) {
    case 6: return Tile<6>(K, A, B, ldb, C, ldc, m_valid, accumulate);
    case 5: return Tile<5>(K, A, B, ldb, C, ldc, m_valid, accumulate);
    case 4: return Tile<4>(K, A, B, ldb, C, ldc, m_valid, accumulate);
    case 3: return Tile<3>(K, A, B, ldb, C, ldc, m_valid, accumulate);
    case 2: return Tile<2>(K, A, B, ldb, C, ldc, m_valid, accumulate);
    default: return Tile<1>(K, A, B, ldb, C, ldc, m_valid, accumulate);
  }
}

// Panel of rows [r0, r0+64) of X (rows x K, row-major, ld) packed in pairs along K:
// P[p*128 + 2r + h] = X[(r0+r)*ld + 2p + h], zero past the last row or K.
void PackRowPanel(bf16* P, const bf16* X, size_t r0, size_t rows, size_t K, size_t ld) {
  const size_t pairs = (K + 1) / 2;
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
void PackColumnPanel(bf16* P, const bf16* X, size_t c0, size_t cols, size_t K, size_t ld,
                     size_t p_begin, size_t p_end) {
  const size_t m = std::min(kMR, cols - c0);
  for (size_t p = p_begin; p < p_end; ++p) {
    bf16* out = P + p * kPair;
    const bf16* x0 = X + 2 * p * ld + c0;
    const bf16* x1 = 2 * p + 1 < K ? x0 + ld : nullptr;
    for (size_t r = 0; r < m; ++r) {
      out[2 * r] = x0[r];
      out[2 * r + 1] = x1 ? x1[r] : bf16(0);
    }
    std::fill(out + 2 * m, out + kPair, bf16(0));
  }
}

}  // namespace

bool has_avx512_bf16() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512bf16");
  return yes;
}

void bf16_matmul_forward(float* out, const bf16* inp, const bf16* weight, const float* bias,
                         size_t N, int C_, int OC_) {
  const size_t C = size_t(C_), OC = size_t(OC_);
  const size_t pairs = (C + 1) / 2, panel = pairs * kPair;
  const size_t panels = (N + kMR - 1) / kMR;
  bf16* A = bf16_scratch(ScratchSlot::kBf16A, panels * panel);
  const size_t blocks = (OC + kNR - 1) / kNR;
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const Range pr = split_range(panels, tid, nt);
    for (size_t p = pr.begin; p < pr.end; ++p) PackRowPanel(A + p * panel, inp, p * kMR, N, C, C);
#pragma omp barrier
    alignas(64) float tile[kMR * kNR];
    const Range br = split_range(blocks, tid, nt);
    for (size_t b = br.begin; b < br.end; ++b) {
      const size_t o0 = b * kNR, nb = std::min(kNR, OC - o0);
      for (size_t p = 0; p < panels; ++p) {
        const size_t n0 = p * kMR, mr = std::min(kMR, N - n0);
        TileAny(nb, C, A + p * panel, weight + o0 * C, C, tile, kMR, kMR, false);
        for (size_t r = 0; r < mr; ++r) {
          float* y = out + (n0 + r) * OC + o0;
          for (size_t j = 0; j < nb; ++j) y[j] = tile[r + j * kMR] + (bias ? bias[o0 + j] : 0.0f);
        }
      }
    }
  }
}

void bf16_matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const bf16* inp, const bf16* weight, size_t N, int C_, int OC_) {
  const size_t C = size_t(C_), OC = size_t(OC_);
  const size_t cpanels = (C + kMR - 1) / kMR;
  if (dinp) {
    // dinp = bf16(dout) W: the weight packed by channel panels, pairs along OC.
    const size_t pairs = (OC + 1) / 2, panel = pairs * kPair;
    bf16* A = bf16_scratch(ScratchSlot::kBf16A, cpanels * panel);
    bf16* D = bf16_scratch(ScratchSlot::kBf16B, N * OC);
    const size_t groups = (N + kNR - 1) / kNR;  // tokens, kNR at a time
    const size_t items = cpanels * groups;
#pragma omp parallel
    {
      const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
      const Range dr = split_range(N * OC, tid, nt);
      for (size_t i = dr.begin; i < dr.end; ++i) D[i] = float_to_bf16(dout[i]);
      for (size_t cp = 0; cp < cpanels; ++cp) {
        const Range pr = split_range(pairs, tid, nt);
        PackColumnPanel(A + cp * panel, weight, cp * kMR, C, OC, C, pr.begin, pr.end);
      }
#pragma omp barrier
      const Range ir = split_range(items, tid, nt);
      for (size_t kc = 0; kc < pairs; kc += kKcPairs) {
        const size_t kvals = std::min(2 * kKcPairs, OC - 2 * kc);
        for (size_t it = ir.begin; it < ir.end; ++it) {
          const size_t cp = it / groups, g = it % groups;
          const size_t n0 = g * kNR, nb = std::min(kNR, N - n0), c0 = cp * kMR;
          TileAny(nb, kvals, A + cp * panel + kc * kPair, D + n0 * OC + 2 * kc, OC,
                  dinp + n0 * C + c0, C, std::min(kMR, C - c0), kc > 0);
        }
      }
    }
  }
  // dweight += bf16(dout)^T inp: inp packed by channel panels, pairs along the tokens.
  const size_t pairs = (N + 1) / 2, panel = pairs * kPair;
  bf16* A = bf16_scratch(ScratchSlot::kBf16C, cpanels * panel);
  bf16* DT = bf16_scratch(ScratchSlot::kBf16A, OC * N);
  const size_t blocks = (OC + kNR - 1) / kNR;
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    for (size_t cp = 0; cp < cpanels; ++cp) {
      const Range pr = split_range(pairs, tid, nt);
      PackColumnPanel(A + cp * panel, inp, cp * kMR, C, N, C, pr.begin, pr.end);
    }
    constexpr size_t kOB = 64;  // output channels transposed at a time
    const Range obr = split_range((OC + kOB - 1) / kOB, tid, nt);
    for (size_t ob = obr.begin; ob < obr.end; ++ob) {
      const size_t o0 = ob * kOB, o1 = std::min(OC, o0 + kOB);
      for (size_t n = 0; n < N; ++n) {
        const float* d = dout + n * OC;
        for (size_t o = o0; o < o1; ++o) DT[o * N + n] = float_to_bf16(d[o]);
      }
    }
#pragma omp barrier
    const Range br = split_range(blocks, tid, nt);
    for (size_t b = br.begin; b < br.end; ++b) {
      const size_t o0 = b * kNR, nb = std::min(kNR, OC - o0);
      for (size_t cp = 0; cp < cpanels; ++cp) {
        const size_t c0 = cp * kMR;
        TileAny(nb, N, A + cp * panel, DT + o0 * N, N, dweight + o0 * C + c0, C,
                std::min(kMR, C - c0), true);
      }
    }
    if (dbias) {  // fp32 column sums of dout, tokens in order, then added (as the reference)
      const Range orr = split_range(OC, tid, nt);
      float* acc = thread_scratch(ScratchSlot::kReduce, orr.end - orr.begin + 1);
      std::fill(acc, acc + (orr.end - orr.begin), 0.0f);
      for (size_t n = 0; n < N; ++n) {
        const float* d = dout + n * OC + orr.begin;
        for (size_t o = 0; o < orr.end - orr.begin; ++o) acc[o] += d[o];
      }
      for (size_t o = orr.begin; o < orr.end; ++o) dbias[o] += acc[o - orr.begin];
    }
  }
}

}  // namespace llmcpu::x86
