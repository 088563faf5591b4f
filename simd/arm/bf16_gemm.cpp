// bf16 GEMMs on Arm BF16 (see bf16_gemm.h). One register-tile kernel serves the three products of
// a linear layer, each written as
//   C(m, n) (+)= sum_k A(m, k) B(n, k)
// with both operands packed per call into panels. BFMMLA takes a row pair of A and a row pair of B
// at four K values (a 2x4 and a 4x2 bf16 matrix, one register each) and adds their 2x2 product to
// four fp32 sums:
//   c[2i+r][2j+s] += sum_{h<4} A(2i+r, 4q+h) B(2j+s, 4q+h)
// A tile is 8 rows of A by 12 rows of B: 4 x 6 accumulators of 2 x 2 sums, 24 of the 32 vector
// registers, beside the 4 A registers and one B register at a time (the shape of Arm Compute
// Library's 8x12 BFMMLA kernel): per 4 K values, 10 loads of 16 bytes feed 24 BFMMLA.
// A panel of R rows (R = kMR for A, kNR for B) holds, per block q of 4 K values, its R/2 row pairs
// one after the other, each as 8 bf16: [row 2i: K 4q..4q+3 | row 2i+1: K 4q..4q+3]. K is padded
// with zeros to a multiple of 4 and rows past the last are zero (0 x 0 adds nothing).
//   forward  out (N,OC):  A = inp rows (tokens),        B = weight rows (output channels), K = C;
//                         the bias added, or the sum rounded once to bf16, in the epilogue.
//   dinp (N,C):           A = bf16(dout) rows (tokens),  B = weight columns (channels),    K = OC.
//   dweight (OC,C) +=     A = bf16(dout) columns (OC),   B = inp columns (channels),       K = N.
// dout is rounded to bf16 as it is packed (nearest, ties to even: float_to_bf16's bits).
// Cache blocking (fixed sizes, never the thread count's): dinp and dweight cut K in slices of kKc
// values; within a slice A's panels run in chunks that stay in a core's L2 (kL2Bytes) while each
// thread runs its B panels over them (a B panel's slice stays in L1). The forward sums its whole K
// (C) in one go, so that its bf16 output is rounded from the finished sum.
// Every output sums its K in order (slice by slice, each slice's sum added to the output); threads
// own disjoint outputs (B panels, or A panels where B has fewer panels than there are threads), so
// no atomics and no dependence on the thread count. Operands are packed per call into the calling
// thread's scratch (grow-only: after the first step nothing is allocated).
// The instruction's arithmetic (Arm ARM, BFDotAdd without FEAT_EBF16's FPCR.EBF, which Linux leaves
// clear): products exact, every addition rounded to odd (an error below one fp32 ulp rather than
// half of one), subnormal inputs and results flushed to zero, whatever FPCR says.
// The functions with BF16 instructions carry a target attribute; the file is compiled for the
// baseline ISA, so none of them runs unless has_bf16() said yes.
#include "simd/arm/bf16_gemm.h"

#include <arm_neon.h>
#include <omp.h>
#include <sys/auxv.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "simd/column_sums.h"
#include "simd/workspace.h"

#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1UL << 14)  // Linux's arch/arm64 hwcap bit, for older C library headers
#endif

// The feature set arm_neon.h declares the bf16 intrinsics under (g++ 12 refuses "+bf16" alone on
// the armv8-a baseline: the intrinsics need armv8.2-a as well).
#define LLMCPU_ARM_BF16 __attribute__((target("arch=armv8.2-a+bf16")))

