// Finite-difference checks of every backward pass in simd/scalar/, instantiated in double: for
// random inputs on tiny ragged shapes, the gradient of J = sum(out * R), R fixed and random, as the
// kernel's backward computes it with dout = R, must match central differences on every input
// element. Also checked: which gradients accumulate (+=) and which overwrite, AdamW against
// torch.optim.AdamW's formulas, and bit-identical backward passes with 1, 2 and 3 OpenMP threads.
// Not here: the model as a whole against PyTorch (test_fixtures.cpp).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "simd/scalar/adamw.h"
#include "simd/scalar/attention.h"
#include "simd/scalar/encoder.h"
#include "simd/scalar/gelu.h"
#include "simd/scalar/layernorm.h"
#include "simd/scalar/matmul.h"
#include "simd/scalar/residual.h"
#include "simd/scalar/softmax_xent.h"

namespace llmcpu {
namespace {

using Vec = std::vector<double>;

// Central differences, J'(x) ~ (J(x+h) - J(x-h)) / 2h, and how far they can be from the truth.
//  - Truncation: the error is h^2/6 J'''(xi). Every input here is O(1), so J''' is at most a small
//    multiple (kThirdDerivative = 100) of M, the magnitude of J defined below: the error is at
//    most h^2/6 * 100 * M ~ 2e-11 M.
//  - Rounding: J is computed with an absolute error of at most k eps M (Higham's bound: k roundings
//    of relative size eps = 2^-52 along the longest chain of operations, on terms whose magnitudes
//    add up to M = sum_i |R_i| A_i, A_i bounding the intermediates that make up out_i). Two
//    evaluations differ by at most 2 k eps M; divided by 2h, that is k eps M / h ~ 2.2e-10 k M.
//  - The step itself: x+h and x-h are rounded, so we divide by their actual difference, not by 2h.
//  - The analytic gradient has its own rounding error of k eps |g|, negligible next to the above.
// With h = 1e-6 truncation is negligible and rounding dominates; the bound stays far below the O(1)
// gradients, which each check also asserts (else it would accept anything).
constexpr double kH = 1e-6;
constexpr double kEps = std::numeric_limits<double>::epsilon();
constexpr double kThirdDerivative = 100;

double fd_tolerance(double chain, double magnitude) {
  const double rounding = chain * kEps * magnitude / kH;
  const double truncation = kH * kH / 6 * kThirdDerivative * magnitude;
  return rounding + truncation;
}

Vec random_vec(size_t n, std::mt19937_64& rng, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> dist(lo, hi);
  Vec v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

std::vector<float> to_float(const Vec& v) { return std::vector<float>(v.begin(), v.end()); }

// J = sum_i out_i R_i, in index order.
double weighted_sum(const Vec& out, const Vec& R) {
  double j = 0;
  for (size_t i = 0; i < out.size(); ++i) j += out[i] * R[i];
  return j;
}

double sum_abs(const Vec& v) {
  double s = 0;
  for (double x : v) s += std::abs(x);
  return s;
}

double max_abs(const Vec& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// dJ/dx by central differences on every element of x; x is perturbed in place and restored.
Vec numeric_gradient(Vec& x, const std::function<double()>& J) {
  Vec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    const double xp = x0 + kH, xm = x0 - kH;
    x[i] = xp;
    const double jp = J();
    x[i] = xm;
    const double jm = J();
    x[i] = x0;
    g[i] = (jp - jm) / (xp - xm);
  }
  return g;
}

// Every element within tol, and tol well below the gradients' scale.
void expect_gradient(const std::string& what, const Vec& analytic, const Vec& numeric, double tol) {
  ASSERT_EQ(analytic.size(), numeric.size()) << what;
  EXPECT_LT(tol, 1e-3 * max_abs(numeric))
      << what << ": the tolerance would not catch a wrong gradient";
  int failures = 0;
  for (size_t i = 0; i < analytic.size(); ++i) {
    const double err = std::abs(analytic[i] - numeric[i]);
    if (!(err <= tol) && ++failures <= 5) {
      ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << ", numeric "
                    << numeric[i] << ", |diff| " << err << " > tol " << tol;
    }
  }
  EXPECT_EQ(failures, 0) << what << ": elements out of tolerance";
}

// dqkv (rows, 3C) against the numeric gradient, q, k and v separately so a failure says which.
void expect_dqkv_parts(const std::string& what, const Vec& dqkv, const Vec& numeric, size_t rows,
                       int Cq, int Ckv, double tol) {
  const size_t row = size_t(Cq) + 2 * size_t(Ckv);  // [q (Cq) | k (Ckv) | v (Ckv)]
  for (int part = 0; part < 3; ++part) {
    const size_t begin = part == 0 ? 0 : size_t(Cq) + size_t(part - 1) * Ckv;
    const size_t width = part == 0 ? size_t(Cq) : size_t(Ckv);
    Vec a, n;
    for (size_t r = 0; r < rows; ++r) {
      for (size_t c = 0; c < width; ++c) {
        a.push_back(dqkv[r * row + begin + c]);
        n.push_back(numeric[r * row + begin + c]);
      }
    }
    expect_gradient(what + " " + "qkv"[part] + " (overwritten)", a, n, tol);
  }
}

// Subtracts the value an accumulating gradient was pre-filled with.
Vec minus(const Vec& v, double prefill) {
  Vec r(v);
  for (double& x : r) x -= prefill;
  return r;
}

constexpr double kPrefill = 0.375;     // accumulating gradients start here; it must be added to
constexpr double kSentinel = -1234.5;  // overwritten gradients start here; it must disappear

TEST(FiniteDifference, Encoder) {
  constexpr int B = 2, T = 5, C = 7, Vp = 11, maxT = 7;
  std::mt19937_64 rng(1);
  Vec wte = random_vec((size_t)Vp * C, rng), wpe = random_vec((size_t)maxT * C, rng);
  std::vector<int> inp(B * T);
  std::uniform_int_distribution<int> tok(0, Vp - 1);
  for (int& t : inp) t = tok(rng);
  inp[7] = inp[2];  // a repeated token: its rows of dwte must add up
  const Vec R = random_vec((size_t)B * T * C, rng);

  Vec out((size_t)B * T * C);
  auto J = [&] {
    scalar::encoder_forward(out.data(), inp.data(), wte.data(), wpe.data(), B, T, C);
    return weighted_sum(out, R);
  };
  Vec dwte(wte.size(), kPrefill), dwpe(wpe.size(), kPrefill);
  scalar::encoder_backward(dwte.data(), dwpe.data(), R.data(), inp.data(), B, T, C);

  // out = wte row + wpe row: A = 2, chain = 1 add + the B*T*C-term sum of J.
  const double tol = fd_tolerance(1 + B * T * C, sum_abs(R) * 2);
  expect_gradient("dwte", minus(dwte, kPrefill), numeric_gradient(wte, J), tol);
  expect_gradient("dwpe", minus(dwpe, kPrefill), numeric_gradient(wpe, J), tol);
  // Positions T..maxT-1 are never used: their gradient stays exactly the pre-filled value.
  for (size_t i = (size_t)T * C; i < dwpe.size(); ++i) EXPECT_EQ(dwpe[i], kPrefill) << i;
}

TEST(FiniteDifference, LayerNorm) {
  constexpr size_t N = 10;
  constexpr int C = 13;  // one full group of 8 lanes and a ragged tail
  std::mt19937_64 rng(2);
  Vec inp = random_vec(N * C, rng), weight = random_vec(C, rng, 0.5, 1.5),
      bias = random_vec(C, rng);
  const Vec R = random_vec(N * C, rng);

  Vec out(N * C), mean(N), rstd(N);
  auto J = [&] {
    scalar::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(),
                              bias.data(), N, C);
    return weighted_sum(out, R);
  };
  J();
  const Vec mean0 = mean, rstd0 = rstd;
  Vec dinp(inp.size(), kPrefill), dweight(C, kPrefill), dbias(C, kPrefill);
  scalar::layernorm_backward(dinp.data(), dweight.data(), dbias.data(), R.data(), inp.data(),
                             weight.data(), mean0.data(), rstd0.data(), N, C);

  // out = (x - mean) rstd w + b, with |x - mean| <= 2: A = 2 max(rstd) max|w| + max|b|.
  // Chain: C adds for the mean, C for the variance, sqrt and divide, 4 ops per output, N*C for J.
  const double A = 2 * max_abs(rstd0) * max_abs(weight) + max_abs(bias);
  const double tol = fd_tolerance(2 * C + 6 + N * C, sum_abs(R) * A);
  expect_gradient("dinp", minus(dinp, kPrefill), numeric_gradient(inp, J), tol);
  expect_gradient("dweight", minus(dweight, kPrefill), numeric_gradient(weight, J), tol);
  expect_gradient("dbias", minus(dbias, kPrefill), numeric_gradient(bias, J), tol);
}

void check_matmul(bool with_bias) {
  constexpr size_t N = 10;  // two full row tiles of 4 and a ragged one, not a multiple of 8
  constexpr int C = 13, OC = 5;
  std::mt19937_64 rng(with_bias ? 3 : 4);
  Vec inp = random_vec(N * C, rng), weight = random_vec((size_t)OC * C, rng);
  Vec bias = random_vec(OC, rng);
  const Vec R = random_vec(N * OC, rng);

  Vec out(N * OC);
  auto J = [&] {
    scalar::matmul_forward(out.data(), inp.data(), weight.data(), with_bias ? bias.data() : nullptr,
                           N, C, OC);
    return weighted_sum(out, R);
  };
  Vec dinp(inp.size(), kSentinel), dweight(weight.size(), kPrefill), dbias(OC, kPrefill);
  scalar::matmul_backward(dinp.data(), dweight.data(), with_bias ? dbias.data() : nullptr, R.data(),
                          inp.data(), weight.data(), N, C, OC);

  // out = b + sum of C products, each <= 1: A = C + 1; chain = C + 1 + the N*OC-term sum of J.
  const double tol = fd_tolerance(C + 1 + N * OC, sum_abs(R) * (C + 1));
  expect_gradient("dinp (overwritten)", dinp, numeric_gradient(inp, J), tol);
  expect_gradient("dweight", minus(dweight, kPrefill), numeric_gradient(weight, J), tol);
  if (with_bias) {
    expect_gradient("dbias", minus(dbias, kPrefill), numeric_gradient(bias, J), tol);
  } else {
    for (double d : dbias) EXPECT_EQ(d, kPrefill) << "dbias was null, nothing may be written";
  }

  // dinp may be null: dweight is then still accumulated, identically.
  Vec dweight2(weight.size(), kPrefill);
  scalar::matmul_backward<double>(nullptr, dweight2.data(), nullptr, R.data(), inp.data(),
                                  weight.data(), N, C, OC);
  EXPECT_EQ(dweight2, dweight);
}

TEST(FiniteDifference, MatmulWithBias) { check_matmul(true); }
TEST(FiniteDifference, MatmulWithoutBias) { check_matmul(false); }

TEST(FiniteDifference, Attention) {
  constexpr int B = 2, T = 5, C = 12, NH = 3, hs = C / NH;  // head size 4
  std::mt19937_64 rng(5);
  Vec qkv = random_vec((size_t)B * T * 3 * C, rng);
  const Vec R = random_vec((size_t)B * T * C, rng);

  Vec out((size_t)B * T * C), att((size_t)B * NH * T * T);
  auto J = [&] {
    scalar::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    return weighted_sum(out, R);
  };
  J();
  const Vec att0 = att;
  Vec dqkv(qkv.size(), kSentinel), scratch((size_t)B * NH * T, kSentinel);
  scalar::attention_backward(dqkv.data(), scratch.data(), R.data(), qkv.data(), att0.data(), B, T,
                             C, NH);

  // Scores are hs-term dot products scaled by 1/sqrt(hs), and out is a convex combination of values
  // <= 1; an absolute error in a score becomes a relative one in exp. A = hs bounds all of it.
  // Chain: hs (score) + T (softmax sum) + 4 (exp, divide) + T (weighted sum) + B*T*C (J).
  const double tol = fd_tolerance(hs + 2 * T + 4 + B * T * C, sum_abs(R) * hs);
  const Vec numeric = numeric_gradient(qkv, J);
  expect_dqkv_parts("dqkv", dqkv, numeric, size_t(B) * T, C, C, tol);

  // Causal: the softmax weights are zero above the diagonal, and changing the last token's q, k and
  // v leaves every earlier output bit-identical.
  for (size_t row = 0; row < (size_t)B * NH; ++row) {
    for (int t = 0; t < T; ++t) {
      for (int u = t + 1; u < T; ++u) EXPECT_EQ(att0[(row * T + t) * T + u], 0.0);
    }
  }
  J();
  const Vec out0 = out;
  for (int b = 0; b < B; ++b) {
    for (int c = 0; c < 3 * C; ++c) qkv[((size_t)b * T + T - 1) * 3 * C + c] += 0.5;
  }
  J();
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T - 1; ++t) {
      for (int c = 0; c < C; ++c) {
        const size_t i = ((size_t)b * T + t) * C + c;
        EXPECT_EQ(out[i], out0[i]) << "b=" << b << " t=" << t << " c=" << c;
      }
    }
  }
}

