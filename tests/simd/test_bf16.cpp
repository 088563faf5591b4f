// The bf16 kernels (simd/bf16.h) of every bf16 table this CPU runs ("scalar", "avx512bf16" where
// the CPU has AVX512-BF16, "neon_bf16" where it has Arm BF16, and the portable table of each
// Highway target):
// - fp32 -> bf16 against an independent rounding written with doubles (nearest, ties to even; NaN
//   quiet; overflow to infinity), bf16 -> fp32 exact;
// - the GEMMs against the scalar fp32 math in double on the same bf16 operands. Products of two
// bf16
//   values are exact in fp32 (8 + 8 significant bits), so a bf16 GEMM with fp32 accumulation has
//   the error of an fp32 sum of K exact terms: |error| <= gamma(K) sum |terms| (error_bounds.h),
//   whatever the order of the sum (VDPBF16PS adds its two products one after the other, each
//   rounded); gamma(2K) for Arm's BFMMLA, whose additions round to odd (bf16_tables.h);
// - layernorm and GELU with bf16 outputs: the fp32 kernel's error plus one rounding to bf16
//   (half a bf16 ulp, 2^-8 relative); AdamW: the fp32 master bit for bit as the fp32 table of the
//   same target, and the bf16 copy equal to bf16(master).
// Ragged sizes throughout; results must not depend on the thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#if defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1UL << 14)
#endif
#endif

#include "simd/bf16.h"
#include "simd/error.h"
#include "simd/isa_cap.h"
#include "simd/roofs.h"
#include "simd/scalar/gelu.h"
#include "simd/scalar/layernorm.h"
#include "simd/scalar/matmul.h"
#include "tests/simd/bf16_tables.h"
#include "tests/simd/emulated.h"
#include "tests/simd/error_bounds.h"

namespace llmcpu::simd_test {
namespace {

constexpr double kBf16HalfUlp = 0x1p-8;  // relative rounding error of fp32 -> bf16

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Independent reference: the bf16 values just below and above |f| (truncation and the next one up),
// the nearer one chosen by exact double arithmetic, ties to the even significand.
bf16 reference_round(float f) {
  if (std::isnan(f)) return bf16((bits_of(f) >> 16) | 0x40);
  const uint32_t u = bits_of(f);
  const uint16_t sign = uint16_t(u >> 16) & 0x8000;
  const uint32_t mag = u & 0x7fffffff;
  const uint16_t lo = uint16_t(mag >> 16), hi = uint16_t(lo + 1);
  if ((mag & 0xffff) == 0) return uint16_t(sign | lo);
  const double x = std::fabs(double(f));
  const double dlo = x - double(bf16_to_float(lo));
  // hi may be infinity (0x7f80): then the halfway point is 2^128 - 2^119 rather than infinity.
  const double vhi = hi == 0x7f80 ? 0x1p128 : double(bf16_to_float(hi));
  const double dhi = vhi - x;
  uint16_t r = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
  return uint16_t(sign | r);
}

std::vector<float> special_values() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          inf,
                          -inf,
                          std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::min(),
                          3.0e38f,
                          3.3895e38f,
                          3.3896e38f};
  for (uint32_t u :
       {0x7f800001u, 0xff800001u, 0x7fc00000u, 0x7fffffffu, 0x3f808000u, 0x3f818000u, 0x3f80ffffu,
        0x3f807fffu, 0x00008000u, 0x00018000u, 0x7f7f8000u, 0x7f7f7fffu}) {
    float f;
    std::memcpy(&f, &u, 4);
    v.push_back(f);
  }
  return v;
}

class SimdBf16 : public ::testing::TestWithParam<std::string> {
 protected:
  const Bf16Kernels& k() const { return bf16_kernels_named(GetParam()); }
};

std::vector<std::string> bf16_tables() {
  std::vector<std::string> r;
  for (std::string_view name : available_bf16_targets()) r.emplace_back(name);
  return r;
}

