// Causal multi-head self-attention, forward and backward (scalar reference).
// qkv holds, per token, the query, key and value vectors side by side: [q (C) | k (C) | v (C)], and
// head h uses channels [h*hs, (h+1)*hs) of each, hs = C / NH. With scale = 1/sqrt(hs):
//   s[t,u]   = scale * q_t . k_u                      for u <= t (causal mask: u > t excluded)
//   a[t,u]   = exp(s[t,u] - max_u s) / sum_u exp(...)  (softmax over u <= t; stored, zero above diagonal)
//   y_t      = sum_{u<=t} a[t,u] v_u
// Backward, per row t (softmax identity ds_u = a_u (da_u - sum_w a_w da_w)):
//   da[t,u] = dy_t . v_u;   dv_u += a[t,u] dy_t;   ds[t,u] = a[t,u] (da[t,u] - sum_w a[t,w] da[t,w])
//   dq_t += scale * sum_u ds[t,u] k_u;   dk_u += scale * ds[t,u] q_t
// Threads split over (batch, head) pairs, which own disjoint slices of dqkv: no races, fixed order.
// Below them: the flash variant's contract (a per-row log-sum-exp instead of att), KV-cache decode.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "simd/attention_options.h"
#include "simd/scalar/common.h"

namespace llmcpu::scalar {

template <typename F>
void attention_forward(F* out,        // (B,T,C)
                       F* att,        // (B,NH,T,T) softmax weights
                       const F* qkv,  // (B,T,3C)
                       int B, int T, int C, int NH) {
  const int hs = C / NH;
  const F scale = F(1) / std::sqrt(F(hs));
  const size_t C3 = (size_t)C * 3;
#pragma omp parallel for collapse(3) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < T; ++t) {
        const F* q = qkv + ((size_t)b * T + t) * C3 + h * hs;
        F* a = att + (((size_t)b * NH + h) * T + t) * T;
        F maxval = -INFINITY;
        for (int u = 0; u <= t; ++u) {
          const F* k = qkv + ((size_t)b * T + u) * C3 + C + h * hs;
          a[u] = scale * dot(q, k, hs);
          maxval = std::max(maxval, a[u]);
        }
        F acc[kLanes] = {};
        for (int u = 0; u <= t; ++u) {
          a[u] = std::exp(a[u] - maxval);
          acc[u % kLanes] += a[u];
        }
        const F inv = F(1) / combine_lanes(acc);
        for (int u = 0; u <= t; ++u) a[u] *= inv;
        for (int u = t + 1; u < T; ++u) a[u] = 0;
        F* y = out + ((size_t)b * T + t) * C + h * hs;
        for (int i = 0; i < hs; ++i) y[i] = 0;
        for (int u = 0; u <= t; ++u) {
          const F* v = qkv + ((size_t)b * T + u) * C3 + 2 * C + h * hs;
          for (int i = 0; i < hs; ++i) y[i] += a[u] * v[i];
        }
      }
    }
  }
}

template <typename F>
void attention_backward(F* dqkv,        // (B,T,3C) overwritten
                        F* scratch,     // (B,NH,T) one row of da/ds per (batch, head)
                        const F* dout,  // (B,T,C)
                        const F* qkv,   // (B,T,3C)
                        const F* att,   // (B,NH,T,T)
                        int B, int T, int C, int NH) {
  const int hs = C / NH;
  const F scale = F(1) / std::sqrt(F(hs));
  const size_t C3 = (size_t)C * 3;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      F* ds = scratch + ((size_t)b * NH + h) * T;
      for (int t = 0; t < T; ++t) {
        F* d = dqkv + ((size_t)b * T + t) * C3 + h * hs;
        for (int i = 0; i < hs; ++i) d[i] = d[C + i] = d[2 * C + i] = 0;
      }
      for (int t = 0; t < T; ++t) {
        const F* a = att + (((size_t)b * NH + h) * T + t) * T;
        const F* dy = dout + ((size_t)b * T + t) * C + h * hs;
        const F* q = qkv + ((size_t)b * T + t) * C3 + h * hs;
        F* dq = dqkv + ((size_t)b * T + t) * C3 + h * hs;
        F acc[kLanes] = {};
        for (int u = 0; u <= t; ++u) {
          const F* v = qkv + ((size_t)b * T + u) * C3 + 2 * C + h * hs;
          F* dv = dqkv + ((size_t)b * T + u) * C3 + 2 * C + h * hs;
          ds[u] = dot(dy, v, hs);
          acc[u % kLanes] += a[u] * ds[u];
          for (int i = 0; i < hs; ++i) dv[i] += a[u] * dy[i];
        }
        const F a_da = combine_lanes(acc);
        for (int u = 0; u <= t; ++u) {
          const F g = scale * a[u] * (ds[u] - a_da);
          const F* k = qkv + ((size_t)b * T + u) * C3 + C + h * hs;
          F* dk = dqkv + ((size_t)b * T + u) * C3 + C + h * hs;
          for (int i = 0; i < hs; ++i) {
            dq[i] += g * k[i];
            dk[i] += g * q[i];
          }
        }
      }
    }
  }
}

}  // namespace llmcpu::scalar

