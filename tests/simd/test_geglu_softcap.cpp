// The Gemma family's element-wise kernels on every fp32 table this CPU runs, the scalar one
// included, and (GeGLU) every bf16 table, against references written here in double:
// - GeGLU (kernels.h geglu_forward/backward, bf16.h's on bf16 inputs): out = gelu(gate) up with
//   GELU's tanh form; the vectorized tables compute it as x sigma(2u) with one exp (simd/hwy/
//   gelu.cc), the scalar table with tanhf, so each has its own bound (below); the bf16 entries are
//   their fp32 table's kernels on the widened input, the output rounded once (bit for bit), and
//   within that bound plus one bf16 rounding (bf16_rounding.h);
// - soft-capping (softcap_forward/backward): y = c tanh(x / c), dx = dy (1 - (y / c)^2), against
//   the double reference from the same capped values and against dy sech^2(x / c), the derivative
//   of the double forward; where |x| >> c the output is exactly +-c and the gradient exactly 0.
// Lengths and widths are ragged (1, 7, 33, 1000, 4097, ...); gates and logits include values where
// exp and tanh saturate.
#include <gtest/gtest.h>
#include <omp.h>

#include <cfloat>
#include <cmath>

#include "tests/simd/bf16_rounding.h"
#include "tests/simd/error_bounds.h"

