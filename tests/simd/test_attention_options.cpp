// The options of attention (simd/attention_options.h: scale, sliding window, logit soft-cap) in
// the fp32 tables' flash attention and KV-cache decode, every table this CPU runs ("scalar"
// included), against the plain double attention of attention_reference.h:
// - that reference's backward pass is the gradient of its forward (central differences in double);
// - the options change the reference's results by far more than the bounds below (a kernel that
//   ignored one would fail), on every case that uses them;
// - forward out and lse, backward dqkv (from the reference's out and lse rounded to fp32, as the
//   kernels take them) within the bounds of flash_attention_bounds.h with the case's options, on
//   windows that cut the kernels' blocks (T not a multiple of them), window 1, windows of T and
//   more, soft-caps of 0.75 to 2 on scores of a few units (tanh far from linear), scales other than
//   1/sqrt(D), multi-head, grouped-query and multi-query, D = 24, 40, 64;
// - packed rows (opt.starts: examples cut at random, of 1 to 400 tokens, with and without the
//   options) likewise, every table; unpacking them moves the reference far beyond the bounds, the
//   scalar reference in double is the plain attention, rows of one example are the plain call bit
//   for bit;
// - a window of T or more, and the scale 1/sqrt(D) given explicitly, are the plain call bit for
//   bit; the results do not depend on the thread count;
// - the decode at position pos is the reference's row pos (rows max(0, pos - window + 1) .. pos),
//   within the forward bound of that row.
// The bf16 tables: test_bf16_attention_options.cpp.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "simd/kernels.h"
#include "simd/scalar/attention.h"
#include "tests/simd/attention_options_cases.h"
#include "tests/simd/attention_reference.h"
#include "tests/simd/error_bounds.h"
#include "tests/simd/flash_attention_bounds.h"

