// The kernels' sizing entries (simd/scratch.h) against what the kernels really allocate: for every
// fp32 and bf16 table this CPU runs, each entry with scratch is called on ragged shapes from no
// scratch at all, and the bytes its thread and team then hold (thread_scratch_held) must be what
// the sizing entry said, for one call and for a sequence of calls (grow-only buffers keep the
// largest ask per thread and slot), with 1, 2 and 3 threads. The memory plan adds a training
// step's calls up with these entries (core/model/kernel_scratch.h), so they must not drift from the
// kernels.
#include <gtest/gtest.h>
#include <omp.h>

#include <functional>
#include <string>
#include <vector>

#include "simd/bf16.h"
#include "simd/kernels.h"
#include "simd/scratch.h"
#include "simd/workspace.h"
#include "tests/common/team_scratch.h"
#include "tests/simd/emulated.h"
#include "tests/simd/error_bounds.h"

namespace llmcpu::simd_test {
namespace {

using testing::release_team_scratch;
using testing::team_scratch_held;

// What `run` leaves allocated in the scratch of the calling thread and its team, from nothing.
size_t held_after(const std::function<void()>& run) {
  release_team_scratch();
  run();
  return team_scratch_held();
}

// The sizing entries count a team's widest part for all of its threads (add_column_sums splits
// the columns unevenly by one): each thread's buffer may hold a cache line less than planned.
void expect_planned(const std::string& where, size_t held, const ScratchUse& use, int threads) {
  const size_t planned = use.bytes(threads) - use.library;  // the library's is not ours to count
  EXPECT_LE(held, planned) << where;
  if (held <= planned) {
    EXPECT_LE(planned - held, size_t(64) * size_t(threads))
        << where << ": held " << held << ", planned " << planned;
  }
}

struct Gemm {
  size_t N;
  int C, OC;
};

// Ragged in every dimension; N above the token panels of every GEMM (64), K odd for the bf16
// pairs, a lm_head-like wide OC, and GPT-2's four layer shapes at a small C.
constexpr Gemm kGemms[] = {{1, 1, 1},      {3, 5, 7},     {17, 33, 29},   {70, 96, 131},
                           {65, 130, 389}, {5, 17, 2003}, {130, 48, 144}, {130, 48, 48},
                           {130, 48, 192}, {130, 192, 48}};

// kGemms, under emulation (tests/simd/emulated.h) without {65, 130, 389}: the GEMMs are run to see
// what they allocate, which the others, at the same blocking, show for a fraction of the products.
std::vector<Gemm> gemms() {
  std::vector<Gemm> r;
  for (const Gemm& g : kGemms) {
    if (!testing::emulated_run() || g.N * size_t(g.C) * size_t(g.OC) < 3000000) r.push_back(g);
  }
  return r;
}

struct Operands {
  std::vector<float> inp, weight, bias, dout, out, dinp, dweight, dbias;
  std::vector<bf16> inp16, weight16;
  explicit Operands(const Gemm& g) {
    const size_t N = g.N, C = size_t(g.C), OC = size_t(g.OC);
    Random rnd(7);
    inp = rnd.normal(N * C), weight = rnd.normal(OC * C), bias = rnd.normal(OC);
    dout = rnd.normal(N * OC);
    out.assign(N * OC, 0), dinp.assign(N * C, 0), dweight.assign(OC * C, 0), dbias.assign(OC, 0);
    inp16 = to_bf16_vector(inp.data(), inp.size());
    weight16 = to_bf16_vector(weight.data(), weight.size());
  }
};

std::string shape(const std::string& what, const Gemm& g, int threads) {
  return what + " N=" + std::to_string(g.N) + " C=" + std::to_string(g.C) +
         " OC=" + std::to_string(g.OC) + ", " + std::to_string(threads) + " threads";
}

// Runs f with `threads` OpenMP threads.
void with_threads(int threads, const std::function<void()>& f) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  f();
  omp_set_num_threads(saved);
}

class SimdScratch : public ::testing::TestWithParam<std::string> {
 protected:
  const KernelTable& k() const { return kernels_for_target(GetParam()); }
};

TEST_P(SimdScratch, MatmulAllocatesWhatItsSizingEntriesSay) {
  for (int threads : {1, 2, 3}) {
    with_threads(threads, [&] {
      for (const Gemm& g : gemms()) {
        Operands o(g);
        for (bool bias : {false, true}) {
          const size_t held = held_after([&] {
            k().matmul_forward(o.out.data(), o.inp.data(), o.weight.data(),
                               bias ? o.bias.data() : nullptr, g.N, g.C, g.OC);
          });
          expect_planned(shape("forward", g, threads), held,
                         k().matmul_forward_scratch(g.N, g.C, g.OC, bias, threads), threads);
        }
        for (bool dinp : {false, true}) {
          for (bool dbias : {false, true}) {
            const size_t held = held_after([&] {
              k().matmul_backward(dinp ? o.dinp.data() : nullptr, o.dweight.data(),
                                  dbias ? o.dbias.data() : nullptr, o.dout.data(), o.inp.data(),
                                  o.weight.data(), g.N, g.C, g.OC);
            });
            expect_planned(shape("backward", g, threads), held,
                           k().matmul_backward_scratch(g.N, g.C, g.OC, dinp, dbias, threads),
                           threads);
          }
        }
      }
    });
  }
}

// A sequence of calls (a block's four GEMMs and the head, forward and backward, then attention
// and the gradient norm): the buffers keep per thread and slot the largest ask, as merge() says.
TEST_P(SimdScratch, ASequenceOfCallsHoldsTheMergedAsks) {
  const int B = 2, T = 65, C = 48, NH = 3, Vp = 384;
  const size_t N = size_t(B) * T;
  const std::vector<Gemm> gemms = {
      {N, C, 3 * C}, {N, C, C}, {N, C, 4 * C}, {N, 4 * C, C}, {N, C, Vp}};
  Random rnd(3);
  const std::vector<float> qkv = rnd.normal(N * 3 * C), dout = rnd.normal(N * C);
  std::vector<float> out(N * C), lse(size_t(B) * NH * T), dqkv(N * 3 * C);
  for (int threads : {2, 1, 3}) {
    with_threads(threads, [&] {
      ScratchUse planned;
      const size_t held = held_after([&] {
        for (const Gemm& g : gemms) {
          Operands o(g);
          const bool bias = g.OC != Vp;  // the head has none
          k().matmul_forward(o.out.data(), o.inp.data(), o.weight.data(),
                             bias ? o.bias.data() : nullptr, g.N, g.C, g.OC);
          k().matmul_backward(o.dinp.data(), o.dweight.data(), bias ? o.dbias.data() : nullptr,
                              o.dout.data(), o.inp.data(), o.weight.data(), g.N, g.C, g.OC);
          planned.merge(k().matmul_forward_scratch(g.N, g.C, g.OC, bias, threads))
              .merge(k().matmul_backward_scratch(g.N, g.C, g.OC, true, bias, threads));
        }
        k().flash_attention_forward(out.data(), lse.data(), qkv.data(), B, T, NH, NH, C / NH,
                                    AttentionOptions{});
        k().flash_attention_backward(dqkv.data(), dout.data(), out.data(), qkv.data(), lse.data(),
                                     B, T, NH, NH, C / NH, AttentionOptions{});
        (void)k().sum_squares(qkv.data(), qkv.size());
        planned.merge(k().flash_attention_forward_scratch(B, T, NH, NH, C / NH, threads))
            .merge(k().flash_attention_backward_scratch(B, T, NH, NH, C / NH, threads))
            .merge(k().sum_squares_scratch(qkv.size(), threads));
      });
      expect_planned(GetParam() + " sequence, " + std::to_string(threads) + " threads", held,
                     planned, threads);
    });
  }
}

TEST_P(SimdScratch, AttentionAndReductionAllocateWhatTheirSizingEntriesSay) {
  struct Attention {  // multi-head, grouped-query, multi-query
    int B, T, NH, NKV, D;
  };
  for (const Attention& s :
       {Attention{1, 1, 1, 1, 4}, Attention{2, 67, 3, 3, 16}, Attention{1, 300, 2, 2, 32},
        Attention{2, 67, 6, 2, 24}, Attention{1, 65, 4, 1, 7}}) {
    const size_t rows = size_t(s.B) * s.T, N = rows * s.NH * s.D;
    Random rnd(11);
    const std::vector<float> qkv = rnd.normal(rows * (s.NH + 2 * s.NKV) * s.D),
                             dout = rnd.normal(N);
    std::vector<float> out(N), lse(size_t(s.B) * s.NH * s.T), dqkv(qkv.size());
    const std::string where = GetParam() + " T=" + std::to_string(s.T) +
                              " NH=" + std::to_string(s.NH) + " NKV=" + std::to_string(s.NKV);
    for (int threads : {1, 2}) {
      with_threads(threads, [&] {
        size_t held = held_after([&] {
          k().flash_attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.NH, s.NKV,
                                      s.D, AttentionOptions{});
        });
        expect_planned("attention forward " + where, held,
                       k().flash_attention_forward_scratch(s.B, s.T, s.NH, s.NKV, s.D, threads),
                       threads);
        held = held_after([&] {
          k().flash_attention_backward(dqkv.data(), dout.data(), out.data(), qkv.data(), lse.data(),
                                       s.B, s.T, s.NH, s.NKV, s.D, AttentionOptions{});
        });
        expect_planned("attention backward " + where, held,
                       k().flash_attention_backward_scratch(s.B, s.T, s.NH, s.NKV, s.D, threads),
                       threads);
      });
    }
  }
  for (size_t n : {size_t(0), size_t(1), size_t(100000)}) {
    const std::vector<float> x(n, 0.5f);
    const size_t held = held_after([&] { (void)k().sum_squares(x.data(), n); });
    expect_planned("sum_squares n=" + std::to_string(n), held, k().sum_squares_scratch(n, 2), 2);
  }
}

