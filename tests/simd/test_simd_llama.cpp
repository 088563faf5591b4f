// The Llama family's kernels (RMSNorm, SwiGLU, rotary position embedding) of every table this CPU
// runs, the scalar one included, against the scalar reference in double, with bounds derived from
// fp32 rounding and Highway's exp guarantee (llama_bounds.h); the rotation of every vectorized
// table also bit for bit against the scalar fp32 reference. Shapes are ragged: C and H of 1, 7, 33
// and 768 among others, head sizes D of 2, 24, 64 and 128, 1 to 3 heads in rows with a gap after
// them, positions from 0 and from further on.
#include <gtest/gtest.h>

#include <cmath>

#include "simd/scalar/rmsnorm.h"
#include "simd/scalar/rope.h"
#include "simd/scalar/swiglu.h"
#include "tests/simd/error_bounds.h"
#include "tests/simd/llama_bounds.h"

namespace llmcpu::simd_test {
namespace {

// Every table this CPU runs, "scalar" first: the fp32 reference is held to its bound too.
std::vector<std::string> all_targets() {
  std::vector<std::string> r;
  for (std::string_view name : available_targets()) r.emplace_back(name);
  return r;
}

class SimdLlama : public ::testing::TestWithParam<std::string> {
 protected:
  const KernelTable& k() const { return kernels_for_target(GetParam()); }
};

// RMSNorm backward, with the same fp32 rstd s on both sides, n = x s and g = w dy (one rounding
// each when recomputed):
//   mean(g n):  C products of rounded factors, summed and divided: gamma(C + 3) mean|g n|;
//   bracket = g - n mean(g n): u|g| + |n| d_mean + u|n mean| (the factors' errors) and
//               gamma(2) (|g| + |n mean|) (the product and the subtraction);
//   dx = dx0 + s bracket:  s d_bracket + gamma(2) (|dx0| + s |bracket|);
//   dw = dw0 + sum_rows n dy: each term rounds twice under at most N additions,
//               gamma(N + 2) (|dw0| + sum |n dy|).
void rmsnorm_backward_bounds(const std::vector<double>& x, const std::vector<double>& w,
                             const std::vector<double>& dy, const std::vector<double>& s,
                             const std::vector<double>& dx0, const std::vector<double>& dw0,
                             size_t N, size_t C, std::vector<double>& dx_b,
                             std::vector<double>& dw_b) {
  for (size_t c = 0; c < C; ++c) dw_b[c] = std::fabs(dw0[c]);
  for (size_t r = 0; r < N; ++r) {
    double gn_abs = 0, gn_sum = 0;
    for (size_t c = 0; c < C; ++c) {
      const double g = w[c] * dy[r * C + c], n = x[r * C + c] * s[r];
      gn_abs += std::fabs(g * n), gn_sum += g * n;
      dw_b[c] += std::fabs(n * dy[r * C + c]);
    }
    const double gn_mean = gn_sum / double(C), d_mean = gamma(double(C) + 3) * gn_abs / double(C);
    for (size_t c = 0; c < C; ++c) {
      const double g = w[c] * dy[r * C + c], n = x[r * C + c] * s[r];
      const double bracket = g - n * gn_mean;
      const double d_bracket = kU * std::fabs(g) + std::fabs(n) * d_mean +
                               kU * std::fabs(n * gn_mean) +
                               gamma(2) * (std::fabs(g) + std::fabs(n * gn_mean));
      dx_b[r * C + c] =
          s[r] * d_bracket + gamma(2) * (std::fabs(dx0[r * C + c]) + s[r] * std::fabs(bracket));
    }
  }
  for (size_t c = 0; c < C; ++c) dw_b[c] *= gamma(double(N) + 2);
}

TEST_P(SimdLlama, RmsNormWithinDerivedBound) {
  struct Shape {
    size_t N;
    int C;
  };
  for (const Shape sh : {Shape{1, 1}, Shape{3, 7}, Shape{5, 17}, Shape{2, 33}, Shape{4, 64},
                         Shape{9, 129}, Shape{2, 768}, Shape{3, 1000}}) {
    const size_t N = sh.N, C = size_t(sh.C);
    const float eps = sh.C % 2 ? 1e-5f : 1e-6f;
    Random rnd(sh.C + 100);
    std::vector<float> x = rnd.normal(N * C, 0.3, 1.5);
    for (size_t c = 0; c < C; ++c) x[c] *= 1e-3f;  // a row whose mean square is near eps
    const std::vector<float> w = rnd.normal(C, 1, 0.3), dy = rnd.normal(N * C);
    const std::vector<float> dx0 = rnd.normal(N * C), dw0 = rnd.normal(C);
    std::vector<float> y(N * C), rstd(N);
    k().rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, sh.C, eps);
    const std::vector<double> xd = widen(x), wd = widen(w);
    std::vector<double> y_r(N * C), rstd_r(N), rstd_b(N);
    scalar::rmsnorm_forward<double>(y_r.data(), rstd_r.data(), xd.data(), wd.data(), N, sh.C,
                                    double(eps));
    const std::vector<double> y_b = rmsnorm_forward_bounds(xd, wd, rstd_r, N, C, eps, rstd_b);
    const std::string where = " N=" + std::to_string(N) + " C=" + std::to_string(C);
    expect_within("rmsnorm out" + where, y, y_r, y_b);
    expect_within("rmsnorm rstd" + where, rstd, rstd_r, rstd_b);

    // Recomputation from the saved rstd gives the forward's bits.
    std::vector<float> again(N * C);
    k().rmsnorm_apply(again.data(), x.data(), rstd.data(), w.data(), N, sh.C);
    expect_identical("rmsnorm apply" + where, again, y);

    // Backward from the same (fp32) rstd on both sides.
    std::vector<float> dx = dx0, dw = dw0;
    k().rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), N, sh.C);
    const std::vector<double> dyd = widen(dy), sd = widen(rstd);
    std::vector<double> dx_r = widen(dx0), dw_r = widen(dw0), dx_b(N * C), dw_b(C);
    scalar::rmsnorm_backward<double>(dx_r.data(), dw_r.data(), dyd.data(), xd.data(), wd.data(),
                                     sd.data(), N, sh.C);
    rmsnorm_backward_bounds(xd, wd, dyd, sd, widen(dx0), widen(dw0), N, C, dx_b, dw_b);
    expect_within("rmsnorm dinp" + where, dx, dx_r, dx_b);
    expect_within("rmsnorm dweight" + where, dw, dw_r, dw_b);
  }
}