// The flash form: the backward pass from the saved out and lse (per-row log-sum-exp) instead of
// the softmax matrix, on the same shape as the materialized one above (multi-head), and with
// grouped-query (3 query heads per key/value head) and multi-query heads, whose key and value
// gradients sum over their group.
TEST(FiniteDifference, FlashAttention) {
  struct Heads {
    int NH, NKV, hs;
  };
  for (const Heads s : {Heads{3, 3, 4}, Heads{6, 2, 3}, Heads{4, 1, 3}}) {
    constexpr int B = 2, T = 5;
    const int C = s.NH * s.hs, Ckv = s.NKV * s.hs;
    std::mt19937_64 rng(5);
    Vec qkv = random_vec((size_t)B * T * (C + 2 * Ckv), rng);
    const Vec R = random_vec((size_t)B * T * C, rng);

    Vec out((size_t)B * T * C), lse((size_t)B * s.NH * T);
    auto J = [&] {
      scalar::flash_attention_forward(out.data(), lse.data(), qkv.data(), B, T, s.NH, s.NKV, s.hs,
                                      AttentionOptions{});
      return weighted_sum(out, R);
    };
    J();
    const Vec out0 = out, lse0 = lse;
    Vec dqkv(qkv.size(), kSentinel);
    scalar::flash_attention_backward(dqkv.data(), R.data(), out0.data(), qkv.data(), lse0.data(), B,
                                     T, s.NH, s.NKV, s.hs, AttentionOptions{});

    // As the materialized case, with lse's log and one more subtraction per weight: A = hs.
    // Chain: hs (score) + T (sum) + 5 (exp, log, subtractions) + T (weighted sum) + B*T*C (J).
    const double tol = fd_tolerance(s.hs + 2 * T + 5 + B * T * C, sum_abs(R) * s.hs);
    const Vec numeric = numeric_gradient(qkv, J);
    expect_dqkv_parts("flash dqkv NH=" + std::to_string(s.NH) + " NKV=" + std::to_string(s.NKV),
                      dqkv, numeric, size_t(B) * T, C, Ckv, tol);
  }
}