namespace llmcpu::scalar {

// The general shape of the flash and decode kernels below (grouped-query attention): NH query heads
// and NKV key/value heads, all of size D; NKV divides NH, and query head h reads key/value head
// h / (NH / NKV) (NKV == NH: multi-head attention; NKV == 1: multi-query attention). A qkv row
// holds (NH + 2 NKV) D values: the NH query heads, then the NKV key heads, then the NKV value
// heads. The scale (1/sqrt(D) unless given), window and soft-cap: attention_options.h.
struct HeadLayout {
  int NH, NKV, D;
  size_t row() const { return size_t(NH + 2 * NKV) * D; }  // a qkv (and dqkv) row
  int kv_head(int h) const { return h / (NH / NKV); }      // the one query head h reads
  // Offsets in a row: query head h, key head g, value head g.
  size_t q(int h) const { return size_t(h) * D; }
  size_t k(int g) const { return size_t(NH + g) * D; }
  size_t v(int g) const { return size_t(NH + NKV + g) * D; }
};

// One new query position against a KV cache (generation): for each query head h, with t = pos and
// g = h / (NH / NKV) its key/value head, and s_u the (capped) score of attention_options.h,
//   y_h = sum_u softmax_u(s_u) v_u,g,   s_u from scale q_h . k_u,g,   over the keys t sees
// (rows max(0, t - window + 1) .. t with a window, else 0 .. t; one sequence: opt.starts unread).
// q and out are (NH*D); kcache and vcache are (maxT, NKV*D) with rows 0..pos filled; scores is
// (pos+1) scratch.
template <typename F>
void attention_decode(F* out, F* scores, const F* q, const F* kcache, const F* vcache, int pos,
                      int NH, int NKV, int D, const AttentionOptions& opt) {
  const F scale = attention_scale<F>(opt, D), cap = F(opt.softcap);
  const int first = window_first_key(opt, pos);
  const size_t kv_row = size_t(NKV) * D;
  for (int h = 0; h < NH; ++h) {
    const size_t g = size_t(h / (NH / NKV)) * D;  // its key/value head's offset in a cache row
    F maxval = -INFINITY;
    for (int u = first; u <= pos; ++u) {
      scores[u] = scale * dot(q + size_t(h) * D, kcache + u * kv_row + g, D);
      if (cap > 0) scores[u] = cap * std::tanh(scores[u] / cap);
      maxval = std::max(maxval, scores[u]);
    }
    F acc[kLanes] = {};
    for (int u = first; u <= pos; ++u) {
      scores[u] = std::exp(scores[u] - maxval);
      acc[u % kLanes] += scores[u];
    }
    const F inv = F(1) / combine_lanes(acc);
    F* y = out + size_t(h) * D;
    for (int i = 0; i < D; ++i) y[i] = 0;
    for (int u = first; u <= pos; ++u) {
      const F a = scores[u] * inv;
      const F* v = vcache + u * kv_row + g;
      for (int i = 0; i < D; ++i) y[i] += a * v[i];
    }
  }
}

}  // namespace llmcpu::scalar

