// Causal self-attention without the (B, NH, T, T) matrix (FlashAttention-2), vectorized: the math
// of scalar::flash_attention_* (simd/scalar/attention.h), grouped-query: NH query heads read NKV
// key/value heads (query head h reads head g = h / (NH/NKV)), all of size hs (kernels.h's D), with
// the scale, window and soft-cap of attention_options.h. Per (batch, query head), with Q, dY the
// query head's (T, hs) slices and K, V its key/value head's: forward, per block of query rows
// against the key blocks from the one holding the block's first query's first key (0 without a
// window or packed examples: attention_first_key) up to the diagonal, with per row t a running max
// m, a running sum l and an accumulator o:
//   S = Q K_j^T;  X = scale S, or c tanh(scale S / c) with the soft-cap c;
//   m' = max(m, max_u X_tu);  P_tu = exp(X_tu - m')   (0 for the keys t does not see)
//   l <- exp(m - m') l + sum_u P_tu;  o <- exp(m - m') o + sum_u P_tu v_u;  m <- m'
//   and at the end y_t = o / l, lse_t = m + log(l).
// Backward, per key block j (dK_j, dV_j accumulated there) against the query blocks i >= j that
// see one of its keys (up to attention_query_end: the window's or the example's end), with
// D_t = dY_t . Y_t computed first:
//   S = Q_i K_j^T;  P = exp(X - lse) (0 where masked);  dP = dY_i V_j^T;
//   dS = scale P * (dP - D) (times 1 - tanh^2(scale S / c) with a soft-cap);
//   dV_j += P^T dY_i;  dK_j += dS^T Q_i;  dQ_i += dS K_j.
// A window of W keys makes both passes O(T (W + block)): blocks outside it are skipped, and in a
// tile of query columns only the key rows from its first query's first key are computed; so are
// the blocks of other examples in a packed row (opt.starts).
// Every product runs on the micro-kernel of gemm-inl.h, column-major as in attention.cc: a score
// block is kept as S^T (keys down, one query per column), so the keys come packed (K_j^T, and V_j^T
// in the backward pass) and Q, dY, V are read in place from a copy of the heads gathered into the
// thread's scratch (rows 3 hs apart, not a whole qkv row): K and V come from their key/value head
// (in the backward pass gathered once per group), never expanded to a copy per query head in
// memory. On the diagonal block a tile of query columns computes only the key rows up to its last
// query (and from its first query's first key); the masked entries are zeros. exp from
// hwy/contrib/math. Threads split the forward's (batch, query head) pairs and the backward's
// (batch, key/value head) pairs: the latter runs the group's query heads one after the other, the
// first writing the key/value head's dK, dV and the others adding theirs. Each pair owns disjoint
// slices of out, lse and dqkv: no races, and every sum in a fixed order (bitwise reproducible,
// whatever the thread count). The bf16 entries widen a head's q, k, v exactly into fp32 scratch and
// run the same blocks; out is rounded to bf16 once.
// Not here: the materialized kernels (attention.cc).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/flash_attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "simd/bf16.h"
#include "simd/hwy/bf16-inl.h"
#include "simd/hwy/common-inl.h"
#include "simd/hwy/gemm-inl.h"
#include "simd/hwy/softcap-inl.h"
#include "simd/kernels.h"
#include "simd/workspace.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace {

// Block sizes. Forward: kFwdBq query rows against key blocks of kFwdBk (a multiple of kFwdBq, so a
// key block never starts inside a query block). The key block is long, so that rows rescale their
// accumulator rarely, and its packed K^T panel (kFwdBk x hs) plus the V rows it pairs with stay in
// L2 while the query block's column tiles stream over them. Backward: square blocks of kBwdB, whose
// five block products all have one side of kBwdB (one register tile of rows on AVX-512). Measured
// on Zen 5 (hs = 64, T = 256..2048): kFwdBk = 128 or 512 within noise of 256; kFwdBq = 32 or 128,
// and kBwdB = 32 or 96, slower; kBwdB = 128 the same.
constexpr size_t kFwdBq = 64, kFwdBk = 256, kBwdB = 64;
static_assert(kFwdBk % kFwdBq == 0, "key blocks start at query block boundaries");