TEST(FiniteDifference, Gelu) {
  constexpr size_t N = 13;
  std::mt19937_64 rng(6);
  Vec inp = random_vec(N, rng, -3, 3);  // both tanh tails and the middle
  const Vec R = random_vec(N, rng);

  Vec out(N);
  auto J = [&] {
    scalar::gelu_forward(out.data(), inp.data(), N);
    return weighted_sum(out, R);
  };
  Vec dinp(N, kSentinel);
  scalar::gelu_backward(dinp.data(), inp.data(), R.data(), N);

  // |x| <= 3: the tanh argument is <= 0.8 (3 + 0.045 * 27) < 4 and |out| <= 3: A = 4.
  // Chain: 5 ops for the argument, tanh (counted as 2), 3 ops after, N for J.
  const double tol = fd_tolerance(10 + N, sum_abs(R) * 4);
  expect_gradient("dinp (overwritten)", dinp, numeric_gradient(inp, J), tol);

  // dinp may alias dout.
  Vec inplace = R;
  scalar::gelu_backward(inplace.data(), inp.data(), inplace.data(), N);
  EXPECT_EQ(inplace, dinp);
}

TEST(FiniteDifference, SoftmaxCrossEntropy) {
  constexpr size_t N = 6;
  constexpr int V = 11, Vp = 16;
  std::mt19937_64 rng(7);
  Vec logits = random_vec(N * Vp, rng, -2, 2);
  // Padding columns hold garbage that would dominate the max and the sum if the forward read it.
  for (size_t n = 0; n < N; ++n) {
    for (int v = V; v < Vp; ++v) logits[n * Vp + v] = 1e3;
  }
  std::vector<int> targets(N);
  std::uniform_int_distribution<int> tok(0, V - 1);
  for (int& t : targets) t = tok(rng);
  targets[0] = V - 1;  // the last real column as a target too
  // The backward takes one dloss for every row (the gradient of a mean): J = dloss * sum_n loss_n.
  const double dloss = 0.7;

  Vec losses(N), lse(N);
  auto J = [&] {
    scalar::softmax_xent_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V,
                                 Vp);
    return dloss * std::accumulate(losses.begin(), losses.end(), 0.0);
  };
  J();
  for (size_t n = 0; n < N; ++n) {
    EXPECT_LT(losses[n], 10) << "the forward read the padding columns (row " << n << ")";
  }
  Vec dlogits = logits;  // the backward overwrites the logits with their gradient
  scalar::softmax_xent_backward(dlogits.data(), lse.data(), targets.data(), dloss, N, V, Vp);
  for (size_t n = 0; n < N; ++n) {
    for (int v = V; v < Vp; ++v) {
      EXPECT_EQ(dlogits[n * Vp + v], 0.0) << "padding n=" << n << " v=" << v;
    }
  }

  // loss = lse - z_y with |z| <= 2, lse <= 2 + log V: A = 4 + log V < 7.
  // Chain: V (max), V (sum of exps, each exp counted as 2 and the log as 2 more), 2, N for J.
  const double tol = fd_tolerance(3 * V + 4 + N, dloss * N * 7);
  expect_gradient("dlogits (overwritten)", dlogits, numeric_gradient(logits, J), tol);
}

