// Error bounds of the Llama family's kernels (RMSNorm, SwiGLU, rotary position embedding) computed
// in fp32, against the scalar references in double (simd/scalar/{rmsnorm,swiglu,rope}.h), derived
// as in error_bounds.h, and the rotary tests' cases and tables. Shared by the fp32 tables' tests
// (test_simd_llama.cpp) and the bf16 tables' (test_bf16_llama.cpp), which add one rounding to bf16.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "simd/scalar/swiglu.h"
#include "tests/simd/error_bounds.h"

namespace llmcpu::simd_test {

// The absolute error a rounding may add where its result falls below the smallest normal float
// (gradual underflow: at most half the spacing of subnormals, 2^-149); Exp's subnormal results
// are within one spacing.
inline constexpr double kTiny = 0x1p-149;

// RMSNorm forward, per row with ms*, s* the exact mean square and rstd of the fp32 inputs:
//   ms = fl(sum x^2)/C:  a sum of C non-negative products and the division, gamma(C + 1) ms*;
//   v = ms + eps:        one more rounding, relative to v*: rel_v = gamma(C + 1) ms*/v* + u;
//   s = 1/sqrt(v):       the square root halves rel_v and rounds, the division rounds:
//                        rho = rel_v / 2 + gamma(2) (relative, to first order);
//   y = (x s) w:         two more roundings: |dy| <= |x w| s* (rho + gamma(2) (1 + rho)).
inline std::vector<double> rmsnorm_forward_bounds(const std::vector<double>& x,
                                                  const std::vector<double>& w,
                                                  const std::vector<double>& rstd_r, size_t N,
                                                  size_t C, double eps,
                                                  std::vector<double>& rstd_b) {
  std::vector<double> y_b(N * C);
  for (size_t r = 0; r < N; ++r) {
    const double s = rstd_r[r], v = 1 / (s * s), ms = v - eps;
    const double rho = (gamma(double(C) + 1) * ms / v + kU) / 2 + gamma(2);
    rstd_b[r] = rho * s;
    for (size_t c = 0; c < C; ++c) {
      y_b[r * C + c] = std::fabs(x[r * C + c] * w[c]) * s * (rho + gamma(2) * (1 + rho));
    }
  }
  return y_b;
}

// SwiGLU, per element with x = gate, s* = sigmoid(x) and sm* = sigmoid(-x) exact. e = exp(-|x|)
// errs by eps_e = kExpUlps ulp (relative) and, below 2^-126, kTiny; r = 1/(1 + e) and e r see e's
// error scaled by at most 1 (d/de of 1/(1+e) and of e/(1+e) are at most 1/(1+e)^2), and round
// up to three times; e r may underflow once more:
//   |d s| <= (eps_e + gamma(3)) s* + 2 kTiny, the same for sm;
//   silu = x s:       |x| |d s| + u |x s*| + kTiny;
//   out = silu up:    |up| |d silu| + u |x s* up| + kTiny.
// Backward (to first order, products of two errors left out):
//   q = 1 + x sm:     |x| |d sm| + u |x sm*| + kTiny, then u |q*| for the addition;
//   ds = s q:         |q*| |d s| + s* |d q| + u s*|q*| + kTiny;
//   dgate = (dy up) ds: |dy up| |d ds| + |ds*| (u |dy up| + kTiny) + u |dy up ds*| + kTiny;
//   dup = dy silu:    |dy| |d silu| + u |dy x s*| + kTiny.
// q* is 0 near x = -1.28 (silu's minimum), so the bounds are absolute, not relative to the result.
struct SwiGluBounds {
  std::vector<double> out, dinp;
};

inline SwiGluBounds swiglu_bounds(const std::vector<double>& inp, const std::vector<double>& dout,
                                  size_t N, size_t H) {
  SwiGluBounds b{std::vector<double>(N * H), std::vector<double>(N * 2 * H)};
  const double rel_s = kExpUlps * kUlp + gamma(3);
  for (size_t r = 0; r < N; ++r) {
    for (size_t h = 0; h < H; ++h) {
      const double x = inp[r * 2 * H + h], up = std::fabs(inp[r * 2 * H + H + h]);
      const double dy = std::fabs(dout[r * H + h]), ax = std::fabs(x);
      double s, sm;
      scalar::sigmoid_pair(x, s, sm);
      const double d_s = rel_s * s + 2 * kTiny, d_sm = rel_s * sm + 2 * kTiny;
      const double d_silu = ax * d_s + kU * ax * s + kTiny;
      b.out[r * H + h] = up * d_silu + kU * ax * s * up + kTiny;
      const double q = 1 + x * sm, aq = std::fabs(q);
      const double d_q = ax * d_sm + kU * ax * sm + kTiny + kU * aq;
      const double d_ds = aq * d_s + s * d_q + kU * s * aq + kTiny;
      const double dyup = dy * up, ads = s * aq;
      b.dinp[r * 2 * H + h] = dyup * d_ds + ads * (kU * dyup + kTiny) + kU * dyup * ads + kTiny;
      b.dinp[r * 2 * H + H + h] = dy * d_silu + kU * dy * ax * s + kTiny;
    }
  }
  return b;
}

struct RopeCase {
  size_t B, T;
  int pos0, heads, D;
  size_t row_stride;
};

// Cases: every D of {2, 24, 64, 128} with 1, 2 and 3 heads, from position 0 and from position
// 5 or 1000, rows with a gap of 3 or more floats after their heads.
inline std::vector<RopeCase> rope_cases() {
  std::vector<RopeCase> r;
  for (int D : {2, 24, 64, 128}) {
    for (int heads = 1; heads <= 3; ++heads) {
      for (int pos0 : {0, D == 64 ? 1000 : 5}) {
        const size_t T = heads == 2 ? 1 : 7;
        r.push_back({2, T, pos0, heads, D, size_t(heads * D + 3 + D / 2)});
      }
    }
  }
  return r;
}

// cos and sin of p theta^(-2j/D) for positions p < P, in fp32 (the caller's tables).
inline void rope_tables(size_t P, int D, std::vector<float>& cos, std::vector<float>& sin) {
  const size_t half = size_t(D) / 2;
  cos.resize(P * half), sin.resize(P * half);
  for (size_t p = 0; p < P; ++p) {
    for (size_t j = 0; j < half; ++j) {
      const double angle = double(p) * std::pow(10000.0, -2.0 * double(j) / D);
      cos[p * half + j] = float(std::cos(angle)), sin[p * half + j] = float(std::sin(angle));
    }
  }
}

// Each rotated element is a c -+ b s from the fp32 table entries c and s: two products and one
// addition, |error| <= gamma(2) (|a c| + |b s|). Elements outside the heads (the gap after them)
// must stay as they are: bound 0.
inline std::vector<double> rope_bounds(const std::vector<double>& x, const std::vector<double>& cos,
                                       const std::vector<double>& sin, const RopeCase& rc) {
  std::vector<double> b(x.size(), 0.0);
  const size_t half = size_t(rc.D) / 2;
  for (size_t r = 0; r < rc.B * rc.T; ++r) {
    const size_t p = size_t(rc.pos0) + r % rc.T;
    for (size_t h = 0; h < size_t(rc.heads); ++h) {
      const size_t o = r * rc.row_stride + h * size_t(rc.D);
      for (size_t j = 0; j < half; ++j) {
        const double c = std::fabs(cos[p * half + j]), s = std::fabs(sin[p * half + j]);
        const double a = std::fabs(x[o + j]), bb = std::fabs(x[o + half + j]);
        b[o + j] = gamma(2) * (a * c + bb * s);
        b[o + half + j] = gamma(2) * (bb * c + a * s);
      }
    }
  }
  return b;
}

}  // namespace llmcpu::simd_test
