// LayerNorm and attention (forward, backward, KV-cache decode) of every vectorized table against
// the scalar reference in double, with bounds derived from fp32 rounding (see error_bounds.h).
// Shapes are ragged: C = 1.., head sizes 1, 3, 12 and 64, T = 1 and T not a multiple of any tile;
// the decode also with grouped-query and multi-query heads and head sizes 7 and 24.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "simd/scalar/attention.h"
#include "simd/scalar/layernorm.h"
#include "tests/simd/attention_bounds.h"
#include "tests/simd/error_bounds.h"

namespace llmcpu::simd_test {
namespace {

class SimdLayers : public ::testing::TestWithParam<std::string> {
 protected:
  const KernelTable& k() const { return kernels_for_target(GetParam()); }
};

// LayerNorm forward, per row with m*, v*, s* the exact mean, variance and rstd:
//   m = fl(sum x)/C:        dm = gamma(C) mean|x|
//   v = fl(sum (x - m)^2)/C: sum (x - m)^2 = C v* + C (m - m*)^2 exactly (the deviations sum to 0),
//                           so |v - v*| <= gamma(C + 3) v* + dm^2
//   s = 1/sqrt(v + eps):    rho = (|v - v*| / (v* + eps) + u) / 2 + 2u   (relative)
//   n = (x - m) s:          dn <= s* (1 + rho) (dm + |x - m*| (rho + gamma(2)))
//   y = n w + b:            dy <= |w| dn + gamma(2) (|n* w| + |b|)
// Backward, with the stored mean and rstd as inputs (n recomputed with gamma(2) |n|), g = w dy:
//   mean(g):   gamma(C + 1) mean|g|;      mean(g n): gamma(C + 5) mean|g n|
//   dx = dx0 + s (g - mean(g) - n mean(g n)): s times the inputs' errors, gamma(3) on the
//   bracket's terms and gamma(2) on the update;
//   dw = dw0 + sum_rows n dy: gamma(N + 3) (|dw0| + sum |n dy|);  db: gamma(N + 1) (|db0| +
//   sum|dy|).
TEST_P(SimdLayers, LayerNormWithinDerivedBound) {
  struct Shape {
    size_t N;
    int C;
  };
  for (const Shape sh : {Shape{1, 1}, Shape{3, 7}, Shape{5, 17}, Shape{4, 64}, Shape{9, 129},
                         Shape{2, 768}, Shape{3, 1000}}) {
    const size_t N = sh.N, C = size_t(sh.C);
    Random rnd(sh.C);
    const std::vector<float> x = rnd.normal(N * C, 0.5, 2), w = rnd.normal(C, 1, 0.3);
    const std::vector<float> b = rnd.normal(C, 0, 0.3), dy = rnd.normal(N * C);
    const std::vector<float> dx0 = rnd.normal(N * C), dw0 = rnd.normal(C), db0 = rnd.normal(C);
    std::vector<float> y(N * C), mean(N), rstd(N);
    k().layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N,
                          sh.C);
    const std::vector<double> xd = widen(x), wd = widen(w), bd = widen(b);
    std::vector<double> y_r(N * C), mean_r(N), rstd_r(N), y_b(N * C), mean_b(N), rstd_b(N);
    scalar::layernorm_forward<double>(y_r.data(), mean_r.data(), rstd_r.data(), xd.data(),
                                      wd.data(), bd.data(), N, sh.C);
    const double eps = scalar::kLayerNormEps;
    for (size_t r = 0; r < N; ++r) {
      double abs_mean = 0;
      for (size_t c = 0; c < C; ++c) abs_mean += std::fabs(xd[r * C + c]) / double(C);
      const double dm = gamma(double(C)) * abs_mean;
      const double s = rstd_r[r], v = 1 / (s * s) - eps;
      const double rho = ((gamma(double(C) + 3) * v + dm * dm) / (v + eps) + kU) / 2 + 2 * kU;
      mean_b[r] = dm;
      rstd_b[r] = rho * s;
      for (size_t c = 0; c < C; ++c) {
        const double dev = std::fabs(xd[r * C + c] - mean_r[r]);
        const double dn = s * (1 + rho) * (dm + dev * (rho + gamma(2)));
        y_b[r * C + c] =
            std::fabs(wd[c]) * dn + gamma(2) * (dev * s * std::fabs(wd[c]) + std::fabs(bd[c]));
      }
    }
    const std::string where = " N=" + std::to_string(N) + " C=" + std::to_string(C);
    expect_within("layernorm out" + where, y, y_r, y_b);
    expect_within("layernorm mean" + where, mean, mean_r, mean_b);
    expect_within("layernorm rstd" + where, rstd, rstd_r, rstd_b);

    // Backward from the same (fp32) statistics on both sides.
    std::vector<float> dx = dx0, dw = dw0, db = db0;
    k().layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                           mean.data(), rstd.data(), N, sh.C);
    std::vector<double> dx_r = widen(dx0), dw_r = widen(dw0), db_r = widen(db0);
    const std::vector<double> dyd = widen(dy), md = widen(mean), sd = widen(rstd);
    scalar::layernorm_backward<double>(dx_r.data(), dw_r.data(), db_r.data(), dyd.data(), xd.data(),
                                       wd.data(), md.data(), sd.data(), N, sh.C);
    std::vector<double> dx_b(N * C), dw_b(C), db_b(C);
    for (size_t c = 0; c < C; ++c)
      dw_b[c] = std::fabs(double(dw0[c])), db_b[c] = std::fabs(double(db0[c]));
    for (size_t r = 0; r < N; ++r) {
      const double s = sd[r];
      double g_abs = 0, gn_abs = 0, g_sum = 0, gn_sum = 0;
      for (size_t c = 0; c < C; ++c) {
        const double g = wd[c] * dyd[r * C + c], n = (xd[r * C + c] - md[r]) * s;
        g_abs += std::fabs(g), gn_abs += std::fabs(g * n), g_sum += g, gn_sum += g * n;
        dw_b[c] += std::fabs(n * dyd[r * C + c]);
        db_b[c] += std::fabs(dyd[r * C + c]);
      }
      const double g_mean = g_sum / double(C), gn_mean = gn_sum / double(C);
      const double d_gm = gamma(double(C) + 1) * g_abs / double(C);
      const double d_gnm = gamma(double(C) + 5) * gn_abs / double(C);
      for (size_t c = 0; c < C; ++c) {
        const double g = wd[c] * dyd[r * C + c], n = (xd[r * C + c] - md[r]) * s;
        const double bracket = g - g_mean - n * gn_mean;
        const double d_bracket =
            kU * std::fabs(g) + d_gm + std::fabs(n) * d_gnm +
            std::fabs(gn_mean) * gamma(2) * std::fabs(n) +
            gamma(3) * (std::fabs(g) + std::fabs(g_mean) + std::fabs(n * gn_mean));
        dx_b[r * C + c] =
            s * d_bracket + gamma(2) * (std::fabs(double(dx0[r * C + c])) + s * std::fabs(bracket));
      }
    }
    for (size_t c = 0; c < C; ++c) dw_b[c] *= gamma(double(N) + 3), db_b[c] *= gamma(double(N) + 1);
    expect_within("layernorm dinp" + where, dx, dx_r, dx_b);
    expect_within("layernorm dweight" + where, dw, dw_r, dw_b);
    expect_within("layernorm dbias" + where, db, db_r, db_b);
  }
}