TEST(FiniteDifference, Residual) {
  constexpr size_t N = 13;
  std::mt19937_64 rng(8);
  Vec a = random_vec(N, rng), b = random_vec(N, rng);
  const Vec R = random_vec(N, rng);
  Vec out(N);
  auto J = [&] {
    scalar::residual_forward(out.data(), a.data(), b.data(), N);
    return weighted_sum(out, R);
  };
  // The backward is the identity: dout flows to both inputs unchanged. A = 2, chain = 1 + N.
  const double tol = fd_tolerance(1 + N, sum_abs(R) * 2);
  expect_gradient("da", R, numeric_gradient(a, J), tol);
  expect_gradient("db", R, numeric_gradient(b, J), tol);

  // out may alias a or b.
  J();
  Vec into_a = a, into_b = b;
  scalar::residual_forward(into_a.data(), into_a.data(), b.data(), N);
  scalar::residual_forward(into_b.data(), a.data(), into_b.data(), N);
  EXPECT_EQ(into_a, out);
  EXPECT_EQ(into_b, out);
}

// torch.optim.AdamW (_single_tensor_adamw) as its source writes it, one element at a time:
//   param.mul_(1 - lr * weight_decay)
//   exp_avg.lerp_(grad, 1 - beta1)                         # m = beta1 m + (1 - beta1) g
//   exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
//   step_size = lr / (1 - beta1 ** step)
//   denom = (exp_avg_sq.sqrt() / sqrt(1 - beta2 ** step)).add_(eps)
//   param.addcdiv_(exp_avg, denom, value=-step_size)
struct AdamWReference {
  double param, m, v;
};