TEST_P(SimdLlama, SwiGluWithinDerivedBound) {
  struct Shape {
    size_t N;
    int H;
  };
  // Gates where the sigmoid saturates, where exp(-|x|) is subnormal (|x| > 87.3) and where Exp
  // returns 0 (|x| > 104), and silu's minimum.
  const float special[] = {0.0f,    -0.0f,   20.0f,   -20.0f, 30.0f,    -87.0f, -95.0f, 95.0f,
                           -100.0f, -104.5f, -120.0f, 120.0f, -1.2785f, 1e-20f, -1e-20f};
  for (const Shape sh : {Shape{1, 1}, Shape{3, 7}, Shape{2, 33}, Shape{4, 64}, Shape{3, 768},
                         Shape{2, 1000}, Shape{5, 4097}}) {
    const size_t N = sh.N, H = size_t(sh.H);
    Random rnd(sh.H + 200);
    std::vector<float> inp = rnd.normal(N * 2 * H, 0, 1.5);
    const std::vector<float> gates = rnd.uniform(N * H, -10, 10);
    for (size_t r = 0; r < N; ++r) {
      for (size_t h = 0; h < H; ++h) inp[r * 2 * H + h] = gates[r * H + h];
    }
    for (size_t i = 0; i < std::size(special) && i < N * H; ++i) {
      inp[(i / H) * 2 * H + i % H] = special[i];
    }
    const std::vector<float> dout = rnd.normal(N * H);
    std::vector<float> out(N * H, NAN), dinp(N * 2 * H, NAN);
    k().swiglu_forward(out.data(), inp.data(), N, sh.H);
    k().swiglu_backward(dinp.data(), dout.data(), inp.data(), N, sh.H);
    const std::vector<double> id = widen(inp), dd = widen(dout);
    std::vector<double> out_r(N * H), dinp_r(N * 2 * H);
    scalar::swiglu_forward<double>(out_r.data(), id.data(), N, sh.H);
    scalar::swiglu_backward<double>(dinp_r.data(), dd.data(), id.data(), N, sh.H);
    const SwiGluBounds b = swiglu_bounds(id, dd, N, H);
    const std::string where = " N=" + std::to_string(N) + " H=" + std::to_string(H);
    expect_within("swiglu out" + where, out, out_r, b.out);
    expect_within("swiglu dinp" + where, dinp, dinp_r, b.dinp);
  }
}