namespace llmcpu::arm {
namespace {

// Blocking constants. Not measured: no Arm machine was at hand, only QEMU, whose timings say
// nothing. The reasoning: a tile's 24 accumulators fill the register file as in the 8x12 kernels of
// Arm's own libraries; a B panel's slice (12 x kKc bf16 = 12 KiB) stays in the 64 KiB L1 of
// Neoverse N2/V1/V2 (128 KiB on Apple cores) beside the A panel it meets; a chunk of A panels
// (kL2Bytes) takes half the 1 MiB L2 of Graviton 3 (Neoverse V1) or a quarter of Graviton 4's
// 2 MiB (V2), leaving room for the B panels and the outputs.
constexpr size_t kMR = 8;                // A rows per tile (4 row pairs)
constexpr size_t kNR = 12;               // B rows per tile (6 row pairs)
constexpr size_t kKc = 512;              // dinp, dweight: K values per slice
constexpr size_t kL2Bytes = 512 * 1024;  // A panels' slices kept in a core's L2 at a time

size_t Blocks(size_t K) { return (K + 3) / 4; }  // blocks of 4 K values (the last zero-padded)

// The bf16 values of `rows` rows packed in panels of R rows (the last zero-padded) along K.
size_t PanelValues(size_t rows, size_t R, size_t K) {
  return (rows + R - 1) / R * R * 4 * Blocks(K);
}

size_t Bf16Floats(size_t count) { return (count + 1) / 2; }  // thread_scratch counts floats

bf16* bf16_scratch(ScratchSlot slot, size_t count) {
  return reinterpret_cast<bf16*>(thread_scratch(slot, Bf16Floats(count)));
}

// Operand panels in scratch: `rows` rows of K values, panels of R rows.
struct Panels {
  bf16* P;
  size_t rows, R, K;
  size_t count() const { return (rows + R - 1) / R; }
  size_t values() const { return R * 4 * Blocks(K); }  // per panel
  // Panel p from block q of 4 K values on.
  bf16* at(size_t p, size_t q) const { return P + p * values() + q * 4 * R; }
};

// fp32 -> bf16 bits of 4 lanes, as float_to_bf16: nearest, ties to even; a NaN made quiet.
inline uint16x4_t RoundBf16(float32x4_t v) {
  const uint32x4_t u = vreinterpretq_u32_f32(v);
  const uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
  const uint32x4_t rounded = vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fff), lsb));
  const uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffff)), vdupq_n_u32(0x7f800000));
  const uint32x4_t quiet = vorrq_u32(u, vdupq_n_u32(0x00400000));
  return vshrn_n_u32(vbslq_u32(nan, quiet, rounded), 16);
}

// 4 or 8 consecutive values as bf16 bits: fp32 rounded, bf16 as is.
inline uint16x4_t Load4(const bf16* x) { return vld1_u16(x); }
inline uint16x4_t Load4(const float* x) { return RoundBf16(vld1q_f32(x)); }
inline uint16x8_t Load8(const bf16* x) { return vld1q_u16(x); }
inline uint16x8_t Load8(const float* x) {
  return vcombine_u16(RoundBf16(vld1q_f32(x)), RoundBf16(vld1q_f32(x + 4)));
}
inline bf16 Bits(bf16 x) { return x; }
inline bf16 Bits(float x) { return float_to_bf16(x); }

// Panels [p_begin, p_end) of R rows of X (rows x K, row-major, ld), per row pair i and block q:
//   P[p][q][i][4r + h] = X[(p*R + 2i + r)*ld + 4q + h],  zero past the last row or K.
// Two blocks at a time: 8 values of each row of the pair, their halves interleaved.
template <size_t R, class T>
void PackRows(bf16* P, const T* X, size_t ld, size_t rows, size_t K, size_t p_begin, size_t p_end) {
  const Panels panels{P, rows, R, K};
  const size_t stride = 4 * R, end = 4 * Blocks(K);
  for (size_t p = p_begin; p < p_end; ++p) {
    for (size_t i = 0; i < R / 2; ++i) {
      const size_t r0 = p * R + 2 * i;
      const T* x0 = r0 < rows ? X + r0 * ld : nullptr;
      const T* x1 = r0 + 1 < rows ? X + (r0 + 1) * ld : nullptr;
      bf16* out = panels.at(p, 0) + 8 * i;
      size_t k = 0;
      for (; x0 && k + 8 <= K; k += 8) {
        const uint64x2_t a = vreinterpretq_u64_u16(Load8(x0 + k));
        const uint64x2_t b = vreinterpretq_u64_u16(x1 ? Load8(x1 + k) : vdupq_n_u16(0));
        vst1q_u16(out + k / 4 * stride, vreinterpretq_u16_u64(vzip1q_u64(a, b)));
        vst1q_u16(out + (k / 4 + 1) * stride, vreinterpretq_u16_u64(vzip2q_u64(a, b)));
      }
      for (; k < end; ++k) {
        out[k / 4 * stride + k % 4] = x0 && k < K ? Bits(x0[k]) : bf16(0);
        out[k / 4 * stride + 4 + k % 4] = x1 && k < K ? Bits(x1[k]) : bf16(0);
      }
    }
  }
}

