// Causal multi-head self-attention, vectorized (the math of simd/scalar/attention.h). Per (batch,
// head), with hs = C/NH, scale = 1/sqrt(hs), Q, K, V the head's (T, hs) slices of qkv:
//   S = scale Q K^T (u <= t),  A = softmax_rows(S) (zero above the diagonal),  Y = A V
// Backward, with dY the head's slice of dout:
//   dA = dY V^T;  dS[t,u] = scale A[t,u] (dA[t,u] - sum_w A[t,w] dA[t,w]);
//   dV = A^T dY;  dQ = dS K;  dK = dS^T Q
// Every product is a column-major GEMM on the micro-kernel of gemm-inl.h over the tensors in place
// (one K^T or V^T pack per head), restricted to the causal triangle in steps of one tile of
// columns. Threads split the (batch, head) pairs, which own disjoint slices of out and dqkv: no
// races, a fixed order of every sum. exp comes from hwy/contrib/math. The backward pass keeps a T x
// T matrix per thread in its own scratch (the table's (B,NH,T) scratch argument is not needed).
// Also here: the KV-cache decode, grouped-query (NKV key/value heads, each read by NH/NKV queries),
// with the scale, window and soft-cap of attention_options.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include <cmath>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "simd/hwy/common-inl.h"
#include "simd/hwy/gemm-inl.h"
#include "simd/hwy/softcap-inl.h"
#include "simd/kernels.h"
#include "simd/workspace.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {
namespace {

// P[u + i*T] = X[u*ld + i] for u < T, i < hs: the head's keys (or values) as hs columns of length
// T.
void PackTransposed(float* HWY_RESTRICT P, const float* HWY_RESTRICT X, size_t ld, size_t T,
                    size_t hs) {
  for (size_t u = 0; u < T; ++u) {
    const float* HWY_RESTRICT x = X + u * ld;
    for (size_t i = 0; i < hs; ++i) P[u + i * T] = x[i];
  }
}

// row[0, n) <- softmax(scale * row[0, n)); row[n, zero_to) <- 0.
void SoftmaxRow(float* HWY_RESTRICT row, size_t n, size_t zero_to, float scale) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF vs = hn::Set(d, scale);
  float m = -INFINITY;
  {
    VF vm = hn::Set(d, -INFINITY);
    size_t u = 0;
    for (; u + L <= n; u += L) {
      const VF s = hn::Mul(hn::LoadU(d, row + u), vs);
      hn::StoreU(s, d, row + u);
      vm = hn::Max(vm, s);
    }
    if (u < n) {
      const auto mask = hn::FirstN(d, n - u);
      const VF s = hn::Mul(LoadTail(d, row + u, n - u), vs);
      StoreTail(s, d, row + u, n - u);
      vm = hn::Max(vm, hn::IfThenElse(mask, s, hn::Set(d, -INFINITY)));
    }
    m = hn::GetLane(hn::MaxOfLanes(d, vm));
  }
  const VF vm = hn::Set(d, m);
  VF sum = hn::Zero(d);
  size_t u = 0;
  for (; u + L <= n; u += L) {
    const VF e = hn::Exp(d, hn::Sub(hn::LoadU(d, row + u), vm));
    hn::StoreU(e, d, row + u);
    sum = hn::Add(sum, e);
  }
  if (u < n) {
    const auto mask = hn::FirstN(d, n - u);
    const VF e = hn::IfThenElseZero(mask, hn::Exp(d, hn::Sub(LoadTail(d, row + u, n - u), vm)));
    StoreTail(e, d, row + u, n - u);
    sum = hn::Add(sum, e);
  }
  const VF inv = hn::Set(d, 1.0f / ReduceSum(d, sum));
  for (u = 0; u + L <= n; u += L) hn::StoreU(hn::Mul(hn::LoadU(d, row + u), inv), d, row + u);
  if (u < n) StoreTail(hn::Mul(LoadTail(d, row + u, n - u), inv), d, row + u, n - u);
  for (u = n; u < zero_to; ++u) row[u] = 0.0f;
}

