// llama.cpp's Q8_0 and Q4_0 blocks (core/io/ggml_blocks.h) against ggml-quants.c's reference
// quantizers, transcribed in tests/gguf/ggml_quants_reference.py (numpy, fp32 arithmetic): the
// same bytes for every block, and the same values back, bit for bit. The blocks cover what the
// reference's arithmetic turns on: random weights at several scales, zero blocks, magnitudes tied
// between signs (Q4_0 keeps the first), values whose scaled form is an exact half (roundf rounds it
// away from zero), the nibble clamp at 15, scales that are fp16 subnormals or overflow to infinity.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/io/ggml_blocks.h"
#include "tests/common/process.h"
#include "tests/common/temp_files.h"

namespace llmcpu {
namespace {

std::vector<float> blocks_to_test() {
  std::vector<float> x;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float scale : {1.0f, 0.02f, 3e-3f, 250.0f}) {  // random weights at several scales
    for (int i = 0; i < 32 * 16; ++i) x.push_back(scale * normal(rng));
  }
  x.insert(x.end(), 32, 0.0f);  // a zero block: d = 0, every q the middle value
  for (int j = 0; j < 32; ++j) x.push_back(j % 2 ? -5.0f : 5.0f);  // tied magnitudes, + first
  for (int j = 0; j < 32; ++j) x.push_back(j % 2 ? 5.0f : -5.0f);  // tied magnitudes, - first
  // max|x| = 127 makes Q8_0's d = 1: x.5 values are exact halves for roundf.
  for (int j = 0; j < 32; ++j) x.push_back(j == 0 ? 127.0f : float(j % 7) - 3.5f);
  // Q4_0 with max = -8: d = 1, x + 8.5 reaches 16.5 at x = 8, clamped to 15.
  for (int j = 0; j < 32; ++j) x.push_back(j == 0 ? -8.0f : float(j % 17) - 8.0f);
  for (int j = 0; j < 32; ++j) x.push_back(1e-6f * normal(rng));          // d an fp16 subnormal
  for (int j = 0; j < 32; ++j) x.push_back(j == 3 ? 1e7f : normal(rng));  // d past fp16's range
  return x;
}

class GgmlBlocks : public testing::TempDirTest {};

TEST_F(GgmlBlocks, Q8_0AndQ4_0MatchGgmlsReferenceQuantizers) {
  const std::vector<float> x = blocks_to_test();
  const size_t n = x.size(), blocks = n / kGgmlQ0Block;
  ASSERT_EQ(n % kGgmlQ0Block, 0u);
  testing::Bytes in(n * 4);
  std::memcpy(in.data(), x.data(), in.size());
  testing::write_bytes(path("x.f32"), in);
  const std::string cmd =
      "/usr/bin/python3 " + testing::shell_quote(LLMCPU_GGUF_TEST_DIR "/ggml_quants_reference.py") +
      " " + testing::shell_quote(path("x.f32")) + " " + testing::shell_quote(path("ref")) + " 2>&1";
  const testing::Outcome ref = testing::run_shell(cmd);
  ASSERT_EQ(ref.status, 0) << cmd << ": " << ref.output;

  struct Format {
    const char* name;
    size_t block_bytes;
    void (*quantize)(const float*, size_t, uint8_t*);
    void (*dequantize)(const uint8_t*, size_t, float*);
  };
  for (const Format& f : {Format{"q8_0", kGgmlQ8_0Bytes, quantize_q8_0, dequantize_q8_0},
                          Format{"q4_0", kGgmlQ4_0Bytes, quantize_q4_0, dequantize_q4_0}}) {
    SCOPED_TRACE(f.name);
    std::vector<uint8_t> ours(blocks * f.block_bytes);
    f.quantize(x.data(), n, ours.data());
    const testing::Bytes want = testing::read_bytes(path(std::string("ref.") + f.name));
    ASSERT_EQ(want.size(), ours.size());
    for (size_t b = 0; b < blocks; ++b) {
      ASSERT_EQ(0, std::memcmp(ours.data() + b * f.block_bytes, want.data() + b * f.block_bytes,
                               f.block_bytes))
          << "block " << b << " (values from " << x[b * kGgmlQ0Block] << ")";
    }
    std::vector<float> back(n);
    f.dequantize(ours.data(), n, back.data());
    const testing::Bytes want_back =
        testing::read_bytes(path(std::string("ref.") + f.name + ".f32"));
    ASSERT_EQ(want_back.size(), n * 4);
    for (size_t i = 0; i < n; ++i) {
      uint32_t a, b;
      std::memcpy(&a, &back[i], 4);
      std::memcpy(&b, want_back.data() + 4 * i, 4);
      ASSERT_EQ(a, b) << "value " << i << ": " << back[i];
    }
  }
}

// The error bound of a block that fits fp16: Q8_0 is within d/2 of x (plus the rounding of d to
// fp16, relative 2^-11 of |x|), Q4_0 within d/2 except at the clamped end, where it is within d.
TEST_F(GgmlBlocks, DequantizedValuesAreWithinHalfAStep) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(32 * 64);
  for (float& v : x) v = normal(rng);
  std::vector<uint8_t> q8(x.size() / 32 * kGgmlQ8_0Bytes), q4(x.size() / 32 * kGgmlQ4_0Bytes);
  quantize_q8_0(x.data(), x.size(), q8.data());
  quantize_q4_0(x.data(), x.size(), q4.data());
  std::vector<float> b8(x.size()), b4(x.size());
  dequantize_q8_0(q8.data(), x.size(), b8.data());
  dequantize_q4_0(q4.data(), x.size(), b4.data());
  for (size_t blk = 0; blk < x.size() / 32; ++blk) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[blk * 32 + j]));
    const float d8 = amax / 127, d4 = amax / 8;
    for (size_t j = 0; j < 32; ++j) {
      const size_t i = blk * 32 + j;
      EXPECT_LE(std::fabs(b8[i] - x[i]), d8 / 2 + std::fabs(x[i]) * 0x1p-11f) << i;
      EXPECT_LE(std::fabs(b4[i] - x[i]), d4 + std::fabs(x[i]) * 0x1p-11f) << i;
    }
  }
}

}  // namespace
}  // namespace llmcpu