// Panels [p_begin, p_end) of R columns of X (K x cols, row-major, ld), per column pair i and
// block q:
//   P[p][q][i][4r + h] = X[(4q + h)*ld + p*R + 2i + r],  zero past the last column or K.
// Four rows of X at a time, read left to right across the panels; 4 x 4 values are transposed in
// registers.
template <size_t R, class T>
void PackColumns(bf16* P, const T* X, size_t ld, size_t cols, size_t K, size_t p_begin,
                 size_t p_end) {
  static_assert(R % 4 == 0);
  const Panels panels{P, cols, R, K};
  for (size_t q = 0; q < Blocks(K); ++q) {
    const T* x = X + 4 * q * ld;
    const bool whole = 4 * q + 4 <= K;
    for (size_t p = p_begin; p < p_end; ++p) {
      bf16* out = panels.at(p, q);
      for (size_t c = 0; c < R; c += 4) {  // columns c..c+3: pairs c/2 and c/2 + 1
        const size_t col = p * R + c;
        if (whole && col + 4 <= cols) {
          const uint16x4_t r0 = Load4(x + col), r1 = Load4(x + ld + col);
          const uint16x4_t r2 = Load4(x + 2 * ld + col), r3 = Load4(x + 3 * ld + col);
          // (r0, r1) and (r2, r3) of columns 0, 1 (lo) and 2, 3 (hi) side by side; a 32-bit zip
          // then gives a column's four K values.
          const uint32x2_t lo01 = vreinterpret_u32_u16(vzip1_u16(r0, r1));
          const uint32x2_t lo23 = vreinterpret_u32_u16(vzip1_u16(r2, r3));
          const uint32x2_t hi01 = vreinterpret_u32_u16(vzip2_u16(r0, r1));
          const uint32x2_t hi23 = vreinterpret_u32_u16(vzip2_u16(r2, r3));
          vst1q_u16(out + 4 * c, vreinterpretq_u16_u32(
                                     vcombine_u32(vzip1_u32(lo01, lo23), vzip2_u32(lo01, lo23))));
          vst1q_u16(out + 4 * c + 8, vreinterpretq_u16_u32(vcombine_u32(vzip1_u32(hi01, hi23),
                                                                        vzip2_u32(hi01, hi23))));
          continue;
        }
        for (size_t j = c; j < c + 4; ++j) {
          for (size_t h = 0; h < 4; ++h) {
            const bool in = p * R + j < cols && 4 * q + h < K;
            out[j / 2 * 8 + j % 2 * 4 + h] = in ? Bits(x[h * ld + p * R + j]) : bf16(0);
          }
        }
      }
    }
  }
}