TEST(SimdBf16Scalar, RoundingMatchesAnIndependentReference) {
  std::vector<float> v = special_values();
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    v.push_back(f);
  }
  for (float f : v) {
    ASSERT_EQ(float_to_bf16(f), reference_round(f)) << "bits 0x" << std::hex << bits_of(f);
    const bf16 h = float_to_bf16(f);
    if (!std::isnan(f)) {
      EXPECT_EQ(bits_of(bf16_to_float(h)), uint32_t(h) << 16);
    } else {
      EXPECT_TRUE(std::isnan(bf16_to_float(h)));  // a NaN never becomes infinity
    }
  }
}

TEST_P(SimdBf16, ConversionsEqualTheScalarRounding) {
  std::vector<float> v = special_values();
  Random rnd(3);
  for (float x : rnd.normal(9000, 0, 100)) v.push_back(x);
  v.resize(v.size() + 5, 1.00390625f);  // a tie: 1 + 2^-8 rounds to even (1.0)
  std::vector<bf16> got(v.size() + 1, 0xabcd);
  k().to_bf16(got.data(), v.data(), v.size());
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(got[i], float_to_bf16(v[i])) << "element " << i;
  EXPECT_EQ(got[v.size()], 0xabcd) << "wrote past the end";
  std::vector<float> back(v.size() + 1, 7.0f);
  k().to_f32(back.data(), got.data(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(bits_of(back[i]), uint32_t(got[i]) << 16) << "element " << i;
  }
  EXPECT_EQ(back[v.size()], 7.0f) << "wrote past the end";
}

struct Shape {
  size_t N;
  int C, OC;
};
constexpr Shape kShapes[] = {{1, 1, 1},     {3, 5, 7},        {17, 33, 29},   {64, 64, 12},
                             {65, 96, 131}, {33, 769, 13},    {5, 17, 1031},  {130, 130, 389},
                             {40, 768, 24}, {1100, 1030, 70}, {70, 2100, 13}, {65, 40, 2100}};

// The shapes a table's GEMM is checked on: kShapes; neon_bf16, and every table under emulation
// (tests/simd/emulated.h), take two smaller shapes for the largest, {600, 12, 600} (dinp's and
// dW's 512-wide K slices, their chunks of 64 panels) and {300, 1030, 13} (the forward's chunks of
// 31 token panels at C = 1030): the blocking is crossed with a tenth of the products (QEMU
// emulates BFMMLA in soft float). Under emulation {130, 130, 389} and {65, 40, 2100} take 131 and
// 600 columns too (the latter still past dinp's 512-wide K slices).
std::vector<Shape> gemm_shapes(std::string_view table) {
  const bool emulated = testing::emulated_run();
  const bool smaller = table == "neon_bf16" || emulated;
  std::vector<Shape> r;
  for (Shape s : kShapes) {
    const bool largest = s.N == 1100 && s.C == 1030 && s.OC == 70;
    if (smaller && largest) continue;
    if (emulated && s.OC == 389) s.OC = 131;
    if (emulated && s.OC == 2100) s.OC = 600;
    r.push_back(s);
  }
  if (smaller) r.insert(r.end(), {Shape{600, 12, 600}, Shape{300, 1030, 13}});
  return r;
}

std::vector<bf16> round_all(const std::vector<float>& v) {
  return to_bf16_vector(v.data(), v.size());
}
std::vector<double> widen_bf16(const std::vector<bf16>& v) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = bf16_to_float(v[i]);
  return r;
}

