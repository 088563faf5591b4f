// matmul forward and backward of every vectorized table against the scalar reference in double, on
// ragged shapes (N, C, OC not multiples of any vector width or tile), with and without bias; and
// the determinism rule: the same bits for 1, 2 and 3 threads and for repeated runs.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <iterator>
#include <vector>

#include "simd/scalar/matmul.h"
#include "tests/simd/emulated.h"
#include "tests/simd/error_bounds.h"

namespace llmcpu::simd_test {
namespace {

class SimdMatmul : public ::testing::TestWithParam<std::string> {
 protected:
  const KernelTable& k() const { return kernels_for_target(GetParam()); }
};

struct Shape {
  size_t N;
  int C, OC;
};

// Tiny, ragged in every dimension, a long reduction over C (forward), over OC (dinp) and over N
// (dW: more tokens than one slice), N above one token panel, and one GPT-2-like channel count.
constexpr Shape kShapes[] = {{1, 1, 1},     {3, 5, 7},      {17, 33, 29},
                             {31, 64, 50},  {70, 96, 131},  {33, 769, 13},
                             {5, 17, 2003}, {65, 130, 389}, {40, 768, 24},
                             {1100, 40, 70}};

// kShapes, with 600 tokens for 1100 under emulation (tests/simd/emulated.h): still two dW slices.
std::vector<Shape> shapes() {
  std::vector<Shape> r(std::begin(kShapes), std::end(kShapes));
  if (testing::emulated_run()) {
    for (Shape& s : r) s.N = s.N == 1100 ? 600 : s.N;
  }
  return r;
}

void check_matmul(const KernelTable& k, const Shape& s, bool with_bias, bool with_dinp,
                  unsigned seed) {
  const size_t N = s.N, C = size_t(s.C), OC = size_t(s.OC);
  const std::string where = std::string(k.target) + " N=" + std::to_string(N) +
                            " C=" + std::to_string(C) + " OC=" + std::to_string(OC) +
                            (with_bias ? " bias" : "");
  Random rnd(seed);
  const std::vector<float> inp = rnd.normal(N * C), weight = rnd.normal(OC * C, 0, 0.5);
  const std::vector<float> bias = rnd.normal(OC), dout = rnd.normal(N * OC);
  const std::vector<float> dweight0 = rnd.normal(OC * C), dbias0 = rnd.normal(OC);
  const float* b = with_bias ? bias.data() : nullptr;

  // Forward: out[n,o] = b[o] + sum_i x[n,i] w[o,i], a sum of C + 1 terms:
  //   |error| <= gamma(C + 1) (|b[o]| + sum_i |x[n,i] w[o,i]|).
  std::vector<float> out(N * OC, NAN);
  k.matmul_forward(out.data(), inp.data(), weight.data(), b, N, s.C, s.OC);
  std::vector<double> ref(N * OC), bound(N * OC);
  const std::vector<double> inp_d = widen(inp), weight_d = widen(weight), bias_d = widen(bias);
  scalar::matmul_forward<double>(ref.data(), inp_d.data(), weight_d.data(),
                                 with_bias ? bias_d.data() : nullptr, N, s.C, s.OC);
  for (size_t n = 0; n < N; ++n) {
    for (size_t o = 0; o < OC; ++o) {
      double mag = with_bias ? std::fabs(bias_d[o]) : 0.0;
      for (size_t i = 0; i < C; ++i) mag += std::fabs(inp_d[n * C + i] * weight_d[o * C + i]);
      bound[n * OC + o] = gamma(double(C) + 1) * mag;
    }
  }
  expect_within("forward " + where, out, ref, bound);

  // Backward. dinp[n,i] = sum_o dout[n,o] w[o,i] (OC terms, overwritten);
  // dW[o,i] = dW0[o,i] + sum_n dout[n,o] x[n,i] and db[o] = db0[o] + sum_n dout[n,o] (N + 1 terms).
  std::vector<float> dinp(N * C, NAN), dweight = dweight0, dbias = dbias0;
  k.matmul_backward(with_dinp ? dinp.data() : nullptr, dweight.data(),
                    with_bias ? dbias.data() : nullptr, dout.data(), inp.data(), weight.data(), N,
                    s.C, s.OC);
  std::vector<double> dinp_r(N * C), dweight_r = widen(dweight0), dbias_r = widen(dbias0);
  const std::vector<double> dout_d = widen(dout);
  scalar::matmul_backward<double>(dinp_r.data(), dweight_r.data(), dbias_r.data(), dout_d.data(),
                                  inp_d.data(), weight_d.data(), N, s.C, s.OC);
  if (with_dinp) {
    std::vector<double> dinp_b(N * C);
    for (size_t n = 0; n < N; ++n) {
      for (size_t i = 0; i < C; ++i) {
        double mag = 0;
        for (size_t o = 0; o < OC; ++o) mag += std::fabs(dout_d[n * OC + o] * weight_d[o * C + i]);
        dinp_b[n * C + i] = gamma(double(OC)) * mag;
      }
    }
    expect_within("dinp " + where, dinp, dinp_r, dinp_b);
  }
  std::vector<double> dweight_b(OC * C), dbias_b(OC);
  for (size_t o = 0; o < OC; ++o) {
    double mag_b = std::fabs(double(dbias0[o]));
    for (size_t n = 0; n < N; ++n) mag_b += std::fabs(dout_d[n * OC + o]);
    dbias_b[o] = gamma(double(N) + 1) * mag_b;
    for (size_t i = 0; i < C; ++i) {
      double mag = std::fabs(double(dweight0[o * C + i]));
      for (size_t n = 0; n < N; ++n) mag += std::fabs(dout_d[n * OC + o] * inp_d[n * C + i]);
      dweight_b[o * C + i] = gamma(double(N) + 1) * mag;
    }
  }
  expect_within("dweight " + where, dweight, dweight_r, dweight_b);
  if (with_bias) {
    expect_within("dbias " + where, dbias, dbias_r, dbias_b);
  } else {
    expect_identical("dbias untouched " + where, dbias, dbias0);
  }
}

TEST_P(SimdMatmul, RaggedShapesWithBias) {
  unsigned seed = 1;
  for (const Shape& s : shapes()) check_matmul(k(), s, true, true, seed++);
}

TEST_P(SimdMatmul, RaggedShapesWithoutBiasOrDinp) {
  unsigned seed = 100;
  for (const Shape& s : shapes()) {
    check_matmul(k(), s, false, seed % 2 == 0, seed);
    ++seed;
  }
}

// A frozen weight (LoRA's base): with dweight null the backward gives the same dinp and dbias, bit
// for bit, as with it, and writes nothing else.
TEST_P(SimdMatmul, FrozenWeightGivesTheSameInputGradient) {
  unsigned seed = 300;
  for (const Shape& s : shapes()) {
    const size_t N = s.N, C = size_t(s.C), OC = size_t(s.OC);
    Random rnd(seed++);
    const std::vector<float> inp = rnd.normal(N * C), weight = rnd.normal(OC * C, 0, 0.5);
    const std::vector<float> dout = rnd.normal(N * OC), dbias0 = rnd.normal(OC);
    std::vector<float> dinp(N * C, NAN), dweight(OC * C, 0.0f), dbias = dbias0;
    k().matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                        weight.data(), N, s.C, s.OC);
    std::vector<float> frozen(N * C, NAN), frozen_bias = dbias0;
    k().matmul_backward(frozen.data(), nullptr, frozen_bias.data(), dout.data(), inp.data(),
                        weight.data(), N, s.C, s.OC);
    const std::string where = std::string(k().target) + " N=" + std::to_string(N) +
                              " C=" + std::to_string(C) + " OC=" + std::to_string(OC);
    expect_identical("dinp " + where, frozen, dinp);
    expect_identical("dbias " + where, frozen_bias, dbias);
  }
}

void identical_bits_for_any_thread_count(const KernelTable& k, size_t N) {
  // Under emulation (tests/simd/emulated.h) fewer channels: still several column blocks to share.
  const int C = testing::emulated_run() ? 40 : 200, OC = testing::emulated_run() ? 131 : 301;
  Random rnd(unsigned(9 + N));
  const std::vector<float> inp = rnd.normal(N * C), weight = rnd.normal(size_t(OC) * C);
  const std::vector<float> bias = rnd.normal(OC), dout = rnd.normal(N * OC);
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> r(N * OC + N * C + size_t(OC) * C + OC, 0.0f);
    float* out = r.data();
    float* dinp = out + N * OC;
    float* dweight = dinp + N * C;
    float* dbias = dweight + size_t(OC) * C;
    k.matmul_forward(out, inp.data(), weight.data(), bias.data(), N, C, OC);
    k.matmul_backward(dinp, dweight, dbias, dout.data(), inp.data(), weight.data(), N, C, OC);
    omp_set_num_threads(saved);
    return r;
  };
  const std::vector<float> one = run(1);
  expect_identical(std::to_string(N) + " tokens: 1 thread, repeated", run(1), one);
  expect_identical(std::to_string(N) + " tokens: 2 threads vs 1", run(2), one);
  expect_identical(std::to_string(N) + " tokens: 3 threads vs 1", run(3), one);
}

// Every output element has one owner and a fixed order of its sum: the same bits for any thread
// count, and for a repeated call (no state carried between calls); N = 1100 spans several of dW's
// 512-token slices (600 under emulation: two).
TEST_P(SimdMatmul, IdenticalBitsForAnyThreadCount) {
  const size_t many = testing::emulated_run() ? 600 : 1100;
  for (const size_t N : {size_t(67), many}) identical_bits_for_any_thread_count(k(), N);
}

INSTANTIATE_TEST_SUITE_P(Targets, SimdMatmul, ::testing::ValuesIn(vectorized_targets()),
                         param_name);

}  // namespace
}  // namespace llmcpu::simd_test