AdamWReference torch_adamw(double p, double m, double v, double g, const scalar::AdamWStep& s) {
  p *= 1 - s.lr * s.weight_decay;
  m = s.beta1 * m + (1 - s.beta1) * g;
  v = s.beta2 * v + (1 - s.beta2) * g * g;
  const double m_hat = m / (1 - std::pow(s.beta1, (double)s.t));
  const double v_hat = v / (1 - std::pow(s.beta2, (double)s.t));
  p -= s.lr * m_hat / (std::sqrt(v_hat) + s.eps);
  return {p, m, v};
}

void check_adamw(const scalar::AdamWStep& s, bool zero_moments, unsigned seed) {
  constexpr size_t N = 13;
  std::mt19937_64 rng(seed);
  Vec param = random_vec(N, rng), grad = random_vec(N, rng);
  Vec m = zero_moments ? Vec(N, 0.0) : random_vec(N, rng, -0.1, 0.1);
  Vec v = zero_moments ? Vec(N, 0.0) : random_vec(N, rng, 0.0, 0.01);
  grad[3] = 0;
  const Vec param0 = param, m0 = m, v0 = v;
  scalar::adamw_update(param.data(), m.data(), v.data(), grad.data(), N, s);
  const double bc1 = 1 - std::pow(s.beta1, (double)s.t), bc2 = 1 - std::pow(s.beta2, (double)s.t);
  for (size_t i = 0; i < N; ++i) {
    const AdamWReference ref = torch_adamw(param0[i], m0[i], v0[i], grad[i], s);
    // Both sides take about a dozen roundings (pow, sqrt and the divisions within an ulp) in a
    // different order: lerp against multiply-add, sqrt(v)/sqrt(bc2) against sqrt(v/bc2). So each
    // is within 16 eps of the exact value and the two within 32 eps, relative to the magnitudes
    // that went in: |p0| plus the update had m no cancellation. m and v take 3 roundings a side,
    // hence 8 eps relative to |m0| + |g| and to v0 + g^2.
    const double update_scale =
        s.lr / bc1 * (std::abs(m0[i]) + std::abs(grad[i])) / (std::sqrt(ref.v / bc2) + s.eps);
    const double p_scale = std::abs(param0[i]) + update_scale;
    EXPECT_NEAR(param[i], ref.param, 32 * kEps * p_scale) << "param[" << i << "] t=" << s.t;
    EXPECT_NEAR(m[i], ref.m, 8 * kEps * (std::abs(m0[i]) + std::abs(grad[i]))) << "m[" << i << "]";
    EXPECT_NEAR(v[i], ref.v, 8 * kEps * (v0[i] + grad[i] * grad[i])) << "v[" << i << "]";
  }
  if (zero_moments) {
    // Zero gradient and zero moments: only the decoupled weight decay moves the weight.
    EXPECT_EQ(m[3], 0.0);
    EXPECT_EQ(v[3], 0.0);
    EXPECT_EQ(param[3], param0[3] * (1 - s.lr * s.weight_decay));
  }
}

