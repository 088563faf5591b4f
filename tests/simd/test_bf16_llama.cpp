// The Llama family's bf16 storage kernels (simd/bf16.h: rmsnorm_forward and _apply, rope_forward,
// swiglu_forward and _backward) of every bf16 table this CPU runs, the scalar reference included:
// - each is the fp32 kernel of its own target on the bf16 inputs widened exactly, its bf16 output
//   rounded once: bit for bit against bf16(that fp32 kernel's output);
// - against the scalar reference in double, within the fp32 bound of llama_bounds.h plus one
//   rounding to bf16 (below);
// - against the scalar bf16 table, at most one bf16 step apart where the fp32 values may differ by
//   a few fp32 ulps (RMSNorm's sums and SwiGLU's exp differ by target), and bit for bit for RoPE,
//   whose fp32 rotation is the same bits on every target;
// - recomputation gives the forward's bits (rmsnorm_apply, swiglu_forward again), whatever the
//   thread count, and tables that share a Highway target give the same bits.
// Ragged shapes: C and H of 1, 7, 33, 129, 1000, 4097 (no multiple of a vector width), N of 1 up.
//
// One rounding to bf16: with y the fp32 result and b its bound, |y - ref| <= b, the stored
// bf16(y) errs by at most u_b |y| (u_b = 2^-8, bf16's unit roundoff: 8 significant bits) where y
// is normal in bf16, and by at most half the spacing of bf16's subnormals (2^-134) below; so
//   |bf16(y) - ref| <= u_b (|ref| + b) + b + 2^-134.
// Rounding to nearest is monotone: two fp32 values less than one bf16 spacing apart round to bf16
// values at most one step apart. The fp32 bounds here are far below a bf16 spacing (relative
// C 2^-24 for RMSNorm, a few 2^-24 for SwiGLU, against 2^-7), so one step is the bound between
// tables.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>

#include "simd/bf16.h"
#include "simd/scalar/rmsnorm.h"
#include "simd/scalar/rope.h"
#include "simd/scalar/swiglu.h"
#include "tests/simd/bf16_tables.h"
#include "tests/simd/error_bounds.h"
#include "tests/simd/llama_bounds.h"

namespace llmcpu::simd_test {
namespace {

constexpr double kBf16U = 0x1p-8;       // bf16's unit roundoff
constexpr double kBf16Tiny = 0x1p-134;  // half the spacing of bf16's subnormals

std::vector<std::string> bf16_tables() {
  std::vector<std::string> r;
  for (std::string_view name : available_bf16_targets()) r.emplace_back(name);
  return r;
}

// The fp32 table whose kernels a bf16 table's Llama entries share: the GEMM tables ("avx512bf16",
// "onednn", "neon_bf16") are the best vectorized target's table with other GEMMs.
const KernelTable& fp32_of(const std::string& bf16_table) {
  return kernels_for_target(has_own_gemm(bf16_table) ? vectorized_targets().front() : bf16_table);
}

std::vector<float> widen16(const std::vector<bf16>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = bf16_to_float(v[i]);
  return r;
}
std::vector<bf16> round16(const std::vector<float>& v) {
  return to_bf16_vector(v.data(), v.size());
}

// The bound of one rounding to bf16 on top of an fp32 bound b (see the top of the file).
std::vector<double> plus_bf16_rounding(const std::vector<double>& ref,
                                       const std::vector<double>& b) {
  std::vector<double> r(ref.size());
  for (size_t i = 0; i < r.size(); ++i)
    r[i] = kBf16U * (std::fabs(ref[i]) + b[i]) + b[i] + kBf16Tiny;
  return r;
}

void expect_bits(const std::string& what, const std::vector<bf16>& got,
                 const std::vector<bf16>& ref) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], ref[i]) << what << ": element " << i << " is " << bf16_to_float(got[i])
                              << ", expected " << bf16_to_float(ref[i]);
  }
}

