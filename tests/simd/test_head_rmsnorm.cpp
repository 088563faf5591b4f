// Per-head RMSNorm of q and k in place in the qkv rows (kernels.h head_rmsnorm_forward/backward,
// bf16.h head_rmsnorm_forward) on every fp32 table this CPU runs, the scalar one included, and on
// every bf16 table:
// - forward (x, saved, rstd) and backward (dx, dwq, dwk) against a reference written here in
//   double, within bounds derived from fp32 rounding as in error_bounds.h (below);
// - the backward also against central differences of the double forward (Richardson's error
//   estimate of the difference quotient as its tolerance);
// - the v part of each row and the gap after it are never written (signalling NaNs there, which a
//   kernel that wrote them back would quieten);
// - bf16: saved is the widened input, rstd and the output bf16(fp32 kernel of the same target);
//   one bf16 step from the scalar table; the same bits on 1, 2 and 3 threads, dwq and dwk too.
// Shapes: NH != NKV, D of 5, 16, 24, 64 and 128, N of 1 and 7, rows longer than their q and k
// heads, weight_offset 0 (Qwen3) and 1 (Gemma 3: the scale is 1 + w).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>

#include "tests/simd/bf16_rounding.h"
#include "tests/simd/error_bounds.h"

namespace llmcpu::simd_test {
namespace {

struct HeadCase {
  size_t N;
  int NH, NKV, D;
  float offset;
  size_t heads() const { return size_t(NH + NKV); }
  size_t stride() const { return size_t(NH + 2 * NKV) * size_t(D) + 3; }  // q, k, v, a gap
  size_t at(size_t j, int i) const {  // the i-th value of head pair j in the rows
    return (j / heads()) * stride() + (j % heads()) * size_t(D) + size_t(i);
  }
  std::string name() const {
    return " N=" + std::to_string(N) + " NH=" + std::to_string(NH) + " NKV=" + std::to_string(NKV) +
           " D=" + std::to_string(D) + " offset=" + std::to_string(offset);
  }
};

std::vector<HeadCase> cases() {
  std::vector<HeadCase> r;
  const int groups[][2] = {{4, 2}, {3, 1}, {2, 1}};
  int g = 0;
  for (int D : {16, 24, 64, 128, 5}) {
    for (float offset : {0.0f, 1.0f}) {
      const int* nh = groups[g++ % 3];
      r.push_back({D == 5 ? 1u : 7u, nh[0], nh[1], D, offset});
    }
  }
  return r;
}

constexpr float kEps = 1e-6f;
constexpr uint32_t kGapBits = 0x7fa00001u;  // a signalling NaN

bool in_heads(const HeadCase& c, size_t i) { return i % c.stride() < c.heads() * size_t(c.D); }

struct Inputs {
  std::vector<float> rows, wq, wk, dy;  // rows and dy (N, stride); gaps hold kGapBits
  std::vector<float> dwq0, dwk0;
};

Inputs inputs(const HeadCase& c, unsigned seed) {
  Random rnd(seed);
  Inputs in;
  in.rows = rnd.normal(c.N * c.stride(), 0.2, 1.5);
  in.dy = rnd.normal(c.N * c.stride());
  for (int i = 0; i < c.D; ++i) in.rows[c.at(0, i)] *= 1e-3f;  // a head whose mean square ~ eps
  float gap;
  std::memcpy(&gap, &kGapBits, 4);
  for (size_t i = 0; i < in.rows.size(); ++i) {
    if (!in_heads(c, i)) in.rows[i] = in.dy[i] = gap;
  }
  const double w_mean = c.offset == 0.0f ? 1.0 : 0.0;  // Gemma stores the scale minus one
  in.wq = rnd.normal(size_t(c.D), w_mean, 0.3), in.wk = rnd.normal(size_t(c.D), w_mean, 0.3);
  in.dwq0 = rnd.normal(size_t(c.D)), in.dwk0 = rnd.normal(size_t(c.D));
  return in;
}

// The reference in double on the heads gathered contiguously, x (N, NH+NKV, D).
std::vector<double> gather(const HeadCase& c, const std::vector<float>& rows) {
  std::vector<double> x(c.N * c.heads() * size_t(c.D));
  for (size_t j = 0; j < c.N * c.heads(); ++j) {
    for (int i = 0; i < c.D; ++i) x[j * c.D + i] = rows[c.at(j, i)];
  }
  return x;
}
const std::vector<float>& weight_of(const HeadCase& c, const Inputs& in, size_t j) {
  return int(j % c.heads()) < c.NH ? in.wq : in.wk;
}
double rstd_of(const double* x, int D) {
  double ms = 0;
  for (int i = 0; i < D; ++i) ms += x[i] * x[i];
  return 1 / std::sqrt(ms / D + double(kEps));
}
// sum_i c_i y_i of one head: the loss whose gradient the backward computes (c = dy).
double head_loss(const double* x, const std::vector<float>& w, double offset, const double* c,
                 int D) {
  const double s = rstd_of(x, D);
  double l = 0;
  for (int i = 0; i < D; ++i) l += c[i] * x[i] * s * (w[i] + offset);
  return l;
}

struct Grads {
  std::vector<double> dx, dwq, dwk;
};
// dx = s (g - n mean(g n)), dw += sum n dy, with n = x s, g = (w + offset) dy, s given per head.
Grads reference_backward(const HeadCase& c, const Inputs& in, const std::vector<double>& x,
                         const std::vector<double>& dy, const std::vector<double>& s) {
  const size_t D = size_t(c.D);
  Grads r{std::vector<double>(x.size()), widen(in.dwq0), widen(in.dwk0)};
  for (size_t j = 0; j < c.N * c.heads(); ++j) {
    const std::vector<float>& w = weight_of(c, in, j);
    std::vector<double>& dw = int(j % c.heads()) < c.NH ? r.dwq : r.dwk;
    double gn = 0;
    for (size_t i = 0; i < D; ++i) gn += (w[i] + double(c.offset)) * dy[j * D + i] * x[j * D + i];
    const double mean = gn * s[j] / double(D);
    for (size_t i = 0; i < D; ++i) {
      const double g = (w[i] + double(c.offset)) * dy[j * D + i], n = x[j * D + i] * s[j];
      r.dx[j * D + i] = s[j] * (g - n * mean);
      dw[i] += n * dy[j * D + i];
    }
  }
  return r;
}

// Forward bound, per head with ms*, v* = ms* + eps and s* exact (as llama_bounds.h's RMSNorm):
//   rho = (gamma(D + 1) ms* / v* + u) / 2 + gamma(2)   relative error of rstd;
//   y = (x s) W with W = fl(w + offset) (exact for offset 0): three roundings on top of rho,
//   |dy| <= |x (w + offset)| s* (rho + gamma(3) (1 + rho)).
void forward_bounds(const HeadCase& c, const Inputs& in, const std::vector<double>& x,
                    std::vector<double>& y_r, std::vector<double>& y_b, std::vector<double>& s_r,
                    std::vector<double>& s_b) {
  const size_t D = size_t(c.D), pairs = c.N * c.heads();
  y_r.resize(x.size()), y_b.resize(x.size()), s_r.resize(pairs), s_b.resize(pairs);
  for (size_t j = 0; j < pairs; ++j) {
    const double s = rstd_of(&x[j * D], c.D), v = 1 / (s * s), ms = v - double(kEps);
    const double rho = (gamma(double(D) + 1) * ms / v + kU) / 2 + gamma(2);
    s_r[j] = s, s_b[j] = rho * s;
    const std::vector<float>& w = weight_of(c, in, j);
    for (size_t i = 0; i < D; ++i) {
      const double W = w[i] + double(c.offset);
      y_r[j * D + i] = x[j * D + i] * s * W;
      y_b[j * D + i] = std::fabs(x[j * D + i] * W) * s * (rho + gamma(3) * (1 + rho));
    }
  }
}

// Backward bound with the same fp32 s on both sides (as test_simd_llama.cpp's RMSNorm), n = x s
// (one rounding) and g = W dy (two: W and the product):
//   mean(g n): D products of rounded factors, summed and divided: gamma(D + 4) mean|g n|;
//   bracket = g - n mean: gamma(2)|g| + |n| d_mean + u|n mean| (the factors' errors) and
//             gamma(2) (|g| + |n mean|) (the product and the subtraction);
//   dx = s bracket: s d_bracket + u s |bracket|;
//   dw = dw0 + sum n dy over the K = N * heads terms of that weight, each rounded twice:
//             gamma(K + 2) (|dw0| + sum |n dy|).
Grads backward_bounds(const HeadCase& c, const Inputs& in, const std::vector<double>& x,
                      const std::vector<double>& dy, const std::vector<double>& s) {
  const size_t D = size_t(c.D);
  Grads b{std::vector<double>(x.size()), std::vector<double>(D), std::vector<double>(D)};
  for (size_t i = 0; i < D; ++i) b.dwq[i] = std::fabs(in.dwq0[i]), b.dwk[i] = std::fabs(in.dwk0[i]);
  for (size_t j = 0; j < c.N * c.heads(); ++j) {
    const std::vector<float>& w = weight_of(c, in, j);
    std::vector<double>& dw_b = int(j % c.heads()) < c.NH ? b.dwq : b.dwk;
    double gn_abs = 0, gn_sum = 0;
    for (size_t i = 0; i < D; ++i) {
      const double g = (w[i] + double(c.offset)) * dy[j * D + i], n = x[j * D + i] * s[j];
      gn_abs += std::fabs(g * n), gn_sum += g * n;
      dw_b[i] += std::fabs(n * dy[j * D + i]);
    }
    const double mean = gn_sum / double(D), d_mean = gamma(double(D) + 4) * gn_abs / double(D);
    for (size_t i = 0; i < D; ++i) {
      const double g = (w[i] + double(c.offset)) * dy[j * D + i], n = x[j * D + i] * s[j];
      const double bracket = g - n * mean;
      const double d_bracket = gamma(2) * std::fabs(g) + std::fabs(n) * d_mean +
                               kU * std::fabs(n * mean) +
                               gamma(2) * (std::fabs(g) + std::fabs(n * mean));
      b.dx[j * D + i] = s[j] * d_bracket + kU * s[j] * std::fabs(bracket);
    }
  }
  const double Kq = double(c.N) * c.NH, Kk = double(c.N) * c.NKV;
  for (size_t i = 0; i < D; ++i) b.dwq[i] *= gamma(Kq + 2), b.dwk[i] *= gamma(Kk + 2);
  return b;
}

// Central differences of the double forward's loss sum dy y, at steps h and h/2: q(h/2) errs by
// C h^2 / 4 + R(h/2) to leading order, and |q(h) - q(h/2)| >= 3 C h^2 / 4 - R(h) - R(h/2), so
//   |q(h/2) - f'| <= 2 (|q(h) - q(h/2)| + R(h) + R(h/2)) / 3 + R(h/2)
// (the factor 2 for the next order), with R(h) = gamma_53(n) S / h the rounding of the two
// losses (n roundings, S the sum of their terms' magnitudes) over the step.
struct Difference {
  double value, tolerance;
};
template <class Loss>
Difference central_difference(const Loss& loss, double h, double magnitude, double roundings) {
  auto q = [&](double step) { return (loss(step) - loss(-step)) / (2 * step); };
  const double gamma53 = roundings * 0x1p-53 / (1 - roundings * 0x1p-53);
  auto R = [&](double step) { return gamma53 * magnitude / step; };
  const double q1 = q(h), q2 = q(h / 2);
  return {q2, 2 * (std::fabs(q1 - q2) + R(h) + R(h / 2)) / 3 + R(h / 2)};
}

// The gradients of the double forward by central differences: dx per element, dw per weight.
// Steps are powers of two about 2^-10 of the head's root mean square (of |w| + 1 for a weight), so
// that x + step is exact in double.
Grads differences(const HeadCase& c, const Inputs& in, const std::vector<double>& x,
                  const std::vector<double>& dy, Grads& tol) {
  const size_t D = size_t(c.D), pairs = c.N * c.heads();
  Grads r{std::vector<double>(x.size()), std::vector<double>(D), std::vector<double>(D)};
  tol = r;
  auto step_for = [](double scale) { return std::ldexp(1.0, std::ilogb(scale) - 10); };
  auto term = [&](size_t j, size_t k, double W, double s) {
    return dy[j * D + k] * x[j * D + k] * s * (W + c.offset);
  };
  // The loss of one head: 2D + 4 roundings in s, 3 per term, D - 1 in the sum.
  const double head_roundings = 3.0 * D + 8;
  std::vector<double> xj(D);
  for (size_t j = 0; j < pairs; ++j) {
    const std::vector<float>& w = weight_of(c, in, j);
    const double s = rstd_of(&x[j * D], c.D);
    double mag = 0;
    for (size_t k = 0; k < D; ++k) mag += std::fabs(term(j, k, w[k], s));
    for (size_t i = 0; i < D; ++i) {
      auto loss = [&](double step) {
        std::copy(&x[j * D], &x[j * D] + D, xj.begin());
        xj[i] += step;
        return head_loss(xj.data(), w, c.offset, &dy[j * D], c.D);
      };
      const Difference d = central_difference(loss, step_for(1 / s), 2 * mag, head_roundings);
      r.dx[j * D + i] = d.value, tol.dx[j * D + i] = d.tolerance;
    }
  }
  for (const bool key : {false, true}) {
    const std::vector<float>& w = key ? in.wk : in.wq;
    auto uses = [&](size_t j) { return (int(j % c.heads()) >= c.NH) == key; };
    double mag = 0, terms = 0;
    for (size_t j = 0; j < pairs; ++j) {
      if (!uses(j)) continue;
      const double s = rstd_of(&x[j * D], c.D);
      for (size_t k = 0; k < D; ++k) mag += std::fabs(term(j, k, w[k], s));
      terms += D;
    }
    for (size_t i = 0; i < D; ++i) {
      auto loss = [&](double step) {
        double l = 0;
        for (size_t j = 0; j < pairs; ++j) {
          if (!uses(j)) continue;
          const double s = rstd_of(&x[j * D], c.D);
          for (size_t k = 0; k < D; ++k) l += term(j, k, w[k] + (k == i ? step : 0.0), s);
        }
        return l;
      };
      const Difference d =
          central_difference(loss, step_for(std::fabs(w[i]) + 1), 2 * mag, head_roundings + terms);
      (key ? r.dwk : r.dwq)[i] = d.value + (key ? in.dwk0 : in.dwq0)[i];
      (key ? tol.dwk : tol.dwq)[i] = d.tolerance;
    }
  }
  return r;
}

std::vector<float> heads_of(const HeadCase& c, const std::vector<float>& rows) {
  std::vector<float> h;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (in_heads(c, i)) h.push_back(rows[i]);
  }
  return h;
}

void expect_gaps_untouched(const std::string& what, const HeadCase& c,
                           const std::vector<float>& got, const std::vector<float>& before) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (in_heads(c, i)) continue;
    ASSERT_EQ(std::memcmp(&got[i], &before[i], 4), 0) << what << ": element " << i << " written";
  }
}