// Scratch carving: sizes rounded up to whole cache lines.
HWY_INLINE size_t Lines(size_t floats) { return (floats + 15) / 16 * 16; }

// The balanced column tiles GemmBlock uses: tile jt of Tiles(n) is [TileBegin(n, jt), ...(jt + 1)).
HWY_INLINE size_t Tiles(size_t n) { return (n + kGemmNR - 1) / kGemmNR; }
HWY_INLINE size_t TileBegin(size_t n, size_t jt) { return n * jt / Tiles(n); }

// One head's q, k, v: row t of each at q + t*ld (fp32, copied or widened from bf16).
struct HeadQKV {
  const float* q;
  const float* k;
  const float* v;
  size_t ld;
};

// P[u + i*ldp] = X[u*ldx + i] for u < rows, i < hs: rows of keys (or values) as hs columns. In
// groups of 16 rows, so that each column's stores fill whole cache lines while the group's rows
// stay in L1 (one strided store per element cost more than the block products at T = 256).
void PackColumns(float* HWY_RESTRICT P, size_t ldp, const float* HWY_RESTRICT X, size_t ldx,
                 size_t rows, size_t hs) {
  constexpr size_t kGroup = 16;
  for (size_t u0 = 0; u0 < rows; u0 += kGroup) {
    const size_t n = std::min(kGroup, rows - u0);
    for (size_t i = 0; i < hs; ++i) {
      float* HWY_RESTRICT p = P + u0 + i * ldp;
      const float* HWY_RESTRICT x = X + u0 * ldx + i;
      for (size_t u = 0; u < n; ++u) p[u] = x[u * ldx];
    }
  }
}

// dst[0, n) = src[0, n), bf16 widened exactly.
void CopyToF32(float* HWY_RESTRICT dst, const float* HWY_RESTRICT src, size_t n) {
  const DF d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::LoadU(d, src + i), d, dst + i);
  if (i < n) StoreTail(LoadTail(d, src + i, n - i), d, dst + i, n - i);
}
void CopyToF32(float* HWY_RESTRICT dst, const bf16* HWY_RESTRICT src, size_t n) {
  const DF d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(LoadBf16(d, src + i), d, dst + i);
  for (; i < n; ++i) dst[i] = bf16_to_float(src[i]);
}

// Rows of one head gathered: x[t*ldx, +hs) = src[t*lds, +hs) for t < T, widened to fp32. The copy
// costs O(T hs) against the O(T^2 hs) products, and spares them rows a whole qkv row apart (at
// T = 2048 a head's rows span more 4 KiB pages than the TLB holds).
template <typename InT>
void GatherRows(float* HWY_RESTRICT x, size_t ldx, const InT* src, size_t lds, size_t T,
                size_t hs) {
  for (size_t t = 0; t < T; ++t) CopyToF32(x + t * ldx, src + t * lds, hs);
}

// dst[0, n) += src[0, n).
void AddRow(float* HWY_RESTRICT dst, const float* HWY_RESTRICT src, size_t n) {
  const DF d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + L <= n; i += L) {
    hn::StoreU(hn::Add(hn::LoadU(d, dst + i), hn::LoadU(d, src + i)), d, dst + i);
  }
  if (i < n) {
    StoreTail(hn::Add(LoadTail(d, dst + i, n - i), LoadTail(d, src + i, n - i)), d, dst + i, n - i);
  }
}

// p[0, n) = 0.
HWY_INLINE void Zero(float* HWY_RESTRICT p, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = 0.0f;
}

// x[0, n) *= a.
HWY_INLINE void ScaleRow(float* HWY_RESTRICT x, size_t n, float a) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF va = hn::Set(d, a);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), va), d, x + i);
  if (i < n) StoreTail(hn::Mul(LoadTail(d, x + i, n - i), va), d, x + i, n - i);
}

