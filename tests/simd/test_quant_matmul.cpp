// The GEMMs of a block-quantized frozen weight (simd/quant/quant_matmul.h), on every fp32 and bf16
// table this CPU runs, against the scalar math in double on the decoded weights:
// - the panels decode to block_quant.h's values (fp32: dequantize_rows' bits; bf16: those rounded
//   once by float_to_bf16);
// - forward out = inp W^T + bias and backward dinp = dout W within the table's GEMM bound on the
//   decoded weights: a sum of K exact products (fp32: products rounded, bf16: exact in fp32) in
//   any order errs by at most gamma(units K) sum |terms| (error_bounds.h, bf16_tables.h), plus
//   the bias's rounding; a bf16 output adds half a bf16 ulp; the bf16 backward's dout enters the
//   product rounded to bf16 (the reference rounds it the same way);
// - results do not depend on the thread count, and a call allocates no more scratch than its
//   sizing entry says.
// Ragged shapes: rows and columns that are not whole panels or blocks, an odd C (nf4's padding).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "simd/bf16.h"
#include "simd/error.h"
#include "simd/quant/quant_matmul.h"
#include "simd/workspace.h"
#include "tests/simd/bf16_tables.h"
#include "tests/simd/emulated.h"
#include "tests/simd/error_bounds.h"

