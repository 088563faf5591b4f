// What an attention call may change in the causal softmax attention of the flash kernels and the
// KV-cache decode (kernels.h, bf16.h), with Hugging Face transformers' semantics. Per query row t
// of a head, against its keys u:
//   x_u = scale q_t . k_u              (scale: given, or 1/sqrt(D))
//   s_u = softcap tanh(x_u / softcap)  (Gemma 2's attn_logit_softcapping; without one s_u = x_u)
//   keys seen: u <= t, and t - window < u with a window (`window` keys, the query's own included:
//     transformers' sliding-window mask kv_idx > q_idx - sliding_window)
//   softmax over the keys seen; lse_t = log sum_u exp(s_u), of the capped scores.
// Backward, with ds the gradient of the capped score (p (dp - D_t) in the flash contract):
//   dx_u = ds (1 - tanh^2(x_u / softcap));  dq_t += scale sum_u dx_u k_u;  dk_u += scale dx_u q_t.
// A window makes a call's cost O(T window), not O(T^2): the kernels skip the key blocks outside it.
// AttentionOptions{} is the plain attention: bit for bit the kernels' results without options.
// Not here: which layer uses which options (the model's description), nor checks of the values
// (the caller's): scale >= 0, window >= 0, softcap >= 0.
#pragma once

#include <algorithm>
#include <cmath>

namespace llmcpu {

struct AttentionOptions {
  float scale = 0;    // 0: 1/sqrt(D) (Gemma 2/3: query_pre_attn_scalar^-0.5)
  int window = 0;     // 0: none (every key u <= t); else the keys t - window < u <= t
  float softcap = 0;  // 0: none; else scores become softcap tanh(score / softcap)
};

// The scale a call uses in precision F: the given one, or 1/sqrt(D) computed in F (the kernels'
// expression without options).
template <typename F>
inline F attention_scale(const AttentionOptions& opt, int D) {
  return opt.scale > 0 ? F(opt.scale) : F(1) / std::sqrt(F(D));
}

// The first key query row t sees (its last is t).
inline int attention_first_key(const AttentionOptions& opt, int t) {
  return opt.window > 0 ? std::max(0, t - opt.window + 1) : 0;
}

}  // namespace llmcpu
