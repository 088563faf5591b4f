// Flash attention's backward pass on AVX512-BF16 dot products (see bf16_attention.h), as
// FlashAttention-2: per (batch, key/value head g), per query head h of its group, per key block j
// of 64 keys against the query rows t >= its first key that see one of its keys (up to
// attention_query_end: the window's end, or in a packed row its example's), in groups of 6, with
// the scale, window and soft-cap c of attention_options.h, dO = bf16(dout) and D_t = dO_t . out_t
// (the saved bf16 out; fp32 sums):
//   S^T = K_j Q^T;  dP^T = V_j dO^T                      (bf16 products, fp32 sums)
//   P = exp(scale S - lse_t)  (0 for keys t does not see; one rounding: FMA)
//   dS = (P (dP - D_t)) scale  (fp32)
//   with a soft-cap c: th = tanh(scale S / c), P = exp(c th - lse_t),
//   dS = (P (dP - D_t) (1 - th^2)) scale
//   dQ_t += sum_u bf16(dS_tu) k_u          (per group: A = K_j^T packed along the keys)
//   dV_j += sum_t bf16(P_tu) dO_t,  dK_j += sum_t bf16(dS_tu) q_t
// The last two run once per key block and head over every query t >= the block's first key: P and
// dS are kept for them rounded to bf16, interleaved by query pairs (key u's pairs 128 values apart:
// a tile's B columns), with dO or Q packed along the queries as A (lanes: the D dimensions), so
// the tiles write rows of dV, dK. dQ, dK and dV accumulate in fp32 scratch; dK, dV sum the group's
// heads in order. A (batch, key/value head) pair is one thread's, and owns the dq, dk, dv columns
// of its heads: every sum has a fixed order whatever the thread count, and the bits do not depend
// on it.
// Not here: the forward pass and the exp (bf16_attention.cpp).
#include <cmath>

#include "simd/x86/bf16_attention.h"

// GCC 12 warns about the intentionally undefined upper lanes inside its own AVX-512 intrinsics
// (_mm512_reduce_add_ps and friends) once they are inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "simd/x86/bf16_attention_blocks.h"  // after the pragma: its inline functions warn too

namespace llmcpu::x86 {
namespace {

using namespace attention;

constexpr size_t kKeys = 64;  // keys per block: one tile of lanes

// One (batch, key/value head)'s scratch, carved the same way to size it and to use it. Tk = T
// rounded up to 64, Dp = D rounded up to even, Dc = D rounded up to 64.
struct BackwardScratch {
  bf16* kp;   // K packed along D (S^T's A): Tk x Dp
  bf16* vp;   // V packed along D (dP^T's A): Tk x Dp
  bf16* kr;   // K^T packed along the keys (dQ^T's A): Dc x Tk
  bf16* q;    // the query rows (S^T's B): T x Dp
  bf16* rows;  // K's rows, then V's, copied contiguous for the packing: T x Dp
  bf16* qr;   // Q^T packed along the queries (dK's B): Dc x Tk
  bf16* dy;   // bf16(dout) rows (dP^T's B): T x Dp
  bf16* dyr;  // its transpose packed along the queries (dV's B): Dc x Tk
  bf16* pi;   // bf16(P) of a key block, interleaved by query pairs: Tk/2 pairs of 64 x 2
  bf16* dsi;  // bf16(dS), likewise
  bf16* dsr;  // bf16(dS) rows of a group (dQ^T's B): kCols x 64
  float* st;  // S^T, then P^T, of a group: kCols columns of 64
  float* dpt;  // dP^T, then dS^T
  float* Dt;   // D_t (T)
  float* dq;   // dQ rows: T x Dc
  float* dk;   // dK rows: T x Dc
  float* dv;   // dV rows
  size_t floats;

