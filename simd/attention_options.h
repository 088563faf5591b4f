// What an attention call may change in the causal softmax attention of the flash kernels and the
// KV-cache decode (kernels.h, bf16.h), with Hugging Face transformers' semantics. Per query row t
// of a head, against its keys u:
//   x_u = scale q_t . k_u              (scale: given, or 1/sqrt(D))
//   s_u = softcap tanh(x_u / softcap)  (Gemma 2's attn_logit_softcapping; without one s_u = x_u)
//   keys seen: u <= t, and t - window < u with a window (`window` keys, the query's own included:
//     transformers' sliding-window mask kv_idx > q_idx - sliding_window), and in a packed row
//     (starts) u >= the start of t's example: attention never crosses from one example to another
//     (block-diagonal causal; flash-attention's varlen calls, transformers' position_ids packing)
//   softmax over the keys seen; lse_t = log sum_u exp(s_u), of the capped scores.
// Backward, with ds the gradient of the capped score (p (dp - D_t) in the flash contract):
//   dx_u = ds (1 - tanh^2(x_u / softcap));  dq_t += scale sum_u dx_u k_u;  dk_u += scale dx_u q_t.
// A window makes a call's cost O(T window), not O(T^2): the kernels skip the key blocks outside it;
// a packed row costs what its examples cost one by one (and the partly covered blocks on their
// diagonals).
// AttentionOptions{} is the plain attention: bit for bit the kernels' results without options.
// Not here: which layer uses which options (the model's description), nor checks of the values
// (the caller's): scale >= 0, window >= 0, softcap >= 0, starts as described below. The KV-cache
// decode (one sequence) takes no starts.
#pragma once

#include <algorithm>
#include <cmath>

namespace llmcpu {

struct AttentionOptions {
  float scale = 0;    // 0: 1/sqrt(D) (Gemma 2/3: query_pre_attn_scalar^-0.5)
  int window = 0;     // 0: none (every key u <= t); else the keys t - window < u <= t
  float softcap = 0;  // 0: none; else scores become softcap tanh(score / softcap)
  // Null: each batch row is one sequence. Else (B, T), rows packed with several examples:
  // starts[b*T + t] is where, in row b, the example holding token t begins: starts[b*T + t] <= t,
  // and it is starts[b*T + t - 1] (the same example) or t (a new one), starts[b*T] = 0.
  const int* starts = nullptr;
};

// The scale a call uses in precision F: the given one, or 1/sqrt(D) computed in F (the kernels'
// expression without options).
template <typename F>
inline F attention_scale(const AttentionOptions& opt, int D) {
  return opt.scale > 0 ? F(opt.scale) : F(1) / std::sqrt(F(D));
}

// The first key query row t sees by the window alone (the decode's rule).
inline int window_first_key(const AttentionOptions& opt, int t) {
  return opt.window > 0 ? std::max(0, t - opt.window + 1) : 0;
}

// The first key query row t of batch row b (of T) sees, its last being t: the window's first, or
// the start of t's example in a packed row, whichever is later. Non-decreasing in t, so the keys
// the queries [t0, t1) see are [first(t0), t1): a kernel's blocks skip the keys before.
inline int attention_first_key(const AttentionOptions& opt, int b, int T, int t) {
  const int first = window_first_key(opt, t);
  return opt.starts ? std::max(first, opt.starts[size_t(b) * size_t(T) + size_t(t)]) : first;
}

// One past the last query row of batch row b that sees a key before u1 (u1 <= T): the queries
// [u, attention_query_end(u + 1)) see key u, and a key block [u0, u1) has queries from u0 to
// this. With starts it walks the example holding key u1 - 1 to its end (at most the queries the
// caller then visits anyway).
inline int attention_query_end(const AttentionOptions& opt, int b, int T, int u1) {
  int end = opt.window > 0 ? std::min(T, u1 + opt.window - 1) : T;
  if (!opt.starts) return end;
  const int* row = opt.starts + size_t(b) * size_t(T);
  for (int t = u1; t < end; ++t) {
    if (row[t] >= u1) return t;  // a new example from t on: none of its queries sees u1 - 1
  }
  return end;
}

// The two of one batch row, in the kernels' indices.
struct AttentionRow {
  const AttentionOptions& opt;
  int b, T;
  size_t first_key(size_t t) const { return size_t(attention_first_key(opt, b, T, int(t))); }
  size_t query_end(size_t u1) const { return size_t(attention_query_end(opt, b, T, int(u1))); }
};

}  // namespace llmcpu
