// Error bounds of causal attention computed in fp32, against the scalar reference in double
// (simd/scalar/attention.h), derived as in error_bounds.h. Shared by the vectorized kernels' tests
// and the offload plugin's, which differ only in how exact their exp and normalisation are.
//
// Forward, per (b, h, t) with hs the head size, scale = 1/sqrt(hs):
//   s_u = scale q.k_u:  E_u = scale (gamma(hs) sum|q k_u| + gamma(2) |q.k_u|)  (dot, fp32 scale)
//   a_u = exp(s_u - m) / S: the shifted argument errs by E_u + max E + u|s_u - m|, exp adds its
//     ulps, S adds gamma(t + 1) relative, the normalisation `extra_rel` and the division and scaling
//     gamma(2): rel(a_u) <= those summed;
//   y = sum_u a_u v_u:  |dy| <= sum_u rel(a_u) a_u |v_u| + gamma(t + 1) sum_u a_u |v_u|.
// Backward, from the same att on both sides, da_u = dy.v_u (F_u = gamma(hs) sum|dy v_u|),
//   D = sum_w a_w da_w (dD = sum a_w F_w + gamma(t + 1) sum a_w |da_w|),
//   ds_u = scale a_u (da_u - D) (|d ds_u| <= scale a_u (F_u + dD + gamma(4) (|da_u| + |D|))),
//   dq = sum_u ds_u k_u, dk_u = sum_t ds_tu q_t, dv_u = sum_t a_tu dy_t: the propagated |d ds|
//   times |k| or |q| plus gamma(terms) on the magnitudes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <vector>

#include "tests/simd/error_bounds.h"