  BackwardScratch(float* base, size_t T, size_t D) {
    const size_t Tk = RoundUp(T, kLanes), Dp = RoundUp(D, 2), Dc = RoundUp(D, kLanes);
    Carve c(base);
    kp = c.halves(Tk * Dp), vp = c.halves(Tk * Dp), kr = c.halves(Dc * Tk);
    q = c.halves(T * Dp), rows = c.halves(T * Dp), qr = c.halves(Dc * Tk), dy = c.halves(T * Dp), dyr = c.halves(Dc * Tk);
    pi = c.halves(Tk * kKeys), dsi = c.halves(Tk * kKeys), dsr = c.halves(kCols * kKeys);
    st = c.floats(kCols * kKeys), dpt = c.floats(kCols * kKeys), Dt = c.floats(T);
    dq = c.floats(T * Dc), dk = c.floats(T * Dc), dv = c.floats(T * Dc);
    floats = c.used_floats();
  }
};

// Query head h's rows into the scratch: q, Q^T, dO = bf16(dout) and its transpose, and
// D_t = dO_t . out_t on the rounded dO (the one dP sees: at T = 1, dP = D_t and dS = 0 exactly).
LLMCPU_AVX512BF16 void GatherHead(const BackwardScratch& w, size_t T, size_t D, const bf16* q,
                                  size_t ldq, const float* dout, const bf16* out, size_t ldo) {
  const size_t Tk = RoundUp(T, kLanes), Dp = RoundUp(D, 2);
  CopyRows(w.q, Dp, q, ldq, T, D);
  PackAlongRows(w.qr, w.q, Dp, T, D, Tk / 2);
  for (size_t t = 0; t < T; ++t) {
    const float* d = dout + t * ldo;
    const bf16* o = out + t * ldo;
    if (t + 8 < T) {  // rows a whole out row apart: prefetched a few ahead, as CopyRows does
      for (size_t i = 0; i < D; i += 16) __builtin_prefetch(d + 8 * ldo + i);
      __builtin_prefetch(o + 8 * ldo), __builtin_prefetch(o + 8 * ldo + D - 1);
    }
    __m512 acc = _mm512_setzero_ps();
    for (size_t i = 0; i < Dp; i += 16) {
      const __mmask16 k = __mmask16((1u << std::min<size_t>(16, D > i ? D - i : 0)) - 1u);
      const __mmask16 store = __mmask16((1u << std::min<size_t>(16, Dp - i)) - 1u);
      const __m256i dv = ToBf16(_mm512_maskz_loadu_ps(k, d + i));
      acc = _mm512_fmadd_ps(Widen(dv), Widen(_mm256_maskz_loadu_epi16(k, o + i)), acc);
      _mm256_mask_storeu_epi16(w.dy + t * Dp + i, store, dv);
    }
    w.Dt[t] = _mm512_reduce_add_ps(acc);
  }
  PackAlongRows(w.dyr, w.dy, Dp, T, D, Tk / 2);
}

// Columns t and t + 1 (odd: t + 1 absent, its P and dS zero) of a group's S^T and dP^T become P and
// dS: rounded, interleaved into pi, dsi at query pair (t - u0)/2, and dS's rows into dsr. Column h
// sees the keys [lo[h], n[h]) of the block (u > t - window, u <= t, u < T); chunks: the 16-key
// vectors the block reads; cap: the soft-cap (0: none).
LLMCPU_AVX512BF16 void GradPair(const BackwardScratch& w, size_t j, bool odd, const size_t lo[2],
                                const size_t n[2], size_t chunks, float scale, float cap,
                                const float* lse, const float* Dt, size_t pair) {
  const __m512 vs = _mm512_set1_ps(scale);
  __m512 p[2], ds[2];
  for (size_t c = 0; c < chunks; ++c) {
    for (size_t h = 0; h < 2; ++h) {
      const size_t col = j + h;
      const __mmask16 valid = odd && h == 1 ? __mmask16(0) : KeysIn(16 * c, lo[h], n[h]);
      const float* s = w.st + col * kKeys + 16 * c;
      const float* dp = w.dpt + col * kKeys + 16 * c;
      const __m512 diff =
          _mm512_sub_ps(_mm512_maskz_loadu_ps(valid, dp), _mm512_set1_ps(valid ? Dt[h] : 0.0f));
      if (cap >
          0) {  // th = tanh(scale s / c); P = exp(c th - lse); dS = P (dP - D) (1 - th^2) scale
        const __m512 th =
            Tanh(_mm512_mul_ps(_mm512_maskz_loadu_ps(valid, s), _mm512_set1_ps(scale / cap)));
        const __m512 x =
            _mm512_fmsub_ps(th, _mm512_set1_ps(cap), _mm512_set1_ps(valid ? lse[h] : 0.0f));
        p[h] = _mm512_maskz_mov_ps(valid, Exp(x));
        const __m512 g = _mm512_fnmadd_ps(th, th, _mm512_set1_ps(1.0f));
        ds[h] = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(p[h], diff), g), vs);
      } else {
        const __m512 x = _mm512_fmsub_ps(_mm512_maskz_loadu_ps(valid, s), vs,
                                         _mm512_set1_ps(valid ? lse[h] : 0.0f));
        p[h] = _mm512_maskz_mov_ps(valid, Exp(x));
        ds[h] = _mm512_mul_ps(_mm512_mul_ps(p[h], diff), vs);
      }
      if (!(odd && h == 1)) _mm256_storeu_si256((__m256i*)(w.dsr + col * kKeys + 16 * c), ToBf16(ds[h]));
    }
    _mm512_storeu_si512(w.pi + pair * kPair + 32 * c, InterleaveBf16(p[0], p[1]));
    _mm512_storeu_si512(w.dsi + pair * kPair + 32 * c, InterleaveBf16(ds[0], ds[1]));
  }
}

