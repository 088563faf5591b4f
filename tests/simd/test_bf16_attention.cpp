// Flash attention on AVX512-BF16 dot products (simd/x86/bf16_attention.h), skipped where the CPU
// lacks AVX512-BF16:
// - forward out, lse and backward dqkv against the scalar reference in double on the same bf16
//   q, k, v (and the same fp32 dout, bf16 out and fp32 lse in the backward pass), within the
//   bounds of flash_attention_bounds.h with rho = 2^-8: the fp32 evaluation's, plus P rounded to
//   bf16 for P.V (forward), dO, P and dS rounded to bf16 for their products (backward), plus the
//   subnormals VDPBF16PS flushes; out then rounded to bf16 once (half a bf16 ulp of the result);
// - on D = 7, 12, 24, 64, 128 (and 1, 2, 3, 65: odd D pads pairs with zero), T from 1 to 1024
//   (across the key blocks of 256 and 64, the groups of 6 queries and the pairs of queries),
//   multi-head, grouped-query and multi-query;
// - the same bits with 1, 2 and 3 threads and on a second call;
// - grouped-query attention is multi-head attention on the key/value heads copied out per query
//   head: out, lse, dq the same bits, a key/value head's dk, dv the copies' summed in head order;
// - the exp the kernels use within kExpUlps of exp, over the arguments with normal results;
// - the avx512bf16 table (and the onednn one where built) installs these entries.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "simd/bf16.h"
#include "simd/scalar/attention.h"
#include "tests/simd/bf16_tables.h"
#include "tests/simd/error_bounds.h"
#include "tests/simd/flash_attention_bounds.h"

#if defined(__x86_64__)
#include "simd/x86/bf16_attention.h"
#include "simd/x86/bf16_gemm.h"