TEST_P(SimdLlama, RopeWithinDerivedBoundAndBitIdenticalToScalar) {
  for (const RopeCase& rc : rope_cases()) {
    const size_t N = rc.B * rc.T;
    std::vector<float> cos, sin;
    rope_tables(size_t(rc.pos0) + rc.T, rc.D, cos, sin);
    Random rnd(unsigned(rc.D * 10 + rc.heads));
    const std::vector<float> x0 = rnd.normal(N * rc.row_stride, 0, 2);
    const std::vector<double> xd = widen(x0), cd = widen(cos), sd = widen(sin);
    const std::vector<double> bound = rope_bounds(xd, cd, sd, rc);
    const std::string where = " D=" + std::to_string(rc.D) + " heads=" + std::to_string(rc.heads) +
                              " pos0=" + std::to_string(rc.pos0) + " T=" + std::to_string(rc.T);
    for (const bool backward : {false, true}) {
      const auto kernel = backward ? k().rope_backward : k().rope_forward;
      const auto scalar_f = backward ? scalar::rope_backward<float> : scalar::rope_forward<float>;
      const auto scalar_d = backward ? scalar::rope_backward<double> : scalar::rope_forward<double>;
      const std::string what = (backward ? "rope backward" : "rope forward") + where;
      std::vector<float> x = x0, x_f = x0;
      std::vector<double> x_r = xd;
      kernel(x.data(), cos.data(), sin.data(), N, int(rc.T), rc.pos0, rc.heads, rc.D,
             rc.row_stride);
      scalar_f(x_f.data(), cos.data(), sin.data(), N, int(rc.T), rc.pos0, rc.heads, rc.D,
               rc.row_stride);
      scalar_d(x_r.data(), cd.data(), sd.data(), N, int(rc.T), rc.pos0, rc.heads, rc.D,
               rc.row_stride);
      expect_within(what, x, x_r, bound);
      expect_identical(what + " against scalar fp32", x, x_f);
    }
  }
}

// The backward is the forward's transpose: with exact arithmetic a rotation and then its transpose
// give the input back; this checks that the two entries agree on the layout and on the angle's
// sign. With m = |a| + |b| for a pair and |c|, |s| <= 1: the forward errs by at most gamma(2) m
// per element and its results are at most m (1 + gamma(2)) in size; the transpose passes both
// errors of the pair on (2 gamma(2) m) and adds its own gamma(2) (|a'| + |b'|); c^2 + s^2 of the
// rounded table entries is 1 within 2u + u^2 <= gamma(2). In all 4 gamma(2) (1 + gamma(2)) m +
// gamma(2) m.
TEST_P(SimdLlama, RopeBackwardUndoesForward) {
  for (const RopeCase& rc : rope_cases()) {
    const size_t N = rc.B * rc.T, half = size_t(rc.D) / 2;
    std::vector<float> cos, sin;
    rope_tables(size_t(rc.pos0) + rc.T, rc.D, cos, sin);
    Random rnd(unsigned(rc.D + rc.heads));
    const std::vector<float> x0 = rnd.normal(N * rc.row_stride);
    std::vector<float> x = x0;
    k().rope_forward(x.data(), cos.data(), sin.data(), N, int(rc.T), rc.pos0, rc.heads, rc.D,
                     rc.row_stride);
    k().rope_backward(x.data(), cos.data(), sin.data(), N, int(rc.T), rc.pos0, rc.heads, rc.D,
                      rc.row_stride);
    std::vector<double> bound(x0.size(), 0.0);
    for (size_t r = 0; r < N; ++r) {
      for (size_t h = 0; h < size_t(rc.heads); ++h) {
        const size_t o = r * rc.row_stride + h * size_t(rc.D);
        for (size_t j = 0; j < half; ++j) {
          const double m = std::fabs(x0[o + j]) + std::fabs(x0[o + half + j]);
          bound[o + j] = bound[o + half + j] = (4 * gamma(2) * (1 + gamma(2)) + gamma(2)) * m;
        }
      }
    }
    expect_within("rope round trip D=" + std::to_string(rc.D), x, widen(x0), bound);
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, SimdLlama, ::testing::ValuesIn(all_targets()), param_name);

}  // namespace
}  // namespace llmcpu::simd_test