// The online softmax of query row t over one key block. s[lo, n) holds the scores of the keys t
// sees (raw q_t . k_u, or already capped with scale 1), s[0, lo) and s[n, r) masked ones. On return
// s[0, r) holds P = exp(scale s - m') on [lo, n) and zeros elsewhere, with
// m' = max(m, max_u scale s_u); l and the accumulator o[0, hs) were rescaled by exp(m - m') first
// when the max grew (never otherwise: a row that keeps its max is never multiplied, and its first
// block only sets m), and l has the block's sum added. A block without keys of the row (lo >= n)
// leaves m, l and o as they were.
void OnlineSoftmaxColumn(float* HWY_RESTRICT s, size_t lo, size_t n, size_t r, float scale,
                         float& m, float& l, float* HWY_RESTRICT o, size_t hs) {
  if (lo >= n) return Zero(s, r);
  Zero(s, lo);
  Zero(s + n, r - n);
  s += lo, n -= lo;
  const DF d;
  const size_t L = hn::Lanes(d);
  // Rounding is monotonic and scale > 0: the largest fl(scale s_u) is fl(scale max_u s_u), so the
  // max pass reads the raw scores and the exp pass scales them.
  VF vmax = hn::Set(d, -INFINITY);
  size_t u = 0;
  for (; u + L <= n; u += L) vmax = hn::Max(vmax, hn::LoadU(d, s + u));
  if (u < n) {
    vmax = hn::Max(vmax, hn::IfThenElse(hn::FirstN(d, n - u), LoadTail(d, s + u, n - u),
                                        hn::Set(d, -INFINITY)));
  }
  const float block_max = scale * hn::GetLane(hn::MaxOfLanes(d, vmax));
  if (block_max > m) {
    if (m != -INFINITY) {  // o and l are still zero before the first block
      const float alpha = std::exp(m - block_max);
      l *= alpha;
      ScaleRow(o, hs, alpha);
    }
    m = block_max;
  }
  const VF vm = hn::Set(d, m), vs = hn::Set(d, scale);
  VF sum = hn::Zero(d);
  for (u = 0; u + L <= n; u += L) {
    const VF p = hn::Exp(d, hn::Sub(hn::Mul(hn::LoadU(d, s + u), vs), vm));
    hn::StoreU(p, d, s + u);
    sum = hn::Add(sum, p);
  }
  if (u < n) {
    const VF x = hn::Mul(LoadTail(d, s + u, n - u), vs);
    const VF p = hn::IfThenElseZero(hn::FirstN(d, n - u), hn::Exp(d, hn::Sub(x, vm)));
    StoreTail(p, d, s + u, n - u);
    sum = hn::Add(sum, p);
  }
  l += ReduceSum(d, sum);
}

// Query row t of one block pair in the backward pass, with a soft-cap c: s[0, n) raw scores and
// dp[0, n) become P = exp(c th - lse) and dS = P (dp - D) (1 - th^2) scale, th = tanh(scale s / c).
void SoftCapGradColumn(float* HWY_RESTRICT s, float* HWY_RESTRICT dp, size_t n, float scale,
                       float c, float lse, float D) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF va = hn::Set(d, scale / c), vc = hn::Set(d, c), vs = hn::Set(d, scale);
  const VF vl = hn::Set(d, lse), vD = hn::Set(d, D), one = hn::Set(d, 1.0f);
  // P and dS of one vector of raw scores x and dp.
  const auto grad = [&](VF x, VF dpv, VF& p, VF& ds) {
    const VF th = hn::Tanh(d, hn::Mul(x, va));
    p = hn::Exp(d, hn::Sub(hn::Mul(th, vc), vl));
    ds = hn::Mul(hn::Mul(hn::Mul(p, hn::Sub(dpv, vD)), hn::NegMulAdd(th, th, one)), vs);
  };
  VF p, ds;
  size_t u = 0;
  for (; u + L <= n; u += L) {
    grad(hn::LoadU(d, s + u), hn::LoadU(d, dp + u), p, ds);
    hn::StoreU(p, d, s + u);
    hn::StoreU(ds, d, dp + u);
  }
  if (u < n) {
    grad(LoadTail(d, s + u, n - u), LoadTail(d, dp + u, n - u), p, ds);
    StoreTail(p, d, s + u, n - u);
    StoreTail(ds, d, dp + u, n - u);
  }
}