// At most one bf16 step apart: the bit patterns as a signed order (both zeros at 0).
void expect_within_one_step(const std::string& what, const std::vector<bf16>& got,
                            const std::vector<bf16>& ref) {
  auto order = [](bf16 h) { return (h & 0x8000) ? -int(h & 0x7fff) : int(h); };
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::abs(order(got[i]) - order(ref[i])), 1)
        << what << ": element " << i << " is " << bf16_to_float(got[i]) << ", scalar table "
        << bf16_to_float(ref[i]);
  }
}

class SimdBf16Llama : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const Bf16Kernels& t = k();
    ASSERT_TRUE(t.rmsnorm_forward && t.rmsnorm_apply && t.rope_forward && t.swiglu_forward &&
                t.swiglu_backward)
        << GetParam() << " leaves a Llama entry empty";
  }
  const Bf16Kernels& k() const { return bf16_kernels_named(GetParam()); }
  const KernelTable& f32() const { return fp32_of(GetParam()); }
};

struct RowShape {
  size_t N;
  int C;  // C for RMSNorm, H for SwiGLU
};
constexpr RowShape kRows[] = {{1, 1},   {3, 7},   {5, 17},   {2, 33},  {4, 64},
                              {9, 129}, {2, 768}, {3, 1000}, {1, 4097}};

TEST_P(SimdBf16Llama, RmsNormRoundsTheFp32OutputOnce) {
  for (const RowShape sh : kRows) {
    const size_t N = sh.N, C = size_t(sh.C);
    const float eps = sh.C % 2 ? 1e-5f : 1e-6f;
    Random rnd(sh.C + 300);
    std::vector<float> x = rnd.normal(N * C, 0.3, 1.5);
    for (size_t c = 0; c < C; ++c) x[c] *= 1e-3f;  // a row whose mean square is near eps
    const std::vector<float> w = rnd.normal(C, 1, 0.3);
    const std::string where = GetParam() + " N=" + std::to_string(N) + " C=" + std::to_string(C);

    std::vector<bf16> out(N * C, 0x7fc1);
    std::vector<float> rstd(N, NAN), y32(N * C), rstd32(N);
    k().rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, sh.C, eps);
    f32().rmsnorm_forward(y32.data(), rstd32.data(), x.data(), w.data(), N, sh.C, eps);
    expect_identical("rmsnorm rstd against fp32" + where, rstd, rstd32);
    expect_bits("rmsnorm out against bf16(fp32)" + where, out, round16(y32));

    const std::vector<double> xd = widen(x), wd = widen(w);
    std::vector<double> y_r(N * C), rstd_r(N), rstd_b(N);
    scalar::rmsnorm_forward<double>(y_r.data(), rstd_r.data(), xd.data(), wd.data(), N, sh.C,
                                    double(eps));
    const std::vector<double> y_b = rmsnorm_forward_bounds(xd, wd, rstd_r, N, C, eps, rstd_b);
    expect_within("rmsnorm out" + where, widen16(out), y_r, plus_bf16_rounding(y_r, y_b));
    expect_within("rmsnorm rstd" + where, rstd, rstd_r, rstd_b);

    std::vector<bf16> ref(N * C);
    std::vector<float> rstd_s(N);
    scalar_bf16_kernels().rmsnorm_forward(ref.data(), rstd_s.data(), x.data(), w.data(), N, sh.C,
                                          eps);
    expect_within_one_step("rmsnorm out against scalar" + where, out, ref);
  }
}

// Rows of bf16 q or k with sNaN bits in the gap after their heads: a kernel that wrote them
// (even rounding them back unchanged) would turn them quiet.
constexpr bf16 kGap = 0x7f81;

bool in_heads(const RopeCase& rc, size_t i) {
  return i % rc.row_stride < size_t(rc.heads) * size_t(rc.D);
}