std::vector<double> plus(std::vector<double> a, const std::vector<double>& b,
                         const std::vector<double>& c) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i] + c[i];
  return a;
}
std::vector<double> abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = std::fabs(a[i] - b[i]);
  return r;
}

std::vector<std::string> fp32_tables() {
  std::vector<std::string> r;
  for (std::string_view name : available_targets()) r.emplace_back(name);
  return r;
}

class SimdHeadRmsNorm : public ::testing::TestWithParam<std::string> {
 protected:
  const KernelTable& k() const { return kernels_for_target(GetParam()); }
};

TEST_P(SimdHeadRmsNorm, ForwardAndBackwardWithinDerivedBounds) {
  for (const HeadCase& c : cases()) {
    const std::string where = GetParam() + c.name();
    const Inputs in = inputs(c, unsigned(c.D * 10 + c.NH));
    const size_t pairs = c.N * c.heads(), D = size_t(c.D);
    std::vector<float> rows = in.rows, saved(pairs * D, NAN), rstd(pairs, NAN);
    k().head_rmsnorm_forward(rows.data(), saved.data(), rstd.data(), in.wq.data(), in.wk.data(),
                             c.N, c.NH, c.NKV, c.D, c.stride(), kEps, c.offset);
    const std::vector<double> x = gather(c, in.rows);
    std::vector<double> y_r, y_b, s_r, s_b;
    forward_bounds(c, in, x, y_r, y_b, s_r, s_b);
    expect_identical("head_rmsnorm saved" + where, saved, heads_of(c, in.rows));
    expect_within("head_rmsnorm rstd" + where, rstd, s_r, s_b);
    expect_within("head_rmsnorm out" + where, heads_of(c, rows), y_r, y_b);
    expect_gaps_untouched("head_rmsnorm forward" + where, c, rows, in.rows);

    // Backward from the forward's saved and rstd; the reference from the same fp32 rstd.
    std::vector<float> dx = in.dy, dwq = in.dwq0, dwk = in.dwk0;
    k().head_rmsnorm_backward(dx.data(), dwq.data(), dwk.data(), saved.data(), rstd.data(),
                              in.wq.data(), in.wk.data(), c.N, c.NH, c.NKV, c.D, c.stride(),
                              c.offset);
    expect_gaps_untouched("head_rmsnorm backward" + where, c, dx, in.dy);
    const std::vector<double> dy = gather(c, in.dy), s32 = widen(rstd);
    const Grads ref = reference_backward(c, in, x, dy, s32), b = backward_bounds(c, in, x, dy, s32);
    expect_within("head_rmsnorm dx" + where, heads_of(c, dx), ref.dx, b.dx);
    expect_within("head_rmsnorm dwq" + where, dwq, ref.dwq, b.dwq);
    expect_within("head_rmsnorm dwk" + where, dwk, ref.dwk, b.dwk);

    // Against the true gradient: the reference moves by |ref(s32) - ref(s)| with the exact rstd s.
    Grads tol;
    const Grads fd = differences(c, in, x, dy, tol), exact = reference_backward(c, in, x, dy, s_r);
    expect_within("head_rmsnorm dx vs differences" + where, heads_of(c, dx), fd.dx,
                  plus(b.dx, abs_diff(ref.dx, exact.dx), tol.dx));
    expect_within("head_rmsnorm dwq vs differences" + where, dwq, fd.dwq,
                  plus(b.dwq, abs_diff(ref.dwq, exact.dwq), tol.dwq));
    expect_within("head_rmsnorm dwk vs differences" + where, dwk, fd.dwk,
                  plus(b.dwk, abs_diff(ref.dwk, exact.dwk), tol.dwk));
  }
}