TEST(FiniteDifference, AdamWFirstStepMatchesTorchFormulas) {
  check_adamw({.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01, .t = 1},
              /*zero_moments=*/true, 9);
}

TEST(FiniteDifference, AdamWLaterStepMatchesTorchFormulas) {
  check_adamw({.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1, .t = 7},
              /*zero_moments=*/false, 10);
  check_adamw(
      {.lr = 3e-4, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0, .t = 1000},
      /*zero_moments=*/false, 11);
}

// Sets the OpenMP thread count for a scope and restores it after.
class OmpThreads {
 public:
  explicit OmpThreads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~OmpThreads() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

// Runs `backward` (which fills the buffers it is given) with 1 thread, then with 2 and 3, and
// requires bit-identical buffers. fp32, where a changed summation order would show.
void expect_same_bits_across_threads(
    const std::string& what, const std::vector<size_t>& sizes,
    const std::function<void(std::vector<std::vector<float>>&)>& backward) {
  auto run = [&](int threads) {
    std::vector<std::vector<float>> bufs;
    for (size_t n : sizes) bufs.emplace_back(n, float(kPrefill));
    OmpThreads scope(threads);
    EXPECT_EQ(omp_get_max_threads(), threads);
    backward(bufs);
    return bufs;
  };
  const auto one = run(1);
  for (int threads : {2, 3}) {
    const auto many = run(threads);
    for (size_t k = 0; k < sizes.size(); ++k) {
      EXPECT_EQ(std::memcmp(one[k].data(), many[k].data(), sizes[k] * sizeof(float)), 0)
          << what << " output " << k << " differs between 1 and " << threads << " threads";
    }
  }
}

TEST(FiniteDifferenceDeterminism, BackwardIsBitIdenticalAcrossThreadCounts) {
  std::mt19937_64 rng(12);
  {
    // Matmul: ragged row tiles (37 rows) and output-channel tiles (69 channels).
    constexpr size_t N = 37;
    constexpr int C = 70, OC = 69;
    const auto inp = to_float(random_vec(N * C, rng)), weight = to_float(random_vec(OC * C, rng));
    const auto dout = to_float(random_vec(N * OC, rng));
    expect_same_bits_across_threads("matmul", {N * C, (size_t)OC * C, OC}, [&](auto& g) {
      scalar::matmul_backward(g[0].data(), g[1].data(), g[2].data(), dout.data(), inp.data(),
                              weight.data(), N, C, OC);
    });
  }
  {
    // LayerNorm: 4 channel slices of 64 for the parameter gradients.
    constexpr size_t N = 37;
    constexpr int C = 200;
    const auto inp = to_float(random_vec(N * C, rng)), dout = to_float(random_vec(N * C, rng));
    const auto weight = to_float(random_vec(C, rng)), bias = to_float(random_vec(C, rng));
    std::vector<float> out(N * C), mean(N), rstd(N);
    scalar::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(),
                              bias.data(), N, C);
    expect_same_bits_across_threads("layernorm", {N * C, C, C}, [&](auto& g) {
      scalar::layernorm_backward(g[0].data(), g[1].data(), g[2].data(), dout.data(), inp.data(),
                                 weight.data(), mean.data(), rstd.data(), N, C);
    });
  }
  {
    constexpr int B = 3, T = 17, C = 48, NH = 4;
    const auto qkv = to_float(random_vec((size_t)B * T * 3 * C, rng));
    const auto dout = to_float(random_vec((size_t)B * T * C, rng));
    std::vector<float> out((size_t)B * T * C), att((size_t)B * NH * T * T);
    scalar::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    expect_same_bits_across_threads(
        "attention", {(size_t)B * T * 3 * C, (size_t)B * NH * T}, [&](auto& g) {
          scalar::attention_backward(g[0].data(), g[1].data(), dout.data(), qkv.data(), att.data(),
                                     B, T, C, NH);
        });
  }
  {
    // Encoder: 4 channel slices, and tokens repeated many times over.
    constexpr int B = 3, T = 17, C = 200, Vp = 9, maxT = 20;
    std::vector<int> inp(B * T);
    std::uniform_int_distribution<int> tok(0, Vp - 1);
    for (int& t : inp) t = tok(rng);
    const auto dout = to_float(random_vec((size_t)B * T * C, rng));
    expect_same_bits_across_threads("encoder", {(size_t)Vp * C, (size_t)maxT * C}, [&](auto& g) {
      scalar::encoder_backward(g[0].data(), g[1].data(), dout.data(), inp.data(), B, T, C);
    });
  }
  for (const int NKV : {4, 2}) {  // multi-head, grouped-query
    constexpr int B = 3, T = 17, NH = 4, D = 12;
    const size_t row = size_t(NH + 2 * NKV) * D, C = size_t(NH) * D;
    const auto qkv = to_float(random_vec((size_t)B * T * row, rng));
    const auto dout = to_float(random_vec((size_t)B * T * C, rng));
    std::vector<float> out((size_t)B * T * C), lse((size_t)B * NH * T);
    scalar::flash_attention_forward(out.data(), lse.data(), qkv.data(), B, T, NH, NKV, D,
                                    AttentionOptions{});
    expect_same_bits_across_threads("flash attention", {(size_t)B * T * row}, [&](auto& g) {
      scalar::flash_attention_backward(g[0].data(), dout.data(), out.data(), qkv.data(), lse.data(),
                                       B, T, NH, NKV, D, AttentionOptions{});
    });
  }
}

}  // namespace
}  // namespace llmcpu