// row[u] <- scale * a[u] * (row[u] - sum_{w<n} a[w] row[w]) for u < n; row[n, zero_to) <- 0.
void SoftmaxBackwardRow(float* HWY_RESTRICT row, const float* HWY_RESTRICT a, size_t n,
                        size_t zero_to, float scale) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF ad = hn::Set(d, Dot(a, row, n)), vs = hn::Set(d, scale);
  size_t u = 0;
  for (; u + L <= n; u += L) {
    const VF g = hn::Mul(hn::Mul(vs, hn::LoadU(d, a + u)), hn::Sub(hn::LoadU(d, row + u), ad));
    hn::StoreU(g, d, row + u);
  }
  if (u < n) {
    const size_t k = n - u;
    StoreTail(hn::Mul(hn::Mul(vs, LoadTail(d, a + u, k)), hn::Sub(LoadTail(d, row + u, k), ad)), d,
              row + u, k);
  }
  for (u = n; u < zero_to; ++u) row[u] = 0.0f;
}

void AttentionForward(float* out, float* att, const float* qkv, int B, int T_, int C_, int NH) {
  const size_t T = size_t(T_), C = size_t(C_), hs = C / size_t(NH), C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(float(hs));
  const size_t tiles = (T + kGemmNR - 1) / kGemmNR;  // column tiles of balanced widths
  // The per-thread scratch may not be had: the error is kept and thrown after the region.
  TeamErrors errors;
#pragma omp parallel
  {
    float* kt = nullptr;
    errors.run([&] { kt = thread_scratch(ScratchSlot::kAttention, hs * T); });
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * NH; ++bh) {
      if (!kt) continue;
      const size_t b = size_t(bh / NH), h = size_t(bh % NH);
      const float* q = qkv + b * T * C3 + h * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* a = att + size_t(bh) * T * T;
      float* y = out + b * T * C + h * hs;
      PackTransposed(kt, k, C3, T, hs);
      for (size_t jt = 0; jt < tiles; ++jt) {
        const size_t t0 = T * jt / tiles, nr = T * (jt + 1) / tiles - t0;
        // S^T(u, t) = sum_i K^T(u, i) Q^T(i, t), for the tile's rows t and every u <= t.
        GemmBlock<BLayout::kCols>(t0 + nr, nr, hs, kt, T, q + t0 * C3, C3, a + t0 * T, T, false);
        for (size_t t = t0; t < t0 + nr; ++t) SoftmaxRow(a + t * T, t + 1, T, scale);
        // Y^T(i, t) = sum_{u <= t} V^T(i, u) A^T(u, t).
        GemmBlock<BLayout::kCols>(hs, nr, t0 + nr, v, C3, a + t0 * T, T, y + t0 * C, C, false);
      }
    }
  }
  errors.rethrow();
}