// The weight gradients are sums over rows and heads whose order must not follow the team.
TEST_P(SimdHeadRmsNorm, SameBitsOnAnyThreadCount) {
  const HeadCase c{37, 8, 2, 128, 1.0f};
  const Inputs in = inputs(c, 5);
  const size_t pairs = c.N * c.heads(), D = size_t(c.D);
  struct Run {
    std::vector<float> rows, saved, rstd, dx, dwq, dwk;
  };
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    Run r{in.rows, std::vector<float>(pairs * D), std::vector<float>(pairs), in.dy, in.dwq0,
          in.dwk0};
    k().head_rmsnorm_forward(r.rows.data(), r.saved.data(), r.rstd.data(), in.wq.data(),
                             in.wk.data(), c.N, c.NH, c.NKV, c.D, c.stride(), kEps, c.offset);
    k().head_rmsnorm_backward(r.dx.data(), r.dwq.data(), r.dwk.data(), r.saved.data(),
                              r.rstd.data(), in.wq.data(), in.wk.data(), c.N, c.NH, c.NKV, c.D,
                              c.stride(), c.offset);
    return r;
  };
  const int saved_threads = omp_get_max_threads();
  const Run one = run(1), two = run(2), three = run(3);
  omp_set_num_threads(saved_threads);
  for (const Run* r : {&two, &three}) {
    const std::string t = GetParam() + (r == &two ? " 2 threads" : " 3 threads");
    expect_identical(t + " out", heads_of(c, r->rows), heads_of(c, one.rows));
    expect_identical(t + " rstd", r->rstd, one.rstd);
    expect_identical(t + " dx", heads_of(c, r->dx), heads_of(c, one.dx));
    expect_identical(t + " dwq", r->dwq, one.dwq);
    expect_identical(t + " dwk", r->dwk, one.dwk);
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, SimdHeadRmsNorm, ::testing::ValuesIn(fp32_tables()), param_name);