std::vector<std::string> all_targets() {
  std::vector<std::string> r;
  for (std::string_view name : available_targets()) r.emplace_back(name);
  return r;
}

INSTANTIATE_TEST_SUITE_P(Targets, SimdScratch, ::testing::ValuesIn(all_targets()), param_name);

class SimdBf16Scratch : public ::testing::TestWithParam<std::string> {
 protected:
  const Bf16Kernels& h() const { return bf16_kernels_named(GetParam()); }
};

TEST_P(SimdBf16Scratch, MatmulAllocatesWhatItsSizingEntriesSay) {
  for (int threads : {1, 2, 3}) {
    with_threads(threads, [&] {
      for (const Gemm& g : gemms()) {
        Operands o(g);
        for (bool bias : {false, true}) {
          const size_t held = held_after([&] {
            h().matmul_forward(o.out.data(), o.inp16.data(), o.weight16.data(),
                               bias ? o.bias.data() : nullptr, g.N, g.C, g.OC);
          });
          expect_planned(GetParam() + " " + shape("forward", g, threads), held,
                         h().matmul_forward_scratch(g.N, g.C, g.OC, bias, threads), threads);
        }
        for (bool dinp : {false, true}) {
          for (bool dbias : {false, true}) {
            const size_t held = held_after([&] {
              h().matmul_backward(dinp ? o.dinp.data() : nullptr, o.dweight.data(),
                                  dbias ? o.dbias.data() : nullptr, o.dout.data(), o.inp16.data(),
                                  o.weight16.data(), g.N, g.C, g.OC);
            });
            expect_planned(GetParam() + " " + shape("backward", g, threads), held,
                           h().matmul_backward_scratch(g.N, g.C, g.OC, dinp, dbias, threads),
                           threads);
          }
        }
      }
    });
  }
}

