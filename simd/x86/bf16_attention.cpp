// Flash attention's forward pass on AVX512-BF16 dot products (see bf16_attention.h), and the exp
// the blocks share. Per (batch, query head), with Q the head's (T, D) rows and K, V those of the
// key/value head it reads (h / (NH/NKV)), with the scale, window and soft-cap of
// attention_options.h, in groups of 6 query rows against key blocks of kKeyBlock from the 64 keys
// holding the group's first query's first key (attention_first_key: 0 without a window or packed
// examples) up to the diagonal, with per row t a running max m, a running sum l and an
// accumulator o (D), all fp32:
//   S^T = K_j Q^T                       (bf16 products, fp32 sums; keys down, one query a column)
//   X = scale S, or c tanh(scale S / c) with a soft-cap c (capped in place, then scale 1)
//   m' = max(m, max_u X_tu);  p_tu = exp(X_tu - m')   (0 for keys t does not see; one rounding)
//   l <- exp(m - m') l + sum_u p_tu         (fp32 p: the lse keeps fp32 accuracy)
//   o <- exp(m - m') o + sum_u bf16(p_tu) v_u   (P rounded to bf16 for the dot products)
//   and at the end y_t = bf16(o fl(1/l)), lse_t = m + log(l).
// o and l are rescaled only when a block raises the max (a row whose max stays is never multiplied).
// Both products run on the register tile of bf16_attention_blocks.h: S^T with A = K packed along D
// and B = the query rows; O^T with A = V^T packed along the keys and B = the P rows (bf16, keys
// contiguous), so the softmax reads whole columns of S^T and writes whole rows of P. Threads split
// the (batch, query head) pairs; each pair packs its K and V into the thread's scratch and owns its
// rows of out and lse, so the bits do not depend on the thread count.
// Not here: the backward pass (bf16_attention_backward.cpp).
#include "simd/x86/bf16_attention.h"

#include <cmath>


// GCC 12 warns about the intentionally undefined upper lanes inside its own AVX-512 intrinsics
// (_mm512_reduce_add_ps and friends) once they are inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "simd/x86/bf16_attention_blocks.h"  // after the pragma: its inline functions warn too

namespace llmcpu::x86 {
namespace {

using namespace attention;

// Keys per block of the online softmax: a rescale at most once per block and row. Its K panel and
// V^T panel (64 KiB at D = 64) stay in L2 while the query groups stream over them.
constexpr size_t kKeyBlock = 256;

// One forward head's scratch, carved the same way to size it and to use it.
struct ForwardScratch {
  bf16* kp;  // K packed along D: panels of 64 keys, (T rounded up to 64) x Dp
  bf16* vp;  // V^T packed along the keys: panels of 64 values, Dc x (T rounded up to 64)
  bf16* q;   // the query rows, T x Dp (zero past D)
  bf16* rows;  // K's rows, then V's, copied contiguous for the packing: T x Dp
  float* st;  // S^T of a group: kCols columns of kKeyBlock
  bf16* pb;   // P of a group: kCols rows of kKeyBlock
  float* o;   // the accumulators: kCols rows of Dc
  size_t floats;

  ForwardScratch(float* base, size_t T, size_t D) {
    const size_t Tk = RoundUp(T, kLanes), Dp = RoundUp(D, 2), Dc = RoundUp(D, kLanes);
    Carve c(base);
    kp = c.halves(Tk * Dp);
    vp = c.halves(Dc * Tk);
    q = c.halves(T * Dp);
    rows = c.halves(T * Dp);
    st = c.floats(kCols * kKeyBlock);
    pb = c.halves(kCols * kKeyBlock);
    o = c.floats(kCols * Dc);
    floats = c.used_floats();
  }
};

// Lanes [0, n) of 16 set (n may exceed 16).
inline __mmask16 FirstN(size_t n) { return __mmask16((1u << std::min<size_t>(16, n)) - 1u); }

// s[lo, n) <- c tanh(a s[lo, n)): raw scores to capped ones (a = scale / c).
LLMCPU_AVX512BF16 void SoftCapRow(float* s, size_t lo, size_t n, float a, float c) {
  for (size_t u = lo / 16 * 16; u < n; u += 16) {
    const __mmask16 k = KeysIn(u, lo, n);
    const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + u), _mm512_set1_ps(a));
    _mm512_mask_storeu_ps(s + u, k, _mm512_mul_ps(Tanh(x), _mm512_set1_ps(c)));
  }
}

