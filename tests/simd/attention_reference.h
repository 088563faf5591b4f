// Attention with the options of simd/attention_options.h written out plainly in double, for the
// tests of those options: O(T^2) explicit loops over every (query t, key u) pair, the mask applied
// by its definition (t sees u when u <= t and, with a window W, u > t - W, and in a packed row u is
// not before the start of t's example: u >= starts[b*T + t]), independent of the
// kernels and of simd/scalar/attention.h. The backward pass is the analytic gradient of the forward
// (test_attention_options.cpp checks it against central differences).
//   x_u = scale q_t . k_u;   s_u = c tanh(x_u / c) with a soft-cap c, else x_u
//   lse_t = log sum_{u seen} exp(s_u);   p_u = exp(s_u - lse_t);   y_t = sum_{u seen} p_u v_u
//   ds_u = p_u (dy_t . v_u - dy_t . y_t), times 1 - tanh^2(x_u / c) with a soft-cap
//   dq_t += scale sum_u ds_u k_u;   dk_u += scale ds_u q_t;   dv_u += p_u dy_t
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "simd/attention_options.h"
#include "tests/simd/flash_attention_bounds.h"

namespace llmcpu::simd_test {

// Whether query t of batch row b (of T) sees key u.
inline bool sees(const AttentionOptions& opt, size_t b, size_t T, size_t t, size_t u) {
  const bool same_example = !opt.starts || int(u) >= opt.starts[b * T + t];
  return u <= t && (opt.window <= 0 || u + size_t(opt.window) > t) && same_example;
}

// The score of query q against key k (D values each), and tanh(x / c) in *th with a soft-cap.
inline double plain_score(const double* q, const double* k, size_t D, const AttentionOptions& opt,
                          double* th) {
  const double scale = opt.scale > 0 ? double(opt.scale) : 1 / std::sqrt(double(D));
  double x = 0;
  for (size_t i = 0; i < D; ++i) x += q[i] * k[i];
  x *= scale;
  *th = 0;
  if (opt.softcap <= 0) return x;
  *th = std::tanh(x / double(opt.softcap));
  return double(opt.softcap) * *th;
}

struct PlainForward {
  std::vector<double> out, lse;  // (B, T, NH D), (B, NH, T)
};

// qkv (B, T, (NH + 2 NKV) D) as FlashShape lays it out.
inline PlainForward plain_attention_forward(const std::vector<double>& qkv, const FlashShape& sh,
                                            const AttentionOptions& opt) {
  const size_t B = size_t(sh.B), T = size_t(sh.T), NH = size_t(sh.NH), D = size_t(sh.D);
  const size_t R = sh.row(), OR = sh.out_row();
  PlainForward r{std::vector<double>(B * T * OR, 0.0), std::vector<double>(B * NH * T)};
  std::vector<double> s(T);
  for (size_t b = 0; b < B; ++b) {
    const double* x = qkv.data() + b * T * R;
    for (size_t h = 0; h < NH; ++h) {
      for (size_t t = 0; t < T; ++t) {
        double m = -INFINITY, th;
        for (size_t u = 0; u < T; ++u) {
          s[u] = sees(opt, b, T, t, u)
                     ? plain_score(x + t * R + sh.q(h), x + u * R + sh.k(h), D, opt, &th)
                     : -INFINITY;
          m = std::max(m, s[u]);
        }
        double sum = 0;
        for (size_t u = 0; u < T; ++u) sum += std::exp(s[u] - m);  // exp(-inf) = 0: masked
        const double lse = m + std::log(sum);
        r.lse[(b * NH + h) * T + t] = lse;
        double* y = r.out.data() + (b * T + t) * OR + sh.q(h);
        for (size_t u = 0; u < T; ++u) {
          const double p = std::exp(s[u] - lse);
          for (size_t i = 0; i < D; ++i) y[i] += p * x[u * R + sh.v(h) + i];
        }
      }
    }
  }
  return r;
}

// dqkv (B, T, (NH + 2 NKV) D) from dout, and the forward's out and lse (B, NH, T) as the kernels'
// backward pass takes them.
inline std::vector<double> plain_attention_backward(
    const std::vector<double>& qkv, const std::vector<double>& dout, const std::vector<double>& out,
    const std::vector<double>& lse, const FlashShape& sh, const AttentionOptions& opt) {
  const size_t B = size_t(sh.B), T = size_t(sh.T), NH = size_t(sh.NH), D = size_t(sh.D);
  const size_t R = sh.row(), OR = sh.out_row();
  const double scale = opt.scale > 0 ? double(opt.scale) : 1 / std::sqrt(double(D));
  std::vector<double> dqkv(qkv.size(), 0.0);
  for (size_t b = 0; b < B; ++b) {
    const double* x = qkv.data() + b * T * R;
    double* dx = dqkv.data() + b * T * R;
    for (size_t h = 0; h < NH; ++h) {
      for (size_t t = 0; t < T; ++t) {
        const double* dy = dout.data() + (b * T + t) * OR + sh.q(h);
        const double* y = out.data() + (b * T + t) * OR + sh.q(h);
        double Dt = 0;
        for (size_t i = 0; i < D; ++i) Dt += dy[i] * y[i];
        for (size_t u = 0; u < T; ++u) {
          if (!sees(opt, b, T, t, u)) continue;
          double th;
          const double s = plain_score(x + t * R + sh.q(h), x + u * R + sh.k(h), D, opt, &th);
          const double p = std::exp(s - lse[(b * NH + h) * T + t]);
          double dp = 0;
          for (size_t i = 0; i < D; ++i) dp += dy[i] * x[u * R + sh.v(h) + i];
          const double ds = p * (dp - Dt) * (opt.softcap > 0 ? 1 - th * th : 1.0);
          for (size_t i = 0; i < D; ++i) {
            dx[t * R + sh.q(h) + i] += scale * ds * x[u * R + sh.k(h) + i];
            dx[u * R + sh.k(h) + i] += scale * ds * x[t * R + sh.q(h) + i];
            dx[u * R + sh.v(h) + i] += p * dy[i];
          }
        }
      }
    }
  }
  return dqkv;
}

}  // namespace llmcpu::simd_test
