// Flash attention (kernels.h's and bf16.h's flash_attention_*) of every table this CPU runs,
// "scalar" included, against the scalar reference in double, with the bounds derived in
// flash_attention_bounds.h; on ragged shapes: T from 1 to 1024 (across the forward's key blocks of
// 256 and the backward's blocks of 64, and not a multiple of any tile), head sizes 1 to 128 (not a
// multiple of any vector), 1 to 12 heads; multi-head, grouped-query (2, 3 and 4 query heads per
// key/value head) and multi-query. The bf16 tables here are those that widen q, k, v to fp32 (the
// dot-product ones: test_bf16_attention.cpp). Also: the flash reference agrees with the
// materialized one (scalar::attention_*), its grouped-query form with multi-head attention on
// key/value heads copied out to every query head, and the KV-cache decode with its last row; every
// output is overwritten, and results are the same bits on a second call and with another thread
// count.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "simd/bf16.h"
#include "simd/scalar/attention.h"
#include "tests/simd/bf16_tables.h"
#include "tests/simd/emulated.h"
#include "tests/simd/error_bounds.h"
#include "tests/simd/flash_attention_bounds.h"
#if defined(__x86_64__)
#include "simd/x86/bf16_attention.h"
#endif

namespace llmcpu::simd_test {
namespace {

constexpr double kBf16HalfUlp = 0x1p-8;  // relative rounding error of fp32 -> bf16

struct Shape : FlashShape {
  std::string name() const {
    return " B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
           " NKV=" + std::to_string(NKV) + " D=" + std::to_string(D);
  }
};
// {B, T, NH, NKV, D}: multi-head (NKV = NH), then grouped-query and multi-query.
constexpr Shape kShapes[] = {
    {1, 1, 1, 1, 1},     {2, 2, 3, 3, 2},    {1, 3, 12, 12, 3},   {2, 5, 2, 2, 7},
    {1, 17, 4, 4, 8},    {2, 31, 3, 3, 16},  {1, 32, 2, 2, 31},   {1, 33, 1, 1, 64},
    {2, 63, 2, 2, 65},   {1, 64, 1, 1, 128}, {1, 65, 12, 12, 64}, {2, 127, 3, 3, 3},
    {1, 129, 2, 2, 128}, {2, 257, 1, 1, 65}, {1, 513, 2, 2, 31},  {1, 1024, 1, 1, 64},
    {2, 1, 6, 2, 24},    {2, 63, 6, 2, 24},  {1, 65, 6, 2, 7},    {2, 257, 6, 2, 12},
    {1, 129, 8, 2, 64},  {2, 300, 4, 2, 7},  {2, 1, 3, 1, 7},     {1, 63, 4, 1, 24},
    {2, 65, 3, 1, 64},   {2, 300, 4, 1, 24}};

// The multi-head, grouped-query and multi-query shapes whose results must not depend on the
// thread count: two batches, T across the blocks.
constexpr Shape kReproducible[] = {{2, 63, 2, 2, 65},
                                   {2, 257, 1, 1, 65},
                                   {2, 63, 6, 2, 24},
                                   {2, 257, 6, 2, 12},
                                   {2, 300, 4, 1, 24}};

size_t index_of(const Shape& sh) {
  for (size_t i = 0; i < std::size(kShapes); ++i) {
    const Shape& s = kShapes[i];
    if (s.B == sh.B && s.T == sh.T && s.NH == sh.NH && s.NKV == sh.NKV && s.D == sh.D) return i;
  }
  throw std::logic_error("shape" + sh.name() + " is not in kShapes");
}

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
  std::vector<float> qkv, dout;  // (B, T, (NH + 2 NKV) D), (B, T, NH D)
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
  const size_t rows = size_t(sh.B) * size_t(sh.T), lse_n = size_t(sh.NH) * rows;
  Case c;
  c.sh = sh;
  Random rnd(unsigned(index * 31 + 7));
  c.qkv = rnd.normal(rows * sh.row());
  c.dout = rnd.normal(rows * sh.out_row());
  if (bf16_case) {
    c.qkv_h = to_bf16_vector(c.qkv.data(), c.qkv.size());
    for (size_t i = 0; i < c.qkv.size(); ++i) c.qkv[i] = bf16_to_float(c.qkv_h[i]);
  }
  const std::vector<double> qd = widen(c.qkv), dd = widen(c.dout);
  c.out.resize(rows * sh.out_row());
  c.lse.resize(lse_n);
  scalar::flash_attention_forward<double>(c.out.data(), c.lse.data(), qd.data(), sh.B, sh.T, sh.NH,
                                          sh.NKV, sh.D, AttentionOptions{});
  c.forward = flash_forward_bounds(qd, c.lse, sh);
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
                                           lse_d.data(), sh.B, sh.T, sh.NH, sh.NKV, sh.D,
                                           AttentionOptions{});
  c.dqkv_bound = flash_backward_bounds(qd, dd, out_d, lse_d, sh);
  return cache.emplace(key, std::move(c)).first->second;
}