void AttentionBackward(float* dqkv, float* /*scratch*/, const float* dout, const float* qkv,
                       const float* att, int B, int T_, int C_, int NH) {
  const size_t T = size_t(T_), C = size_t(C_), hs = C / size_t(NH), C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(float(hs));
  const size_t tiles = (T + kGemmNR - 1) / kGemmNR;  // column tiles of balanced widths
  // The per-thread scratch may not be had: the error is kept and thrown after the region.
  TeamErrors errors;
#pragma omp parallel
  {
    float *ds = nullptr, *vt = nullptr;  // dA, then dS, (T, T); V^T (hs, T)
    errors.run([&] {
      ds = thread_scratch(ScratchSlot::kAttention, T * T + hs * T);
      vt = ds + T * T;
    });
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * NH; ++bh) {
      if (!ds) continue;
      const size_t b = size_t(bh / NH), h = size_t(bh % NH);
      const float* q = qkv + b * T * C3 + h * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      const float* a = att + size_t(bh) * T * T;
      const float* dy = dout + b * T * C + h * hs;
      float* dq = dqkv + b * T * C3 + h * hs;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      PackTransposed(vt, v, C3, T, hs);
      for (size_t jt = 0; jt < tiles; ++jt) {
        const size_t t0 = T * jt / tiles, nr = T * (jt + 1) / tiles - t0;
        // dA^T(u, t) = sum_i V^T(u, i) dY^T(i, t), u <= t; then dS in place.
        GemmBlock<BLayout::kCols>(t0 + nr, nr, hs, vt, T, dy + t0 * C, C, ds + t0 * T, T, false);
        for (size_t t = t0; t < t0 + nr; ++t)
          SoftmaxBackwardRow(ds + t * T, a + t * T, t + 1, T, scale);
        // dQ^T(i, t) = sum_{u <= t} K^T(i, u) dS^T(u, t).
        GemmBlock<BLayout::kCols>(hs, nr, t0 + nr, k, C3, ds + t0 * T, T, dq + t0 * C3, C3, false);
      }
      for (size_t jt = 0; jt < tiles; ++jt) {
        const size_t u0 = T * jt / tiles, nr = T * (jt + 1) / tiles - u0;
        // dV^T(i, u) = sum_{t >= u} dY^T(i, t) A(t, u);  dK^T(i, u) = sum_{t >= u} Q^T(i, t) dS(t,
        // u).
        GemmBlock<BLayout::kRows>(hs, nr, T - u0, dy + u0 * C, C, a + u0 * T + u0, T, dv + u0 * C3,
                                  C3, false);
        GemmBlock<BLayout::kRows>(hs, nr, T - u0, q + u0 * C3, C3, ds + u0 * T + u0, T,
                                  dk + u0 * C3, C3, false);
      }
    }
  }
  errors.rethrow();
}

// One query position against a KV cache: per query head h, softmax over u <= pos of scale q_h.k_u
// (k of its key/value head g = h / (NH/NKV), cache rows of NKV*D), then the weighted sum of v_u.
// Single-threaded, like the reference (it runs once per generated token).
void AttentionDecode(float* out, float* scores, const float* q, const float* kcache,
                     const float* vcache, int pos, int NH, int NKV, int D,
                     const AttentionOptions& opt) {
  const size_t first = size_t(window_first_key(opt, pos));  // the window's first cache row
  const size_t hs = size_t(D), ld = size_t(NKV) * hs, n = size_t(pos) + 1 - first;
  const size_t G = size_t(NH / NKV);
  const float scale = attention_scale<float>(opt, D), cap = opt.softcap;
  const DF d;
  const size_t L = hn::Lanes(d);
  for (size_t h = 0; h < size_t(NH); ++h) {
    const float* k = kcache + first * ld + h / G * hs;  // row first + u at k + u*ld
    const float* v = vcache + first * ld + h / G * hs;
    for (size_t u = 0; u < n; ++u) scores[u] = Dot(q + h * hs, k + u * ld, hs);
    if (cap > 0) {
      SoftCapRow(scores, n, scale / cap, cap);
      SoftmaxRow(scores, n, n, 1.0f);
    } else {
      SoftmaxRow(scores, n, n, scale);
    }
    float* HWY_RESTRICT y = out + h * hs;
    size_t i = 0;
    for (; i + L <= hs; i += L) {
      VF acc = hn::Zero(d);
      for (size_t u = 0; u < n; ++u) {
        acc = hn::MulAdd(hn::Set(d, scores[u]), hn::LoadU(d, v + u * ld + i), acc);
      }
      hn::StoreU(acc, d, y + i);
    }
    if (i < hs) {
      VF acc = hn::Zero(d);
      for (size_t u = 0; u < n; ++u) {
        acc = hn::MulAdd(hn::Set(d, scores[u]), LoadTail(d, v + u * ld + i, hs - i), acc);
      }
      StoreTail(acc, d, y + i, hs - i);
    }
  }
}

}  // namespace

void FillAttention(KernelTable& t) {
  t.attention_forward = &AttentionForward;
  t.attention_backward = &AttentionBackward;
  t.attention_decode = &AttentionDecode;
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();