struct AttnShape {
  int B, T, C, NH;
};
// Head sizes 1, 3, 12 and 64; T = 1, ragged T, and T past two column tiles.
constexpr AttnShape kAttnShapes[] = {{2, 5, 3, 3},    {1, 17, 15, 5}, {2, 13, 36, 3},
                                     {1, 33, 128, 2}, {3, 1, 24, 2},  {1, 40, 64, 1}};

// The bounds are derived in tests/simd/attention_bounds.h (exp within kExpUlps, exact division).
TEST_P(SimdLayers, AttentionWithinDerivedBound) {
  for (const AttnShape sh : kAttnShapes) {
    const size_t B = size_t(sh.B), T = size_t(sh.T), C = size_t(sh.C), NH = size_t(sh.NH);
    const size_t hs = C / NH, C3 = 3 * C;
    Random rnd(sh.C * 7 + sh.T);
    const std::vector<float> qkv = rnd.normal(B * T * C3), dout = rnd.normal(B * T * C);
    std::vector<float> out(B * T * C), att(B * NH * T * T, NAN);
    k().attention_forward(out.data(), att.data(), qkv.data(), sh.B, sh.T, sh.C, sh.NH);
    const std::vector<double> qd = widen(qkv), dd = widen(dout);
    std::vector<double> out_r(out.size()), att_r(att.size());
    scalar::attention_forward<double>(out_r.data(), att_r.data(), qd.data(), sh.B, sh.T, sh.C,
                                      sh.NH);
    const AttentionForwardBounds fb = attention_forward_bounds(
        qd, att_r, sh.B, sh.T, sh.C, sh.NH, [](double) { return kExpUlps; }, 0.0);
    const std::string where =
        " B=" + std::to_string(B) + " T=" + std::to_string(T) + " hs=" + std::to_string(hs);
    expect_within("attention out" + where, out, out_r, fb.out);
    expect_within("attention att" + where, att, att_r, fb.att);  // above the diagonal: exactly 0

    // Backward from the reference's att, rounded to fp32, on both sides.
    std::vector<float> att_in(att_r.begin(), att_r.end());
    const std::vector<double> ad = widen(att_in);
    std::vector<float> dqkv(qkv.size(), NAN), scratch(B * NH * T);
    k().attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att_in.data(),
                           sh.B, sh.T, sh.C, sh.NH);
    std::vector<double> dqkv_r(qkv.size()), scratch_r(scratch.size());
    scalar::attention_backward<double>(dqkv_r.data(), scratch_r.data(), dd.data(), qd.data(),
                                       ad.data(), sh.B, sh.T, sh.C, sh.NH);
    const std::vector<double> dqkv_b =
        attention_backward_bounds(qd, dd, ad, sh.B, sh.T, sh.C, sh.NH);
    expect_within("attention dqkv" + where, dqkv, dqkv_r, dqkv_b);
  }
}