std::vector<std::string> fp32_tables() {
  std::vector<std::string> r;
  for (std::string_view name : available_targets()) r.emplace_back(name);
  return r;
}

// The bf16 tables whose attention widens q, k, v to fp32; those on AVX512-BF16 dot products round
// P, dS and dO to bf16 too, and have their own bounds (test_bf16_attention.cpp). A table with a
// GEMM of its own that keeps a portable table's attention (neon_bf16) runs the same functions as
// that table, tested under that table's name.
std::vector<std::string> bf16_tables() {
  auto portable_attention = [](const Bf16Kernels& t) {
    for (std::string_view name : available_bf16_targets()) {
      const Bf16Kernels& p = bf16_kernels_named(name);
      if (!has_own_gemm(name) && p.flash_attention_forward == t.flash_attention_forward &&
          p.flash_attention_backward == t.flash_attention_backward) {
        return true;
      }
    }
    return false;
  };
  std::vector<std::string> r;
  for (std::string_view name : available_bf16_targets()) {
#if defined(__x86_64__)
    if (bf16_kernels_named(name).flash_attention_forward == &x86::bf16_flash_attention_forward) {
      continue;
    }
#endif
    if (has_own_gemm(name) && portable_attention(bf16_kernels_named(name))) continue;
    r.emplace_back(name);
  }
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
  k.flash_attention_forward(r.out.data(), r.lse.data(), c.qkv.data(), sh.B, sh.T, sh.NH, sh.NKV,
                            sh.D, AttentionOptions{});
  k.flash_attention_backward(r.dqkv.data(), c.dout.data(), c.out_in.data(), c.qkv.data(),
                             c.lse_in.data(), sh.B, sh.T, sh.NH, sh.NKV, sh.D, AttentionOptions{});
  return r;
}