void check_gemm(const Bf16Kernels& k, const Shape& s, bool with_bias, bool with_dinp) {
  const size_t N = s.N, C = size_t(s.C), OC = size_t(s.OC);
  const std::string where = std::string(k.target) + " N=" + std::to_string(N) +
                            " C=" + std::to_string(C) + " OC=" + std::to_string(OC);
  Random rnd(unsigned(N * 131 + C * 7 + OC));
  const std::vector<bf16> inp = round_all(rnd.normal(N * C)),
                          weight = round_all(rnd.normal(OC * C, 0, 0.5));
  const std::vector<float> bias = rnd.normal(OC), dout = rnd.normal(N * OC);
  const std::vector<float> dweight0 = rnd.normal(OC * C), dbias0 = rnd.normal(OC);
  const std::vector<double> x = widen_bf16(inp), w = widen_bf16(weight);
  const double units = gemm_rounding_units(k.target);  // gamma(units * n): sums of n terms

  // Forward: a sum of C exact products plus the bias.
  std::vector<float> out(N * OC, NAN);
  k.matmul_forward(out.data(), inp.data(), weight.data(), with_bias ? bias.data() : nullptr, N, s.C,
                   s.OC);
  std::vector<double> ref(N * OC), bound(N * OC);
  const std::vector<double> bias_d = widen(bias);
  scalar::matmul_forward<double>(ref.data(), x.data(), w.data(),
                                 with_bias ? bias_d.data() : nullptr, N, s.C, s.OC);
  for (size_t n = 0; n < N; ++n) {
    for (size_t o = 0; o < OC; ++o) {
      double mag = with_bias ? std::fabs(bias_d[o]) : 0.0;
      for (size_t i = 0; i < C; ++i) mag += std::fabs(x[n * C + i] * w[o * C + i]);
      bound[n * OC + o] = gamma(units * double(C + 1)) * mag + 1e-30;
    }
  }
  expect_within(where + " forward", out, ref, bound);

  // Backward with d = bf16(dout).
  std::vector<double> d(N * OC);
  for (size_t i = 0; i < d.size(); ++i) d[i] = bf16_to_float(float_to_bf16(dout[i]));
  std::vector<float> dinp(N * C, NAN), dweight = dweight0, dbias = dbias0;
  k.matmul_backward(with_dinp ? dinp.data() : nullptr, dweight.data(),
                    with_bias ? dbias.data() : nullptr, dout.data(), inp.data(), weight.data(), N,
                    s.C, s.OC);
  std::vector<double> rdinp(N * C), rdw = widen(dweight0), rdb = widen(dbias0);
  scalar::matmul_backward<double>(rdinp.data(), rdw.data(), nullptr, d.data(), x.data(), w.data(),
                                  N, s.C, s.OC);
  if (with_dinp) {
    std::vector<double> b(N * C);
    for (size_t n = 0; n < N; ++n) {
      for (size_t i = 0; i < C; ++i) {
        double mag = 0;
        for (size_t o = 0; o < OC; ++o) mag += std::fabs(d[n * OC + o] * w[o * C + i]);
        b[n * C + i] = gamma(units * double(OC)) * mag + 1e-30;
      }
    }
    expect_within(where + " dinp", dinp, rdinp, b);
  }
  std::vector<double> bw(OC * C);
  for (size_t o = 0; o < OC; ++o) {
    for (size_t i = 0; i < C; ++i) {
      double mag = std::fabs(double(dweight0[o * C + i]));
      for (size_t n = 0; n < N; ++n) mag += std::fabs(d[n * OC + o] * x[n * C + i]);
      bw[o * C + i] = gamma(units * double(N + 1)) * mag + 1e-30;
    }
  }
  expect_within(where + " dweight", dweight, rdw, bw);
  if (with_bias) {  // fp32 sums of the unrounded dout
    std::vector<double> bb(OC);
    for (size_t o = 0; o < OC; ++o) {
      double mag = std::fabs(double(dbias0[o]));
      for (size_t n = 0; n < N; ++n) {
        rdb[o] += dout[n * OC + o];
        mag += std::fabs(double(dout[n * OC + o]));
      }
      bb[o] = gamma(double(N + 1)) * mag + 1e-30;
    }
    expect_within(where + " dbias", dbias, rdb, bb);
  }
}