// Query row t of one block pair in the backward pass: s[lo, n) raw scores q_t . k_u of the keys t
// sees and dp[lo, n) = dy_t . v_u become P = exp(scale s - lse) and dS = scale P (dp - D) (with a
// soft-cap c > 0: SoftCapGradColumn); both are zero on [0, lo) and [n, r).
void SoftmaxGradColumn(float* HWY_RESTRICT s, float* HWY_RESTRICT dp, size_t lo, size_t n, size_t r,
                       float scale, float cap, float lse, float D) {
  if (lo >= n) {
    Zero(s, r);
    Zero(dp, r);
    return;
  }
  Zero(s, lo);
  Zero(dp, lo);
  Zero(s + n, r - n);
  Zero(dp + n, r - n);
  s += lo, dp += lo, n -= lo;
  if (cap > 0) return SoftCapGradColumn(s, dp, n, scale, cap, lse, D);
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF vs = hn::Set(d, scale), vl = hn::Set(d, lse), vD = hn::Set(d, D);
  size_t u = 0;
  for (; u + L <= n; u += L) {
    const VF p = hn::Exp(d, hn::Sub(hn::Mul(hn::LoadU(d, s + u), vs), vl));
    hn::StoreU(p, d, s + u);
    hn::StoreU(hn::Mul(hn::Mul(p, hn::Sub(hn::LoadU(d, dp + u), vD)), vs), d, dp + u);
  }
  if (u < n) {
    const size_t k = n - u;
    const VF p = hn::Exp(d, hn::Sub(hn::Mul(LoadTail(d, s + u, k), vs), vl));
    StoreTail(p, d, s + u, k);
    StoreTail(hn::Mul(hn::Mul(p, hn::Sub(LoadTail(d, dp + u, k), vD)), vs), d, dp + u, k);
  }
}

// Scratch of one forward head, in floats: the K^T panels, S^T (kFwdBk x kFwdBq), the accumulators
// O^T (hs x kFwdBq), m and l.
size_t ForwardScratch(size_t T, size_t hs) {
  const size_t panels = (T + kFwdBk - 1) / kFwdBk;
  return Lines(panels * kFwdBk * hs) + Lines(kFwdBk * kFwdBq) + Lines(hs * kFwdBq) +
         2 * Lines(kFwdBq);
}