// The tile: the sums of one A panel (kMR rows) with the first NP row pairs of one B panel over
// `blocks` blocks of 4 K values, written to t (kMR x kNR fp32, row-major; columns past 2*NP not).
template <size_t NP>
LLMCPU_ARM_BF16 __attribute__((noinline)) void Tile(size_t blocks, const bf16* A, const bf16* B,
                                                    float* t) {
  float32x4_t c[4][NP];
#pragma GCC unroll 4
  for (size_t i = 0; i < 4; ++i) {
#pragma GCC unroll 6
    for (size_t j = 0; j < NP; ++j) c[i][j] = vdupq_n_f32(0.0f);
  }
  for (size_t q = 0; q < blocks; ++q) {
    const bf16* a = A + q * 4 * kMR;
    const bf16* b = B + q * 4 * kNR;
    const bfloat16x8_t a0 = vreinterpretq_bf16_u16(vld1q_u16(a));
    const bfloat16x8_t a1 = vreinterpretq_bf16_u16(vld1q_u16(a + 8));
    const bfloat16x8_t a2 = vreinterpretq_bf16_u16(vld1q_u16(a + 16));
    const bfloat16x8_t a3 = vreinterpretq_bf16_u16(vld1q_u16(a + 24));
#pragma GCC unroll 6
    for (size_t j = 0; j < NP; ++j) {
      // Keeps the compiler from loading all of B's pairs first: 24 + 4 + 6 registers would spill.
      asm volatile("" ::: "memory");
      const bfloat16x8_t bj = vreinterpretq_bf16_u16(vld1q_u16(b + 8 * j));
      c[0][j] = vbfmmlaq_f32(c[0][j], a0, bj);
      c[1][j] = vbfmmlaq_f32(c[1][j], a1, bj);
      c[2][j] = vbfmmlaq_f32(c[2][j], a2, bj);
      c[3][j] = vbfmmlaq_f32(c[3][j], a3, bj);
    }
  }
  // c[i][j] = [(2i, 2j), (2i, 2j+1), (2i+1, 2j), (2i+1, 2j+1)]
#pragma GCC unroll 4
  for (size_t i = 0; i < 4; ++i) {
#pragma GCC unroll 6
    for (size_t j = 0; j < NP; ++j) {
      vst1_f32(t + 2 * i * kNR + 2 * j, vget_low_f32(c[i][j]));
      vst1_f32(t + (2 * i + 1) * kNR + 2 * j, vget_high_f32(c[i][j]));
    }
  }
}

// The tile for np row pairs of B (1 to 6; a tile is compiled per count).
void TileAny(size_t np, size_t blocks, const bf16* A, const bf16* B, float* t) {
  switch (np) {
    case 6:
      return Tile<6>(blocks, A, B, t);
    case 5:
      return Tile<5>(blocks, A, B, t);
    case 4:
      return Tile<4>(blocks, A, B, t);
    case 3:
      return Tile<3>(blocks, A, B, t);
    case 2:
      return Tile<2>(blocks, A, B, t);
    default:
      return Tile<1>(blocks, A, B, t);
  }
}

// A tile's row (n sums at t) to its place: the forward's output with the bias, in fp32 or rounded
// once to bf16; or a sum of K slices, overwritten by the first slice and added to after.
void StoreRow(float* out, const float* t, const float* bias, size_t n) {
  if (!bias) {
    std::memcpy(out, t, n * sizeof(float));
    return;
  }
  size_t c = 0;
  for (; c + 4 <= n; c += 4) vst1q_f32(out + c, vaddq_f32(vld1q_f32(t + c), vld1q_f32(bias + c)));
  for (; c < n; ++c) out[c] = t[c] + bias[c];
}

void StoreRow(bf16* out, const float* t, const float* bias, size_t n) {
  size_t c = 0;
  for (; c + 4 <= n; c += 4) {
    const float32x4_t v = vld1q_f32(t + c);
    vst1_u16(out + c, RoundBf16(bias ? vaddq_f32(v, vld1q_f32(bias + c)) : v));
  }
  for (; c < n; ++c) out[c] = float_to_bf16(bias ? t[c] + bias[c] : t[c]);
}

void AddRow(float* C, const float* t, size_t n, bool accumulate) {
  if (!accumulate) {
    std::memcpy(C, t, n * sizeof(float));
    return;
  }
  size_t c = 0;
  for (; c + 4 <= n; c += 4) vst1q_f32(C + c, vaddq_f32(vld1q_f32(C + c), vld1q_f32(t + c)));
  for (; c < n; ++c) C[c] += t[c];
}