TEST_P(SimdBf16, MatmulMatchesTheReferenceOnRaggedShapes) {
  for (const Shape& s : gemm_shapes(GetParam())) {
    check_gemm(k(), s, true, true);
    check_gemm(k(), s, false, false);
  }
}

// A frozen weight (LoRA's base): with dweight null the backward gives the same dinp and dbias, bit
// for bit, as with it.
TEST_P(SimdBf16, MatmulWithAFrozenWeightGivesTheSameInputGradient) {
  for (const Shape& s : gemm_shapes(GetParam())) {
    const size_t N = s.N, C = size_t(s.C), OC = size_t(s.OC);
    Random rnd(unsigned(N * 5 + C * 3 + OC));
    const std::vector<bf16> inp = round_all(rnd.normal(N * C)),
                            weight = round_all(rnd.normal(OC * C, 0, 0.5));
    const std::vector<float> dout = rnd.normal(N * OC), dbias0 = rnd.normal(OC);
    std::vector<float> dinp(N * C, NAN), dweight(OC * C, 0.0f), dbias = dbias0;
    k().matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                        weight.data(), N, s.C, s.OC);
    std::vector<float> frozen(N * C, NAN), frozen_bias = dbias0;
    k().matmul_backward(frozen.data(), nullptr, frozen_bias.data(), dout.data(), inp.data(),
                        weight.data(), N, s.C, s.OC);
    const std::string where = GetParam() + " N=" + std::to_string(N) + " C=" +
                              std::to_string(C) + " OC=" + std::to_string(OC);
    expect_identical(where + " dinp", frozen, dinp);
    expect_identical(where + " dbias", frozen_bias, dbias);
  }
}

// A table's forward with a bf16 epilogue gives matmul_forward's output rounded by to_bf16, bit for
// bit, on the ragged shapes, with and without a bias, on 1 and 2 threads.
TEST_P(SimdBf16, MatmulForwardBf16IsTheRoundedForward) {
  if (!k().matmul_forward_bf16) GTEST_SKIP() << GetParam() << " rounds in the caller";
  const int saved = omp_get_max_threads();
  for (const Shape& s : gemm_shapes(GetParam())) {
    Random rnd(unsigned(s.N * 3 + s.C * 5 + s.OC));
    const std::vector<bf16> inp = round_all(rnd.normal(s.N * s.C));
    const std::vector<bf16> w = round_all(rnd.normal(size_t(s.OC) * s.C));
    const std::vector<float> bias = rnd.normal(s.OC);
    for (const bool with_bias : {true, false}) {
      const float* b = with_bias ? bias.data() : nullptr;
      std::vector<float> wide(s.N * s.OC);
      k().matmul_forward(wide.data(), inp.data(), w.data(), b, s.N, s.C, s.OC);
      std::vector<bf16> want(wide.size());
      k().to_bf16(want.data(), wide.data(), wide.size());
      for (const int threads : {1, 2}) {
        omp_set_num_threads(threads);
        std::vector<bf16> got(wide.size(), 0x7fc1);
        k().matmul_forward_bf16(got.data(), inp.data(), w.data(), b, s.N, s.C, s.OC);
        ASSERT_EQ(got, want) << GetParam() << " N=" << s.N << " C=" << s.C << " OC=" << s.OC
                             << " bias=" << with_bias << " threads=" << threads;
      }
    }
  }
  omp_set_num_threads(saved);
}