// Decoding one position against a KV cache: the forward bound of the last row, t = pos. Multi-head
// (NKV = NH), grouped-query (3 query heads per key/value head) and multi-query (NKV = 1) heads of
// sizes 1 to 64, odd ones included.
struct DecodeShape {
  int T, NH, NKV, D;
};
constexpr DecodeShape kDecodeShapes[] = {
    {5, 3, 3, 1},   {17, 5, 5, 3},  {13, 3, 3, 12}, {33, 2, 2, 64}, {1, 2, 2, 12},
    {40, 1, 1, 64}, {19, 6, 2, 24}, {9, 6, 2, 7},   {33, 4, 1, 64}, {1, 3, 1, 5}};

TEST_P(SimdLayers, AttentionDecodeWithinDerivedBound) {
  for (const DecodeShape sh : kDecodeShapes) {
    const size_t NH = size_t(sh.NH), hs = size_t(sh.D), G = NH / size_t(sh.NKV);
    const size_t C = NH * hs, ld = size_t(sh.NKV) * hs, maxT = size_t(sh.T) + 3;
    const double scale = 1 / std::sqrt(double(hs));
    Random rnd(unsigned(C + ld + 5));
    const std::vector<float> q = rnd.normal(C), kc = rnd.normal(maxT * ld),
                             vc = rnd.normal(maxT * ld);
    const std::vector<double> qd = widen(q), kd = widen(kc), vd = widen(vc);
    for (int pos : {0, sh.T - 1}) {
      const size_t n = size_t(pos) + 1;
      std::vector<float> out(C), scores(n);
      std::vector<double> out_r(C), scores_r(n), out_b(C);
      k().attention_decode(out.data(), scores.data(), q.data(), kc.data(), vc.data(), pos, sh.NH,
                           sh.NKV, sh.D, AttentionOptions{});
      scalar::attention_decode<double>(out_r.data(), scores_r.data(), qd.data(), kd.data(),
                                       vd.data(), pos, sh.NH, sh.NKV, sh.D, AttentionOptions{});
      for (size_t h = 0; h < NH; ++h) {
        const size_t g = h / G * hs;  // the key/value head's offset in a cache row
        std::vector<double> sc(n), E(n), a(n), rel(n);
        for (size_t u = 0; u < n; ++u) {
          double dot = 0, mag = 0;
          for (size_t i = 0; i < hs; ++i) {
            dot += qd[h * hs + i] * kd[u * ld + g + i];
            mag += std::fabs(qd[h * hs + i] * kd[u * ld + g + i]);
          }
          sc[u] = scale * dot, E[u] = scale * (gamma(double(hs)) * mag + gamma(2) * std::fabs(dot));
        }
        const double m = *std::max_element(sc.begin(), sc.end());
        const double Emax = *std::max_element(E.begin(), E.end());
        double S = 0, rel_max = 0;
        for (size_t u = 0; u < n; ++u) {
          a[u] = std::exp(sc[u] - m), S += a[u];
          rel[u] = E[u] + Emax + kU * std::fabs(sc[u] - m) + kExpUlps * kUlp;
          rel_max = std::max(rel_max, rel[u]);
        }
        for (size_t i = 0; i < hs; ++i) {
          double bound = 0, mag = 0;
          for (size_t u = 0; u < n; ++u) {
            const double w = a[u] / S, v = std::fabs(vd[u * ld + g + i]);
            bound += (rel[u] + rel_max + gamma(double(n)) + gamma(2)) * w * v, mag += w * v;
          }
          out_b[h * hs + i] = bound + gamma(double(n)) * mag;
        }
      }
      expect_within("decode pos=" + std::to_string(pos) + " NH=" + std::to_string(sh.NH) +
                        " NKV=" + std::to_string(sh.NKV) + " D=" + std::to_string(sh.D),
                    out, out_r, out_b);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, SimdLayers, ::testing::ValuesIn(vectorized_targets()),
                         param_name);

}  // namespace
}  // namespace llmcpu::simd_test