namespace llmcpu::simd_test {
namespace {

// tanh within 4 ulp: Highway's Tanh (tested by Highway) and glibc's tanhf (2 ulp in its tables).
constexpr double kTanhUlpBound = 4;
// What a rounding may add where its result falls below the smallest normal float.
constexpr double kTiny = 0x1p-149;

constexpr double kS = 0.7978845608028654, kK = 0.044715;  // sqrt(2/pi), GELU's cubic coefficient

// GELU and its derivative in double, through 0.5 (1 + tanh(u)) = sigma(2u) = 1 / (1 + E),
// E = exp(-2u), which never cancels:
//   gelu = x sigma,  gelu' = sigma + x sigma (1 - sigma) 2u',  u' = sqrt(2/pi) (1 + 3 k x^2).
struct Gelu {
  double value, grad;
  // The error bounds of the kernels' gelu and gelu' (fp32), by the form the table computes.
  double value_b, grad_b;
};

// The vectorized form (simd/hwy/gelu.cc), fused multiply-adds or not: a = -2s (x + k x^3) with
// the constants, x^3 and the multiply-add rounded, gamma(7) 2s (|x| + k|x|^3); E = exp(a) adds
// kExpUlps ulp and expm1(|d a|); sigma = 1/(1+E): (1 - sigma) rel_E + gamma(2); gelu = x / (1+E)
// the same two roundings (forward), x sigma one more (backward); gelu' = sigma + x (E sigma^2) 2u':
// E sigma^2 rel_E + 2 rel_sigma + gamma(2), 2u' gamma(6), x times them and the multiply-add's
// product gamma(2) more, its addition u |gelu'|. exp's argument is clamped to [-87, 88]: where
// |a| >= 87 both the exact and the computed terms are below e^-87 (gelu_forward's test).
Gelu gelu_vectorized(double x) {
  const double ax = std::fabs(x), a = -2 * kS * (x + kK * x * x * x), e = std::exp(-std::fabs(a));
  // sigma = 1 / (1 + exp(a)) and 1 - sigma from exp(-|a|), which never overflows.
  const double sigma = a <= 0 ? 1 / (1 + e) : e / (1 + e), sm = a <= 0 ? e / (1 + e) : 1 / (1 + e);
  const double du = 2 * kS * (1 + 3 * kK * x * x);
  const double t = x * sigma * sm * du, local = sigma + t;
  const double d_a = gamma(7) * 2 * kS * (ax + kK * ax * ax * ax);
  const double rel_e = kExpUlps * kUlp + std::expm1(d_a);
  const double rel_sigma = sm * rel_e + gamma(2);
  const double rel_q = rel_e + 2 * rel_sigma + gamma(2);
  Gelu g{x * sigma, local, ax * sigma * (rel_sigma + kU) + kTiny,
         sigma * rel_sigma + std::fabs(t) * (rel_q + gamma(8)) + kU * std::fabs(local) + kTiny};
  if (std::fabs(a) >= 87) {
    g.value_b += 2 * ax * std::exp(-87.0);
    g.grad_b += 2 * (1 + ax * du) * std::exp(-87.0);
  }
  return g;
}

// The scalar table's tanh form (simd/scalar/gelu.h) in fp32, with tanhf within kTanhUlpBound ulp
// and 1-Lipschitz: u = s (x + ((k x) x) x) with the constants rounded, gamma(7) s (|x| + k|x|^3);
// th errs by that plus kTanhUlpBound ulp; 1 + th, (0.5 x)(1 + th): u each. gelu' =
// 0.5 (1 + th) + (((0.5 x)(1 - th^2)) s)(1 + ((3k) x) x): 1 - th^2 by 2|th| d_th + u th^2 + u m,
// then each product u (s, a constant, one more), 1 + 3k x^2 within gamma(5) of itself, the sum u.
Gelu gelu_tanh_form(double x) {
  const double ax = std::fabs(x), u = kS * (x + kK * x * x * x), th = std::tanh(u);
  Gelu g = gelu_vectorized(x);  // the values; the bounds below
  const double d_th =
      gamma(7) * kS * (ax + kK * ax * ax * ax) + kTanhUlpBound * kUlp * std::fabs(th);
  const double d_one = d_th + kU * (1 + th);
  g.value_b = 0.5 * ax * d_one + kU * std::fabs(g.value) + kTiny;
  const double m = 1 - th * th,
               d_m = 2 * std::fabs(th) * d_th + d_th * d_th + kU * th * th + kU * m;
  const double p1 = 0.5 * ax * m, d_p1 = 0.5 * ax * d_m + kU * p1;
  const double p2 = p1 * kS, d_p2 = kS * d_p1 + gamma(2) * p2;
  const double c = 1 + 3 * kK * x * x, d_c = gamma(5) * c;
  const double p3 = p2 * c, d_p3 = c * d_p2 + p2 * d_c + kU * p3;
  g.grad_b = 0.5 * d_one + d_p3 + kU * std::fabs(g.grad) + kTiny;
  return g;
}

struct GeGluRef {
  std::vector<double> out, dinp, out_b, dinp_b;
};

// out = gelu up: |up| d_gelu + u |out|; dgate = (dy up) gelu': |dy up| d_gelu' + gamma(2)
// |dy up gelu'|; dup = dy gelu: |dy| d_gelu + u |dup|; each may underflow once more (kTiny).
GeGluRef geglu_reference(const std::vector<float>& inp, const std::vector<float>& dout, size_t N,
                         size_t H, bool tanh_form) {
  GeGluRef r{std::vector<double>(N * H), std::vector<double>(N * 2 * H), std::vector<double>(N * H),
             std::vector<double>(N * 2 * H)};
  for (size_t n = 0; n < N; ++n) {
    for (size_t h = 0; h < H; ++h) {
      const double x = inp[n * 2 * H + h], up = inp[n * 2 * H + H + h], dy = dout[n * H + h];
      const Gelu g = tanh_form ? gelu_tanh_form(x) : gelu_vectorized(x);
      const size_t o = n * H + h, dg = n * 2 * H + h, du = dg + H;
      r.out[o] = g.value * up, r.dinp[dg] = dy * up * g.grad, r.dinp[du] = dy * g.value;
      r.out_b[o] = std::fabs(up) * g.value_b + kU * std::fabs(r.out[o]) + kTiny;
      r.dinp_b[dg] = std::fabs(dy * up) * g.grad_b + gamma(2) * std::fabs(r.dinp[dg]) + 2 * kTiny;
      r.dinp_b[du] = std::fabs(dy) * g.value_b + kU * std::fabs(r.dinp[du]) + kTiny;
    }
  }
  return r;
}

struct RowShape {
  size_t N;
  int H;
};
constexpr RowShape kRows[] = {{1, 1}, {3, 7}, {2, 33}, {4, 64}, {3, 768}, {2, 1000}, {5, 4097}};

// Gates uniform in [-10, 10] and, first, where exp's argument is clamped, tanh saturates, zeros and
// tiny values; ups and dout normal.
std::vector<float> geglu_input(size_t N, size_t H, unsigned seed) {
  const float special[] = {0.0f,  -0.0f, 15.0f,  -15.0f,  30.0f, -30.0f,
                           -9.5f, 9.5f,  1e-20f, -1e-20f, -0.75f};
  Random rnd(seed);
  std::vector<float> inp = rnd.normal(N * 2 * H, 0, 1.5);
  const std::vector<float> gates = rnd.uniform(N * H, -10, 10);
  for (size_t i = 0; i < N * H; ++i) {
    inp[(i / H) * 2 * H + i % H] = i < std::size(special) ? special[i] : gates[i];
  }
  return inp;
}

std::vector<std::string> fp32_tables() {
  std::vector<std::string> r;
  for (std::string_view name : available_targets()) r.emplace_back(name);
  return r;
}

class SimdGemma : public ::testing::TestWithParam<std::string> {
 protected:
  const KernelTable& k() const { return kernels_for_target(GetParam()); }
};

TEST_P(SimdGemma, GeGluWithinDerivedBound) {
  for (const RowShape sh : kRows) {
    const size_t N = sh.N, H = size_t(sh.H);
    const std::string where = GetParam() + " N=" + std::to_string(N) + " H=" + std::to_string(H);
    const std::vector<float> inp = geglu_input(N, H, unsigned(sh.H + 500));
    const std::vector<float> dout = Random(unsigned(sh.H + 501)).normal(N * H);
    std::vector<float> out(N * H, NAN), dinp(N * 2 * H, NAN);
    k().geglu_forward(out.data(), inp.data(), N, sh.H);
    k().geglu_backward(dinp.data(), dout.data(), inp.data(), N, sh.H);
    const GeGluRef r = geglu_reference(inp, dout, N, H, GetParam() == "scalar");
    expect_within("geglu out" + where, out, r.out, r.out_b);
    expect_within("geglu dinp" + where, dinp, r.dinp, r.dinp_b);
  }
}

// Soft-cap, per element with q = x / c, th = tanh(q), y = c th exact:
//   forward: fl(x / c) moves q by u|q|, tanh passes that on scaled by sech^2 <= min(1, 4 e^-2|q'|)
//     over the moved interval, and adds kTanhUlpBound ulp; the product by c one rounding:
//     |d y| <= c (min(1, 4 e^(-2 (|q| - u|q|))) u|q| + kTanhUlpBound 2u |th|) + u |y|;
//   backward from the same capped y: t = fl(y / c) (u), 1 - t^2 (t^2 and the subtraction, fused or
//     not), the product by dy: |d dx| <= |dy| (3u t^2 + u |m|) + u |dx|, m = 1 - t^2;
//   backward of the kernel's own forward against dy sech^2(q): t is off tanh(q) by e = |d y| / c,
//     so m by 2|th| e + e^2, on top of the bound above.
struct SoftCapRef {
  double y, y_b, th;
};
SoftCapRef softcap_reference(double x, double c) {
  const double q = x / c, th = std::tanh(q), dq = kU * std::fabs(q);
  const double lipschitz = std::fmin(1.0, 4 * std::exp(-2 * (std::fabs(q) - dq)));
  const double y = c * th;
  return {y,
          c * (lipschitz * dq + kTanhUlpBound * kUlp * std::fabs(th)) + kU * std::fabs(y) + kTiny,
          th};
}
double softcap_backward_bound(double dy, double t, double m) {
  return std::fabs(dy) * (3 * kU * t * t + kU * std::fabs(m)) + kU * std::fabs(dy * m) + kTiny;
}

constexpr size_t kLengths[] = {1, 3, 7, 17, 33, 1000, 4095, 4097, 12289};

TEST_P(SimdGemma, SoftCapWithinDerivedBoundAndSaturates) {
  for (const float cap : {30.0f, 50.0f, 1.5f}) {
    for (const size_t n : kLengths) {
      const std::string where =
          GetParam() + " cap=" + std::to_string(cap) + " n=" + std::to_string(n);
      Random rnd(unsigned(n + size_t(cap)));
      std::vector<float> x = rnd.uniform(n, -4 * cap, 4 * cap);
      const float special[] = {0.0f,        -0.0f,   20 * cap, -20 * cap, 1e4f * cap,
                               -1e4f * cap, FLT_MAX, -FLT_MAX, 1e-30f,    cap};
      for (size_t i = 0; i < std::size(special) && i < n; ++i) x[n - 1 - i] = special[i];
      const std::vector<float> dy = rnd.normal(n);
      std::vector<float> y = x, dx = dy;
      k().softcap_forward(y.data(), n, cap);
      k().softcap_backward(dx.data(), y.data(), n, cap);

      std::vector<double> y_r(n), y_b(n), dx_r(n), dx_b(n), dx_true(n), dx_true_b(n);
      for (size_t i = 0; i < n; ++i) {
        const SoftCapRef s = softcap_reference(x[i], cap);
        y_r[i] = s.y, y_b[i] = s.y_b;
        const double t = double(y[i]) / cap, m = 1 - t * t;
        dx_r[i] = dy[i] * m, dx_b[i] = softcap_backward_bound(dy[i], t, m);
        const double e = s.y_b / cap;
        dx_true[i] = dy[i] * (1 - s.th * s.th);
        dx_true_b[i] = dx_b[i] + std::fabs(dy[i]) * (2 * std::fabs(s.th) * e + e * e);
        if (std::fabs(double(x[i]) / cap) >= 20) {  // tanh is 1 in fp32 there, in every table
          EXPECT_EQ(y[i], std::copysign(cap, x[i]))
              << "softcap saturates" << where << " x=" << x[i];
          EXPECT_EQ(dx[i], 0.0f) << "softcap gradient saturates" << where << " x=" << x[i];
        }
      }
      expect_within("softcap forward" + where, y, y_r, y_b);
      expect_within("softcap backward" + where, dx, dx_r, dx_b);
      expect_within("softcap backward against sech^2" + where, dx, dx_true, dx_true_b);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, SimdGemma, ::testing::ValuesIn(fp32_tables()), param_name);

class SimdBf16GeGlu : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(k().geglu_forward && k().geglu_backward) << GetParam() << " leaves GeGLU empty";
  }
  const Bf16Kernels& k() const { return bf16_kernels_named(GetParam()); }
};

TEST_P(SimdBf16GeGlu, RoundsTheFp32OutputOnce) {
  const KernelTable& f32 = fp32_table_of(GetParam());
  for (const RowShape sh : kRows) {
    const size_t N = sh.N, H = size_t(sh.H);
    const std::string where = GetParam() + " N=" + std::to_string(N) + " H=" + std::to_string(H);
    const std::vector<bf16> inp = round_bf16(geglu_input(N, H, unsigned(sh.H + 600)));
    const std::vector<float> x = widen_bf16(inp), dout = Random(unsigned(sh.H)).normal(N * H);
    std::vector<bf16> out(N * H, 0x7fc1);
    std::vector<float> dinp(N * 2 * H, NAN), out32(N * H), dinp32(N * 2 * H);
    k().geglu_forward(out.data(), inp.data(), N, sh.H);
    k().geglu_backward(dinp.data(), dout.data(), inp.data(), N, sh.H);
    f32.geglu_forward(out32.data(), x.data(), N, sh.H);
    f32.geglu_backward(dinp32.data(), dout.data(), x.data(), N, sh.H);
    expect_same_bf16("geglu out against bf16(fp32)" + where, out, round_bf16(out32));
    expect_identical("geglu dinp against fp32" + where, dinp, dinp32);

    const GeGluRef r = geglu_reference(x, dout, N, H, f32.target == "scalar");
    expect_within("geglu out" + where, widen_bf16(out), r.out, plus_bf16_rounding(r.out, r.out_b));
    expect_within("geglu dinp" + where, dinp, r.dinp, r.dinp_b);
  }
}

// Forward (and its recomputation in a backward pass) and backward: the same bits on any team.
TEST_P(SimdBf16GeGlu, SameBitsOnAnyThreadCount) {
  const size_t N = 37;
  const int H = 1031;
  const std::vector<bf16> inp = round_bf16(geglu_input(N, size_t(H), 19));
  const std::vector<float> dout = Random(20).normal(N * size_t(H));
  auto run = [&](int threads, std::vector<bf16>& out, std::vector<float>& dinp) {
    omp_set_num_threads(threads);
    out.assign(N * size_t(H), 0);
    dinp.assign(N * 2 * size_t(H), 0.0f);
    k().geglu_forward(out.data(), inp.data(), N, H);
    k().geglu_backward(dinp.data(), dout.data(), inp.data(), N, H);
  };
  const int saved = omp_get_max_threads();
  std::vector<bf16> o1, o;
  std::vector<float> d1, d;
  run(1, o1, d1);
  for (int threads : {2, 3}) {
    run(threads, o, d);
    expect_same_bf16(GetParam() + " out on " + std::to_string(threads) + " threads", o, o1);
    expect_identical(GetParam() + " dinp on " + std::to_string(threads) + " threads", d, d1);
  }
  omp_set_num_threads(saved);
}

INSTANTIATE_TEST_SUITE_P(AllTables, SimdBf16GeGlu, ::testing::ValuesIn(all_bf16_tables()),
                         param_name);

}  // namespace
}  // namespace llmcpu::simd_test