// The GEMMs' outputs with 1, 2 and 3 threads, bit for bit.
void check_thread_counts(const Bf16Kernels& k, const std::string& name, const Shape& s) {
  Random rnd(unsigned(11 + s.N));
  const std::vector<bf16> inp = round_all(rnd.normal(s.N * s.C)),
                          w = round_all(rnd.normal(size_t(s.OC) * s.C));
  const std::vector<float> dout = rnd.normal(s.N * s.OC), bias = rnd.normal(s.OC);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<float> out(s.N * s.OC), dinp(s.N * s.C), dw(size_t(s.OC) * s.C, 0.5f),
        db(s.OC, 0.25f);
    k.matmul_forward(out.data(), inp.data(), w.data(), bias.data(), s.N, s.C, s.OC);
    k.matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), s.N,
                      s.C, s.OC);
    out.insert(out.end(), dinp.begin(), dinp.end());
    out.insert(out.end(), dw.begin(), dw.end());
    out.insert(out.end(), db.begin(), db.end());
    return out;
  };
  const int saved = omp_get_max_threads();
  const std::vector<float> one = run(1), two = run(2), three = run(3);
  omp_set_num_threads(saved);
  expect_identical(name + " 2 threads vs 1", two, one);
  expect_identical(name + " 3 threads vs 1", three, one);
}

// The second shape is cut into several K slices in each product and several panel chunks: 1024-wide
// slices in the bf16 GEMMs of their own (avx512bf16, onednn); the other tables widen to the fp32
// GEMM (dinp in 256-channel K slices, libxsmm's dW in 512-token slices), which a smaller shape
// crosses. neon_bf16 cuts dinp's and dW's K (OC, N) in 512-wide slices, runs chunks of 64 panels
// and sums the forward's K whole: with C = 20 its backward has 2 channel panels, so 3 threads split
// the other operand's panels instead.
//
// Under emulation (emulated.h) the widening tables take C = 20 too: still 2 channel panels, and
// dinp's and dW's slices.
TEST_P(SimdBf16, MatmulDoesNotDependOnTheThreadCount) {
  const bool gemm_table = has_own_gemm(GetParam());
  const Shape large = GetParam() == "neon_bf16" ? Shape{600, 20, 600}
                      : gemm_table              ? Shape{1100, 1030, 1100}
                      : testing::emulated_run() ? Shape{530, 20, 300}
                                                : Shape{530, 600, 300};
  for (const Shape s : {Shape{70, 130, 389}, large}) check_thread_counts(k(), GetParam(), s);
}

TEST_P(SimdBf16, LayerNormAndGeluRoundTheirOutputsOnce) {
  for (const auto& [N, C] : {std::pair<size_t, int>{1, 1}, {7, 3}, {33, 47}, {9, 768}}) {
    Random rnd(unsigned(N + C));
    const std::vector<float> inp = rnd.normal(N * C, 0.3, 2.0), wt = rnd.normal(C),
                             b = rnd.normal(C);
    std::vector<bf16> out(N * C);
    std::vector<float> mean(N), rstd(N);
    k().layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), wt.data(), b.data(), N,
                          C);
    std::vector<double> ref(N * C), rm(N), rr(N);
    const std::vector<double> inp_d = widen(inp), wt_d = widen(wt), b_d = widen(b);
    scalar::layernorm_forward<double>(ref.data(), rm.data(), rr.data(), inp_d.data(), wt_d.data(),
                                      b_d.data(), N, C);
    std::vector<float> got(N * C);
    std::vector<double> bound(N * C);
    for (size_t i = 0; i < N * C; ++i) {
      got[i] = bf16_to_float(out[i]);
      // fp32 layernorm: loose 64 u relative to the row's scale, then one bf16 rounding.
      const size_t r = i / C, c = i % C;
      const double scale =
          std::fabs(wt_d[c]) * (std::fabs(inp_d[i] - rm[r]) * rr[r] + 1) + std::fabs(b_d[c]);
      bound[i] =
          kBf16HalfUlp * std::fabs(ref[i]) * (1 + 1e-6) + 64 * kU * double(C) * scale + 1e-30;
    }
    expect_within(GetParam() + " layernorm C=" + std::to_string(C), got, ref, bound);
    for (size_t r = 0; r < N; ++r) {
      EXPECT_NEAR(mean[r], rm[r], 8 * kU * C * (std::fabs(rm[r]) + 2.0));
      EXPECT_NEAR(rstd[r], rr[r], 64 * kU * C * rr[r]);
    }
    std::vector<bf16> g(N * C);
    k().gelu_forward(g.data(), inp.data(), N * C);
    std::vector<double> gref(N * C), gb(N * C);
    scalar::gelu_forward<double>(gref.data(), inp_d.data(), N * C);
    for (size_t i = 0; i < N * C; ++i) {
      got[i] = bf16_to_float(g[i]);
      gb[i] =
          kBf16HalfUlp * std::fabs(gref[i]) * (1 + 1e-6) + 64 * kU * std::fabs(inp_d[i]) + 1e-30;
    }
    expect_within(GetParam() + " gelu", got, gref, gb);
  }
}

