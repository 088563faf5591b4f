// The options of attention (simd/attention_options.h) in every bf16 table this CPU runs
// (bf16.h's flash_attention_*: "scalar", the portable tables that widen q, k, v to fp32, and those
// on AVX512-BF16 dot products), against the plain double attention of attention_reference.h on the
// same bf16 q, k, v (the cases of attention_options_cases.h), within the bounds of
// flash_attention_bounds.h with the case's options:
// - widening tables: the fp32 bounds, and out rounded to bf16 once (half a bf16 ulp of the result);
// - dot-product tables: the bounds with rho = 2^-8 (P, dS, dO rounded to bf16 for the products,
//   subnormals flushed), then out rounded once;
// - a window of T or more is the plain call bit for bit, and the results do not depend on the
//   thread count;
// - packed rows (opt.starts) within the same bounds; rows of one example are the plain call bit
//   for bit;
// - the tanh of the dot-product kernels within kTanhUlps of tanh.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "simd/bf16.h"
#include "tests/simd/attention_options_cases.h"
#include "tests/simd/error_bounds.h"
#include "tests/simd/flash_attention_bounds.h"
#if defined(__x86_64__)
#include "simd/x86/bf16_attention.h"
#include "simd/x86/bf16_gemm.h"
#endif

namespace llmcpu::simd_test {
namespace {

constexpr double kBf16HalfUlp = 0x1p-8;  // relative rounding error of fp32 -> bf16

// Whether a table's attention rounds P, dS and dO to bf16 (AVX512-BF16 dot products).
bool dot_product_attention(const Bf16Kernels& t) {
#if defined(__x86_64__)
  return t.flash_attention_forward == &x86::bf16_flash_attention_forward;
#else
  (void)t;
  return false;
#endif
}

Results run(const Bf16Kernels& k, const Reference& r, const FlashShape& sh,
            const AttentionOptions& opt) {
  std::vector<bf16> out(r.out.size(), 0x7fc0);  // NaN: every element must be written
  Results x{{}, std::vector<float>(r.lse.size(), NAN), std::vector<float>(r.qkv.size(), NAN)};
  k.flash_attention_forward(out.data(), x.lse.data(), r.qkv_h.data(), sh.B, sh.T, sh.NH, sh.NKV,
                            sh.D, opt);
  for (bf16 h : out) x.out.push_back(bf16_to_float(h));
  const std::vector<float> lse_in(r.lse_in.begin(), r.lse_in.end());
  k.flash_attention_backward(x.dqkv.data(), r.dout_f.data(), r.out_in_h.data(), r.qkv_h.data(),
                             lse_in.data(), sh.B, sh.T, sh.NH, sh.NKV, sh.D, opt);
  return x;
}

class AttentionOptionsBf16 : public ::testing::TestWithParam<std::string> {
 protected:
  const Bf16Kernels& k() const { return bf16_kernels_named(GetParam()); }
};

// The bounds of case c (reference r) on this table: the fp32 ones on the widening tables, with
// rho = 2^-8 on the dot-product ones, and out rounded to bf16 once.
struct Bf16Bounds {
  FlashForwardBounds forward;
  std::vector<double> dqkv;
};
Bf16Bounds bf16_bounds(const Bf16Kernels& k, const Reference& r, const OptionCase& c) {
  const bool dot = dot_product_attention(k);
  const double rho = dot ? kBf16HalfUlp : 0.0;
  Bf16Bounds b{dot ? flash_forward_bounds(r.qkv, r.lse, c.sh, rho, c.opt) : r.bounds,
               dot ? flash_backward_bounds(r.qkv, r.dout, r.out_in, r.lse_in, c.sh, rho, c.opt)
                   : r.dqkv_bound};
  for (size_t j = 0; j < b.forward.out.size(); ++j) {  // out rounded once (flushed if tiny)
    b.forward.out[j] +=
        kBf16HalfUlp * (std::fabs(r.out[j]) + b.forward.out[j]) + (dot ? 0x1p-126 : 0.0);
  }
  return b;
}

TEST_P(AttentionOptionsBf16, WithinDerivedBound) {
  for (size_t i = 0; i < std::size(kCases); ++i) {
    const OptionCase& c = kCases[i];
    if (!run_case(c)) continue;
    const Reference& r = reference(i, true);
    const Results x = run(k(), r, c.sh, c.opt);
    const Bf16Bounds b = bf16_bounds(k(), r, c);
    const std::string where = " " + GetParam() + c.name();
    expect_within("bf16 out" + where, x.out, r.out, b.forward.out);
    expect_within("bf16 lse" + where, x.lse, r.lse, b.forward.lse);
    expect_within("bf16 dqkv" + where, x.dqkv, r.dqkv, b.dqkv);
  }
}

// Packed rows (attention_options_cases.h's packed_cases) within the same bounds.
TEST_P(AttentionOptionsBf16, PackedRowsWithinDerivedBound) {
  for (size_t i = 0; i < packed_cases().size(); ++i) {
    const OptionCase& c = packed_cases()[i].c;
    if (!run_case(c)) continue;
    const Reference& r = packed_reference(i, true);
    const Results x = run(k(), r, c.sh, c.opt);
    const Bf16Bounds b = bf16_bounds(k(), r, c);
    const std::string where = " " + GetParam() + packed_cases()[i].name();
    expect_within("bf16 out" + where, x.out, r.out, b.forward.out);
    expect_within("bf16 lse" + where, x.lse, r.lse, b.forward.lse);
    expect_within("bf16 dqkv" + where, x.dqkv, r.dqkv, b.dqkv);
  }
}

// Rows of one example each (starts all 0) are the call without starts, bit for bit.
TEST_P(AttentionOptionsBf16, OneExamplePerRowIsThePlainCall) {
  expect_one_example_per_row_is_plain(
      GetParam(), true, [&](const Reference& r, const FlashShape& sh, const AttentionOptions& opt) {
        return run(k(), r, sh, opt);
      });
}

// A window of T keys or more masks nothing: the same bits as without one (with a soft-cap too).
TEST_P(AttentionOptionsBf16, WindowOfTOrMoreIsThePlainCall) {
  const size_t i = multi_query_case();  // T = 300 (130 under emulation), multi-query
  const OptionCase& c = kCases[i];
  const Reference& r = reference(i, true);
  const std::pair<AttentionOptions, AttentionOptions> same[] = {
      {{}, {.window = c.sh.T}},
      {{}, {.window = c.sh.T + 7}},
      {{.softcap = 1.5f}, {.window = c.sh.T, .softcap = 1.5f}}};
  for (const auto& [plain, opt] : same) {
    const Results a = run(k(), r, c.sh, plain), b = run(k(), r, c.sh, opt);
    const std::string where = " " + GetParam() + c.name() + " window " + std::to_string(opt.window);
    expect_identical("out" + where, b.out, a.out);
    expect_identical("lse" + where, b.lse, a.lse);
    expect_identical("dqkv" + where, b.dqkv, a.dqkv);
  }
}

TEST_P(AttentionOptionsBf16, SameBitsOnEveryThreadCount) {
  const int saved = omp_get_max_threads();
  for (size_t i : {size_t(0), multi_query_case()}) {
    const OptionCase& c = kCases[i];
    const Reference& r = reference(i, true);
    const Results first = run(k(), r, c.sh, c.opt);
    for (int threads : {1, 3}) {
      omp_set_num_threads(threads);
      const Results other = run(k(), r, c.sh, c.opt);
      omp_set_num_threads(saved);
      const std::string where = " " + GetParam() + c.name() + " " + std::to_string(threads);
      expect_identical("out" + where, other.out, first.out);
      expect_identical("lse" + where, other.lse, first.lse);
      expect_identical("dqkv" + where, other.dqkv, first.dqkv);
    }
  }
}

std::vector<std::string> bf16_tables() {
  std::vector<std::string> r;
  for (std::string_view name : available_bf16_targets()) r.emplace_back(name);
  return r;
}

INSTANTIATE_TEST_SUITE_P(AllTables, AttentionOptionsBf16, ::testing::ValuesIn(bf16_tables()),
                         param_name);

#if defined(__x86_64__)
// The soft-cap's tanh on AVX-512 (bf16_attention_blocks.h) within kTanhUlps of tanh, relative to
// |tanh|, over every 61st fp32 in (0, 20] (both branches, and where tanh rounds to 1) and their
// negatives (odd symmetry, exactly), in chunks.
TEST(AttentionOptionsBf16Tanh, IsWithinItsUlpBound) {
  if (!x86::has_avx512_bf16()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  constexpr size_t kChunk = 1 << 16;
  std::vector<float> x, y(2 * kChunk);
  double worst = 0;
  float worst_x = 0, worst_y = 0;
  for (uint32_t u = 1; std::bit_cast<float>(u) <= 20.0f;) {
    x.clear();
    for (; x.size() < 2 * kChunk && std::bit_cast<float>(u) <= 20.0f; u += 61) {
      x.push_back(std::bit_cast<float>(u));
      x.push_back(-std::bit_cast<float>(u));
    }
    x86::bf16_attention_tanh(y.data(), x.data(), x.size());
    for (size_t i = 0; i < x.size(); i += 2) {
      ASSERT_EQ(y[i + 1], -y[i]) << "tanh(" << x[i + 1] << ") against tanh(" << x[i] << ")";
      const double e = std::tanh(double(x[i]));
      const double ulps = std::fabs(double(y[i]) - e) / (kUlp * e);
      if (!(ulps <= worst)) worst = ulps, worst_x = x[i], worst_y = y[i];
    }
  }
  EXPECT_LE(worst, kTanhUlps) << "tanh(" << worst_x << ") = " << worst_y << ", exact "
                              << std::tanh(double(worst_x));
}
#endif

}  // namespace
}  // namespace llmcpu::simd_test