Results run(const Bf16Kernels& k, const Case& c) {
  const Shape sh = c.sh;
  std::vector<bf16> out(c.out.size(), 0x7fc0);  // NaN
  Results r{{}, std::vector<float>(c.lse.size(), NAN), std::vector<float>(c.qkv.size(), NAN)};
  k.flash_attention_forward(out.data(), r.lse.data(), c.qkv_h.data(), sh.B, sh.T, sh.NH, sh.NKV,
                            sh.D, AttentionOptions{});
  for (bf16 h : out) r.out.push_back(bf16_to_float(h));
  k.flash_attention_backward(r.dqkv.data(), c.dout.data(), c.out_in_h.data(), c.qkv_h.data(),
                             c.lse_in.data(), sh.B, sh.T, sh.NH, sh.NKV, sh.D, AttentionOptions{});
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

// Under emulation (emulated.h) the sequences up to 70 tokens: past the 64-row blocks, with every
// kind of head sharing; the native runs cross the 256-key blocks (T 257 and 300 took most of the
// emulated minutes: 172 s for one SVE2 table on a 2-vCPU Xeon VM).
bool run_here(const Shape& sh) { return !testing::emulated_run() || sh.T <= 70; }

TEST_P(SimdFlashAttention, WithinDerivedBoundOnRaggedShapes) {
  for (size_t i = 0; i < std::size(kShapes); ++i) {
    if (!run_here(kShapes[i])) continue;
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
    if (!run_here(kShapes[i])) continue;
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
  for (const Shape& sh : kReproducible) {
    if (!run_here(sh)) continue;
    const Case& c = reference(index_of(sh), bf16_case);
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

// |got - ref| <= 1e-12 of ref's largest magnitude, everywhere: two double evaluations of the same
// function, ~ (T + D) 2^-53 relative to the magnitudes apart.
void expect_close(const std::string& what, const std::vector<double>& got,
                  const std::vector<double>& ref) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double scale = 0;
  for (double x : ref) scale = std::max(scale, std::fabs(x));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(got[i] - ref[i]), 1e-12 * scale) << what << " element " << i;
  }
}

// In double, the flash reference and the materialized one (multi-head, C = NH D) are the same
// function up to their rounding. lse is checked against the materialized softmax independently:
// a[t,u] = exp(s_u - lse_t) for every u, so lse_t = s_u - log a[t,u] at the row's largest weight.
TEST(FlashAttentionReference, AgreesWithTheMaterializedReferenceInDouble) {
  for (const Shape sh :
       {Shape{{2, 17, 3, 3, 7}}, Shape{{1, 64, 2, 2, 16}}, Shape{{2, 33, 1, 1, 64}}}) {
    const size_t B = size_t(sh.B), T = size_t(sh.T), NH = size_t(sh.NH), hs = size_t(sh.D);
    const size_t C = NH * hs, C3 = 3 * C;
    const int Ci = sh.NH * sh.D;
    Random rnd(unsigned(sh.T));
    const std::vector<double> qkv = widen(rnd.normal(B * T * C3)),
                              dout = widen(rnd.normal(B * T * C));
    std::vector<double> out_a(B * T * C), att(B * NH * T * T), out_f(B * T * C), lse(B * NH * T);
    scalar::attention_forward<double>(out_a.data(), att.data(), qkv.data(), sh.B, sh.T, Ci, sh.NH);
    scalar::flash_attention_forward<double>(out_f.data(), lse.data(), qkv.data(), sh.B, sh.T, sh.NH,
                                            sh.NKV, sh.D, AttentionOptions{});
    std::vector<double> dqkv_a(qkv.size()), scratch(B * NH * T), dqkv_f(qkv.size(), NAN);
    scalar::attention_backward<double>(dqkv_a.data(), scratch.data(), dout.data(), qkv.data(),
                                       att.data(), sh.B, sh.T, Ci, sh.NH);
    scalar::flash_attention_backward<double>(dqkv_f.data(), dout.data(), out_f.data(), qkv.data(),
                                             lse.data(), sh.B, sh.T, sh.NH, sh.NKV, sh.D,
                                             AttentionOptions{});
    expect_close("out" + sh.name(), out_f, out_a);
    expect_close("dqkv" + sh.name(), dqkv_f, dqkv_a);
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
    expect_close("lse" + sh.name(), lse, lse_a);
  }
}

// The group mapping, checked independently: grouped-query attention is multi-head attention on
// the key/value heads copied out to every query head of their group (query head h gets key/value
// head h / G), and the grouped dk, dv of a key/value head are the sums of the copies' over its
// group. Forward and dq are the same operations on the same values: the same bits; dk, dv add the
// same terms in another order.
TEST(FlashAttentionReference, GroupedQueryIsMultiHeadOnCopiedKeyValueHeads) {
  for (const Shape sh : {Shape{{2, 17, 6, 2, 7}}, Shape{{1, 40, 4, 1, 24}}, Shape{{2, 9, 8, 4, 12}},
                         Shape{{1, 33, 3, 3, 5}}}) {
    const size_t B = size_t(sh.B), T = size_t(sh.T), NH = size_t(sh.NH), hs = size_t(sh.D);
    const size_t rows = B * T, G = sh.group(), R = sh.row(), C = NH * hs;
    const Shape mha{{sh.B, sh.T, sh.NH, sh.NH, sh.D}};
    Random rnd(unsigned(sh.T * 3 + sh.NKV));
    const std::vector<double> qkv = widen(rnd.normal(rows * R)), dout = widen(rnd.normal(rows * C));
    std::vector<double> qkv_m(rows * 3 * C);  // the multi-head copy
    for (size_t r = 0; r < rows; ++r) {
      for (size_t h = 0; h < NH; ++h) {
        for (size_t i = 0; i < hs; ++i) {
          qkv_m[r * 3 * C + mha.q(h) + i] = qkv[r * R + sh.q(h) + i];
          qkv_m[r * 3 * C + mha.k(h) + i] = qkv[r * R + sh.k(h) + i];
          qkv_m[r * 3 * C + mha.v(h) + i] = qkv[r * R + sh.v(h) + i];
        }
      }
    }
    std::vector<double> out(rows * C), lse(rows * NH), out_m(out.size()), lse_m(lse.size());
    scalar::flash_attention_forward<double>(out.data(), lse.data(), qkv.data(), sh.B, sh.T, sh.NH,
                                            sh.NKV, sh.D, AttentionOptions{});
    scalar::flash_attention_forward<double>(out_m.data(), lse_m.data(), qkv_m.data(), sh.B, sh.T,
                                            sh.NH, sh.NH, sh.D, AttentionOptions{});
    EXPECT_EQ(out, out_m) << "out" << sh.name();
    EXPECT_EQ(lse, lse_m) << "lse" << sh.name();
    std::vector<double> dqkv(qkv.size(), NAN), dqkv_m(qkv_m.size(), NAN);
    scalar::flash_attention_backward<double>(dqkv.data(), dout.data(), out.data(), qkv.data(),
                                             lse.data(), sh.B, sh.T, sh.NH, sh.NKV, sh.D,
                                             AttentionOptions{});
    scalar::flash_attention_backward<double>(dqkv_m.data(), dout.data(), out_m.data(), qkv_m.data(),
                                             lse_m.data(), sh.B, sh.T, sh.NH, sh.NH, sh.D,
                                             AttentionOptions{});
    // The multi-head gradient folded back: dq as it is, dk and dv summed over each group.
    std::vector<double> folded(dqkv.size(), 0.0);
    for (size_t r = 0; r < rows; ++r) {
      for (size_t h = 0; h < NH; ++h) {
        for (size_t i = 0; i < hs; ++i) {
          folded[r * R + sh.q(h) + i] = dqkv_m[r * 3 * C + mha.q(h) + i];
          folded[r * R + sh.k(h) + i] += dqkv_m[r * 3 * C + mha.k(h) + i];
          folded[r * R + sh.v(h) + i] += dqkv_m[r * 3 * C + mha.v(h) + i];
        }
      }
    }
    std::vector<double> dq, dq_m;
    for (size_t r = 0; r < rows; ++r) {
      dq.insert(dq.end(), dqkv.begin() + long(r * R), dqkv.begin() + long(r * R + C));
      dq_m.insert(dq_m.end(), folded.begin() + long(r * R), folded.begin() + long(r * R + C));
    }
    EXPECT_EQ(dq, dq_m) << "dq" << sh.name();
    expect_close("dqkv" + sh.name() + " G=" + std::to_string(G), dqkv, folded);
  }
}

// The KV-cache decode (scalar::attention_decode) at position pos is the flash reference's row pos:
// the caches hold the key and value heads of rows 0..pos (NKV D each), the query is row pos's.
TEST(FlashAttentionReference, DecodeIsTheLastRowOfTheForward) {
  for (const Shape sh :
       {Shape{{1, 13, 6, 2, 7}}, Shape{{1, 20, 4, 1, 24}}, Shape{{1, 9, 3, 3, 64}}}) {
    const size_t T = size_t(sh.T), hs = size_t(sh.D), R = sh.row(), C = sh.out_row();
    const size_t kv = size_t(sh.NKV) * hs;
    Random rnd(unsigned(sh.T + sh.NH));
    const std::vector<double> qkv = widen(rnd.normal(T * R));
    std::vector<double> out(T * C), lse(size_t(sh.NH) * T);
    scalar::flash_attention_forward<double>(out.data(), lse.data(), qkv.data(), 1, sh.T, sh.NH,
                                            sh.NKV, sh.D, AttentionOptions{});
    std::vector<double> kcache(T * kv), vcache(T * kv);
    for (size_t t = 0; t < T; ++t) {
      std::copy_n(qkv.begin() + long(t * R + sh.k(0)), kv, kcache.begin() + long(t * kv));
      std::copy_n(qkv.begin() + long(t * R + sh.v(0)), kv, vcache.begin() + long(t * kv));
    }
    for (size_t pos : {size_t(0), T / 2, T - 1}) {
      std::vector<double> y(C, NAN), scores(pos + 1);
      scalar::attention_decode<double>(y.data(), scores.data(), qkv.data() + pos * R, kcache.data(),
                                       vcache.data(), int(pos), sh.NH, sh.NKV, sh.D,
                                       AttentionOptions{});
      const std::vector<double> row(out.begin() + long(pos * C), out.begin() + long((pos + 1) * C));
      expect_close("decode pos=" + std::to_string(pos) + sh.name(), y, row);
    }
  }
}

}  // namespace
}  // namespace llmcpu::simd_test