// What the backward pass recomputes (--recompute) must be the forward's bits: the layernorm output
// from its saved statistics, GELU from the saved bf16 input; and GELU's kernels on a bf16 input are
// the fp32 ones on that input widened (exact), bit for bit.
TEST_P(SimdBf16, RecomputationKernelsGiveTheForwardsBits) {
  const bool gemm_table = has_own_gemm(GetParam());
  const KernelTable& f32 =
      kernels_for_target(gemm_table ? vectorized_targets().front() : GetParam());
  for (const auto& [N, C] : {std::pair<size_t, int>{1, 1}, {7, 3}, {33, 47}, {9, 768}}) {
    Random rnd(unsigned(3 * N + C));
    const std::vector<float> inp = rnd.normal(N * C, 0.3, 2.0), wt = rnd.normal(C),
                             b = rnd.normal(C);
    std::vector<bf16> out(N * C), again(N * C, 0x7fc1);
    std::vector<float> mean(N), rstd(N);
    k().layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), wt.data(), b.data(), N,
                          C);
    k().layernorm_apply(again.data(), inp.data(), mean.data(), rstd.data(), wt.data(), b.data(), N,
                        C);
    EXPECT_TRUE(again == out) << GetParam() << " layernorm_apply N=" << N << " C=" << C;

    const std::vector<bf16> x16 = round_all(inp);
    std::vector<float> x(N * C);
    for (size_t i = 0; i < x.size(); ++i) x[i] = bf16_to_float(x16[i]);
    std::vector<bf16> g16(N * C), g_from_f32(N * C);
    k().gelu_forward_bf16(g16.data(), x16.data(), N * C);
    k().gelu_forward(g_from_f32.data(), x.data(), N * C);
    EXPECT_TRUE(g16 == g_from_f32) << GetParam() << " gelu_forward_bf16 N*C=" << N * C;

    const std::vector<float> dout = rnd.normal(N * C);
    std::vector<float> d16(N * C), d32(N * C);
    k().gelu_backward(d16.data(), x16.data(), dout.data(), N * C);
    f32.gelu_backward(d32.data(), x.data(), dout.data(), N * C);
    expect_identical(GetParam() + " gelu_backward on bf16 input", d16, d32);
  }
}

// The fp32 tables' layernorm_apply gives their forward's output bits.
TEST(SimdBf16Dispatch, Fp32LayerNormApplyGivesTheForwardsBits) {
  for (std::string_view name : available_targets()) {
    const KernelTable& t = kernels_for_target(name);
    for (const auto& [N, C] : {std::pair<size_t, int>{1, 1}, {5, 17}, {9, 768}}) {
      Random rnd(unsigned(N * C));
      const std::vector<float> inp = rnd.normal(N * C, 0.3, 2.0), wt = rnd.normal(C),
                               b = rnd.normal(C);
      std::vector<float> out(N * C), again(N * C, NAN), mean(N), rstd(N);
      t.layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), wt.data(), b.data(), N,
                          C);
      t.layernorm_apply(again.data(), inp.data(), mean.data(), rstd.data(), wt.data(), b.data(), N,
                        C);
      expect_identical(std::string(name) + " layernorm_apply", again, out);
    }
  }
}