// One (batch, head): y (T rows at y + t*ldy, OutT float or bf16) and lse[0, T); keys: the keys
// each query of the head's batch row sees.
template <typename OutT>
void ForwardHead(const HeadQKV& x, size_t T, size_t hs, OutT* y, size_t ldy, float* lse, float* ws,
                 const AttentionRow& keys) {
  const AttentionOptions& opt = keys.opt;
  const float scale = attention_scale<float>(opt, int(hs)), cap = opt.softcap;
  float* kt = ws;  // panel j: K_j^T, column-major kFwdBk x hs
  float* st = kt + Lines((T + kFwdBk - 1) / kFwdBk * kFwdBk * hs);
  float* ot = st + Lines(kFwdBk * kFwdBq);  // O^T: row t's accumulator at ot + (t - t0)*hs
  float* m = ot + Lines(hs * kFwdBq);
  float* l = m + Lines(kFwdBq);
  for (size_t u0 = 0; u0 < T; u0 += kFwdBk) {
    PackColumns(kt + u0 * hs, kFwdBk, x.k + u0 * x.ld, x.ld, std::min(kFwdBk, T - u0), hs);
  }
  const DF d;
  const size_t L = hn::Lanes(d);
  for (size_t t0 = 0; t0 < T; t0 += kFwdBq) {
    const size_t nq = std::min(kFwdBq, T - t0), t1 = t0 + nq;
    for (size_t t = 0; t < nq; ++t) m[t] = -INFINITY, l[t] = 0.0f;
    Zero(ot, hs * nq);
    // Key blocks from the one holding the block's first query's first key up to the diagonal.
    for (size_t u0 = keys.first_key(t0) / kFwdBk * kFwdBk; u0 < t1; u0 += kFwdBk) {
      const size_t u1 = std::min(u0 + kFwdBk, t1);
      const float* ktj = kt + u0 * hs;
      for (size_t jt = 0, tiles = Tiles(nq); jt < tiles; ++jt) {
        const size_t ta = t0 + TileBegin(nq, jt), tb = t0 + TileBegin(nq, jt + 1);
        if (keys.first_key(ta) >= u1) continue;  // the block is before every query's first key
        const size_t r = std::min(u1, tb) - u0;  // key rows the tile's last query needs
        const size_t r0 = std::max(keys.first_key(ta), u0) - u0;  // and its first query
        float* s = st + (ta - t0) * kFwdBk;
        // S^T(u, t) = sum_i K_j^T(u, i) Q^T(i, t).
        GemmBlock<BLayout::kCols>(r - r0, tb - ta, hs, ktj + r0, kFwdBk, x.q + ta * x.ld, x.ld,
                                  s + r0, kFwdBk, false);
        for (size_t t = ta; t < tb; ++t) {
          float* col = st + (t - t0) * kFwdBk;
          const size_t n = std::min(u1, t + 1) - u0, lo = std::max(keys.first_key(t), u0) - u0;
          if (cap > 0 && lo < n) SoftCapRow(col + lo, n - lo, scale / cap, cap);
          OnlineSoftmaxColumn(col, lo, n, r, cap > 0 ? 1.0f : scale, m[t - t0], l[t - t0],
                              ot + (t - t0) * hs, hs);
        }
        // O^T(i, t) += sum_u V_j^T(i, u) P^T(u, t).
        GemmBlock<BLayout::kCols>(hs, tb - ta, r - r0, x.v + (u0 + r0) * x.ld, x.ld, s + r0, kFwdBk,
                                  ot + (ta - t0) * hs, hs, true);
      }
    }
    for (size_t t = t0; t < t1; ++t) {
      const float* o = ot + (t - t0) * hs;
      const VF inv = hn::Set(d, 1.0f / l[t - t0]);
      OutT* yt = y + t * ldy;
      size_t i = 0;
      for (; i + L <= hs; i += L) StoreOut(hn::Mul(hn::LoadU(d, o + i), inv), d, yt + i);
      if (i < hs) StoreOutN(hn::Mul(LoadTail(d, o + i, hs - i), inv), d, yt + i, hs - i);
      lse[t] = m[t - t0] + std::log(l[t - t0]);
    }
  }
}

// Scratch of one backward head, in floats: D (T), dQ^T (hs x T), the packed K_j^T and V_j^T, S^T
// (then P^T) and dP^T (then dS^T), the accumulators dK_j^T and dV_j^T, and one widened row of y.
size_t BackwardScratch(size_t T, size_t hs) {
  return Lines(T) + Lines(hs * T) + 2 * Lines(kBwdB * hs) + 2 * Lines(kBwdB * kBwdB) +
         2 * Lines(hs * kBwdB) + Lines(hs);
}