class SimdBf16HeadRmsNorm : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(k().head_rmsnorm_forward) << GetParam() << " leaves head_rmsnorm_forward empty";
  }
  const Bf16Kernels& k() const { return bf16_kernels_named(GetParam()); }
};

constexpr bf16 kGap16 = 0x7f81;  // a signalling NaN

TEST_P(SimdBf16HeadRmsNorm, RoundsTheFp32OutputOnce) {
  for (const HeadCase& c : cases()) {
    const std::string where = GetParam() + c.name();
    const Inputs in = inputs(c, unsigned(c.D * 10 + c.NH + 1));
    std::vector<bf16> x0 = round_bf16(in.rows);
    for (size_t i = 0; i < x0.size(); ++i) {
      if (!in_heads(c, i)) x0[i] = kGap16;
    }
    const std::vector<float> x0f = widen_bf16(x0);
    const size_t pairs = c.N * c.heads(), D = size_t(c.D);
    std::vector<bf16> x = x0;
    std::vector<float> saved(pairs * D, NAN), rstd(pairs, NAN);
    k().head_rmsnorm_forward(x.data(), saved.data(), rstd.data(), in.wq.data(), in.wk.data(), c.N,
                             c.NH, c.NKV, c.D, c.stride(), kEps, c.offset);

    // The fp32 kernel of the same target on the widened rows, the heads rounded back.
    std::vector<float> v = x0f, saved32(pairs * D), rstd32(pairs);
    fp32_table_of(GetParam())
        .head_rmsnorm_forward(v.data(), saved32.data(), rstd32.data(), in.wq.data(), in.wk.data(),
                              c.N, c.NH, c.NKV, c.D, c.stride(), kEps, c.offset);
    std::vector<bf16> expect = x0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (in_heads(c, i)) expect[i] = float_to_bf16(v[i]);
    }
    expect_same_bf16("head_rmsnorm against bf16(fp32)" + where, x, expect);  // gaps included
    expect_identical("head_rmsnorm saved" + where, saved, heads_of(c, x0f));
    expect_identical("head_rmsnorm rstd against fp32" + where, rstd, rstd32);

    const std::vector<double> xd = gather(c, x0f);
    std::vector<double> y_r, y_b, s_r, s_b;
    forward_bounds(c, in, xd, y_r, y_b, s_r, s_b);
    expect_within("head_rmsnorm out" + where, heads_of(c, widen_bf16(x)), y_r,
                  plus_bf16_rounding(y_r, y_b));
    expect_within("head_rmsnorm rstd" + where, rstd, s_r, s_b);

    // The scalar table: its fp32 values are a few fp32 ulps from these, one bf16 step at most.
    std::vector<bf16> s = x0;
    scalar_bf16_kernels().head_rmsnorm_forward(s.data(), saved32.data(), rstd32.data(),
                                               in.wq.data(), in.wk.data(), c.N, c.NH, c.NKV, c.D,
                                               c.stride(), kEps, c.offset);
    auto order = [](bf16 h) { return (h & 0x8000) ? -int(h & 0x7fff) : int(h); };
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_LE(std::abs(order(x[i]) - order(s[i])), 1)
          << "head_rmsnorm against scalar" << where << ": element " << i;
    }
  }
}