TEST_P(SimdBf16Llama, RopeRoundsTheFp32RotationOnce) {
  std::vector<RopeCase> cases = rope_cases();
  cases.push_back({1, 1, 3, 1, 6, 6});  // one row, one head, no gap
  for (const RopeCase& rc : cases) {
    const size_t N = rc.B * rc.T;
    std::vector<float> cos, sin;
    rope_tables(size_t(rc.pos0) + rc.T, rc.D, cos, sin);
    Random rnd(unsigned(rc.D * 10 + rc.heads + 7));
    std::vector<bf16> x0 = round16(rnd.normal(N * rc.row_stride, 0, 2));
    for (size_t i = 0; i < x0.size(); ++i) {
      if (!in_heads(rc, i)) x0[i] = kGap;
    }
    const std::string where = GetParam() + " D=" + std::to_string(rc.D) +
                              " heads=" + std::to_string(rc.heads) +
                              " pos0=" + std::to_string(rc.pos0) + " N=" + std::to_string(N);
    std::vector<bf16> x = x0;
    k().rope_forward(x.data(), cos.data(), sin.data(), N, int(rc.T), rc.pos0, rc.heads, rc.D,
                     rc.row_stride);

    // The fp32 kernel of the same target on the widened rows, the heads rounded back.
    std::vector<float> v = widen16(x0);
    f32().rope_forward(v.data(), cos.data(), sin.data(), N, int(rc.T), rc.pos0, rc.heads, rc.D,
                       rc.row_stride);
    std::vector<bf16> expect = x0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (in_heads(rc, i)) expect[i] = float_to_bf16(v[i]);
    }
    expect_bits("rope against bf16(fp32)" + where, x, expect);
    std::vector<bf16> s = x0;
    scalar_bf16_kernels().rope_forward(s.data(), cos.data(), sin.data(), N, int(rc.T), rc.pos0,
                                       rc.heads, rc.D, rc.row_stride);
    expect_bits("rope against the scalar table" + where, x, s);

    // The heads against the rotation in double (the gaps are checked bit for bit above).
    std::vector<double> xd(x0.size()), got_all(x0.size());
    for (size_t i = 0; i < x0.size(); ++i) xd[i] = in_heads(rc, i) ? bf16_to_float(x0[i]) : 0.0;
    std::vector<double> ref = xd;
    const std::vector<double> cd = widen(cos), sd = widen(sin);
    scalar::rope_forward<double>(ref.data(), cd.data(), sd.data(), N, int(rc.T), rc.pos0, rc.heads,
                                 rc.D, rc.row_stride);
    const std::vector<double> b = rope_bounds(xd, cd, sd, rc);
    std::vector<float> got;
    std::vector<double> ref_h, b_h;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!in_heads(rc, i)) continue;
      got.push_back(bf16_to_float(x[i]));
      ref_h.push_back(ref[i]);
      b_h.push_back(b[i]);
    }
    expect_within("rope" + where, got, ref_h, plus_bf16_rounding(ref_h, b_h));
  }
}

// Gates as in test_simd_llama.cpp's SwiGLU test (saturated sigmoids, exp(-|x|) subnormal or 0,
// silu's minimum), then everything rounded to bf16 as the fc output is stored.
std::vector<bf16> swiglu_input(size_t N, size_t H, unsigned seed) {
  const float special[] = {0.0f,    -0.0f,   20.0f,   -20.0f, 30.0f,    -87.0f, -95.0f, 95.0f,
                           -100.0f, -104.5f, -120.0f, 120.0f, -1.2785f, 1e-20f, -1e-20f};
  Random rnd(seed);
  std::vector<float> inp = rnd.normal(N * 2 * H, 0, 1.5);
  const std::vector<float> gates = rnd.uniform(N * H, -10, 10);
  for (size_t i = 0; i < N * H; ++i) {
    inp[(i / H) * 2 * H + i % H] = i < std::size(special) ? special[i] : gates[i];
  }
  return round16(inp);
}