// D[t] = dy_t . y_t for t < T (rows at dy + t*lddy, y + t*ldy); a bf16 y is widened into row (hs).
template <typename OutT>
void RowDots(float* D, const float* dy, size_t lddy, const OutT* y, size_t ldy, size_t T, size_t hs,
             float* row) {
  for (size_t t = 0; t < T; ++t) {
    if constexpr (std::is_same_v<OutT, float>) {
      D[t] = Dot(dy + t * lddy, y + t * ldy, hs);
    } else {
      CopyToF32(row, y + t * ldy, hs);
      D[t] = Dot(dy + t * lddy, row, hs);
    }
  }
}

// One (batch, query head): dq (T rows at dq + t*ldd) overwritten, and the head's share of its
// key/value head's dk, dv (rows at d* + t*ldd) written (add_kv false: the group's first head) or
// added (add_kv true), from dy (rows at dy + t*lddy), y (rows at y + t*ldy, float or bf16) and
// lse[0, T); keys: the keys each query of the head's batch row sees.
template <typename OutT>
void BackwardHead(const HeadQKV& x, size_t T, size_t hs, const float* dy, size_t lddy,
                  const OutT* y, size_t ldy, const float* lse, float* dq, float* dk, float* dv,
                  size_t ldd, bool add_kv, float* ws, const AttentionRow& keys) {
  const AttentionOptions& opt = keys.opt;
  const float scale = attention_scale<float>(opt, int(hs)), cap = opt.softcap;
  float* D = ws;
  float* dqt = D + Lines(T);  // dQ^T: row t at dqt + t*hs
  float* ktj = dqt + Lines(hs * T);
  float* vtj = ktj + Lines(kBwdB * hs);
  float* st = vtj + Lines(kBwdB * hs);     // S^T, then P^T: query t's column at st + (t - t0)*kBwdB
  float* dpt = st + Lines(kBwdB * kBwdB);  // dP^T, then dS^T
  float* dkt = dpt + Lines(kBwdB * kBwdB);  // dK_j^T: key u's row at dkt + (u - u0)*hs
  float* dvt = dkt + Lines(hs * kBwdB);
  RowDots(D, dy, lddy, y, ldy, T, hs, dvt + Lines(hs * kBwdB));
  Zero(dqt, hs * T);
  for (size_t u0 = 0; u0 < T; u0 += kBwdB) {
    const size_t nk = std::min(kBwdB, T - u0), u1 = u0 + nk;
    PackColumns(ktj, kBwdB, x.k + u0 * x.ld, x.ld, nk, hs);
    PackColumns(vtj, kBwdB, x.v + u0 * x.ld, x.ld, nk, hs);
    Zero(dkt, hs * nk);
    Zero(dvt, hs * nk);
    // The queries that see a key of the block: from its first key to the last that sees its last
    // (the window's end, or its example's).
    const size_t t_end = keys.query_end(u1);
    size_t tile_end[kBwdB];  // the same for each tile of the block's keys
    for (size_t jt = 0, tiles = Tiles(nk); jt < tiles; ++jt) {
      tile_end[jt] = keys.query_end(u0 + TileBegin(nk, jt + 1));
    }
    for (size_t t0 = u0; t0 < t_end; t0 += kBwdB) {  // query blocks on and below the diagonal
      const size_t nq = std::min(kBwdB, t_end - t0), t1 = t0 + nq;
      for (size_t jt = 0, tiles = Tiles(nq); jt < tiles; ++jt) {
        const size_t ta = t0 + TileBegin(nq, jt), tb = t0 + TileBegin(nq, jt + 1);
        const size_t r = std::min(u1, tb) - u0;  // key rows the tile's last query needs
        const size_t r0 = std::max(keys.first_key(ta), u0) - u0;  // and its first query
        float* s = st + (ta - t0) * kBwdB;
        float* dp = dpt + (ta - t0) * kBwdB;
        // S^T(u, t) = sum_i K_j^T(u, i) Q^T(i, t);  dP^T(u, t) = sum_i V_j^T(u, i) dY^T(i, t).
        GemmBlock<BLayout::kCols>(r - r0, tb - ta, hs, ktj + r0, kBwdB, x.q + ta * x.ld, x.ld,
                                  s + r0, kBwdB, false);
        GemmBlock<BLayout::kCols>(r - r0, tb - ta, hs, vtj + r0, kBwdB, dy + ta * lddy, lddy,
                                  dp + r0, kBwdB, false);
        for (size_t t = ta; t < tb; ++t) {  // every key row of the block is set (zeros if masked)
          SoftmaxGradColumn(st + (t - t0) * kBwdB, dpt + (t - t0) * kBwdB,
                            std::max(keys.first_key(t), u0) - u0, std::min(u1, t + 1) - u0, nk,
                            scale, cap, lse[t], D[t]);
        }
        // dQ^T(i, t) += sum_u K_j^T(i, u) dS^T(u, t)  (K read in place).
        GemmBlock<BLayout::kCols>(hs, tb - ta, r - r0, x.k + (u0 + r0) * x.ld, x.ld, dp + r0, kBwdB,
                                  dqt + ta * hs, hs, true);
      }
      // dV_j^T(i, u) += sum_t dY^T(i, t) P(t, u);  dK_j^T(i, u) += sum_t Q^T(i, t) dS(t, u), over
      // the queries t >= the tile's first key that see one of its keys (the others see zeros).
      for (size_t jt = 0, tiles = Tiles(nk); jt < tiles; ++jt) {
        const size_t ua = u0 + TileBegin(nk, jt), ub = u0 + TileBegin(nk, jt + 1);
        const size_t ts = std::max(t0, ua), te = std::min(t1, tile_end[jt]);
        if (ts >= te) continue;
        const size_t off = (ts - t0) * kBwdB + (ua - u0);
        GemmBlock<BLayout::kRows>(hs, ub - ua, te - ts, dy + ts * lddy, lddy, st + off, kBwdB,
                                  dvt + (ua - u0) * hs, hs, true);
        GemmBlock<BLayout::kRows>(hs, ub - ua, te - ts, x.q + ts * x.ld, x.ld, dpt + off, kBwdB,
                                  dkt + (ua - u0) * hs, hs, true);
      }
    }
    for (size_t u = u0; u < u1; ++u) {
      if (add_kv) {
        AddRow(dk + u * ldd, dkt + (u - u0) * hs, hs);
        AddRow(dv + u * ldd, dvt + (u - u0) * hs, hs);
      } else {
        CopyToF32(dk + u * ldd, dkt + (u - u0) * hs, hs);
        CopyToF32(dv + u * ldd, dvt + (u - u0) * hs, hs);
      }
    }
  }
  for (size_t t = 0; t < T; ++t) CopyToF32(dq + t * ldd, dqt + t * hs, hs);
}