namespace llmcpu::simd_test {
namespace {

// Central differences of J = sum R . out in double, against the analytic backward: the error of
// each is O(h^2 |J'''|) + O(eps |J| / h), about 1e-10 here, far inside 1e-7 of the largest
// gradient.
TEST(AttentionOptionsReference, BackwardIsTheGradientOfTheForward) {
  const std::vector<int> starts = random_starts(2, 13, {5, 2}, 7);  // packed rows
  const OptionCase cases[] = {
      {{1, 13, 4, 2, 5}, {.scale = 0.7f, .window = 4, .softcap = 1.0f}},
      {{2, 9, 3, 1, 6}, {.window = 1}},
      {{1, 11, 2, 2, 7}, {.scale = 0.9f, .softcap = 0.5f}},
      {{2, 13, 4, 2, 5}, {.window = 4, .softcap = 1.0f, .starts = starts.data()}}};
  for (const OptionCase& c : cases) {
    const FlashShape& sh = c.sh;
    Random rnd(unsigned(sh.T));
    std::vector<double> qkv = widen(rnd.normal(size_t(sh.B * sh.T) * sh.row()));
    const std::vector<double> R = widen(rnd.normal(size_t(sh.B * sh.T) * sh.out_row()));
    const auto J = [&] {
      const PlainForward f = plain_attention_forward(qkv, sh, c.opt);
      double j = 0;
      for (size_t i = 0; i < R.size(); ++i) j += R[i] * f.out[i];
      return j;
    };
    const PlainForward f = plain_attention_forward(qkv, sh, c.opt);
    const std::vector<double> g = plain_attention_backward(qkv, R, f.out, f.lse, sh, c.opt);
    const double h = 1e-5, tol = 1e-7 * max_abs(g);
    for (size_t i = 0; i < qkv.size(); ++i) {
      const double x = qkv[i];
      qkv[i] = x + h;
      const double jp = J();
      qkv[i] = x - h;
      const double jm = J();
      qkv[i] = x;
      ASSERT_NEAR((jp - jm) / (2 * h), g[i], tol) << c.name() << " element " << i;
    }
  }
}

// max |a - b| over max bound: how many bounds apart two results are at most.
double bounds_apart(const std::vector<double>& a, const std::vector<double>& b,
                    const std::vector<double>& bound) {
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(a[i] - b[i]));
  return diff / max_abs(bound);
}

// Each option a case sets, dropped alone, moves out, lse and dqkv by more than 100 times the
// largest bound the kernels are held to: none of them can be ignored unnoticed.
TEST(AttentionOptionsReference, EveryOptionMovesTheResultsFarBeyondTheBounds) {
  for (size_t i = 0; i < std::size(kCases); ++i) {
    const OptionCase& c = kCases[i];
    if (!run_case(c)) continue;
    const Reference& r = reference(i, false);
    std::vector<std::pair<std::string, AttentionOptions>> without;
    if (c.opt.scale > 0) without.push_back({"scale", {0, c.opt.window, c.opt.softcap}});
    if (c.opt.window > 0 && c.opt.window < c.sh.T) {
      without.push_back({"window", {c.opt.scale, 0, c.opt.softcap}});
    }
    if (c.opt.softcap > 0) without.push_back({"soft-cap", {c.opt.scale, c.opt.window, 0}});
    for (const auto& [what, opt] : without) {
      const PlainForward f = plain_attention_forward(r.qkv, c.sh, opt);
      const std::vector<double> dqkv =
          plain_attention_backward(r.qkv, r.dout, r.out_in, r.lse_in, c.sh, opt);
      const std::string where = " without the " + what + c.name();
      EXPECT_GT(bounds_apart(f.out, r.out, r.bounds.out), 100.0) << "out" << where;
      EXPECT_GT(bounds_apart(f.lse, r.lse, r.bounds.lse), 100.0) << "lse" << where;
      EXPECT_GT(bounds_apart(dqkv, r.dqkv, r.dqkv_bound), 100.0) << "dqkv" << where;
    }
  }
}

// Packing each row into its examples moves out, lse and dqkv by more than 100 times the largest
// bound: a kernel that attended across examples would fail.
TEST(AttentionOptionsReference, PackingMovesTheResultsFarBeyondTheBounds) {
  for (size_t i = 0; i < packed_cases().size(); ++i) {
    const OptionCase& c = packed_cases()[i].c;
    if (!run_case(c)) continue;
    const Reference& r = packed_reference(i, false);
    AttentionOptions whole = c.opt;
    whole.starts = nullptr;
    const PlainForward f = plain_attention_forward(r.qkv, c.sh, whole);
    const std::vector<double> dqkv =
        plain_attention_backward(r.qkv, r.dout, r.out_in, r.lse_in, c.sh, whole);
    const std::string where = " unpacked" + packed_cases()[i].name();
    EXPECT_GT(bounds_apart(f.out, r.out, r.bounds.out), 100.0) << "out" << where;
    EXPECT_GT(bounds_apart(f.lse, r.lse, r.bounds.lse), 100.0) << "lse" << where;
    EXPECT_GT(bounds_apart(dqkv, r.dqkv, r.dqkv_bound), 100.0) << "dqkv" << where;
  }
}

// The scalar flash reference (simd/scalar/attention.h) in double is the plain attention on packed
// rows: both sum at most T D terms of magnitude at most max|x| in double, gamma(T D) = 3.7e-12 at
// T D = 520 * 64 with u = 2^-53, so they agree within 1e-10 of the largest value.
TEST(AttentionOptionsReference, ScalarFlashIsThePlainAttentionOnPackedRows) {
  for (size_t i = 0; i < packed_cases().size(); ++i) {
    const OptionCase& c = packed_cases()[i].c;
    if (!run_case(c)) continue;
    const Reference& r = packed_reference(i, false);
    const FlashShape& sh = c.sh;
    std::vector<double> out(r.out.size()), lse(r.lse.size()), dqkv(r.qkv.size());
    scalar::flash_attention_forward<double>(out.data(), lse.data(), r.qkv.data(), sh.B, sh.T, sh.NH,
                                            sh.NKV, sh.D, c.opt);
    scalar::flash_attention_backward<double>(dqkv.data(), r.dout.data(), r.out_in.data(),
                                             r.qkv.data(), r.lse_in.data(), sh.B, sh.T, sh.NH,
                                             sh.NKV, sh.D, c.opt);
    const std::string where = packed_cases()[i].name();
    const auto near = [&](const char* what, const std::vector<double>& a,
                          const std::vector<double>& b) {
      const double tol = 1e-10 * std::max(1.0, max_abs(b));
      for (size_t j = 0; j < a.size(); ++j) {
        ASSERT_NEAR(a[j], b[j], tol) << what << where << " element " << j;
      }
    };
    near("out", out, r.out);
    near("lse", lse, r.lse);
    near("dqkv", dqkv, r.dqkv);
  }
}

class AttentionOptions32 : public ::testing::TestWithParam<std::string> {
 protected:
  const KernelTable& k() const { return kernels_for_target(GetParam()); }
};

Results run(const KernelTable& k, const Reference& r, const FlashShape& sh,
            const AttentionOptions& opt) {
  Results x{std::vector<float>(r.out.size(), NAN), std::vector<float>(r.lse.size(), NAN),
            std::vector<float>(r.qkv.size(), NAN)};  // NaN: every element must be written
  k.flash_attention_forward(x.out.data(), x.lse.data(), r.qkv_f.data(), sh.B, sh.T, sh.NH, sh.NKV,
                            sh.D, opt);
  const std::vector<float> out_in(r.out_in.begin(), r.out_in.end());
  const std::vector<float> lse_in(r.lse_in.begin(), r.lse_in.end());
  k.flash_attention_backward(x.dqkv.data(), r.dout_f.data(), out_in.data(), r.qkv_f.data(),
                             lse_in.data(), sh.B, sh.T, sh.NH, sh.NKV, sh.D, opt);
  return x;
}

TEST_P(AttentionOptions32, WithinDerivedBound) {
  for (size_t i = 0; i < std::size(kCases); ++i) {
    const OptionCase& c = kCases[i];
    if (!run_case(c)) continue;
    const Reference& r = reference(i, false);
    const Results x = run(k(), r, c.sh, c.opt);
    const std::string where = " " + GetParam() + c.name();
    expect_within("out" + where, x.out, r.out, r.bounds.out);
    expect_within("lse" + where, x.lse, r.lse, r.bounds.lse);
    expect_within("dqkv" + where, x.dqkv, r.dqkv, r.dqkv_bound);
  }
}

TEST_P(AttentionOptions32, PackedRowsWithinDerivedBound) {
  for (size_t i = 0; i < packed_cases().size(); ++i) {
    const OptionCase& c = packed_cases()[i].c;
    if (!run_case(c)) continue;
    const Reference& r = packed_reference(i, false);
    const Results x = run(k(), r, c.sh, c.opt);
    const std::string where = " " + GetParam() + packed_cases()[i].name();
    expect_within("out" + where, x.out, r.out, r.bounds.out);
    expect_within("lse" + where, x.lse, r.lse, r.bounds.lse);
    expect_within("dqkv" + where, x.dqkv, r.dqkv, r.dqkv_bound);
  }
}

// Rows of one example each (starts all 0) are the call without starts, bit for bit, with and
// without a window and soft-cap; and packed rows give the same bits on every thread count.
TEST_P(AttentionOptions32, OneExamplePerRowIsThePlainCall) {
  expect_one_example_per_row_is_plain(
      GetParam(), false,
      [&](const Reference& r, const FlashShape& sh, const AttentionOptions& opt) {
        return run(k(), r, sh, opt);
      });
  const int saved = omp_get_max_threads();
  const OptionCase& c = packed_cases()[0].c;
  const Reference& r = packed_reference(0, false);
  const Results first = run(k(), r, c.sh, c.opt);
  omp_set_num_threads(3);
  const Results other = run(k(), r, c.sh, c.opt);
  omp_set_num_threads(saved);
  expect_identical_results(" " + GetParam() + packed_cases()[0].name() + " 3 threads", other,
                           first);
}

// A window of T keys or more masks nothing, and an explicit 1/sqrt(D) is the default's float: the
// same bits as the call without options. A soft-cap and scale ride along to cover their paths.
TEST_P(AttentionOptions32, WindowOfTOrMoreAndTheDefaultScaleAreThePlainCall) {
  const size_t i = multi_query_case();  // T = 300 (130 under emulation), multi-query
  const OptionCase& c = kCases[i];
  const Reference& r = reference(i, false);
  const float scale = 1.0f / std::sqrt(float(c.sh.D));
  const std::pair<AttentionOptions, AttentionOptions> same[] = {
      {{}, {.window = c.sh.T}},
      {{}, {.window = c.sh.T + 7}},
      {{}, {.scale = scale}},
      {{.softcap = 1.5f}, {.scale = scale, .window = c.sh.T, .softcap = 1.5f}}};
  for (const auto& [plain, opt] : same) {
    const Results a = run(k(), r, c.sh, plain), b = run(k(), r, c.sh, opt);
    const std::string where = " " + GetParam() + c.name() + " window " +
                              std::to_string(opt.window) + " scale " + std::to_string(opt.scale);
    expect_identical("out" + where, b.out, a.out);
    expect_identical("lse" + where, b.lse, a.lse);
    expect_identical("dqkv" + where, b.dqkv, a.dqkv);
  }
}

TEST_P(AttentionOptions32, SameBitsOnEveryThreadCount) {
  const int saved = omp_get_max_threads();
  for (size_t i : {size_t(0), multi_query_case()}) {
    const OptionCase& c = kCases[i];
    const Reference& r = reference(i, false);
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

// The decode at pos against caches of the key and value heads of rows 0..pos: the reference's row
// pos (a forward over pos + 1 rows), within that row's forward bound.
TEST_P(AttentionOptions32, DecodeWithinDerivedBound) {
  const OptionCase cases[] = {{{1, 40, 6, 2, 24}, {.scale = 0.5f, .window = 9, .softcap = 1.0f}},
                              {{1, 30, 4, 1, 40}, {.window = 1}},
                              {{1, 33, 3, 3, 64}, {.window = 50}},
                              {{1, 20, 2, 2, 24}, {.scale = 0.45f, .softcap = 0.5f}}};
  for (const OptionCase& c : cases) {
    const FlashShape& sh = c.sh;
    const size_t T = size_t(sh.T), R = sh.row(), kv = size_t(sh.NKV) * size_t(sh.D);
    Random rnd(unsigned(T + R));
    const std::vector<float> qkv = rnd.normal(T * R);
    std::vector<float> kcache(T * kv), vcache(T * kv);
    for (size_t t = 0; t < T; ++t) {
      std::copy_n(qkv.begin() + long(t * R + sh.k(0)), kv, kcache.begin() + long(t * kv));
      std::copy_n(qkv.begin() + long(t * R + sh.v(0)), kv, vcache.begin() + long(t * kv));
    }
    const int W = c.opt.window;
    for (int pos : {0, W - 2, W - 1, W, sh.T - 1}) {
      if (pos < 0 || pos >= sh.T) continue;
      const FlashShape rows{1, pos + 1, sh.NH, sh.NKV, sh.D};
      const std::vector<double> xp(qkv.begin(), qkv.begin() + long((size_t(pos) + 1) * R));
      const PlainForward f = plain_attention_forward(xp, rows, c.opt);
      const FlashForwardBounds b = flash_forward_bounds(xp, f.lse, rows, 0, c.opt);
      const size_t C = sh.out_row(), at = size_t(pos) * C;
      std::vector<float> y(C, NAN), scores(size_t(pos) + 1);
      k().attention_decode(y.data(), scores.data(), qkv.data() + size_t(pos) * R, kcache.data(),
                           vcache.data(), pos, sh.NH, sh.NKV, sh.D, c.opt);
      expect_within("decode pos=" + std::to_string(pos) + " " + GetParam() + c.name(), y,
                    {f.out.begin() + long(at), f.out.begin() + long(at + C)},
                    {b.out.begin() + long(at), b.out.begin() + long(at + C)});
    }
  }
}

std::vector<std::string> fp32_tables() {
  std::vector<std::string> r;
  for (std::string_view name : available_targets()) r.emplace_back(name);
  return r;
}

INSTANTIATE_TEST_SUITE_P(AllTables, AttentionOptions32, ::testing::ValuesIn(fp32_tables()),
                         param_name);

}  // namespace
}  // namespace llmcpu::simd_test