namespace llmcpu::simd_test {
namespace {

constexpr double kBf16HalfUlp = 0x1p-8;  // relative rounding error of fp32 -> bf16

#define SKIP_WITHOUT_AVX512_BF16() \
  if (!x86::has_avx512_bf16()) GTEST_SKIP() << "this CPU has no AVX512-BF16"

struct Shape : FlashShape {
  std::string name() const {
    return " B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
           " NKV=" + std::to_string(NKV) + " D=" + std::to_string(D);
  }
};
// {B, T, NH, NKV, D}: multi-head, then grouped-query, then multi-query.
constexpr Shape kShapes[] = {
    {1, 1, 1, 1, 1},     {2, 2, 3, 3, 2},     {1, 3, 2, 2, 3},      {2, 5, 2, 2, 7},
    {1, 17, 3, 3, 12},   {2, 31, 2, 2, 24},   {1, 64, 2, 2, 64},    {1, 65, 12, 12, 64},
    {2, 63, 2, 2, 65},   {1, 127, 1, 1, 128}, {2, 257, 1, 1, 64},   {1, 300, 2, 2, 7},
    {1, 513, 1, 1, 24},  {1, 1024, 1, 1, 64}, {2, 1, 6, 2, 24},     {2, 63, 6, 2, 12},
    {1, 65, 9, 3, 64},   {2, 257, 6, 2, 7},   {1, 129, 8, 2, 128},  {2, 1, 3, 1, 7},
    {1, 63, 4, 1, 24},   {2, 65, 3, 1, 64},   {1, 300, 4, 1, 12}};

std::vector<double> widen_bf16(const std::vector<bf16>& v) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = bf16_to_float(v[i]);
  return r;
}

// One shape's inputs: bf16 q, k, v; fp32 dout; the backward pass's bf16 out and fp32 lse (the
// reference's, rounded).
struct Inputs {
  Shape sh;
  std::vector<bf16> qkv, out;
  std::vector<float> dout, lse;
};

Inputs make_inputs(const Shape& sh, unsigned seed) {
  const size_t rows = size_t(sh.B) * size_t(sh.T);
  Random rnd(seed);
  Inputs in{sh, {}, {}, rnd.normal(rows * sh.out_row()), {}};
  const std::vector<float> x = rnd.normal(rows * sh.row());
  in.qkv = to_bf16_vector(x.data(), x.size());
  std::vector<double> out(rows * sh.out_row()), lse(rows * size_t(sh.NH));
  const std::vector<double> xd = widen_bf16(in.qkv);
  scalar::flash_attention_forward<double>(out.data(), lse.data(), xd.data(), sh.B, sh.T, sh.NH,
                                          sh.NKV, sh.D, AttentionOptions{});
  const std::vector<float> out_f(out.begin(), out.end());
  in.out = to_bf16_vector(out_f.data(), out_f.size());
  in.lse.assign(lse.begin(), lse.end());
  return in;
}

struct Results {
  std::vector<float> out, lse, dqkv;  // out widened from bf16
};

Results run(const Inputs& in) {
  const Shape& sh = in.sh;
  std::vector<bf16> out(in.out.size(), 0x7fc0);  // NaN: every element must be written
  Results r{{}, std::vector<float>(in.lse.size(), NAN), std::vector<float>(in.qkv.size(), NAN)};
  x86::bf16_flash_attention_forward(out.data(), r.lse.data(), in.qkv.data(), sh.B, sh.T, sh.NH,
                                    sh.NKV, sh.D, AttentionOptions{});
  for (bf16 h : out) r.out.push_back(bf16_to_float(h));
  x86::bf16_flash_attention_backward(r.dqkv.data(), in.dout.data(), in.out.data(), in.qkv.data(),
                                     in.lse.data(), sh.B, sh.T, sh.NH, sh.NKV, sh.D,
                                     AttentionOptions{});
  return r;
}

TEST(Bf16DotAttention, WithinDerivedBoundOnRaggedShapes) {
  SKIP_WITHOUT_AVX512_BF16();
  for (size_t s = 0; s < std::size(kShapes); ++s) {
    const Shape& sh = kShapes[s];
    const Inputs in = make_inputs(sh, unsigned(s * 13 + 1));
    const Results r = run(in);
    const std::vector<double> x = widen_bf16(in.qkv), dout = widen(in.dout);
    // Forward: the reference and its bound (P rounded), then out rounded to bf16 once.
    std::vector<double> out(in.out.size()), lse(in.lse.size());
    scalar::flash_attention_forward<double>(out.data(), lse.data(), x.data(), sh.B, sh.T, sh.NH,
                                            sh.NKV, sh.D, AttentionOptions{});
    FlashForwardBounds fb = flash_forward_bounds(x, lse, sh, kBf16HalfUlp);
    for (size_t i = 0; i < out.size(); ++i) {
      fb.out[i] += kBf16HalfUlp * (std::fabs(out[i]) + fb.out[i]) + 0x1p-126;  // flushed if tiny
    }
    const std::string where = sh.name();
    expect_within("out" + where, r.out, out, fb.out);
    expect_within("lse" + where, r.lse, lse, fb.lse);
    // Backward on the kernel's inputs: bf16 out, fp32 lse.
    const std::vector<double> out_in = widen_bf16(in.out), lse_in = widen(in.lse);
    std::vector<double> dqkv(x.size());
    scalar::flash_attention_backward<double>(dqkv.data(), dout.data(), out_in.data(), x.data(),
                                             lse_in.data(), sh.B, sh.T, sh.NH, sh.NKV, sh.D,
                                             AttentionOptions{});
    expect_within("dqkv" + where, r.dqkv, dqkv,
                  flash_backward_bounds(x, dout, out_in, lse_in, sh, kBf16HalfUlp));
  }
}

TEST(Bf16DotAttention, SameBitsOnEveryCallAndThreadCount) {
  SKIP_WITHOUT_AVX512_BF16();
  const int saved = omp_get_max_threads();
  for (const Shape sh : {Shape{{2, 63, 2, 2, 65}}, Shape{{2, 257, 4, 4, 64}},
                         Shape{{3, 70, 6, 2, 24}}, Shape{{2, 300, 4, 1, 12}}}) {
    const Inputs in = make_inputs(sh, unsigned(sh.T));
    const Results first = run(in), second = run(in);
    std::vector<Results> by_threads;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      by_threads.push_back(run(in));
    }
    omp_set_num_threads(saved);
    const std::pair<std::string, const Results*> others[] = {{" second call", &second},
                                                             {" 1 thread", &by_threads[0]},
                                                             {" 2 threads", &by_threads[1]},
                                                             {" 3 threads", &by_threads[2]}};
    for (const auto& [what, other] : others) {
      expect_identical("out" + sh.name() + what, other->out, first.out);
      expect_identical("lse" + sh.name() + what, other->lse, first.lse);
      expect_identical("dqkv" + sh.name() + what, other->dqkv, first.dqkv);
    }
  }
}