// Each thread's scratch in the table entries: the gathered q, k, v (and dy in the backward pass),
// then the head's own blocks. The entries and their sizing entries take it from here.
size_t ForwardThreadFloats(size_t T, size_t hs) {
  return Lines(3 * T * hs) + ForwardScratch(T, hs);
}
size_t BackwardThreadFloats(size_t T, size_t hs) {
  return Lines(3 * T * hs) + Lines(T * hs) + BackwardScratch(T, hs);
}

// The table entries: each head's operands are gathered into the thread's scratch first, rows of
// [q | k | v] (3 hs). InT: the type of qkv and out (float, or bf16 widened exactly). A qkv row
// holds (NH + 2 NKV) hs values: NH query heads, NKV key heads, NKV value heads.
template <typename InT>
void Forward(InT* out, float* lse, const InT* qkv, int B, int T_, int NH_, int NKV_, int D,
             const AttentionOptions& opt) {
  const size_t T = size_t(T_), NH = size_t(NH_), NKV = size_t(NKV_), hs = size_t(D);
  const size_t R = (NH + 2 * NKV) * hs, G = NH / NKV;
  for_each_pair(B, NH_, ForwardThreadFloats(T, hs), [&](size_t b, size_t h, float* ws) {
    const InT* xb = qkv + b * T * R;
    const size_t g = h / G;
    GatherRows(ws, 3 * hs, xb + h * hs, R, T, hs);
    GatherRows(ws + hs, 3 * hs, xb + (NH + g) * hs, R, T, hs);
    GatherRows(ws + 2 * hs, 3 * hs, xb + (NH + NKV + g) * hs, R, T, hs);
    ForwardHead(HeadQKV{ws, ws + hs, ws + 2 * hs, 3 * hs}, T, hs, out + b * T * NH * hs + h * hs,
                NH * hs, lse + (b * NH + h) * T, ws + Lines(3 * T * hs),
                AttentionRow{opt, int(b), T_});
  });
}