TEST_P(SimdBf16HeadRmsNorm, SameBitsOnAnyThreadCount) {
  const HeadCase c{37, 8, 2, 128, 0.0f};
  const Inputs in = inputs(c, 6);
  const std::vector<bf16> x0 = round_bf16(in.rows);
  const size_t pairs = c.N * c.heads();
  auto run = [&](int threads, std::vector<float>& rstd) {
    omp_set_num_threads(threads);
    std::vector<bf16> x = x0;
    std::vector<float> saved(pairs * size_t(c.D));
    rstd.assign(pairs, 0.0f);
    k().head_rmsnorm_forward(x.data(), saved.data(), rstd.data(), in.wq.data(), in.wk.data(), c.N,
                             c.NH, c.NKV, c.D, c.stride(), kEps, c.offset);
    return x;
  };
  const int saved_threads = omp_get_max_threads();
  std::vector<float> r1, r2, r3;
  const std::vector<bf16> one = run(1, r1), two = run(2, r2), three = run(3, r3);
  omp_set_num_threads(saved_threads);
  expect_same_bf16(GetParam() + " 2 threads", two, one);
  expect_same_bf16(GetParam() + " 3 threads", three, one);
  expect_identical(GetParam() + " rstd 2 threads", r2, r1);
  expect_identical(GetParam() + " rstd 3 threads", r3, r1);
}

INSTANTIATE_TEST_SUITE_P(AllTables, SimdBf16HeadRmsNorm, ::testing::ValuesIn(all_bf16_tables()),
                         param_name);

}  // namespace
}  // namespace llmcpu::simd_test