// Blocks [q0, q1) of C (+)= A B^T on the calling thread's share of the tiles: A's panels in chunks
// whose slices stay in L2, each of the thread's B panels over a chunk. store(pa, pb, t) writes the
// sums t of A panel pa with B panel pb. The shares depend on the panel counts only, so a thread
// owns the same outputs in every slice of K.
template <class Store>
void RunSlice(const Panels& a, const Panels& b, size_t q0, size_t q1, int tid, int nt,
              const Store& store) {
  const bool by_b = b.count() >= size_t(nt) || b.count() >= a.count();
  const Range ar = by_b ? Range{0, a.count()} : split_range(a.count(), tid, nt);
  const Range br = by_b ? split_range(b.count(), tid, nt) : Range{0, b.count()};
  const size_t chunk = std::max<size_t>(1, kL2Bytes / ((q1 - q0) * 4 * kMR * sizeof(bf16)));
  alignas(16) float t[kMR * kNR];
  for (size_t p0 = ar.begin; p0 < ar.end; p0 += chunk) {
    const size_t p1 = std::min(ar.end, p0 + chunk);
    for (size_t pb = br.begin; pb < br.end; ++pb) {
      const size_t pairs = (std::min(kNR, b.rows - pb * kNR) + 1) / 2;
      for (size_t pa = p0; pa < p1; ++pa) {
        TileAny(pairs, q1 - q0, a.at(pa, q0), b.at(pb, q0), t);
        store(pa, pb, t);
      }
    }
  }
}

// The tile (pa, pb)'s rows and columns that exist: rows of A from pa*kMR, of B from pb*kNR.
struct TileSpan {
  size_t m0, n0, rows, cols;
  TileSpan(const Panels& a, const Panels& b, size_t pa, size_t pb)
      : m0(pa * kMR),
        n0(pb * kNR),
        rows(std::min(kMR, a.rows - m0)),
        cols(std::min(kNR, b.rows - n0)) {}
};

// out (N x OC) = inp (N x C) weight^T (+ bias): A = inp's rows, B = weight's rows, K = C.
template <class O>
void MatmulForward(O* out, const bf16* inp, const bf16* weight, const float* bias, size_t N, int C_,
                   int OC_) {
  const size_t C = size_t(C_), OC = size_t(OC_);
  const Panels a{bf16_scratch(ScratchSlot::kBf16B, PanelValues(N, kMR, C)), N, kMR, C};
  const Panels b{bf16_scratch(ScratchSlot::kBf16A, PanelValues(OC, kNR, C)), OC, kNR, C};
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const Range ar = split_range(a.count(), tid, nt), br = split_range(b.count(), tid, nt);
    PackRows<kMR>(a.P, inp, C, N, C, ar.begin, ar.end);
    PackRows<kNR>(b.P, weight, C, OC, C, br.begin, br.end);
#pragma omp barrier
    RunSlice(a, b, 0, Blocks(C), tid, nt, [&](size_t pa, size_t pb, const float* t) {
      const TileSpan s(a, b, pa, pb);
      for (size_t r = 0; r < s.rows; ++r) {
        StoreRow(out + (s.m0 + r) * OC + s.n0, t + r * kNR, bias ? bias + s.n0 : nullptr, s.cols);
      }
    });
  }
}

// dinp (N x C) = bf16(dout) (N x OC) weight (OC x C): A = dout's rows rounded, B = weight's
// columns, K = OC in slices.
void BackwardInput(float* dinp, const float* dout, const bf16* weight, size_t N, size_t C,
                   size_t OC) {
  const Panels a{bf16_scratch(ScratchSlot::kBf16B, PanelValues(N, kMR, OC)), N, kMR, OC};
  const Panels b{bf16_scratch(ScratchSlot::kBf16A, PanelValues(C, kNR, OC)), C, kNR, OC};
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const Range ar = split_range(a.count(), tid, nt), br = split_range(b.count(), tid, nt);
    PackRows<kMR>(a.P, dout, OC, N, OC, ar.begin, ar.end);
    PackColumns<kNR>(b.P, weight, C, C, OC, br.begin, br.end);
#pragma omp barrier
    for (size_t q0 = 0; q0 < Blocks(OC); q0 += kKc / 4) {
      const size_t q1 = std::min(Blocks(OC), q0 + kKc / 4);
      RunSlice(a, b, q0, q1, tid, nt, [&](size_t pa, size_t pb, const float* t) {
        const TileSpan s(a, b, pa, pb);
        for (size_t r = 0; r < s.rows; ++r) {
          AddRow(dinp + (s.m0 + r) * C + s.n0, t + r * kNR, s.cols, q0 > 0);
        }
      });
    }
  }
}