// The kernels are the same operations per query head whatever NKV: a grouped call equals a
// multi-head call on the key/value heads copied out to their query heads, and the grouped dk, dv
// are the copies' summed in head order (the kernel adds the group's heads one after the other).
TEST(Bf16DotAttention, GroupedQueryIsMultiHeadOnCopiedKeyValueHeads) {
  SKIP_WITHOUT_AVX512_BF16();
  for (const Shape sh : {Shape{{2, 70, 6, 2, 24}}, Shape{{1, 129, 9, 3, 64}},
                         Shape{{2, 33, 4, 1, 7}}}) {
    const size_t rows = size_t(sh.B) * size_t(sh.T), NH = size_t(sh.NH), D = size_t(sh.D);
    const Shape mha{{sh.B, sh.T, sh.NH, sh.NH, sh.D}};
    Inputs g = make_inputs(sh, unsigned(sh.T + sh.NKV));
    Inputs m{mha, std::vector<bf16>(rows * mha.row()), g.out, g.dout, g.lse};
    for (size_t r = 0; r < rows; ++r) {
      for (size_t h = 0; h < NH; ++h) {
        for (size_t i = 0; i < D; ++i) {
          m.qkv[r * mha.row() + mha.q(h) + i] = g.qkv[r * sh.row() + sh.q(h) + i];
          m.qkv[r * mha.row() + mha.k(h) + i] = g.qkv[r * sh.row() + sh.k(h) + i];
          m.qkv[r * mha.row() + mha.v(h) + i] = g.qkv[r * sh.row() + sh.v(h) + i];
        }
      }
    }
    const Results rg = run(g), rm = run(m);
    expect_identical("out" + sh.name(), rg.out, rm.out);
    expect_identical("lse" + sh.name(), rg.lse, rm.lse);
    std::vector<float> summed(rg.dqkv.size(), 0.0f);
    for (size_t r = 0; r < rows; ++r) {
      for (size_t h = 0; h < NH; ++h) {
        for (size_t i = 0; i < D; ++i) {
          const float* dm = rm.dqkv.data() + r * mha.row();
          float* ds = summed.data() + r * sh.row();
          ds[sh.q(h) + i] = dm[mha.q(h) + i];
          ds[sh.k(h) + i] = h % sh.group() == 0 ? dm[mha.k(h) + i] : ds[sh.k(h) + i] + dm[mha.k(h) + i];
          ds[sh.v(h) + i] = h % sh.group() == 0 ? dm[mha.v(h) + i] : ds[sh.v(h) + i] + dm[mha.v(h) + i];
        }
      }
    }
    expect_identical("dqkv" + sh.name(), rg.dqkv, summed);
  }
}

// Highway's Exp is held to 1 ulp by its own tests; this one (the same reduction and polynomial,
// 2^n by VSCALEFPS) is held to the same kExpUlps here, over every 61st fp32 in [-87, 0.5] (the
// arguments whose results are normal; softmax arguments are <= 0 up to one rounding).
TEST(Bf16DotAttention, ExpIsWithinItsUlpBound) {
  SKIP_WITHOUT_AVX512_BF16();
  std::vector<float> x{0.0f};
  const auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  for (uint32_t u = bits(0.5f); u > 0; u = u > 61 ? u - 61 : 0) x.push_back(std::bit_cast<float>(u));
  for (uint32_t u = bits(-87.0f); u > 0x80000000u; u = u > 0x80000000u + 61 ? u - 61 : 0x80000000u) {
    x.push_back(std::bit_cast<float>(u));
  }
  std::vector<float> y(x.size());
  x86::bf16_attention_exp(y.data(), x.data(), x.size());
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double e = std::exp(double(x[i]));
    const double ulps = std::fabs(double(y[i]) - e) / (kUlp * e);
    if (!(ulps <= worst)) worst = ulps, at = i;
  }
  EXPECT_LE(worst, kExpUlps) << "exp(" << x[at] << ") = " << y[at] << ", exact " << std::exp(double(x[at]));
}

TEST(Bf16DotAttention, TheDotProductTablesInstallIt) {
  SKIP_WITHOUT_AVX512_BF16();
  for (std::string_view name : available_bf16_targets()) {
    const Bf16Kernels& t = bf16_kernels_named(name);
    const bool dot = has_own_gemm(name);
    EXPECT_EQ(t.flash_attention_forward == &x86::bf16_flash_attention_forward, dot) << name;
    EXPECT_EQ(t.flash_attention_backward == &x86::bf16_flash_attention_backward, dot) << name;
    EXPECT_EQ(t.flash_attention_forward_scratch == &x86::bf16_flash_attention_forward_scratch, dot)
        << name;
    EXPECT_EQ(t.flash_attention_backward_scratch == &x86::bf16_flash_attention_backward_scratch,
              dot)
        << name;
  }
}

}  // namespace
}  // namespace llmcpu::simd_test
#endif  // __x86_64__