// The online softmax of one query row over a key block: s[lo, n) its scores of the keys it sees
// (raw q_t . k_u, or capped with scale 1; none when lo >= n). Writes P's row pb[0, len rounded up
// to 16) = bf16(p) (zeros outside [lo, n)), adds the block's fp32 sum to l, and rescales l and o[0,
// D) first when the max grows.
LLMCPU_AVX512BF16 void SoftmaxRow(const float* s, size_t lo, size_t n, size_t len, float scale,
                                  float& m, float& l, float* o, size_t D, bf16* pb) {
  const size_t first = lo / 16 * 16;  // the first 16 keys with one the row sees
  if (lo < n) {
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (size_t u = first; u < n; u += 16) {
      const __mmask16 k = KeysIn(u, lo, n);
      vmax = _mm512_mask_max_ps(vmax, k, vmax, _mm512_maskz_loadu_ps(k, s + u));
    }
    // Rounding is monotonic and scale > 0: the largest fl(scale s_u) is fl(scale max_u s_u).
    const float block_max = scale * _mm512_reduce_max_ps(vmax);
    if (block_max > m) {
      if (m != -INFINITY) {  // o and l are still zero before the first block
        const float alpha = std::exp(m - block_max);
        l *= alpha;
        for (size_t i = 0; i < D; i += 16) {
          const __mmask16 k = FirstN(D - i);
          _mm512_mask_storeu_ps(o + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, o + i),
                                                        _mm512_set1_ps(alpha)));
        }
      }
      m = block_max;
    }
  }
  const __m512 vs = _mm512_set1_ps(scale), vm = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  size_t u = 0;
  for (; u < first; u += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(pb + u), _mm256_setzero_si256());
  for (; u < n; u += 16) {  // p = exp(scale s - m): one rounding before the exp
    const __mmask16 k = KeysIn(u, lo, n);
    const __m512 x = _mm512_fmsub_ps(_mm512_maskz_loadu_ps(k, s + u), vs, vm);
    const __m512 p = _mm512_maskz_mov_ps(k, Exp(x));
    sum = _mm512_add_ps(sum, p);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(pb + u), ToBf16(p));
  }
  for (; u < len; u += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(pb + u), _mm256_setzero_si256());
  if (lo < n) l += _mm512_reduce_add_ps(sum);
}

