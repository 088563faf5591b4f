// Error bounds of flash attention (kernels.h's flash_attention_*) computed in fp32, against the
// scalar reference in double (scalar::flash_attention_*<double>), derived as in error_bounds.h and
// attention_bounds.h. One bound covers both evaluations the tables use: the blocked online softmax
// (simd/hwy/flash_attention.cc) and the reference's three passes run in fp32 (the "scalar" table).
//
// Forward, per (b, h, t) (k and v: of the key/value head query head h reads), with s_u = scale
// q.k_u exact, m = max_u s_u, a_u = exp(s_u - lse) exact:
//   x_u = fl(scale_f fl(q.k_u)):  |x_u - s_u| <= E_u = scale gamma(hs) sum_i|q_i k_ui| +
//   gamma(3)|s_u|
//     (the dot product; scale_f = fl(1/fl(sqrt hs)) is 2 roundings off, the product one more).
//   The online softmax keeps p_u = exp(fl(x_u - m_j)) with m_j the running max when u's block came,
//   and multiplies o and l by alpha = exp(fl(m_old - m_new)) at each of R rescales after it. The
//   running maxima cancel in o / l and in m + log l, so per u only the roundings count: the
//   subtractions, at most kU ((m - x_u) + (m - x_0)) over all (the rescale arguments telescope to
//   m - m_first <= m - x_0), and 1 + R exps. A rescale happens only at a block whose max exceeds
//   every earlier score, so R <= the number of u >= 1 with s_u > max_{w<u} s_w - 2 max E (records
//   of the computed scores): a property of the data, whatever the blocking. (The reference's three
//   passes instead subtract lse: kU (m - s_u + log(t + 1)) and the error of lse itself, below.)
//   rel_u = E_u + kU (m - s_u + m - s_0 + log(t + 1) + 4 max E) + (1 + R) kExpUlps kUlp
//   l = sum of t + 1 positive terms: gamma(t + 1) relative, plus R kU for its rescales; o likewise
//   (gamma(t + 1) on sum_u a_u |v_u|, R kU); y = o fl(1/l): gamma(2). With A = sum_u a_u |v_u|:
//   |dy| <= sum_u (rel_u + max rel) a_u |v_u| + (2 gamma(t + 1) + 2 R kU + gamma(2) + dlse) A
//   where dlse (the reference's lse error, 0 for the online softmax) is covered by adding the lse
//   bound's last two terms:
//   |dlse| <= max rel + gamma(t + 1) + R kU + kLogUlps kUlp log(t + 1) + kU |lse|.
// Backward, from the same fp32 out, lse (and qkv, dout) on both sides, per (t, u <= t):
//   p = exp(fl(x_u - lse)):  rel_p = E_u + kU (|s_u - lse| + E_u) + kExpUlps kUlp
//   dp = dy.v_u: F_u = gamma(hs) sum|dy v_u|;  D = dy.y: dD = gamma(hs) sum|dy y|
//   ds = fl(fl(p fl(dp - D)) scale_f): |d ds| <= scale (p (F_u + dD) (1 + rel_p + gamma(5)) +
//     p |dp - D| (rel_p + gamma(5)))   (subtract, multiply, scale_f's 2 and its product's 1)
//   dq_t = sum_{u<=t} ds k_u,  dk_u = sum_{t>=u} ds q_t,  dv_u = sum_{t>=u} p dy_t: the propagated
//   |d ds| |k| (|q|; rel_p p |dy|) plus gamma(terms) on the magnitudes. A key/value head's dk_u
//   and dv_u also sum over the G query heads of its group: G (T - u) terms, in whatever order.
// Not covered: exp results below fp32's normal range (inputs here keep scores within a few units).
//
// Options (attention_options.h). A given scale replaces 1/sqrt(hs) (gamma(3) still covers its
// product). A window, or a packed row's examples, restricts every sum over u to the n keys t sees
// (u > t - window, u >= the start of t's example): t + 1 becomes n, s_0 the first key's score,
// and a key's dk, dv sum over G (queries that see it) terms.
// A soft-cap c: with x = scale q.k, the kernels round tanh's argument x / c (scale / c or x / c,
// and the product: gamma(4) with scale's own roundings), take tanh within kTanhUlps and multiply by
// c. With Dx = scale gamma(hs) sum|q k| + gamma(4) |x| (c times the argument's error) and tanh
// 1-Lipschitz, the capped score s = c tanh(x / c) errs by
//   E = Dx + (kTanhUlps kUlp + u) (|s| + Dx)
// and everything above holds with this E. Backward: th = tanh(x / c) errs by Eth = Dx / c +
// kTanhUlps kUlp (|th| + Dx / c), so g = 1 - th^2 (one or two roundings) by
// dg = Eth (2 |th| + Eth) + 2u; ds = scale p (dp - D) g gains one multiplication (gamma(6) for
// gamma(5)) and g's error:
//   |d ds| <= scale (p (F + dD) (1 + rel_p + gamma(6)) (g + dg)
//                    + p |dp - D| ((rel_p + gamma(6)) (g + dg) + dg)).
//
// Operands rounded to bf16 (rho = 2^-8, the dot-product kernels of simd/x86/bf16_attention.h; rho = 0
// is the fp32 evaluation above): each rounded value is x (1 + d), |d| <= rho. Forward: P enters P.V
// as bf16(p), while l sums the fp32 p, so y gains |sum_u p_u d_u v_u| / l <= rho sum_u (p_u/l)|v_u|
//   <= rho (1 + 2 max rel + common) A   (p_u / l = a_u (1 + e_u), |e_u| <= rel_u + max rel + common)
// and the sum of the rounded terms is up to (1 + rho) larger: 2 rho gamma(t + 1) A more.
// Backward, with dO = bf16(dout) feeding both dP and D = dO.y:
//   F' = (rho + (1 + rho) gamma(hs)) sum|dy v_u|,  dD' = (rho + (1 + rho) gamma(hs)) sum|dy y|
//   ds as above with F', dD';  bf16(ds): |d ds'| <= |d ds| + rho (|ds| + |d ds|)
//   bf16(p): rel_p' = rel_p + rho (1 + rel_p);  p dy -> bf16(p) bf16(dy):
//   |error| <= p |dy| ((1 + rel_p')(1 + rho) - 1)
// and every gamma(n) applies to the magnitudes of the rounded terms (|ds| + |d ds'|, p (1 + rel_p')
// (1 + rho) |dy|). VDPBF16PS and VCVTNEPS2BF16 also treat subnormal inputs as zero and flush
// subnormal results: each term or partial sum of a dot product may lose 2^-126 (1 + M), M the
// largest operand (flushed(n, M) below), a rounded p or ds 2^-126 (in y divided by l >= 1/2).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "simd/attention_options.h"
#include "tests/simd/error_bounds.h"