TEST_P(SimdBf16Scratch, AttentionAllocatesWhatItsSizingEntriesSay) {
  const int B = 2, T = 67, C = 48, NH = 3;
  const size_t N = size_t(B) * T * C;
  Random rnd(13);
  const std::vector<float> q = rnd.normal(3 * N), dout = rnd.normal(N);
  const std::vector<bf16> qkv = to_bf16_vector(q.data(), q.size());
  std::vector<bf16> out(N);
  std::vector<float> lse(size_t(B) * NH * T), dqkv(3 * N);
  for (int threads : {1, 2}) {
    with_threads(threads, [&] {
      size_t held = held_after([&] {
        h().flash_attention_forward(out.data(), lse.data(), qkv.data(), B, T, NH, NH, C / NH,
                                    AttentionOptions{});
      });
      expect_planned(GetParam() + " attention forward", held,
                     h().flash_attention_forward_scratch(B, T, NH, NH, C / NH, threads), threads);
      held = held_after([&] {
        h().flash_attention_backward(dqkv.data(), dout.data(), out.data(), qkv.data(), lse.data(),
                                     B, T, NH, NH, C / NH, AttentionOptions{});
      });
      expect_planned(GetParam() + " attention backward", held,
                     h().flash_attention_backward_scratch(B, T, NH, NH, C / NH, threads), threads);
    });
  }
}