// Query rows [ta, ta + nr) of one head: their out rows (at y + t*ldy) and lse; keys: what each
// query of the head's batch row sees.
LLMCPU_AVX512BF16 void ForwardGroup(const ForwardScratch& w, size_t T, size_t D, size_t ta,
                                    size_t nr, bf16* y, size_t ldy, float* lse,
                                    const AttentionRow& keys) {
  const AttentionOptions& opt = keys.opt;
  const size_t Tk = RoundUp(T, kLanes), Dp = RoundUp(D, 2), Dc = RoundUp(D, kLanes);
  const size_t tb = ta + nr;
  const float scale = attention_scale<float>(opt, int(D)), cap = opt.softcap;
  float m[kCols], l[kCols];
  for (size_t j = 0; j < nr; ++j) m[j] = -INFINITY, l[j] = 0.0f;
  std::fill(w.o, w.o + nr * Dc, 0.0f);
  // Key blocks from the panel of 64 holding the group's first query's first key to the diagonal.
  const size_t start = keys.first_key(ta) / kLanes * kLanes;
  for (size_t u0 = start; u0 < tb; u0 += kKeyBlock) {
    const size_t u1 = std::min(u0 + kKeyBlock, tb), len = RoundUp(u1 - u0, 2);
    for (size_t k0 = u0; k0 < u1; k0 += kLanes) {  // S^T(u, t) = sum_i K(u, i) Q(t, i)
      TileAny(std::min(kLanes, u1 - k0), nr, Dp / 2, w.kp + k0 * Dp, w.q + ta * Dp, Dp, 2,
              w.st + (k0 - u0), kKeyBlock, false);
    }
    for (size_t j = 0; j < nr; ++j) {
      const size_t t = ta + j, n = t + 1 > u0 ? std::min(u1, t + 1) - u0 : 0;
      const size_t first = keys.first_key(t), lo = first > u0 ? first - u0 : 0;
      float* s = w.st + j * kKeyBlock;
      if (cap > 0) SoftCapRow(s, lo, n, scale / cap, cap);
      SoftmaxRow(s, lo, n, len, cap > 0 ? 1.0f : scale, m[j], l[j], w.o + j * Dc, D,
                 w.pb + j * kKeyBlock);
    }
    for (size_t d0 = 0; d0 < D; d0 += kLanes) {  // O^T(i, t) += sum_u V(u, i) P(t, u)
      TileAny(std::min(kLanes, D - d0), nr, len / 2, w.vp + d0 * Tk + u0 * kLanes, w.pb, kKeyBlock,
              2, w.o + d0, Dc, true);
    }
  }
  for (size_t j = 0; j < nr; ++j) {
    const __m512 inv = _mm512_set1_ps(1.0f / l[j]);
    const float* o = w.o + j * Dc;
    bf16* yt = y + (ta + j) * ldy;
    for (size_t i = 0; i < D; i += 16) {
      const __mmask16 k = FirstN(D - i);
      _mm256_mask_storeu_epi16(yt + i, k, ToBf16(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, o + i), inv)));
    }
    lse[ta + j] = m[j] + std::log(l[j]);
  }
}

LLMCPU_AVX512BF16 void ExpRange(float* out, const float* in, size_t n) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 k = FirstN(n - i);
    _mm512_mask_storeu_ps(out + i, k, Exp(_mm512_maskz_loadu_ps(k, in + i)));
  }
}

LLMCPU_AVX512BF16 void TanhRange(float* out, const float* in, size_t n) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 k = FirstN(n - i);
    _mm512_mask_storeu_ps(out + i, k, Tanh(_mm512_maskz_loadu_ps(k, in + i)));
  }
}

}  // namespace

void bf16_flash_attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T_, int NH_,
                                  int NKV_, int D_, const AttentionOptions& opt) {
  const size_t T = size_t(T_), NH = size_t(NH_), NKV = size_t(NKV_), D = size_t(D_);
  const size_t R = (NH + 2 * NKV) * D, G = NH / NKV, Tk = RoundUp(T, kLanes), Dp = RoundUp(D, 2);
  for_each_pair(B, NH_, ForwardScratch(nullptr, T, D).floats, [&](size_t b, size_t h, float* ws) {
    const ForwardScratch w(ws, T, D);
    const bf16* xb = qkv + b * T * R;
    const size_t g = h / G;
    CopyRows(w.rows, Dp, xb + (NH + g) * D, R, T, D);
    PackAlongValues(w.kp, w.rows, Dp, T, D);
    CopyRows(w.rows, Dp, xb + (NH + NKV + g) * D, R, T, D);
    PackAlongRows(w.vp, w.rows, Dp, T, D, Tk / 2);
    CopyRows(w.q, Dp, xb + h * D, R, T, D);
    for (size_t ta = 0; ta < T; ta += kCols) {
      ForwardGroup(w, T, D, ta, std::min(kCols, T - ta), out + b * T * NH * D + h * D, NH * D,
                   lse + (b * NH + h) * T, AttentionRow{opt, int(b), T_});
    }
  });
}

ScratchUse bf16_flash_attention_forward_scratch(int /*B*/, int T, int /*NH*/, int /*NKV*/, int D,
                                                int /*threads*/) {
  return ScratchUse().ask_each(ScratchSlot::kAttention,
                               ForwardScratch(nullptr, size_t(T), size_t(D)).floats);
}

void bf16_attention_exp(float* out, const float* in, size_t n) { ExpRange(out, in, n); }

void bf16_attention_tanh(float* out, const float* in, size_t n) { TanhRange(out, in, n); }

}  // namespace llmcpu::x86
