// The block-quantized weights of a frozen base (simd/quant/block_quant.h): the NF4 code book against
// its construction in the QLoRA paper (normal quantiles), the codes against a brute-force search
// for the nearest value in double, the derived error bounds, bitsandbytes' nibble order, panels
// decoded on their own, all-zero and short tail blocks, and non-finite weights refused by position.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "simd/error.h"
#include "simd/quant/block_quant.h"

namespace llmcpu {
namespace {

// The standard normal quantile, by bisection on Phi(x) = erfc(-x / sqrt 2) / 2 (in double, to
// well below float precision).
double normal_quantile(double p) {
  double lo = -10, hi = 10;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// QLoRA (Dettmers et al. 2023, appendix E; bitsandbytes create_normal_map with offset 0.9677083):
// 8 positive values, the quantiles of linspace(offset, 0.5, 9) without its last point; 7 negative
// ones, minus the quantiles of linspace(offset, 0.5, 8) without its last; a zero; all divided by
// the largest. bitsandbytes takes the linspace in float32, which moves the quantiles by up to
// about 14 (1 / phi at the offset) times float32's 6e-8 relative spacing: 2e-6 covers it.
TEST(BlockQuant, Nf4CodeBookIsQLoRAsNormalQuantiles) {
  const double offset = 0.9677083;
  std::vector<double> v;
  for (int i = 0; i < 8; ++i) v.push_back(normal_quantile(offset + i * (0.5 - offset) / 8));
  for (int i = 0; i < 7; ++i) v.push_back(-normal_quantile(offset + i * (0.5 - offset) / 7));
  v.push_back(0.0);
  std::sort(v.begin(), v.end());
  const double top = v.back();
  for (int i = 0; i < 16; ++i) {
    EXPECT_NEAR(kNf4Values[i], v[size_t(i)] / top, 2e-6) << "NF4 value " << i;
  }
  EXPECT_EQ(kNf4Values[7], 0.0f);
  EXPECT_EQ(kNf4Values[0], -1.0f);
  EXPECT_EQ(kNf4Values[15], 1.0f);
}

struct Matrix {
  size_t rows, cols;
  std::vector<float> w;
};

// Rows of normal values whose scale varies by row, an outlier here and there, exact zeros, and a
// row that is all zero.
Matrix random_matrix(size_t rows, size_t cols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  Matrix m{rows, cols, std::vector<float>(rows * cols)};
  for (size_t r = 0; r < rows; ++r) {
    const float scale = std::ldexp(1.0f, int(r % 7) - 4);
    for (size_t c = 0; c < cols; ++c) {
      float x = normal(gen) * scale;
      if ((r * cols + c) % 97 == 5) x *= 30;  // an outlier sets its block's scale
      if ((r * cols + c) % 53 == 0) x = 0;
      m.w[r * cols + c] = r == 2 ? 0.0f : x;
    }
  }
  return m;
}

struct Quantized {
  std::vector<uint8_t> codes;
  std::vector<float> scales, decoded;
};

Quantized quantize(QuantFormat f, const Matrix& m) {
  Quantized q{std::vector<uint8_t>(m.rows * quant_code_bytes_per_row(f, m.cols)),
              std::vector<float>(m.rows * quant_blocks_per_row(m.cols)),
              std::vector<float>(m.rows * m.cols)};
  quantize_rows(f, m.w.data(), m.rows, m.cols, q.codes.data(), q.scales.data());
  dequantize_rows(f, q.codes.data(), q.scales.data(), m.cols, 0, m.rows, 0, m.cols,
                  q.decoded.data(), m.cols);
  return q;
}

double block_absmax(const Matrix& m, size_t r, size_t c) {
  const size_t begin = c / kQuantBlock * kQuantBlock;
  double a = 0;
  for (size_t j = begin; j < std::min(m.cols, begin + kQuantBlock); ++j)
    a = std::max(a, double(std::fabs(m.w[r * m.cols + j])));
  return a;
}

class BlockQuantFormat : public ::testing::TestWithParam<QuantFormat> {};

// Every value decodes within the derived bound of its block, and to the nearest representable value
// (brute force in double over all codes, with the block's own scale), up to the rounding of w / s.
TEST_P(BlockQuantFormat, DecodesToTheNearestValueWithinTheBound) {
  const QuantFormat f = GetParam();
  for (const size_t cols : {size_t(64), size_t(200), size_t(131), size_t(7)}) {
    const Matrix m = random_matrix(9, cols, 11 + uint32_t(cols));
    const Quantized q = quantize(f, m);
    size_t checked = 0;
    for (size_t r = 0; r < m.rows; ++r) {
      for (size_t c = 0; c < cols; ++c) {
        const double w = m.w[r * cols + c], got = q.decoded[r * cols + c];
        const double a = block_absmax(m, r, c);
        const double s = q.scales[r * quant_blocks_per_row(cols) + c / kQuantBlock];
        ASSERT_LE(std::fabs(w - got), quantization_bound(f, a))
            << quant_format_name(f) << " row " << r << " col " << c << " of " << cols;
        if (a == 0) {
          ASSERT_EQ(got, 0.0);
          continue;
        }
        // The nearest of the format's values, with the block's scale.
        double best = std::numeric_limits<double>::infinity();
        if (f == QuantFormat::kInt8) {
          for (int k = -127; k <= 127; ++k) best = std::min(best, std::fabs(w - k * s));
        } else {
          for (float v : kNf4Values) best = std::min(best, std::fabs(w - v * s));
        }
        ASSERT_LE(std::fabs(w - got), best + 4 * std::ldexp(a, -24))
            << quant_format_name(f) << " row " << r << " col " << c << ": not the nearest value";
        ++checked;
      }
    }
    EXPECT_GT(checked, m.rows * cols / 2);
  }
}

// A panel (rows, columns, a row stride of its own) decodes to the same values as the whole matrix.
TEST_P(BlockQuantFormat, PanelsDecodeOnTheirOwn) {
  const QuantFormat f = GetParam();
  const Matrix m = random_matrix(6, 150, 5);
  const Quantized q = quantize(f, m);
  const size_t row0 = 1, nrows = 4, col0 = 62, ncols = 71, ld = 80;
  std::vector<float> panel(nrows * ld, -1.0f);
  dequantize_rows(f, q.codes.data(), q.scales.data(), m.cols, row0, nrows, col0, ncols,
                  panel.data(), ld);
  for (size_t i = 0; i < nrows; ++i) {
    for (size_t j = 0; j < ncols; ++j)
      ASSERT_EQ(panel[i * ld + j], q.decoded[(row0 + i) * m.cols + col0 + j]) << i << "," << j;
    for (size_t j = ncols; j < ld; ++j) ASSERT_EQ(panel[i * ld + j], -1.0f) << "past the panel";
  }
}

TEST_P(BlockQuantFormat, NonFiniteWeightsAreRefusedByPosition) {
  Matrix m = random_matrix(3, 70, 2);
  m.w[2 * 70 + 66] = std::numeric_limits<float>::quiet_NaN();
  std::vector<uint8_t> codes(3 * quant_code_bytes_per_row(GetParam(), 70));
  std::vector<float> scales(3 * quant_blocks_per_row(70));
  try {
    quantize_rows(GetParam(), m.w.data(), 3, 70, codes.data(), scales.data());
    FAIL() << "a NaN weight was quantized";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 2, column 66"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, BlockQuantFormat,
                         ::testing::Values(QuantFormat::kInt8, QuantFormat::kNf4),
                         [](const ::testing::TestParamInfo<QuantFormat>& info) {
                           return std::string(quant_format_name(info.param));
                         });

// The bytes: int8 codes as two's complement bytes; NF4 codes two to a byte, the first value in the
// high nibble (bitsandbytes' order), an odd row's last byte padded with the code of 0 (7); one
// fp32 scale per block of 64, the last block of a row shorter.
TEST(BlockQuant, BytesAreLaidOutAsDocumented) {
  // Row 0: -2 (absmax), 0, 2, 0.5, 0.25; row 1 zero. Scales: int8 2/127, nf4 2.
  const std::vector<float> w = {-2, 0, 2, 0.5f, 0.25f, 0, 0, 0, 0, 0};
  std::vector<uint8_t> c8(2 * 5), c4(2 * 3);
  std::vector<float> s8(2), s4(2);
  quantize_rows(QuantFormat::kInt8, w.data(), 2, 5, c8.data(), s8.data());
  quantize_rows(QuantFormat::kNf4, w.data(), 2, 5, c4.data(), s4.data());
  EXPECT_EQ(s8[0], 2.0f / 127.0f);
  EXPECT_EQ(s8[1], 0.0f);
  EXPECT_EQ(c8[0], 0x81);  // -127
  EXPECT_EQ(c8[1], 0x00);
  EXPECT_EQ(c8[2], 0x7F);  // 127
  EXPECT_EQ(c8[3], 32);    // 0.5 / (2/127) = 31.75
  EXPECT_EQ(c8[4], 16);    // 15.875
  EXPECT_EQ(s4[0], 2.0f);
  // w / 2: -1 -> 0, 0 -> 7, 1 -> 15, 0.25 -> 10 (0.2461), 0.125 -> 9 (0.1609, nearer than 0.0796).
  EXPECT_EQ(c4[0], 0x07);
  EXPECT_EQ(c4[1], 0xFA);
  EXPECT_EQ(c4[2], 0x97);  // the padding nibble: 7, the code of 0.0
  EXPECT_EQ(c4[3], 0x77);  // the zero row
  EXPECT_EQ(quantized_bytes(QuantFormat::kNf4, 3, 130), 3 * (65 + 3 * 4));
  EXPECT_EQ(quantized_bytes(QuantFormat::kInt8, 3, 130), 3 * (130 + 3 * 4));
  // An nf4 panel starting inside a byte is refused.
  std::vector<float> out(5);
  EXPECT_THROW(dequantize_rows(QuantFormat::kNf4, c4.data(), s4.data(), 5, 0, 1, 1, 2,
                               out.data(), 5),
               Error);
}

TEST(BlockQuant, FormatNames) {
  QuantFormat f = QuantFormat::kNone;
  EXPECT_TRUE(parse_quant_format("nf4", f));
  EXPECT_EQ(f, QuantFormat::kNf4);
  EXPECT_TRUE(parse_quant_format("int8", f));
  EXPECT_EQ(f, QuantFormat::kInt8);
  EXPECT_TRUE(parse_quant_format("none", f));
  EXPECT_EQ(f, QuantFormat::kNone);
  EXPECT_FALSE(parse_quant_format("q4_0", f));
}

}  // namespace
}  // namespace llmcpu
