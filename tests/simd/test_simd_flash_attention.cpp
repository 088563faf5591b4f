// Flash attention (kernels.h's and bf16.h's flash_attention_*) of every table this CPU runs,
// "scalar" included, against the scalar reference in double, with the bounds derived in
// flash_attention_bounds.h; on ragged shapes: T from 1 to 1024 (across the forward's key blocks of
// 256 and the backward's blocks of 64, and not a multiple of any tile), head sizes 1 to 128 (not a
// multiple of any vector), 1 to 12 heads. Also: the flash reference agrees with the materialized
// one (scalar::attention_*), every output is overwritten, and results are the same bits on a second
// call and with another thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "simd/bf16.h"
#include "simd/scalar/attention.h"
#include "tests/simd/error_bounds.h"
#include "tests/simd/flash_attention_bounds.h"

namespace llmcpu::simd_test {
namespace {

constexpr double kBf16HalfUlp = 0x1p-8;  // relative rounding error of fp32 -> bf16

struct Shape {
  int B, T, NH, hs;
  int C() const { return NH * hs; }
  std::string name() const {
    return " B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
           " hs=" + std::to_string(hs);
  }
};
constexpr Shape kShapes[] = {{1, 1, 1, 1},     {2, 2, 3, 2},    {1, 3, 12, 3},   {2, 5, 2, 7},
                             {1, 17, 4, 8},    {2, 31, 3, 16},  {1, 32, 2, 31},  {1, 33, 1, 64},
                             {2, 63, 2, 65},   {1, 64, 1, 128}, {1, 65, 12, 64}, {2, 127, 3, 3},
                             {1, 129, 2, 128}, {2, 257, 1, 65}, {1, 513, 2, 31}, {1, 1024, 1, 64}};

std::vector<double> widen_bf16(const std::vector<bf16>& v) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = bf16_to_float(v[i]);
  return r;
}

// One shape's inputs and the double reference on them, shared by every table's test. In the bf16
// case q, k, v (and the out the backward pass reads) are bf16 values, and the reference runs on
// them widened exactly.
struct Case {
  Shape sh;
  std::vector<float> qkv, dout;  // (B, T, 3C), (B, T, C)
  std::vector<bf16> qkv_h;       // bf16 case: qkv rounded
  std::vector<double> out, lse;  // forward reference
  FlashForwardBounds forward;
  // The backward pass's inputs on both sides: the reference's out and lse rounded to fp32 (out to
  // bf16 in the bf16 case).
  std::vector<float> out_in, lse_in;
  std::vector<bf16> out_in_h;
  std::vector<double> dqkv, dqkv_bound;
};

const Case& reference(size_t index, bool bf16_case) {
  static std::map<std::pair<size_t, bool>, Case> cache;
  const auto key = std::make_pair(index, bf16_case);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const Shape sh = kShapes[index];
  const size_t B = size_t(sh.B), T = size_t(sh.T), C = size_t(sh.C()), NH = size_t(sh.NH);
  Case c;
  c.sh = sh;
  Random rnd(unsigned(index * 31 + 7));
  c.qkv = rnd.normal(B * T * 3 * C);
  c.dout = rnd.normal(B * T * C);
  if (bf16_case) {
    c.qkv_h = to_bf16_vector(c.qkv.data(), c.qkv.size());
    for (size_t i = 0; i < c.qkv.size(); ++i) c.qkv[i] = bf16_to_float(c.qkv_h[i]);
  }
  const std::vector<double> qd = widen(c.qkv), dd = widen(c.dout);
  c.out.resize(B * T * C);
  c.lse.resize(B * NH * T);
  scalar::flash_attention_forward<double>(c.out.data(), c.lse.data(), qd.data(), sh.B, sh.T, sh.C(),
                                          sh.NH);
  c.forward = flash_forward_bounds(qd, c.lse, sh.B, sh.T, sh.C(), sh.NH);
  c.out_in.assign(c.out.begin(), c.out.end());
  c.lse_in.assign(c.lse.begin(), c.lse.end());
  std::vector<double> out_d = widen(c.out_in);
  if (bf16_case) {
    c.out_in_h = to_bf16_vector(c.out_in.data(), c.out_in.size());
    out_d = widen_bf16(c.out_in_h);
  }
  const std::vector<double> lse_d = widen(c.lse_in);
  c.dqkv.resize(c.qkv.size());
  scalar::flash_attention_backward<double>(c.dqkv.data(), dd.data(), out_d.data(), qd.data(),
                                           lse_d.data(), sh.B, sh.T, sh.C(), sh.NH);
  c.dqkv_bound = flash_backward_bounds(qd, dd, out_d, lse_d, sh.B, sh.T, sh.C(), sh.NH);
  return cache.emplace(key, std::move(c)).first->second;
}

std::vector<std::string> fp32_tables() {
  std::vector<std::string> r;
  for (std::string_view name : available_targets()) r.emplace_back(name);
  return r;
}

std::vector<std::string> bf16_tables() {
  std::vector<std::string> r;
  for (std::string_view name : available_bf16_targets()) r.emplace_back(name);
  return r;
}

// Runs the forward and backward of one table on a case: out, lse, dqkv (out widened when bf16).
struct Results {
  std::vector<float> out, lse, dqkv;
};

Results run(const KernelTable& k, const Case& c) {
  const Shape sh = c.sh;
  Results r{std::vector<float>(c.out.size(), NAN), std::vector<float>(c.lse.size(), NAN),
            std::vector<float>(c.qkv.size(), NAN)};  // NaN: every element must be written
  k.flash_attention_forward(r.out.data(), r.lse.data(), c.qkv.data(), sh.B, sh.T, sh.C(), sh.NH);
  k.flash_attention_backward(r.dqkv.data(), c.dout.data(), c.out_in.data(), c.qkv.data(),
                             c.lse_in.data(), sh.B, sh.T, sh.C(), sh.NH);
  return r;
}

Results run(const Bf16Kernels& k, const Case& c) {
  const Shape sh = c.sh;
  std::vector<bf16> out(c.out.size(), 0x7fc0);  // NaN
  Results r{{}, std::vector<float>(c.lse.size(), NAN), std::vector<float>(c.qkv.size(), NAN)};
  k.flash_attention_forward(out.data(), r.lse.data(), c.qkv_h.data(), sh.B, sh.T, sh.C(), sh.NH);
  for (bf16 h : out) r.out.push_back(bf16_to_float(h));
  k.flash_attention_backward(r.dqkv.data(), c.dout.data(), c.out_in_h.data(), c.qkv_h.data(),
                             c.lse_in.data(), sh.B, sh.T, sh.C(), sh.NH);
  return r;
}

class SimdFlashAttention : public ::testing::TestWithParam<std::string> {
 protected:
  const KernelTable& k() const { return kernels_for_target(GetParam()); }
};

class SimdFlashAttentionBf16 : public ::testing::TestWithParam<std::string> {
 protected:
  const Bf16Kernels& k() const { return bf16_kernels_named(GetParam()); }
};

TEST_P(SimdFlashAttention, WithinDerivedBoundOnRaggedShapes) {
  for (size_t i = 0; i < std::size(kShapes); ++i) {
    const Case& c = reference(i, false);
    const Results r = run(k(), c);
    const std::string where = " " + GetParam() + c.sh.name();
    expect_within("flash out" + where, r.out, c.out, c.forward.out);
    expect_within("flash lse" + where, r.lse, c.lse, c.forward.lse);
    expect_within("flash dqkv" + where, r.dqkv, c.dqkv, c.dqkv_bound);
  }
}

// The fp32 bound, then one rounding of out to bf16: half a bf16 ulp of the fp32 result.
TEST_P(SimdFlashAttentionBf16, WithinDerivedBoundOnRaggedShapes) {
  for (size_t i = 0; i < std::size(kShapes); ++i) {
    const Case& c = reference(i, true);
    const Results r = run(k(), c);
    std::vector<double> out_bound = c.forward.out;
    for (size_t j = 0; j < out_bound.size(); ++j) {
      out_bound[j] += kBf16HalfUlp * (std::fabs(c.out[j]) + out_bound[j]);
    }
    const std::string where = " " + GetParam() + c.sh.name();
    expect_within("bf16 flash out" + where, r.out, c.out, out_bound);
    expect_within("bf16 flash lse" + where, r.lse, c.lse, c.forward.lse);
    expect_within("bf16 flash dqkv" + where, r.dqkv, c.dqkv, c.dqkv_bound);
  }
}

// The same bits on a second call and with 1 or 3 threads: every sum has a fixed order.
template <class Table>
void expect_reproducible(const Table& k, const std::string& name, bool bf16_case) {
  const int saved = omp_get_max_threads();
  for (size_t i : {size_t(9), size_t(13)}) {  // T = 63 and 257, two batches
    const Case& c = reference(i, bf16_case);
    const Results first = run(k, c), second = run(k, c);
    omp_set_num_threads(1);
    const Results one = run(k, c);
    omp_set_num_threads(3);
    const Results three = run(k, c);
    omp_set_num_threads(saved);
    const std::pair<const char*, const Results*> others[] = {
        {" second call", &second}, {" 1 thread", &one}, {" 3 threads", &three}};
    for (const auto& [what, other] : others) {
      const std::string where = name + c.sh.name() + what;
      expect_identical("out" + where, other->out, first.out);
      expect_identical("lse" + where, other->lse, first.lse);
      expect_identical("dqkv" + where, other->dqkv, first.dqkv);
    }
  }
}

TEST_P(SimdFlashAttention, SameBitsOnEveryCallAndThreadCount) {
  expect_reproducible(k(), GetParam(), false);
}

TEST_P(SimdFlashAttentionBf16, SameBitsOnEveryCallAndThreadCount) {
  expect_reproducible(k(), GetParam(), true);
}

INSTANTIATE_TEST_SUITE_P(AllTables, SimdFlashAttention, ::testing::ValuesIn(fp32_tables()),
                         param_name);
INSTANTIATE_TEST_SUITE_P(AllTables, SimdFlashAttentionBf16, ::testing::ValuesIn(bf16_tables()),
                         param_name);

// In double, the flash reference and the materialized one are the same function up to their
// rounding, ~ (T + hs) 2^-53 relative to the magnitudes: within 1e-12 of each tensor's scale. lse
// is checked against the materialized softmax independently: a[t,u] = exp(s_u - lse_t) for every u,
// so lse_t = s_u - log a[t,u] at the row's largest weight.
TEST(FlashAttentionReference, AgreesWithTheMaterializedReferenceInDouble) {
  for (const Shape sh : {Shape{2, 17, 3, 7}, Shape{1, 64, 2, 16}, Shape{2, 33, 1, 64}}) {
    const size_t B = size_t(sh.B), T = size_t(sh.T), C = size_t(sh.C()), NH = size_t(sh.NH);
    const size_t hs = size_t(sh.hs), C3 = 3 * C;
    Random rnd(unsigned(sh.T));
    const std::vector<double> qkv = widen(rnd.normal(B * T * C3)),
                              dout = widen(rnd.normal(B * T * C));
    std::vector<double> out_a(B * T * C), att(B * NH * T * T), out_f(B * T * C), lse(B * NH * T);
    scalar::attention_forward<double>(out_a.data(), att.data(), qkv.data(), sh.B, sh.T, sh.C(),
                                      sh.NH);
    scalar::flash_attention_forward<double>(out_f.data(), lse.data(), qkv.data(), sh.B, sh.T,
                                            sh.C(), sh.NH);
    std::vector<double> dqkv_a(qkv.size()), scratch(B * NH * T), dqkv_f(qkv.size(), NAN);
    scalar::attention_backward<double>(dqkv_a.data(), scratch.data(), dout.data(), qkv.data(),
                                       att.data(), sh.B, sh.T, sh.C(), sh.NH);
    scalar::flash_attention_backward<double>(dqkv_f.data(), dout.data(), out_f.data(), qkv.data(),
                                             lse.data(), sh.B, sh.T, sh.C(), sh.NH);
    auto expect_close = [&](const std::string& what, const std::vector<double>& got,
                            const std::vector<double>& ref) {
      double scale = 0;
      for (double x : ref) scale = std::max(scale, std::fabs(x));
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_LE(std::fabs(got[i] - ref[i]), 1e-12 * scale)
            << what << sh.name() << " element " << i;
      }
    };
    expect_close("out", out_f, out_a);
    expect_close("dqkv", dqkv_f, dqkv_a);
    std::vector<double> lse_a(lse.size());
    for (size_t b = 0; b < B; ++b) {
      for (size_t h = 0; h < NH; ++h) {
        for (size_t t = 0; t < T; ++t) {
          const double* a = att.data() + ((b * NH + h) * T + t) * T;
          const size_t u = size_t(std::max_element(a, a + t + 1) - a);
          double dot = 0;
          for (size_t i = 0; i < hs; ++i) {
            dot += qkv[(b * T + t) * C3 + h * hs + i] * qkv[(b * T + u) * C3 + C + h * hs + i];
          }
          lse_a[(b * NH + h) * T + t] = dot / std::sqrt(double(hs)) - std::log(a[u]);
        }
      }
    }
    expect_close("lse", lse, lse_a);
  }
}

}  // namespace
}  // namespace llmcpu::simd_test