namespace llmcpu::simd_test {
namespace {

struct Shape {
  size_t N, C, OC;
};
const Shape kNativeShapes[] = {{1, 64, 64},   {37, 200, 300}, {5, 129, 513},
                               {64, 512, 256}, {3, 70, 1000},  {2, 300, 40}};
// Under qemu-aarch64 (emulated.h) without the two largest, which took most of its minutes: the
// others still cross panel boundaries both ways (513 and 1000 rows forward, 300 columns
// backward) and end blocks raggedly.
const Shape kEmulatedShapes[] = {{1, 64, 64}, {5, 129, 513}, {3, 70, 1000}, {2, 300, 40}};
std::span<const Shape> shapes() {
  if (testing::emulated_run()) return kEmulatedShapes;
  return kNativeShapes;
}

// A quantized random weight, and its decoded values (block_quant.h's own decoder).
struct Weight {
  QuantFormat format;
  size_t rows, cols;
  std::vector<uint8_t> codes;
  std::vector<float> scales, decoded;
  Weight(QuantFormat f, size_t OC, size_t C, unsigned seed) : format(f), rows(OC), cols(C) {
    Random rnd(seed);
    std::vector<float> w = rnd.normal(OC * C, 0, 0.05);
    codes.resize(OC * quant_code_bytes_per_row(f, C));
    scales.resize(OC * quant_blocks_per_row(C));
    quantize_rows(f, w.data(), OC, C, codes.data(), scales.data());
    decoded.resize(OC * C);
    dequantize_rows(f, codes.data(), scales.data(), C, 0, OC, 0, C, decoded.data(), C);
  }
  QuantMatrix matrix() const { return {format, rows, cols, codes.data(), scales.data()}; }
};

std::vector<float> round_through_bf16(const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = bf16_to_float(float_to_bf16(v[i]));
  return r;
}
std::vector<bf16> to_bf16(const std::vector<float>& v) {
  std::vector<bf16> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = float_to_bf16(v[i]);
  return r;
}

// out (N, OC) = x (N, C) w^T + bias in double, and the bound of an fp32 sum of those terms.
void reference_forward(const std::vector<float>& x, const std::vector<float>& w,
                       const std::vector<float>& bias, const Shape& s, double units,
                       std::vector<double>& ref, std::vector<double>& bound) {
  ref.assign(s.N * s.OC, 0), bound.assign(s.N * s.OC, 0);
  for (size_t n = 0; n < s.N; ++n)
    for (size_t o = 0; o < s.OC; ++o) {
      double sum = bias[o], mag = std::fabs(bias[o]);
      for (size_t c = 0; c < s.C; ++c) {
        const double t = double(x[n * s.C + c]) * w[o * s.C + c];
        sum += t, mag += std::fabs(t);
      }
      ref[n * s.OC + o] = sum;
      bound[n * s.OC + o] = gamma(units * double(s.C + 1)) * mag + 1e-30;
    }
}

// dinp (N, C) = d (N, OC) w in double, and its bound.
void reference_backward(const std::vector<float>& d, const std::vector<float>& w, const Shape& s,
                        double units, std::vector<double>& ref, std::vector<double>& bound) {
  ref.assign(s.N * s.C, 0), bound.assign(s.N * s.C, 0);
  for (size_t n = 0; n < s.N; ++n)
    for (size_t c = 0; c < s.C; ++c) {
      double sum = 0, mag = 0;
      for (size_t o = 0; o < s.OC; ++o) {
        const double t = double(d[n * s.OC + o]) * w[o * s.C + c];
        sum += t, mag += std::fabs(t);
      }
      ref[n * s.C + c] = sum;
      bound[n * s.C + c] = gamma(units * double(s.OC)) * mag + 1e-30;
    }
}

std::string where(const std::string& table, QuantFormat f, const Shape& s) {
  return table + " " + quant_format_name(f) + " N=" + std::to_string(s.N) +
         " C=" + std::to_string(s.C) + " OC=" + std::to_string(s.OC);
}

const QuantFormat kFormats[] = {QuantFormat::kInt8, QuantFormat::kNf4};

TEST(QuantMatmul, PanelsDecodeToTheFormatsValues) {
  for (QuantFormat f : kFormats) {
    const Weight w(f, 300, 129, 3);
    std::vector<float> got(300 * 129, NAN);
    decode_quant_panel(w.matrix(), 0, 300, 0, 129, got.data());
    expect_identical(std::string(quant_format_name(f)) + " fp32", got, w.decoded);
    std::vector<bf16> got16(100 * 65, 0x7fc1);
    decode_quant_panel(w.matrix(), 200, 100, 64, 65, got16.data());
    for (size_t i = 0; i < 100; ++i)
      for (size_t j = 0; j < 65; ++j)
        ASSERT_EQ(got16[i * 65 + j], float_to_bf16(w.decoded[(200 + i) * 129 + 64 + j]))
            << quant_format_name(f) << " row " << 200 + i << " column " << 64 + j;
    EXPECT_THROW(decode_quant_panel(w.matrix(), 0, 1, 32, 8, got.data()), Error);  // not a block
    EXPECT_THROW(decode_quant_panel(w.matrix(), 299, 2, 0, 8, got.data()), Error);  // past the end
  }
}

class QuantMatmulFp32 : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantMatmulFp32, ForwardAndBackwardAreTheProductsOfTheDecodedWeights) {
  const KernelTable& k = kernels_for_target(GetParam());
  const int saved = omp_get_max_threads();
  for (QuantFormat f : kFormats)
    for (const Shape& s : shapes()) {
      const Weight w(f, s.OC, s.C, unsigned(s.N + s.C + s.OC));
      Random rnd(unsigned(s.N * 7 + s.C));
      const std::vector<float> x = rnd.normal(s.N * s.C), bias = rnd.normal(s.OC),
                               d = rnd.normal(s.N * s.OC);
      std::vector<double> ref, bound;
      reference_forward(x, w.decoded, bias, s, 1, ref, bound);
      std::vector<float> first;
      for (const int threads : {1, 2}) {
        omp_set_num_threads(threads);
        std::vector<float> out(s.N * s.OC, NAN);
        quant_matmul_forward(k, out.data(), x.data(), w.matrix(), bias.data(), s.N);
        expect_within(where(GetParam(), f, s) + " forward", out, ref, bound);
        if (threads == 1) first = out;
        expect_identical(where(GetParam(), f, s) + " forward on 2 threads", out, first);
      }
      reference_backward(d, w.decoded, s, 1, ref, bound);
      for (const int threads : {1, 2}) {
        omp_set_num_threads(threads);
        std::vector<float> dinp(s.N * s.C, NAN);
        quant_matmul_backward(k, dinp.data(), d.data(), x.data(), w.matrix(), s.N);
        expect_within(where(GetParam(), f, s) + " backward", dinp, ref, bound);
        if (threads == 1) first = dinp;
        expect_identical(where(GetParam(), f, s) + " backward on 2 threads", dinp, first);
      }
    }
  omp_set_num_threads(saved);
}

TEST_P(QuantMatmulFp32, ScratchIsWhatTheSizingEntriesSay) {
  const KernelTable& k = kernels_for_target(GetParam());
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Shape s = testing::emulated_run() ? Shape{5, 300, 513} : Shape{48, 300, 700};
  const Weight w(QuantFormat::kNf4, s.OC, s.C, 5);
  Random rnd(9);
  const std::vector<float> x = rnd.normal(s.N * s.C), d = rnd.normal(s.N * s.OC);
  std::vector<float> out(s.N * s.OC), dinp(s.N * s.C);
  release_thread_scratch();
  quant_matmul_forward(k, out.data(), x.data(), w.matrix(), nullptr, s.N);
  EXPECT_LE(thread_scratch_held(),
            quant_matmul_forward_scratch(k, s.N, int(s.C), int(s.OC), false, 1).bytes(1));
  release_thread_scratch();
  quant_matmul_backward(k, dinp.data(), d.data(), x.data(), w.matrix(), s.N);
  EXPECT_LE(thread_scratch_held(),
            quant_matmul_backward_scratch(k, s.N, int(s.C), int(s.OC), 1).bytes(1));
  omp_set_num_threads(saved);
}

std::vector<std::string> fp32_tables() {
  std::vector<std::string> r;
  for (std::string_view name : available_targets()) r.emplace_back(name);
  return r;
}
INSTANTIATE_TEST_SUITE_P(Tables, QuantMatmulFp32, ::testing::ValuesIn(fp32_tables()), param_name);

class QuantMatmulBf16 : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantMatmulBf16, ForwardAndBackwardAreTheProductsOfTheDecodedWeights) {
  const Bf16Kernels& h = bf16_kernels_named(GetParam());
  const double units = gemm_rounding_units(GetParam());
  constexpr double kBf16HalfUlp = 0x1p-8;
  const int saved = omp_get_max_threads();
  for (QuantFormat f : kFormats)
    for (const Shape& s : shapes()) {
      const Weight w(f, s.OC, s.C, unsigned(s.N + s.C + s.OC));
      const std::vector<float> w16 = round_through_bf16(w.decoded);  // the panels' values
      Random rnd(unsigned(s.N * 7 + s.C));
      const std::vector<float> x = round_through_bf16(rnd.normal(s.N * s.C)),
                               bias = rnd.normal(s.OC), d = rnd.normal(s.N * s.OC);
      const std::vector<bf16> x16 = to_bf16(x);
      std::vector<double> ref, bound;
      reference_forward(x, w16, bias, s, units, ref, bound);
      for (const int threads : {1, 2}) {
        omp_set_num_threads(threads);
        std::vector<float> out(s.N * s.OC, NAN);
        quant_matmul_forward(h, out.data(), x16.data(), w.matrix(), bias.data(), s.N);
        expect_within(where(GetParam(), f, s) + " forward", out, ref, bound);
        std::vector<bf16> out16(s.N * s.OC, 0x7fc1);
        quant_matmul_forward(h, out16.data(), x16.data(), w.matrix(), bias.data(), s.N);
        std::vector<float> wide(out16.size());
        std::vector<double> bound16(bound.size());
        for (size_t i = 0; i < wide.size(); ++i) {
          wide[i] = bf16_to_float(out16[i]);
          bound16[i] = bound[i] * (1 + kBf16HalfUlp) + kBf16HalfUlp * std::fabs(ref[i]);
        }
        expect_within(where(GetParam(), f, s) + " forward to bf16", wide, ref, bound16);
      }
      reference_backward(round_through_bf16(d), w16, s, units, ref, bound);
      for (const int threads : {1, 2}) {
        omp_set_num_threads(threads);
        std::vector<float> dinp(s.N * s.C, NAN);
        quant_matmul_backward(h, dinp.data(), d.data(), x16.data(), w.matrix(), s.N);
        expect_within(where(GetParam(), f, s) + " backward", dinp, ref, bound);
      }
    }
  omp_set_num_threads(saved);
}

std::vector<std::string> bf16_tables() {
  std::vector<std::string> r;
  for (std::string_view name : available_bf16_targets()) r.emplace_back(name);
  return r;
}
INSTANTIATE_TEST_SUITE_P(Tables, QuantMatmulBf16, ::testing::ValuesIn(bf16_tables()), param_name);

}  // namespace
}  // namespace llmcpu::simd_test
