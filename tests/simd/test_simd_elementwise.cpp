// Element-wise and row-wise kernels of every vectorized table against the scalar reference:
// encoder (with and without a position table), residual, scale (bit-identical: the same operations
// in the same order), GELU and softmax + cross-entropy (bounds from fp32 rounding and Highway's ulp
// guarantees, against the reference in double), AdamW and sum_squares (against the fp32
// reference). Lengths are ragged: 1, a few lanes, and not multiples of any vector width or chunk.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "simd/scalar/adamw.h"
#include "simd/scalar/encoder.h"
#include "simd/scalar/gelu.h"
#include "simd/scalar/reduce.h"
#include "simd/scalar/residual.h"
#include "simd/scalar/softmax_xent.h"
#include "tests/simd/error_bounds.h"

namespace llmcpu::simd_test {
namespace {

class SimdElementwise : public ::testing::TestWithParam<std::string> {
 protected:
  const KernelTable& k() const { return kernels_for_target(GetParam()); }
};

constexpr size_t kLengths[] = {1, 3, 7, 8, 17, 31, 33, 64, 1000, 4095, 4097, 12289};

// With and without the position table (wpe, dwpe null: the Llama family's embedding).
TEST_P(SimdElementwise, EncoderIsBitIdentical) {
  struct Shape {
    int B, T, C;
  };
  for (const Shape s : {Shape{1, 1, 1}, Shape{2, 3, 5}, Shape{3, 7, 37}, Shape{2, 5, 130}}) {
    const int Vp = 11;  // few rows: tokens repeat, so dwte rows accumulate several positions
    Random rnd(s.C);
    const std::vector<int> inp = rnd.tokens(size_t(s.B) * s.T, Vp);
    const std::vector<float> wte = rnd.normal(size_t(Vp) * s.C),
                             wpe = rnd.normal(size_t(s.T) * s.C);
    const std::vector<float> dout = rnd.normal(size_t(s.B) * s.T * s.C);
    const std::vector<float> dwte0 = rnd.normal(wte.size()), dwpe0 = rnd.normal(wpe.size());
    for (const bool with_wpe : {true, false}) {
      const std::string where = " C=" + std::to_string(s.C) + (with_wpe ? "" : " without wpe");
      const float* pe = with_wpe ? wpe.data() : nullptr;
      std::vector<float> out(dout.size()), out_ref(dout.size());
      k().encoder_forward(out.data(), inp.data(), wte.data(), pe, s.B, s.T, s.C);
      scalar::encoder_forward<float>(out_ref.data(), inp.data(), wte.data(), pe, s.B, s.T, s.C);
      expect_identical("encoder forward" + where, out, out_ref);
      // The reference adds each position's gradient in token order; so must the kernel.
      std::vector<float> dwte = dwte0, dwpe = dwpe0, dwte_ref = dwte0, dwpe_ref = dwpe0;
      float* dpe = with_wpe ? dwpe.data() : nullptr;
      float* dpe_ref = with_wpe ? dwpe_ref.data() : nullptr;
      k().encoder_backward(dwte.data(), dpe, dout.data(), inp.data(), s.B, s.T, s.C);
      scalar::encoder_backward<float>(dwte_ref.data(), dpe_ref, dout.data(), inp.data(), s.B, s.T,
                                      s.C);
      expect_identical("encoder dwte" + where, dwte, dwte_ref);
      expect_identical("encoder dwpe" + where, dwpe, dwpe_ref);
      if (with_wpe) continue;
      // Without a position table: out = wte[token], and dwte as with one.
      std::vector<float> rows(dout.size());
      for (size_t bt = 0; bt < inp.size(); ++bt) {
        for (int c = 0; c < s.C; ++c) rows[bt * s.C + c] = wte[size_t(inp[bt]) * s.C + c];
      }
      expect_identical("encoder forward is wte's rows" + where, out_ref, rows);
      std::vector<float> dwte_with = dwte0, dwpe_with = dwpe0;
      scalar::encoder_backward<float>(dwte_with.data(), dwpe_with.data(), dout.data(), inp.data(),
                                      s.B, s.T, s.C);
      expect_identical("encoder dwte as with wpe" + where, dwte_ref, dwte_with);
      expect_identical("encoder dwpe untouched" + where, dwpe, dwpe0);
    }
  }
}

TEST_P(SimdElementwise, ResidualAndScaleAreBitIdentical) {
  for (const size_t n : kLengths) {
    Random rnd{unsigned(n)};
    const std::vector<float> a = rnd.normal(n), b = rnd.normal(n);
    std::vector<float> out(n), ref(n);
    k().residual_forward(out.data(), a.data(), b.data(), n);
    scalar::residual_forward<float>(ref.data(), a.data(), b.data(), n);
    expect_identical("residual n=" + std::to_string(n), out, ref);
    std::vector<float> in_place = a;  // out aliasing an input, as the model calls it
    k().residual_forward(in_place.data(), in_place.data(), b.data(), n);
    expect_identical("residual in place n=" + std::to_string(n), in_place, ref);

    std::vector<float> x = a, x_ref = a;
    k().scale(x.data(), 0.37f, n);
    scalar::scale<float>(x_ref.data(), 0.37f, n);
    expect_identical("scale n=" + std::to_string(n), x, x_ref);
  }
}

// GELU as the kernels compute it (simd/hwy/gelu.cc), with s = sqrt(2/pi), k = 0.044715:
//   a = -2s (x + k x^3) takes <= 5 roundings: |d a| <= gamma(5) 2s (|x| + k|x|^3);
//   E = exp(a) adds <= kExpUlps ulp and passes on d a: rel_E <= kExpUlps ulp + expm1(|d a|);
//   sigma = 1 / (1 + E) (two roundings) moves by the share E / (1 + E) = 1 - sigma of rel_E:
//     rel_sigma <= (1 - sigma) rel_E + gamma(2);
//   forward y = x / (1 + E), the same two roundings: |d y| <= |y| rel_sigma;
//   backward dinp = (sigma + t) dout with t = x (E sigma^2) 2s (1 + 3k x^2):
//     E sigma^2 (two roundings): rel_q <= rel_E + 2 rel_sigma + gamma(2); 2s (1 + 3k x^2) (both
//     constants, x^2, the FMA and the product rounded): gamma(5); x times q and the FMA with
//     sigma: |d local| <= sigma rel_sigma + |t| (rel_q + gamma(6)) + u |local|, and
//     |d dinp| <= |dout| |d local| + u |local dout|.
//   exp's argument is clamped to [-87, 88]: above 88, y, sigma and t are below e^-88 (1 + 3u)
//   (E sigma^2 as well), and the exact ones below e^-a; for a >= 87 both terms of the
//   difference are bounded by e^-87 (the error terms above stay as they are).
TEST_P(SimdElementwise, GeluWithinDerivedBound) {
  const double s = scalar::kGeluScale, kc = scalar::kGeluCube;
  for (const size_t n : kLengths) {
    Random rnd(unsigned(n) + 7);
    std::vector<float> x = rnd.uniform(n, -6, 6);
    x[0] = 0.0f;
    if (n > 2) x[n - 1] = 15.0f, x[n / 2] = -15.0f;  // exp's argument clamped at both ends
    const std::vector<float> dout = rnd.normal(n);
    std::vector<float> y(n), dx(n);
    k().gelu_forward(y.data(), x.data(), n);
    k().gelu_backward(dx.data(), x.data(), dout.data(), n);
    std::vector<double> y_ref(n), dx_ref(n), y_b(n), dx_b(n);
    const std::vector<double> xd = widen(x), dd = widen(dout);
    scalar::gelu_forward<double>(y_ref.data(), xd.data(), n);
    scalar::gelu_backward<double>(dx_ref.data(), xd.data(), dd.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const double xi = xd[i], ax = std::fabs(xi);
      const double a = -2 * s * (xi + kc * xi * xi * xi), e = std::exp(a);
      const double sigma = 1 / (1 + e), du = 2 * s * (1 + 3 * kc * xi * xi);
      const double t = xi * e * sigma * sigma * du, local = sigma + t;
      const double d_a = gamma(5) * 2 * s * (ax + kc * ax * ax * ax);
      const double rel_e = kExpUlps * kUlp + std::expm1(d_a);
      const double rel_sigma = (1 - sigma) * rel_e + gamma(2);
      const double rel_q = rel_e + 2 * rel_sigma + gamma(2);
      y_b[i] = ax * sigma * rel_sigma;
      const double d_local =
          sigma * rel_sigma + std::fabs(t) * (rel_q + gamma(6)) + kU * std::fabs(local);
      dx_b[i] = std::fabs(dd[i]) * d_local + kU * std::fabs(local * dd[i]);
      if (a >= 87) {
        y_b[i] += 2 * ax * std::exp(-87.0);
        dx_b[i] += 2 * std::fabs(dd[i]) * (1 + ax * du) * std::exp(-87.0);
      }
    }
    expect_within("gelu forward n=" + std::to_string(n), y, y_ref, y_b);
    expect_within("gelu backward n=" + std::to_string(n), dx, dx_ref, dx_b);
  }
}

// Softmax + cross-entropy, per row with m = max z (exact), e_v = exp(z_v - m), S = sum e_v:
//   each e_v: the rounded difference shifts exp's argument by <= u|z_v - m|, exp adds <= 1 ulp;
//   S: sum of V positive terms, gamma(V) S more;  log S: |dS|/S + 1 ulp of log S;
//   lse = m + log S and loss = lse - z_y: one rounding each.
// Backward dz_v = exp(z_v - lse) dloss (lse given): argument u|z_v - lse|, exp 1 ulp, product u;
// the target's - dloss one more rounding; the padding must be exactly zero.
TEST_P(SimdElementwise, SoftmaxCrossEntropyWithinDerivedBound) {
  struct Shape {
    size_t N;
    int V, Vp;
  };
  for (const Shape sh : {Shape{1, 1, 1}, Shape{3, 7, 8}, Shape{5, 33, 64}, Shape{4, 1000, 1024},
                         Shape{2, 50257, 50304}}) {
    const size_t N = sh.N, V = size_t(sh.V), Vp = size_t(sh.Vp);
    Random rnd(sh.V);
    std::vector<float> logits = rnd.normal(N * Vp, 0, 3);
    const std::vector<int> targets = rnd.tokens(N, sh.V);
    std::vector<float> losses(N), lse(N);
    k().softmax_xent_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, sh.V,
                             sh.Vp);
    const std::vector<double> zd = widen(logits);
    std::vector<double> losses_r(N), lse_r(N), losses_b(N), lse_b(N);
    scalar::softmax_xent_forward<double>(losses_r.data(), lse_r.data(), zd.data(), targets.data(),
                                         N, sh.V, sh.Vp);
    for (size_t n = 0; n < N; ++n) {
      const double* z = zd.data() + n * Vp;
      const double m = *std::max_element(z, z + V);
      double S = 0, dS = 0;
      for (size_t v = 0; v < V; ++v) {
        const double e = std::exp(z[v] - m);
        S += e;
        dS += e * (kU * std::fabs(z[v] - m) + kExpUlps * kUlp);
      }
      dS += gamma(double(V)) * S;
      lse_b[n] = dS / S + kLogUlps * kUlp * std::fabs(std::log(S)) + kU * std::fabs(lse_r[n]);
      losses_b[n] = lse_b[n] + kU * std::fabs(losses_r[n]);
    }
    const std::string where = " N=" + std::to_string(N) + " V=" + std::to_string(V);
    expect_within("lse" + where, lse, lse_r, lse_b);
    expect_within("loss" + where, losses, losses_r, losses_b);

    const float dloss = 1.0f / float(N);
    std::vector<double> grad_r = zd, grad_b(N * Vp, 0.0);
    const std::vector<double> lse_in = widen(lse);  // both sides start from the same lse
    scalar::softmax_xent_backward<double>(grad_r.data(), lse_in.data(), targets.data(), dloss, N,
                                          sh.V, sh.Vp);
    k().softmax_xent_backward(logits.data(), lse.data(), targets.data(), dloss, N, sh.V, sh.Vp);
    for (size_t n = 0; n < N; ++n) {
      for (size_t v = 0; v < V; ++v) {
        const double z = zd[n * Vp + v], p = std::exp(z - lse_in[n]);
        double b = p * dloss * (kU * std::fabs(z - lse_in[n]) + kExpUlps * kUlp + kU);
        if (int(v) == targets[n]) b += kU * std::fabs(grad_r[n * Vp + v]) + kU * p * dloss;
        grad_b[n * Vp + v] = b;
      }
    }
    expect_within("dlogits" + where, logits, grad_r, grad_b);  // padding: bound 0, exactly zero
  }
}

// A negative target masks its row (PyTorch's ignore_index): loss and lse exactly 0 and a gradient
// row of zeros, whatever the logits; the other rows are those of the same call without the mask.
TEST_P(SimdElementwise, SoftmaxCrossEntropyMaskedRowsAreZero) {
  const size_t N = 6;
  const int V = 1000, Vp = 1024;
  Random rnd(17);
  const std::vector<float> logits = rnd.normal(N * Vp, 0, 3);
  const std::vector<int> targets = rnd.tokens(N, V);
  std::vector<int> masked = targets;
  masked[1] = -1, masked[4] = -100;
  std::vector<float> losses(N, 7.0f), lse(N, 7.0f), losses_all(N), lse_all(N);
  k().softmax_xent_forward(losses.data(), lse.data(), logits.data(), masked.data(), N, V, Vp);
  k().softmax_xent_forward(losses_all.data(), lse_all.data(), logits.data(), targets.data(), N, V,
                           Vp);
  std::vector<float> grad = logits, grad_all = logits;
  k().softmax_xent_backward(grad.data(), lse.data(), masked.data(), 0.25f, N, V, Vp);
  k().softmax_xent_backward(grad_all.data(), lse_all.data(), targets.data(), 0.25f, N, V, Vp);
  for (size_t n = 0; n < N; ++n) {
    const bool off = masked[n] < 0;
    EXPECT_EQ(losses[n], off ? 0.0f : losses_all[n]) << "row " << n;
    EXPECT_EQ(lse[n], off ? 0.0f : lse_all[n]) << "row " << n;
    for (size_t v = 0; v < size_t(Vp); ++v) {
      ASSERT_EQ(grad[n * Vp + v], off ? 0.0f : grad_all[n * Vp + v]) << "row " << n << " col " << v;
    }
  }
}

// AdamW against the fp32 reference, which uses the same fp32 constants (decay, 1 - beta1, ...).
// Relative to exact arithmetic on those constants, each side errs by at most
//   m' = m + (g - m)(1 - b1):        Em = gamma(3) (|m| + |g - m|(1 - b1))
//   v' = b2 v + (1 - b2) g^2:        Ev = gamma(4) (b2 v + (1 - b2) g^2)
//   D = sqrt(v')/bc2 + eps:          ED = (Ev / (2 sqrt v') + gamma(2) sqrt v') / bc2 + u D
//   q = m'/D:                        Eq = Em / D + |q| (ED / D + u)
//   p' = p decay - step q:           Ep = gamma(2) |p decay| + step (Eq + u|q|) + u |p'|
// (first order in u), so the two may differ by twice that.
TEST_P(SimdElementwise, AdamWWithinDerivedBound) {
  for (const size_t n : kLengths) {
    Random rnd(unsigned(n) + 3);
    const std::vector<float> p0 = rnd.normal(n), m0 = rnd.normal(n, 0, 0.1);
    std::vector<float> v0 = rnd.uniform(n, 0, 0.01), g = rnd.normal(n);
    v0[0] = 0.0f, g[0] = 0.0f;  // a parameter that has never had a gradient
    AdamWStep step{1e-3, 0.9, 0.999, 1e-8, 0.1, 7};
    std::vector<float> p = p0, m = m0, v = v0, p_r = p0, m_r = m0, v_r = v0;
    k().adamw_update(p.data(), m.data(), v.data(), g.data(), n, step);
    scalar::adamw_update<float>(p_r.data(), m_r.data(), v_r.data(), g.data(), n, step);
    const double decay = float(1.0 - step.lr * step.weight_decay);
    const double b1 = float(step.beta1), b2 = float(step.beta2);
    const double c1 = float(1.0f - float(b1)), c2 = float(1.0f - float(b2));
    const double st = float(step.lr / (1.0 - std::pow(step.beta1, double(step.t))));
    const double bc2 = float(std::sqrt(1.0 - std::pow(step.beta2, double(step.t))));
    const double eps = float(step.eps);
    std::vector<double> pb(n), mb(n), vb(n);
    for (size_t i = 0; i < n; ++i) {
      const double gi = g[i], mi = m0[i], vi = v0[i], pi = p0[i];
      const double m1 = mi + (gi - mi) * c1, v1 = b2 * vi + c2 * gi * gi;
      const double Em = gamma(3) * (std::fabs(mi) + std::fabs(gi - mi) * c1);
      const double Ev = gamma(4) * (b2 * vi + c2 * gi * gi);
      const double D = std::sqrt(v1) / bc2 + eps;
      const double ED =
          (v1 > 0 ? Ev / (2 * std::sqrt(v1)) : 0.0) / bc2 + gamma(2) * std::sqrt(v1) / bc2 + kU * D;
      const double q = m1 / D, Eq = Em / D + std::fabs(q) * (ED / D + kU);
      const double p1 = pi * decay - st * q;
      const double Ep =
          gamma(2) * std::fabs(pi * decay) + st * (Eq + kU * std::fabs(q)) + kU * std::fabs(p1);
      pb[i] = 2 * Ep, mb[i] = 2 * Em, vb[i] = 2 * Ev;
    }
    const std::string where = " n=" + std::to_string(n);
    expect_within("adamw param" + where, p, widen(p_r), pb);
    expect_within("adamw m" + where, m, widen(m_r), mb);
    expect_within("adamw v" + where, v, widen(v_r), vb);
  }
}

// The clipping factor and the zeroing in the AdamW pass: the update equals, bit for bit, the one
// that reads gradients scaled in place first by the table's scale entry (the product is the same
// single rounding), on every element including the vector tails; the gradients read are zero
// afterwards, and left as they were without clear_grad. The scalar reference, the same.
TEST_P(SimdElementwise, AdamWScalesAndClearsTheGradientInItsPass) {
  for (const size_t n : kLengths) {
    Random rnd(unsigned(n) + 29);
    const std::vector<float> p0 = rnd.normal(n), m0 = rnd.normal(n, 0, 0.1),
                             v0 = rnd.uniform(n, 0, 0.01), g0 = rnd.normal(n);
    const float factor = 0.3712f;  // not a power of two: the product rounds
    const std::string where = " n=" + std::to_string(n);
    for (const bool reference : {false, true}) {
      const auto update = [&](float* p, float* m, float* v, float* g, const AdamWStep& s) {
        if (reference) {
          scalar::adamw_update<float>(p, m, v, g, n, s);
        } else {
          k().adamw_update(p, m, v, g, n, s);
        }
      };
      const std::string who = (reference ? " scalar" : " table") + where;
      // Scaled in place by the table's scale entry, then updated without a factor.
      std::vector<float> pa = p0, ma = m0, va = v0, ga = g0;
      k().scale(ga.data(), factor, n);
      update(pa.data(), ma.data(), va.data(), ga.data(), {1e-3, 0.9, 0.999, 1e-8, 0.1, 7});
      // The factor in the pass, which also clears the gradients.
      std::vector<float> pb = p0, mb = m0, vb = v0, gb = g0;
      update(pb.data(), mb.data(), vb.data(), gb.data(),
             {1e-3, 0.9, 0.999, 1e-8, 0.1, 7, factor, true});
      expect_identical("adamw param" + who, pb, pa);
      expect_identical("adamw m" + who, mb, ma);
      expect_identical("adamw v" + who, vb, va);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(gb[i], 0.0f) << "gradient " << i << who;
      // The factor without clearing: the gradients are only read.
      std::vector<float> pc = p0, mc = m0, vc = v0, gc = g0;
      update(pc.data(), mc.data(), vc.data(), gc.data(),
             {1e-3, 0.9, 0.999, 1e-8, 0.1, 7, factor, false});
      expect_identical("adamw param, not cleared" + who, pc, pa);
      expect_identical("adamw gradient, not cleared" + who, gc, g0);
    }
  }
}

// sum_squares accumulates in double: each x^2 of a float is exact in double, so only the N - 1
// additions round, each side within gamma_double(N) sum x^2 of the exact value.
TEST_P(SimdElementwise, SumSquaresWithinDerivedBound) {
  for (const size_t n :
       {size_t(1), size_t(17), size_t(1000), size_t(16384), size_t(16385), size_t(100003)}) {
    Random rnd(unsigned(n) + 11);
    const std::vector<float> x = rnd.normal(n, 0.3, 2);
    const double got = k().sum_squares(x.data(), n);
    const double ref = scalar::sum_squares<float>(x.data(), n);
    double mag = 0;
    for (float xi : x) mag += double(xi) * xi;
    const double ud = 0x1p-53, gamma_d = n * ud / (1 - n * ud);
    EXPECT_LE(std::fabs(got - ref), 2 * gamma_d * mag) << "n=" << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, SimdElementwise, ::testing::ValuesIn(vectorized_targets()),
                         param_name);

}  // namespace
}  // namespace llmcpu::simd_test