namespace llmcpu::simd_test {

// tanh of the soft-cap, in ulps: Highway's (hwy/contrib/math, tested by Highway), glibc's tanhf and
// the AVX512-BF16 kernels' (held to it by test_attention_options.cpp).
inline constexpr double kTanhUlps = 4;

// A score as the kernels evaluate it: the exact capped score s and its error bound E, from the
// exact dot product q.k, its magnitude sum|q k| (mag) and the dot product's extra absolute error
// (the flushed subnormals of the dot-product kernels, 0 elsewhere); th = tanh(x / c) (0 without a
// cap) and Dx the error of the scaled product.
struct ScoreBound {
  double s, E, th, Dx;
};
inline ScoreBound score_bound(double dot, double mag, double extra, size_t hs, double scale,
                              double cap) {
  if (cap <= 0) {
    const double s = scale * dot;
    return {s, scale * gamma(double(hs)) * mag + gamma(3) * std::fabs(s) + scale * extra, 0, 0};
  }
  const double x = scale * dot;
  const double Dx = scale * gamma(double(hs)) * mag + gamma(4) * std::fabs(x) + scale * extra;
  const double th = std::tanh(x / cap), s = cap * th;
  return {s, Dx + (kTanhUlps * kUlp + kU) * (std::fabs(s) + Dx), th, Dx};
}

// The shape of a flash call (kernels.h): NH query heads reading NKV key/value heads of size D; qkv
// rows of (NH + 2 NKV) D, out rows of NH D.
struct FlashShape {
  int B, T, NH, NKV, D;
  size_t row() const { return size_t(NH + 2 * NKV) * size_t(D); }
  size_t out_row() const { return size_t(NH) * size_t(D); }
  size_t group() const { return size_t(NH / NKV); }  // query heads per key/value head
  // Offsets in a qkv row: query head h, and the key and value heads query head h reads.
  size_t q(size_t h) const { return h * size_t(D); }
  size_t k(size_t h) const { return (size_t(NH) + h / group()) * size_t(D); }
  size_t v(size_t h) const { return k(h) + size_t(NKV) * size_t(D); }
};

// The absolute loss of a dot product of n terms on VDPBF16PS to flushed subnormals, M the largest
// magnitude of its operands.
inline double flushed(double n, double M) { return n * 0x1p-126 * (1 + M); }

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

struct FlashForwardBounds {
  std::vector<double> out;  // (B, T, NH*D)
  std::vector<double> lse;  // (B, NH, T)
};

// qkv (B, T, (NH + 2 NKV) D): the inputs as the kernel saw them; lse (B, NH, T): the reference's;
// rho: the rounding of P (0, or 2^-8 on the dot-product kernels, which also flush subnormals).
inline FlashForwardBounds flash_forward_bounds(const std::vector<double>& qkv,
                                               const std::vector<double>& lse,
                                               const FlashShape& sh, double rho = 0,
                                               const AttentionOptions& opt = {}) {
  const double flush = rho > 0 ? 1.0 : 0.0;  // flushed() applies on the dot-product kernels only
  const double M = std::max(1.0, max_abs(qkv));
  const size_t B = size_t(sh.B), T = size_t(sh.T), NH = size_t(sh.NH), hs = size_t(sh.D);
  const size_t ld = sh.row(), ldo = sh.out_row();
  const double scale = attention_scale<double>(opt, sh.D), cap = opt.softcap;
  FlashForwardBounds r{std::vector<double>(B * T * ldo), std::vector<double>(B * NH * T)};
  std::vector<double> s(T), E(T), rel(T);
  for (size_t b = 0; b < B; ++b) {
    for (size_t h = 0; h < NH; ++h) {
      for (size_t t = 0; t < T; ++t) {
        const double* q = qkv.data() + (b * T + t) * ld + sh.q(h);
        const size_t f = size_t(attention_first_key(opt, int(b), sh.T, int(t)));  // t's first key
        const double n = double(t - f) + 1;                          // and how many
        for (size_t u = f; u <= t; ++u) {
          const double* k = qkv.data() + (b * T + u) * ld + sh.k(h);
          double dot = 0, mag = 0;
          for (size_t i = 0; i < hs; ++i) dot += q[i] * k[i], mag += std::fabs(q[i] * k[i]);
          const ScoreBound sb = score_bound(dot, mag, flush * flushed(double(hs), M), hs, scale, cap);
          s[u] = sb.s, E[u] = sb.E;
        }
        const double m = *std::max_element(s.begin() + f, s.begin() + t + 1);
        const double Emax = *std::max_element(E.begin() + f, E.begin() + t + 1);
        double R = 0, record = s[f];
        for (size_t u = f + 1; u <= t; ++u) {
          if (s[u] > record - 2 * Emax) ++R;
          record = std::max(record, s[u]);
        }
        const double logn = std::log(n);
        double rel_max = 0;
        for (size_t u = f; u <= t; ++u) {
          rel[u] = E[u] + kU * (m - s[u] + m - s[f] + logn + 4 * Emax) + (1 + R) * kExpUlps * kUlp;
          rel_max = std::max(rel_max, rel[u]);
        }
        const double l = lse[(b * NH + h) * T + t];
        const double lse_tail = kLogUlps * kUlp * logn + kU * std::fabs(l);
        const double dl = rel_max + gamma(n) + R * kU + lse_tail;
        r.lse[(b * NH + h) * T + t] = dl;
        double common = 2 * gamma(n) + 2 * R * kU + gamma(2) + dl;
        common += rho * (1 + 2 * rel_max + common) + 2 * rho * gamma(n);
        const double absolute = flush * 2 * n * 0x1p-126 * (3 + M);
        std::vector<double> bound(hs, 0.0), A(hs, 0.0);
        for (size_t u = f; u <= t; ++u) {
          const double a = std::exp(s[u] - l);
          const double* v = qkv.data() + (b * T + u) * ld + sh.v(h);
          for (size_t i = 0; i < hs; ++i) {
            bound[i] += (rel[u] + rel_max) * a * std::fabs(v[i]), A[i] += a * std::fabs(v[i]);
          }
        }
        for (size_t i = 0; i < hs; ++i)
          r.out[(b * T + t) * ldo + sh.q(h) + i] = bound[i] + common * A[i] + absolute;
      }
    }
  }
  return r;
}

// The bound of dqkv (B, T, (NH + 2 NKV) D) for the inputs qkv, dout, out (B, T, NH D) and lse
// (B, NH, T), all as the kernel saw them. The dk and dv of a key/value head sum G (T - u) terms:
// the G query heads of its group, in any order. rho: the rounding of dO, P and dS (0, or 2^-8 on
// the dot-product kernels, which also flush subnormals).
inline std::vector<double> flash_backward_bounds(const std::vector<double>& qkv,
                                                 const std::vector<double>& dout,
                                                 const std::vector<double>& out,
                                                 const std::vector<double>& lse,
                                                 const FlashShape& sh, double rho = 0,
                                                 const AttentionOptions& opt = {}) {
  const size_t B = size_t(sh.B), T = size_t(sh.T), NH = size_t(sh.NH), hs = size_t(sh.D);
  const size_t R = sh.row(), OR = sh.out_row(), G = sh.group();
  const double scale = attention_scale<double>(opt, sh.D), cap = opt.softcap;
  // The first key query t of row b sees, and the number of queries that see key u.
  const auto first = [&](size_t b, size_t t) {
    return size_t(attention_first_key(opt, int(b), sh.T, int(t)));
  };
  const auto seen_by = [&](size_t b, size_t u) {
    return double(attention_query_end(opt, int(b), sh.T, int(u) + 1)) - double(u);
  };
  const double flush = rho > 0 ? 1.0 : 0.0;  // flushed() applies on the dot-product kernels only
  const double Min = std::max({1.0, max_abs(qkv), (1 + rho) * max_abs(dout), max_abs(out)});
  const double gd = rho + (1 + rho) * gamma(double(hs));  // a dot product with dO rounded
  std::vector<double> bound(B * T * R, 0.0);
  // Per (t, u <= t) of one query head: p, ds, their error bounds (those of the rounded operands).
  std::vector<double> P(T * T), dS(T * T), ddS(T * T), relP(T * T);
  for (size_t b = 0; b < B; ++b) {
    for (size_t g = 0; g < size_t(sh.NKV); ++g) {
      // Propagated errors and magnitudes of each sum, (T, hs) per gradient; dk, dv over the group.
      std::vector<double> bk(T * hs, 0.0), mk(T * hs, 0.0), bv(T * hs, 0.0), mv(T * hs, 0.0);
      double M = Min;  // the largest operand, the rounded ds among them
      for (size_t h = g * G; h < (g + 1) * G; ++h) {
        auto at = [&](size_t t, size_t off) { return qkv.data() + (b * T + t) * R + off; };
        for (size_t t = 0; t < T; ++t) {
          const double* q = at(t, sh.q(h));
          const double* dy = dout.data() + (b * T + t) * OR + sh.q(h);
          const double* y = out.data() + (b * T + t) * OR + sh.q(h);
          const double l = lse[(b * NH + h) * T + t];
          double D = 0, dD = 0;
          for (size_t i = 0; i < hs; ++i) D += dy[i] * y[i], dD += std::fabs(dy[i] * y[i]);
          dD = dD * gd;
          for (size_t u = first(b, t); u <= t; ++u) {
            const double *k = at(u, sh.k(h)), *v = at(u, sh.v(h));
            double qk = 0, qk_mag = 0, dp = 0, dp_mag = 0;
            for (size_t i = 0; i < hs; ++i) {
              qk += q[i] * k[i], qk_mag += std::fabs(q[i] * k[i]);
              dp += dy[i] * v[i], dp_mag += std::fabs(dy[i] * v[i]);
            }
            const ScoreBound sb =
                score_bound(qk, qk_mag, flush * flushed(double(hs), Min), hs, scale, cap);
            const double s = sb.s, E = sb.E;
            const double p = std::exp(s - l);
            const double rp = E + kU * (std::fabs(s - l) + E) + kExpUlps * kUlp;
            const double F = gd * dp_mag +
                             flush * flushed(double(hs), Min);
            double ds = scale * p * (dp - D), dds;
            if (cap > 0) {  // the factor g = 1 - th^2 and its error dg
              const double Eth = sb.Dx / cap + kTanhUlps * kUlp * (std::fabs(sb.th) + sb.Dx / cap);
              const double g = 1 - sb.th * sb.th, dg = Eth * (2 * std::fabs(sb.th) + Eth) + 2 * kU;
              ds *= g;
              dds = scale * (p * (F + dD) * (1 + rp + gamma(6)) * (g + dg) +
                             p * std::fabs(dp - D) * ((rp + gamma(6)) * (g + dg) + dg));
            } else {
              dds = scale * (p * (F + dD) * (1 + rp + gamma(5)) +
                             p * std::fabs(dp - D) * (rp + gamma(5)));
            }
            P[t * T + u] = p, dS[t * T + u] = ds;
            relP[t * T + u] = rp + rho * (1 + rp);
            ddS[t * T + u] = dds + rho * (std::fabs(ds) + dds) + flush * 0x1p-126;
            M = std::max(M, std::fabs(ds) + ddS[t * T + u]);
          }
        }
        std::vector<double> bq(T * hs, 0.0), mq(T * hs, 0.0);
        for (size_t t = 0; t < T; ++t) {
          const double *q = at(t, sh.q(h)), *dy = dout.data() + (b * T + t) * OR + sh.q(h);
          for (size_t u = first(b, t); u <= t; ++u) {
            const double* k = at(u, sh.k(h));
            const double dds = ddS[t * T + u], ds = std::fabs(dS[t * T + u]) + dds;
            const double p = P[t * T + u], pr = p * (1 + relP[t * T + u]) + flush * 0x1p-126;
            const double dp = pr * (1 + rho) - p;  // |bf16(p) bf16(dy) - p dy| / |dy|
            for (size_t i = 0; i < hs; ++i) {
              bq[t * hs + i] += dds * std::fabs(k[i]), mq[t * hs + i] += ds * std::fabs(k[i]);
              bk[u * hs + i] += dds * std::fabs(q[i]), mk[u * hs + i] += ds * std::fabs(q[i]);
              bv[u * hs + i] += dp * std::fabs(dy[i]);
              mv[u * hs + i] += pr * (1 + rho) * std::fabs(dy[i]);
            }
          }
        }
        for (size_t t = 0; t < T; ++t) {
          for (size_t i = 0; i < hs; ++i) {
            const double n = double(t - first(b, t)) + 1;  // the keys t sees
            bound[(b * T + t) * R + sh.q(h) + i] =
                bq[t * hs + i] + gamma(n) * mq[t * hs + i] + flush * flushed(n, M);
          }
        }
      }
      for (size_t t = 0; t < T; ++t) {
        const double terms = double(G) * seen_by(b, t);
        for (size_t i = 0; i < hs; ++i) {
          double* row = bound.data() + (b * T + t) * R + i;
          row[sh.k(g * G)] = bk[t * hs + i] + gamma(terms) * mk[t * hs + i] + flush * flushed(terms, M);
          row[sh.v(g * G)] = bv[t * hs + i] + gamma(terms) * mv[t * hs + i] + flush * flushed(terms, M);
        }
      }
    }
  }
  return bound;
}

}  // namespace llmcpu::simd_test