namespace llmcpu::scalar {

// Flash attention's contract (kernels.h's flash_attention_*), written plainly: the same causal
// attention, but instead of the (B,NH,T,T) matrix it keeps per row the log-sum-exp of the scores,
// from which the backward pass recomputes the probabilities. Per query head h, with g its key/value
// head, x_u = scale q_t . k_u (q of head h, k and v of head g), s_u = x_u, or c tanh(x_u / c) with
// the soft-cap c (attention_options.h), over the keys u that t sees (u <= t, u > t - window with a
// window, u >= the start of t's example in a packed row), and m = max_u s_u:
//   lse_t = m + log sum_u exp(s_u - m)             (the max folded in: no overflow)
//   p_u   = exp(s_u - lse_t)                       (= softmax_u(s), the row of att)
//   y_t   = sum_u p_u v_u
// Backward, with D_t = dy_t . y_t (= sum_u p_u dp_u, since y_t = sum_u p_u v_u), per row t:
//   dp_u = dy_t . v_u;   ds_u = p_u (dp_u - D_t), times 1 - tanh^2(x_u / c) with a soft-cap
//   dq_t += scale sum_u ds_u k_u;   dk_u += scale ds_u q_t;   dv_u += p_u dy_t
// where dk and dv of head g sum over every query head of its group. Not blocked and not online:
// one pass per row for the max, one for the sum, one for the output. These are the references the
// blocked kernels (simd/hwy/flash_attention.cc) are tested against.
template <typename F>
void flash_attention_forward(F* out,        // (B,T,NH*D)
                             F* lse,        // (B,NH,T)
                             const F* qkv,  // (B,T,(NH+2*NKV)*D)
                             int B, int T, int NH, int NKV, int D, const AttentionOptions& opt) {
  const HeadLayout at{NH, NKV, D};
  const F scale = attention_scale<F>(opt, D), cap = F(opt.softcap);
  const size_t R = at.row(), OR = size_t(NH) * D;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const F* x = qkv + (size_t)b * T * R;  // row t of the batch at x + t*R
      const int g = at.kv_head(h);
      std::vector<F> s(T);  // the scores of one row
      for (int t = 0; t < T; ++t) {
        const F* q = x + t * R + at.q(h);
        const int first = attention_first_key(opt, b, T, t);
        F maxval = -INFINITY;
        for (int u = first; u <= t; ++u) {
          s[u] = scale * dot(q, x + u * R + at.k(g), D);
          if (cap > 0) s[u] = cap * std::tanh(s[u] / cap);
          maxval = std::max(maxval, s[u]);
        }
        F acc[kLanes] = {};
        for (int u = first; u <= t; ++u) acc[u % kLanes] += std::exp(s[u] - maxval);
        const F l = maxval + std::log(combine_lanes(acc));
        lse[((size_t)b * NH + h) * T + t] = l;
        F* y = out + ((size_t)b * T + t) * OR + at.q(h);
        for (int i = 0; i < D; ++i) y[i] = 0;
        for (int u = first; u <= t; ++u) {
          const F p = std::exp(s[u] - l);
          const F* v = x + u * R + at.v(g);
          for (int i = 0; i < D; ++i) y[i] += p * v[i];
        }
      }
    }
  }
}

// Threads split the (batch, key/value head) pairs: each owns its group's dq and its own dk, dv.
template <typename F>
void flash_attention_backward(F* dqkv,        // (B,T,(NH+2*NKV)*D) overwritten
                              const F* dout,  // (B,T,NH*D)
                              const F* out,   // (B,T,NH*D) the forward's output
                              const F* qkv,   // (B,T,(NH+2*NKV)*D)
                              const F* lse,   // (B,NH,T) the forward's log-sum-exp
                              int B, int T, int NH, int NKV, int D, const AttentionOptions& opt) {
  const HeadLayout at{NH, NKV, D};
  const F scale = attention_scale<F>(opt, D), cap = F(opt.softcap);
  const size_t R = at.row(), OR = size_t(NH) * D;
  const int G = NH / NKV;  // query heads per key/value head
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int g = 0; g < NKV; ++g) {
      const F* x = qkv + (size_t)b * T * R;
      F* dx = dqkv + (size_t)b * T * R;
      for (int t = 0; t < T; ++t) {
        for (int i = 0; i < D; ++i) dx[t * R + at.k(g) + i] = dx[t * R + at.v(g) + i] = 0;
      }
      for (int h = g * G; h < (g + 1) * G; ++h) {
        for (int t = 0; t < T; ++t) {
          for (int i = 0; i < D; ++i) dx[t * R + at.q(h) + i] = 0;
        }
        for (int t = 0; t < T; ++t) {
          const F* q = x + t * R + at.q(h);
          const F* dy = dout + ((size_t)b * T + t) * OR + at.q(h);
          const F Dt = dot(dy, out + ((size_t)b * T + t) * OR + at.q(h), D);
          const F l = lse[((size_t)b * NH + h) * T + t];
          F* dq = dx + t * R + at.q(h);
          for (int u = attention_first_key(opt, b, T, t); u <= t; ++u) {
            const F* k = x + u * R + at.k(g);
            const F* v = x + u * R + at.v(g);
            F* dk = dx + u * R + at.k(g);
            F* dv = dx + u * R + at.v(g);
            F s = scale * dot(q, k, D), th = 0;
            if (cap > 0) th = std::tanh(s / cap), s = cap * th;
            const F p = std::exp(s - l);
            F ds = p * (dot(dy, v, D) - Dt);
            if (cap > 0) ds *= F(1) - th * th;  // d(c tanh(x / c)) / dx
            for (int i = 0; i < D; ++i) {
              dq[i] += scale * ds * k[i];
              dk[i] += scale * ds * q[i];
              dv[i] += p * dy[i];
            }
          }
        }
      }
    }
  }
}

}  // namespace llmcpu::scalar