TEST_P(SimdBf16Llama, SwiGluRoundsTheFp32OutputOnce) {
  for (const RowShape sh : kRows) {
    const size_t N = sh.N, H = size_t(sh.C);
    const std::string where = GetParam() + " N=" + std::to_string(N) + " H=" + std::to_string(H);
    const std::vector<bf16> inp = swiglu_input(N, H, unsigned(sh.C + 400));
    const std::vector<float> x = widen16(inp), dout = Random(unsigned(sh.C)).normal(N * H);

    std::vector<bf16> out(N * H, 0x7fc1);
    std::vector<float> dinp(N * 2 * H, NAN), out32(N * H), dinp32(N * 2 * H);
    k().swiglu_forward(out.data(), inp.data(), N, sh.C);
    k().swiglu_backward(dinp.data(), dout.data(), inp.data(), N, sh.C);
    f32().swiglu_forward(out32.data(), x.data(), N, sh.C);
    f32().swiglu_backward(dinp32.data(), dout.data(), x.data(), N, sh.C);
    expect_bits("swiglu out against bf16(fp32)" + where, out, round16(out32));
    expect_identical("swiglu dinp against fp32" + where, dinp, dinp32);

    const std::vector<double> xd = widen(x), dd = widen(dout);
    std::vector<double> out_r(N * H), dinp_r(N * 2 * H);
    scalar::swiglu_forward<double>(out_r.data(), xd.data(), N, sh.C);
    scalar::swiglu_backward<double>(dinp_r.data(), dd.data(), xd.data(), N, sh.C);
    const SwiGluBounds b = swiglu_bounds(xd, dd, N, H);
    expect_within("swiglu out" + where, widen16(out), out_r, plus_bf16_rounding(out_r, b.out));
    expect_within("swiglu dinp" + where, dinp, dinp_r, b.dinp);

    std::vector<bf16> ref(N * H);
    scalar_bf16_kernels().swiglu_forward(ref.data(), inp.data(), N, sh.C);
    expect_within_one_step("swiglu out against scalar" + where, out, ref);
  }
}

// What a recomputing backward pass runs gives the forward's bits: rmsnorm_apply from the saved
// rstd, swiglu_forward again on the saved bf16 input; and neither, nor RoPE, depends on the
// thread count (rows are independent, every element's math fixed).
TEST_P(SimdBf16Llama, RecomputationGivesTheForwardsBitsOnAnyThreadCount) {
  const size_t N = 37;
  const int C = 1000, H = 1031, D = 24, heads = 3;
  Random rnd(17);
  const std::vector<float> x = rnd.normal(N * C, 0.3, 1.5), w = rnd.normal(C, 1, 0.3);
  const std::vector<bf16> inp = swiglu_input(N, size_t(H), 18);
  const std::vector<bf16> q0 = round16(rnd.normal(N * heads * D));
  std::vector<float> cos, sin;
  rope_tables(N, D, cos, sin);
  struct Run {
    std::vector<bf16> norm, again, act, act_again, q;
    std::vector<float> rstd;
  };
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    Run r{std::vector<bf16>(N * C),
          std::vector<bf16>(N * C, 0x7fc1),
          std::vector<bf16>(N * H),
          std::vector<bf16>(N * H, 0x7fc1),
          q0,
          std::vector<float>(N)};
    k().rmsnorm_forward(r.norm.data(), r.rstd.data(), x.data(), w.data(), N, C, 1e-5f);
    k().rmsnorm_apply(r.again.data(), x.data(), r.rstd.data(), w.data(), N, C);
    k().swiglu_forward(r.act.data(), inp.data(), N, H);
    k().swiglu_forward(r.act_again.data(), inp.data(), N, H);
    k().rope_forward(r.q.data(), cos.data(), sin.data(), N, int(N), 0, heads, D, heads * D);
    return r;
  };
  const int saved = omp_get_max_threads();
  const Run one = run(1), two = run(2), three = run(3);
  omp_set_num_threads(saved);
  expect_bits(GetParam() + " rmsnorm_apply", one.again, one.norm);
  expect_bits(GetParam() + " swiglu_forward again", one.act_again, one.act);
  for (const Run* r : {&two, &three}) {
    const std::string t = GetParam() + (r == &two ? " 2 threads" : " 3 threads");
    expect_bits(t + " rmsnorm", r->norm, one.norm);
    expect_identical(t + " rstd", r->rstd, one.rstd);
    expect_bits(t + " rmsnorm_apply", r->again, one.norm);
    expect_bits(t + " swiglu", r->act, one.act);
    expect_bits(t + " rope", r->q, one.q);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTables, SimdBf16Llama, ::testing::ValuesIn(bf16_tables()), param_name);