// Key block [u0, u1) of query head h against query rows [ta, ta + nr): S^T, dP^T, P, dS, dQ.
LLMCPU_AVX512BF16 void BackwardGroup(const BackwardScratch& w, size_t T, size_t D, size_t u0,
                                     size_t u1, size_t ta, size_t nr, const float* lse,
                                     const AttentionRow& keys) {
  const AttentionOptions& opt = keys.opt;
  const size_t Tk = RoundUp(T, kLanes), Dp = RoundUp(D, 2), Dc = RoundUp(D, kLanes);
  const size_t tb = ta + nr, rk = std::min(u1, tb) - u0;  // keys the group's last query needs
  TileAny(rk, nr, Dp / 2, w.kp + u0 * Dp, w.q + ta * Dp, Dp, 2, w.st, kKeys, false);
  TileAny(rk, nr, Dp / 2, w.vp + u0 * Dp, w.dy + ta * Dp, Dp, 2, w.dpt, kKeys, false);
  const float scale = attention_scale<float>(opt, int(D));
  const size_t chunks = (u1 - u0 + 15) / 16;  // the dK, dV tiles read these lanes of every pair
  // The first key of query t relative to the block (0 when before it).
  const auto lo = [&](size_t t) {
    const size_t first = keys.first_key(t);
    return first > u0 ? first - u0 : 0;
  };
  for (size_t j = 0; j < nr; j += 2) {
    const size_t t = ta + j;
    const bool odd = j + 1 == nr;
    const float l2[2] = {lse[t], odd ? 0.0f : lse[t + 1]};
    const float d2[2] = {w.Dt[t], odd ? 0.0f : w.Dt[t + 1]};
    const size_t lo2[2] = {lo(t), odd ? 0 : lo(t + 1)};  // t + 1 may be past the row
    const size_t n2[2] = {std::min(u1, t + 1) - u0, std::min(u1, t + 2) - u0};
    GradPair(w, j, odd, lo2, n2, chunks, scale, opt.softcap, l2, d2, (t - u0) / 2);
  }
  for (size_t d0 = 0; d0 < D; d0 += kLanes) {  // dQ^T(i, t) += sum_u K(u, i) dS(t, u)
    TileAny(std::min(kLanes, D - d0), nr, (rk + 1) / 2, w.kr + d0 * Tk + u0 * kLanes, w.dsr, kKeys,
            2, w.dq + ta * Dc + d0, Dc, true);
  }
}

// Query head h's share of the key block [u0, u1): every group of query rows from u0 to the last
// that sees one of its keys, then dV^T(i, u) += sum_t dO(t, i) P(t, u) and
// dK^T(i, u) += sum_t Q(t, i) dS(t, u): A = dO (Q) packed along the queries, B_u = key u's lanes of
// the interleaved P (dS), so the tiles write dV, dK rows.
void BackwardKeyBlock(const BackwardScratch& w, size_t T, size_t D, size_t u0, const float* lse,
                      const AttentionRow& keys) {
  const size_t Tk = RoundUp(T, kLanes), Dc = RoundUp(D, kLanes), u1 = std::min(u0 + kKeys, T);
  const size_t te = keys.query_end(u1);
  for (size_t ta = u0; ta < te; ta += kCols) {
    BackwardGroup(w, T, D, u0, u1, ta, std::min(kCols, te - ta), lse, keys);
  }
  const size_t pairs = (te - u0 + 1) / 2;
  for (size_t d0 = 0; d0 < D; d0 += kLanes) {
    const size_t a_off = d0 * Tk + u0 * kLanes, rows = std::min(kLanes, D - d0);
    for (size_t ua = u0; ua < u1; ua += kCols) {
      const size_t nu = std::min(kCols, u1 - ua), b_off = 2 * (ua - u0);
      TileAny(rows, nu, pairs, w.dyr + a_off, w.pi + b_off, 2, kPair, w.dv + ua * Dc + d0, Dc, true);
      TileAny(rows, nu, pairs, w.qr + a_off, w.dsi + b_off, 2, kPair, w.dk + ua * Dc + d0, Dc, true);
    }
  }
}