// The AVX512-BF16 GEMM packs the whole weight for dinp: at GPT-2 124M's lm_head (C = 768,
// Vp = 50304) that is C x Vp bf16 values, 73.7 MiB, whatever the number of rows. Its sizing
// entry must say so from the shape alone (nothing is run here).
TEST(SimdBf16ScratchRule, TheDotProductGemmCountsTheLmHeadsPackedWeight) {
  bool found = false;
  for (std::string_view name : available_bf16_targets()) found = found || name == "avx512bf16";
  if (!found) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  const Bf16Kernels& h = bf16_kernels_named("avx512bf16");
  const size_t C = 768, Vp = 50304, rows = 333;  // rows: a chunk of the head
  const ScratchUse use = h.matmul_backward_scratch(rows, int(C), int(Vp), true, false, 2);
  EXPECT_GE(use.caller[size_t(ScratchSlot::kBf16A)], C * Vp * sizeof(bf16));
  EXPECT_EQ(use.caller[size_t(ScratchSlot::kBf16B)], scratch_bytes((rows * Vp + 1) / 2));
}

// The Arm BF16 GEMM packs the whole weight too, for the forward and for dinp (C x Vp bf16 values
// at the lm_head): its sizing entries say so from the shape alone.
TEST(SimdBf16ScratchRule, TheArmBf16GemmCountsTheLmHeadsPackedWeight) {
  bool found = false;
  for (std::string_view name : available_bf16_targets()) found = found || name == "neon_bf16";
  if (!found) GTEST_SKIP() << "no Arm BF16 on this CPU";
  const Bf16Kernels& h = bf16_kernels_named("neon_bf16");
  const size_t C = 768, Vp = 50304, rows = 333;  // rows: a chunk of the head
  const size_t weight = C * Vp * sizeof(bf16);
  EXPECT_GE(
      h.matmul_forward_scratch(rows, int(C), int(Vp), false, 2).caller[size_t(ScratchSlot::kBf16A)],
      weight);
  EXPECT_GE(h.matmul_backward_scratch(rows, int(C), int(Vp), true, false, 2)
                .caller[size_t(ScratchSlot::kBf16A)],
            weight);
}

std::vector<std::string> bf16_tables() {
  std::vector<std::string> r;
  for (std::string_view name : available_bf16_targets()) r.emplace_back(name);
  return r;
}

INSTANTIATE_TEST_SUITE_P(AllTables, SimdBf16Scratch, ::testing::ValuesIn(bf16_tables()),
                         param_name);

}  // namespace
}  // namespace llmcpu::simd_test