TEST_P(SimdBf16, AdamWWritesTheMasterAndItsBf16Copy) {
  const size_t N = 10007;
  Random rnd(5);
  const std::vector<float> p0 = rnd.normal(N), m0 = rnd.normal(N, 0, 0.1), g0 = rnd.normal(N);
  std::vector<float> g = g0;  // read, not written (no clear_grad)
  std::vector<float> v0 = rnd.uniform(N, 0, 0.2);
  const AdamWStep step{1e-3, 0.9, 0.999, 1e-8, 0.1, 3};
  std::vector<float> p = p0, m = m0, v = v0;
  std::vector<bf16> copy(N + 1, 0x1234);
  k().adamw_update(p.data(), copy.data(), m.data(), v.data(), g.data(), N, step);
  // The fp32 master follows the fp32 table of the same target bit for bit.
  // The GEMM tables ("avx512bf16", "onednn") share the rest with the best vectorized target.
  const bool gemm_table = has_own_gemm(GetParam());
  const std::string fp32_name = gemm_table ? vectorized_targets().front() : GetParam();
  std::vector<float> rp = p0, rm = m0, rv = v0;
  kernels_for_target(fp32_name).adamw_update(rp.data(), rm.data(), rv.data(), g.data(), N, step);
  expect_identical(GetParam() + " adamw master", p, rp);
  expect_identical(GetParam() + " adamw m", m, rm);
  expect_identical(GetParam() + " adamw v", v, rv);
  for (size_t i = 0; i < N; ++i) ASSERT_EQ(copy[i], float_to_bf16(p[i])) << "element " << i;
  EXPECT_EQ(copy[N], 0x1234) << "wrote past the end";
  // Without a copy it is the fp32 update.
  std::vector<float> q = p0, qm = m0, qv = v0;
  k().adamw_update(q.data(), nullptr, qm.data(), qv.data(), g.data(), N, step);
  expect_identical(GetParam() + " adamw without copy", q, rp);
  expect_identical(GetParam() + " adamw gradient read only", g, g0);
  // With the clipping factor and clear_grad, as the fp32 table's update of gradients scaled in
  // place first; the gradients are zero afterwards and the copy follows the master.
  const float factor = 0.3712f;
  std::vector<float> gs = g0, sp = p0, sm = m0, sv = v0;
  kernels_for_target(fp32_name).scale(gs.data(), factor, N);
  kernels_for_target(fp32_name).adamw_update(sp.data(), sm.data(), sv.data(), gs.data(), N, step);
  AdamWStep fused = step;
  fused.grad_scale = factor, fused.clear_grad = true;
  std::vector<float> fp = p0, fm = m0, fv = v0, fg = g0;
  k().adamw_update(fp.data(), copy.data(), fm.data(), fv.data(), fg.data(), N, fused);
  expect_identical(GetParam() + " adamw scaled master", fp, sp);
  expect_identical(GetParam() + " adamw scaled m", fm, sm);
  expect_identical(GetParam() + " adamw scaled v", fv, sv);
  for (size_t i = 0; i < N; ++i) {
    ASSERT_EQ(fg[i], 0.0f) << "gradient " << i;
    ASSERT_EQ(copy[i], float_to_bf16(fp[i])) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTables, SimdBf16, ::testing::ValuesIn(bf16_tables()), param_name);

TEST(SimdBf16Dispatch, EveryFp32TargetHasABf16Table) {
  for (std::string_view name : available_targets()) {
    const Bf16Kernels& t = bf16_kernels_for_target(name);
    EXPECT_FALSE(t.target.empty()) << name;
  }
  EXPECT_THROW(bf16_kernels_named("avx1024"), UsageError);
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512bf16") && isa_allows(IsaCap::kAvx512Bf16)) {
    const std::string_view best = bf16_kernels_for_target("avx512").target;
    if (bf16_dot_products_first()) {
      EXPECT_EQ(best, "avx512bf16");
    } else {
      EXPECT_TRUE(best == "avx512+xsmm" || best == "avx512") << best;
    }
  }
#endif
}