// dweight (OC x C) += bf16(dout)^T (OC x N) inp (N x C): A = dout's columns rounded, B = inp's
// columns, K = N in slices.
void BackwardWeight(float* dweight, const float* dout, const bf16* inp, size_t N, size_t C,
                    size_t OC) {
  const Panels a{bf16_scratch(ScratchSlot::kBf16C, PanelValues(OC, kMR, N)), OC, kMR, N};
  const Panels b{bf16_scratch(ScratchSlot::kBf16B, PanelValues(C, kNR, N)), C, kNR, N};
#pragma omp parallel
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    const Range ar = split_range(a.count(), tid, nt), br = split_range(b.count(), tid, nt);
    PackColumns<kMR>(a.P, dout, OC, OC, N, ar.begin, ar.end);
    PackColumns<kNR>(b.P, inp, C, C, N, br.begin, br.end);
#pragma omp barrier
    for (size_t q0 = 0; q0 < Blocks(N); q0 += kKc / 4) {
      const size_t q1 = std::min(Blocks(N), q0 + kKc / 4);
      RunSlice(a, b, q0, q1, tid, nt, [&](size_t pa, size_t pb, const float* t) {
        const TileSpan s(a, b, pa, pb);
        for (size_t r = 0; r < s.rows; ++r) {
          AddRow(dweight + (s.m0 + r) * C + s.n0, t + r * kNR, s.cols, true);
        }
      });
    }
  }
}

}  // namespace

bool has_bf16() {
  static const bool yes = (getauxval(AT_HWCAP2) & HWCAP2_BF16) != 0;
  return yes;
}

void bf16_matmul_forward(float* out, const bf16* inp, const bf16* weight, const float* bias,
                         size_t N, int C, int OC) {
  MatmulForward(out, inp, weight, bias, N, C, OC);
}

void bf16_matmul_forward_bf16(bf16* out, const bf16* inp, const bf16* weight, const float* bias,
                              size_t N, int C, int OC) {
  MatmulForward(out, inp, weight, bias, N, C, OC);
}

void bf16_matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const bf16* inp, const bf16* weight, size_t N, int C, int OC) {
  if (dinp) BackwardInput(dinp, dout, weight, N, size_t(C), size_t(OC));
  if (dweight) BackwardWeight(dweight, dout, inp, N, size_t(C), size_t(OC));
  if (dbias) add_column_sums(dbias, dout, N, size_t(OC));
}

ScratchUse bf16_matmul_forward_scratch(size_t N, int C, int OC, bool /*bias*/, int /*threads*/) {
  return ScratchUse()
      .ask(ScratchSlot::kBf16B, Bf16Floats(PanelValues(N, kMR, size_t(C))))
      .ask(ScratchSlot::kBf16A, Bf16Floats(PanelValues(size_t(OC), kNR, size_t(C))));
}

ScratchUse bf16_matmul_backward_scratch(size_t N, int C_, int OC_, bool dinp, bool dbias,
                                        int threads) {
  const size_t C = size_t(C_), OC = size_t(OC_);
  ScratchUse use;
  if (dinp) {
    use.ask(ScratchSlot::kBf16B, Bf16Floats(PanelValues(N, kMR, OC)))
        .ask(ScratchSlot::kBf16A, Bf16Floats(PanelValues(C, kNR, OC)));
  }
  use.ask(ScratchSlot::kBf16C, Bf16Floats(PanelValues(OC, kMR, N)))
      .ask(ScratchSlot::kBf16B, Bf16Floats(PanelValues(C, kNR, N)));
  if (dbias) use.merge(column_sums_scratch(OC, threads));
  return use;
}

}  // namespace llmcpu::arm