// Rows dx[t*R, +D) = x[t*ldx, +D) for t < T.
LLMCPU_AVX512BF16 void StoreRows(float* dx, size_t R, const float* x, size_t ldx, size_t T,
                                 size_t D) {
  for (size_t t = 0; t < T; ++t) {
    for (size_t i = 0; i < D; i += 16) {
      const __mmask16 k = __mmask16((1u << std::min<size_t>(16, D - i)) - 1u);
      _mm512_mask_storeu_ps(dx + t * R + i, k, _mm512_maskz_loadu_ps(k, x + t * ldx + i));
    }
  }
}

// One (batch b, key/value head g): dqkv's columns of its query heads, key head and value head.
void BackwardPair(const BackwardScratch& w, float* dx, const float* dout, const bf16* out,
                  const bf16* x, const float* lse, size_t T, size_t NH, size_t NKV, size_t D,
                  size_t g, const AttentionRow& keys) {
  const size_t R = (NH + 2 * NKV) * D, OR = NH * D, G = NH / NKV;
  const size_t Tk = RoundUp(T, kLanes), Dc = RoundUp(D, kLanes);
  const size_t Dp = RoundUp(D, 2);
  CopyRows(w.rows, Dp, x + (NH + g) * D, R, T, D);
  PackAlongValues(w.kp, w.rows, Dp, T, D);
  PackAlongRows(w.kr, w.rows, Dp, T, D, Tk / 2);
  CopyRows(w.rows, Dp, x + (NH + NKV + g) * D, R, T, D);
  PackAlongValues(w.vp, w.rows, Dp, T, D);
  std::fill(w.dk, w.dk + T * Dc, 0.0f);
  std::fill(w.dv, w.dv + T * Dc, 0.0f);
  for (size_t h = g * G; h < (g + 1) * G; ++h) {
    GatherHead(w, T, D, x + h * D, R, dout + h * D, out + h * D, OR);
    std::fill(w.dq, w.dq + T * Dc, 0.0f);
    for (size_t u0 = 0; u0 < T; u0 += kKeys) BackwardKeyBlock(w, T, D, u0, lse + h * T, keys);
    StoreRows(dx + h * D, R, w.dq, Dc, T, D);
  }
  StoreRows(dx + (NH + g) * D, R, w.dk, Dc, T, D);
  StoreRows(dx + (NH + NKV + g) * D, R, w.dv, Dc, T, D);
}

}  // namespace

void bf16_flash_attention_backward(float* dqkv, const float* dout, const bf16* out, const bf16* qkv,
                                   const float* lse, int B, int T_, int NH_, int NKV_, int D_,
                                   const AttentionOptions& opt) {
  const size_t T = size_t(T_), NH = size_t(NH_), NKV = size_t(NKV_), D = size_t(D_);
  const size_t R = (NH + 2 * NKV) * D, OR = NH * D;
  for_each_pair(B, NKV_, BackwardScratch(nullptr, T, D).floats, [&](size_t b, size_t g, float* ws) {
    const BackwardScratch w(ws, T, D);
    BackwardPair(w, dqkv + b * T * R, dout + b * T * OR, out + b * T * OR, qkv + b * T * R,
                 lse + b * NH * T, T, NH, NKV, D, g, AttentionRow{opt, int(b), T_});
  });
}

ScratchUse bf16_flash_attention_backward_scratch(int /*B*/, int T, int /*NH*/, int /*NKV*/, int D,
                                                 int /*threads*/) {
  return ScratchUse().ask_each(ScratchSlot::kAttention,
                               BackwardScratch(nullptr, size_t(T), size_t(D)).floats);
}

}  // namespace llmcpu::x86