// The GEMM tables ("avx512bf16", "onednn", "neon_bf16") take their Llama entries from the portable
// table of the same Highway target: the same functions, so the same bits.
TEST(SimdBf16LlamaTables, TablesOfOneTargetShareTheirLlamaEntries) {
  for (std::string_view name : available_bf16_targets()) {
    if (!has_own_gemm(name)) continue;
    const Bf16Kernels& t = bf16_kernels_named(name);
    // The portable bf16 table of the best target: its name without the fp32 GEMM's "+xsmm".
    const std::string best = vectorized_targets().front();
    const Bf16Kernels& portable = bf16_kernels_named(best.substr(0, best.find('+')));
    EXPECT_EQ(t.rmsnorm_forward, portable.rmsnorm_forward) << name;
    EXPECT_EQ(t.rmsnorm_apply, portable.rmsnorm_apply) << name;
    EXPECT_EQ(t.rope_forward, portable.rope_forward) << name;
    EXPECT_EQ(t.swiglu_forward, portable.swiglu_forward) << name;
    EXPECT_EQ(t.swiglu_backward, portable.swiglu_backward) << name;
  }
}

// SwiGLU's exp (hwy/contrib/math) is the same sequence of operations on every Highway target; on
// the x86 targets, all with fused multiply-adds and exact division, it gives the same bits, so the
// bf16 SwiGLU does too. (The portable fallback rounds each multiply-add twice and the scalar
// reference calls std::exp: those may differ by a bf16 step, as checked above.)
TEST(SimdBf16LlamaTables, SwiGluIsTheSameBitsOnEveryX86Target) {
  std::vector<std::string_view> x86;
  for (std::string_view name : available_bf16_targets()) {
    if (name == "avx2" || name == "avx512" || name == "avx512_dl") x86.push_back(name);
  }
  if (x86.size() < 2) GTEST_SKIP() << "fewer than two x86 vector targets on this CPU";
  const size_t N = 64;
  const int H = 4097;
  Random rnd(23);
  const std::vector<bf16> inp = round16(rnd.uniform(N * 2 * H, -30, 30));
  const std::vector<float> dout = rnd.normal(N * H);
  auto run = [&](std::string_view name, std::vector<bf16>& out, std::vector<float>& dinp) {
    out.assign(N * H, 0);
    dinp.assign(N * 2 * H, 0.0f);
    bf16_kernels_named(name).swiglu_forward(out.data(), inp.data(), N, H);
    bf16_kernels_named(name).swiglu_backward(dinp.data(), dout.data(), inp.data(), N, H);
  };
  std::vector<bf16> out0, out;
  std::vector<float> dinp0, dinp;
  run(x86.front(), out0, dinp0);
  for (size_t i = 1; i < x86.size(); ++i) {
    run(x86[i], out, dinp);
    const std::string what = std::string(x86[i]) + " vs " + std::string(x86.front());
    expect_bits(what + " swiglu out", out, out0);
    expect_identical(what + " swiglu dinp", dinp, dinp0);
  }
}

}  // namespace
}  // namespace llmcpu::simd_test