namespace llmcpu::simd_test {

struct AttentionForwardBounds {
  std::vector<double> out;  // (B, T, C)
  std::vector<double> att;  // (B, NH, T, T); zero above the diagonal
};

// qkv: the inputs (B, T, 3C); att: the reference's softmax weights (B, NH, T, T). exp_ulps(x): the
// error of exp at argument x, in ulps; extra_rel: the normalisation's relative error beyond the
// correctly rounded division (e.g. an approximate reciprocal).
inline AttentionForwardBounds attention_forward_bounds(
    const std::vector<double>& qkv, const std::vector<double>& att, int B_, int T_, int C_,
    int NH_, const std::function<double(double)>& exp_ulps, double extra_rel) {
  const size_t B = size_t(B_), T = size_t(T_), C = size_t(C_), NH = size_t(NH_);
  const size_t hs = C / NH, C3 = 3 * C;
  const double scale = 1 / std::sqrt(double(hs));
  AttentionForwardBounds r{std::vector<double>(B * T * C, 0.0),
                           std::vector<double>(B * NH * T * T, 0.0)};
  for (size_t b = 0; b < B; ++b) {
    for (size_t h = 0; h < NH; ++h) {
      for (size_t t = 0; t < T; ++t) {
        const double* q = qkv.data() + (b * T + t) * C3 + h * hs;
        const double* a = att.data() + ((b * NH + h) * T + t) * T;
        std::vector<double> E(t + 1), sc(t + 1), rel(t + 1);
        for (size_t u = 0; u <= t; ++u) {
          const double* kk = qkv.data() + (b * T + u) * C3 + C + h * hs;
          double dot = 0, mag = 0;
          for (size_t i = 0; i < hs; ++i) dot += q[i] * kk[i], mag += std::fabs(q[i] * kk[i]);
          sc[u] = scale * dot;
          E[u] = scale * (gamma(double(hs)) * mag + gamma(2) * std::fabs(dot));
        }
        const double m = *std::max_element(sc.begin(), sc.end());
        const double Emax = *std::max_element(E.begin(), E.end());
        double rel_max = 0;
        for (size_t u = 0; u <= t; ++u) {
          rel[u] = E[u] + Emax + kU * std::fabs(sc[u] - m) + exp_ulps(sc[u] - m + E[u] + Emax) * kUlp;
          rel_max = std::max(rel_max, rel[u]);
        }
        for (size_t u = 0; u <= t; ++u) {
          rel[u] += rel_max + gamma(double(t) + 1) + extra_rel + gamma(2);
          r.att[((b * NH + h) * T + t) * T + u] = rel[u] * a[u];
        }
        for (size_t i = 0; i < hs; ++i) {
          double bound = 0, mag = 0;
          for (size_t u = 0; u <= t; ++u) {
            const double v = std::fabs(qkv[(b * T + u) * C3 + 2 * C + h * hs + i]);
            bound += rel[u] * a[u] * v, mag += a[u] * v;
          }
          r.out[(b * T + t) * C + h * hs + i] = bound + gamma(double(t) + 1) * mag;
        }
      }
    }
  }
  return r;
}

// The bound of dqkv (B, T, 3C) for dout (B, T, C) and att (B, NH, T, T) given to both sides.
inline std::vector<double> attention_backward_bounds(const std::vector<double>& qkv,
                                                     const std::vector<double>& dout,
                                                     const std::vector<double>& att, int B_, int T_,
                                                     int C_, int NH_) {
  const size_t B = size_t(B_), T = size_t(T_), C = size_t(C_), NH = size_t(NH_);
  const size_t hs = C / NH, C3 = 3 * C;
  const double scale = 1 / std::sqrt(double(hs));
  std::vector<double> bound(B * T * C3, 0.0);
  for (size_t b = 0; b < B; ++b) {
    for (size_t h = 0; h < NH; ++h) {
      auto Q = [&](size_t t, size_t i) { return qkv[(b * T + t) * C3 + h * hs + i]; };
      auto K = [&](size_t t, size_t i) { return qkv[(b * T + t) * C3 + C + h * hs + i]; };
      auto V = [&](size_t t, size_t i) { return qkv[(b * T + t) * C3 + 2 * C + h * hs + i]; };
      auto DY = [&](size_t t, size_t i) { return dout[(b * T + t) * C + h * hs + i]; };
      auto A = [&](size_t t, size_t u) { return att[((b * NH + h) * T + t) * T + u]; };
      std::vector<double> ds(T * T, 0.0), dds(T * T, 0.0);  // exact dS and its error bound
      for (size_t t = 0; t < T; ++t) {
        std::vector<double> da(t + 1), F(t + 1);
        double D = 0, dD = 0, aabs = 0;
        for (size_t u = 0; u <= t; ++u) {
          double dot = 0, mag = 0;
          for (size_t i = 0; i < hs; ++i)
            dot += DY(t, i) * V(u, i), mag += std::fabs(DY(t, i) * V(u, i));
          da[u] = dot, F[u] = gamma(double(hs)) * mag;
          D += A(t, u) * dot, dD += A(t, u) * F[u], aabs += A(t, u) * std::fabs(dot);
        }
        dD += gamma(double(t) + 1) * aabs;
        for (size_t u = 0; u <= t; ++u) {
          ds[t * T + u] = scale * A(t, u) * (da[u] - D);
          dds[t * T + u] =
              scale * A(t, u) * (F[u] + dD + gamma(4) * (std::fabs(da[u]) + std::fabs(D)));
        }
      }
      for (size_t t = 0; t < T; ++t) {
        for (size_t i = 0; i < hs; ++i) {
          double bq = 0, mq = 0, bk = 0, mk = 0, mv = 0;
          for (size_t u = 0; u <= t; ++u) {  // dq_t
            bq += dds[t * T + u] * std::fabs(K(u, i)), mq += std::fabs(ds[t * T + u] * K(u, i));
          }
          for (size_t s = t; s < T; ++s) {  // dk_t and dv_t sum over the later rows s >= t
            bk += dds[s * T + t] * std::fabs(Q(s, i)), mk += std::fabs(ds[s * T + t] * Q(s, i));
            mv += std::fabs(A(s, t) * DY(s, i));
          }
          double* row = bound.data() + (b * T + t) * C3 + h * hs + i;
          row[0] = bq + gamma(double(t) + 1) * mq;
          row[C] = bk + gamma(double(T)) * mk;
          row[2 * C] = gamma(double(T)) * mv;
        }
      }
    }
  }
  return bound;
}

}  // namespace llmcpu::simd_test