// Per (batch, key/value head g): K and V gathered once, then each query head of the group in turn
// (q and dy gathered over the previous head's), its dK, dV added to the first head's in dqkv.
template <typename InT>
void Backward(float* dqkv, const float* dout, const InT* out, const InT* qkv, const float* lse,
              int B, int T_, int NH_, int NKV_, int D, const AttentionOptions& opt) {
  const size_t T = size_t(T_), NH = size_t(NH_), NKV = size_t(NKV_), hs = size_t(D);
  const size_t R = (NH + 2 * NKV) * hs, G = NH / NKV, OR = NH * hs;
  const size_t gathered = Lines(3 * T * hs) + Lines(T * hs);  // q, k, v and dy
  for_each_pair(B, NKV_, BackwardThreadFloats(T, hs), [&](size_t b, size_t g, float* ws) {
    const InT* xb = qkv + b * T * R;
    float* dxb = dqkv + b * T * R;
    float* dy = ws + Lines(3 * T * hs);
    GatherRows(ws + hs, 3 * hs, xb + (NH + g) * hs, R, T, hs);
    GatherRows(ws + 2 * hs, 3 * hs, xb + (NH + NKV + g) * hs, R, T, hs);
    for (size_t h = g * G; h < (g + 1) * G; ++h) {
      GatherRows(ws, 3 * hs, xb + h * hs, R, T, hs);
      GatherRows(dy, hs, dout + b * T * OR + h * hs, OR, T, hs);
      BackwardHead(HeadQKV{ws, ws + hs, ws + 2 * hs, 3 * hs}, T, hs, dy, hs,
                   out + b * T * OR + h * hs, OR, lse + (b * NH + h) * T, dxb + h * hs,
                   dxb + (NH + g) * hs, dxb + (NH + NKV + g) * hs, R, h > g * G, ws + gathered,
                   AttentionRow{opt, int(b), T_});
    }
  });
}

// The sizing entries: every thread of the team asks for its scratch once per call (fp32 and bf16
// operands alike: bf16 is widened into the same gathered copy).
ScratchUse ForwardScratchUse(int /*B*/, int T, int /*NH*/, int /*NKV*/, int D, int /*threads*/) {
  return ScratchUse().ask_each(ScratchSlot::kAttention, ForwardThreadFloats(size_t(T), size_t(D)));
}
ScratchUse BackwardScratchUse(int /*B*/, int T, int /*NH*/, int /*NKV*/, int D, int /*threads*/) {
  return ScratchUse().ask_each(ScratchSlot::kAttention, BackwardThreadFloats(size_t(T), size_t(D)));
}

}  // namespace

void FillFlashAttention(KernelTable& t) {
  t.flash_attention_forward = &Forward<float>;
  t.flash_attention_backward = &Backward<float>;
  t.flash_attention_forward_scratch = &ForwardScratchUse;
  t.flash_attention_backward_scratch = &BackwardScratchUse;
}

void FillFlashAttentionBf16(Bf16Kernels& t) {
  t.flash_attention_forward = &Forward<bf16>;
  t.flash_attention_backward = &Backward<bf16>;
  t.flash_attention_forward_scratch = &ForwardScratchUse;
  t.flash_attention_backward_scratch = &BackwardScratchUse;
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