// The AVX512-BF16 tables rank first exactly where this core's dot products outrun its fp32 FMAs.
// The dispatcher's short probe must land on the same side of 1 as the roofs' long measure on every
// thread, where that measure is clearly off a tie (2x either way on the CPUs measured); the
// ranking then follows the probe.
TEST(SimdBf16Dispatch, DotProductTablesRankFirstWhereTheyOutrunTheFmas) {
  const double probe = bf16_dot_product_ratio();
  const std::vector<std::string_view> names = available_bf16_targets();
  const auto at = [&](std::string_view n) {
    return std::find(names.begin(), names.end(), n) - names.begin();
  };
  if (!roofs::cpu_has_avx512bf16()) {
    EXPECT_EQ(probe, 0.0);
    EXPECT_FALSE(bf16_dot_products_first());
    EXPECT_EQ(at("avx512bf16"), std::ptrdiff_t(names.size()));
    GTEST_SKIP() << "not run here: this CPU has no AVX512-BF16 dot products";
  }
  EXPECT_EQ(bf16_dot_products_first(), probe >= 1.0) << probe;
  const roofs::Roofs measured = roofs::measure(false);
  const double ratio = measured.dpbf16 / measured.fp32;
  std::printf("dot products / FMAs: probe %.2f, roofs %.0f / %.0f GFLOP/s = %.2f\n", probe,
              measured.dpbf16 / 1e9, measured.fp32 / 1e9, ratio);
  if (ratio < 0.8) EXPECT_LT(probe, 1.0) << ratio;
  if (ratio > 1.25) EXPECT_GE(probe, 1.0) << ratio;
  // In the ranking: before or after the portable avx512 table.
  ASSERT_LT(at("avx512"), std::ptrdiff_t(names.size()));
  EXPECT_EQ(at("avx512bf16") < at("avx512"), bf16_dot_products_first());
}

#if defined(__aarch64__)
// The Arm BF16 table is offered exactly where the CPU reports BF16 (HWCAP2_BF16), first for the
// best vectorized target, with that target's portable attention (whose tests then cover its own);
// elsewhere asking for it by name says why not.
TEST(SimdBf16Dispatch, TheArmBf16TableIsOfferedWhereTheCpuHasBf16) {
  const bool bf16 = (getauxval(AT_HWCAP2) & HWCAP2_BF16) != 0;
  bool offered = false;
  for (std::string_view name : available_bf16_targets()) offered = offered || name == "neon_bf16";
  EXPECT_EQ(offered, bf16);
  if (bf16) {
    const std::string best = vectorized_targets().front();
    EXPECT_EQ(bf16_kernels_for_target(best).target, "neon_bf16");
    const Bf16Kernels& t = bf16_kernels_named("neon_bf16");
    const Bf16Kernels& portable = bf16_kernels_named(best);
    EXPECT_NE(t.matmul_forward, portable.matmul_forward);
    EXPECT_EQ(t.flash_attention_forward, portable.flash_attention_forward);
    EXPECT_EQ(t.flash_attention_backward, portable.flash_attention_backward);
    EXPECT_EQ(t.flash_attention_forward_scratch, portable.flash_attention_forward_scratch);
    EXPECT_EQ(t.flash_attention_backward_scratch, portable.flash_attention_backward_scratch);
    return;
  }
  try {
    bf16_kernels_named("neon_bf16");
    ADD_FAILURE() << "neon_bf16 offered on a CPU without BF16";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("Arm BF16"), std::string::npos) << e.what();
  }
}
#endif

}  // namespace
}  // namespace llmcpu::simd_test
