// The cases of the attention-options tests (test_attention_options.cpp, fp32 tables, and
// test_bf16_attention_options.cpp, bf16 tables) and their references, computed once per process:
// inputs, the plain double attention of attention_reference.h on them, and the fp32 bounds of
// flash_attention_bounds.h with the case's options; also rows packed with several examples
// (opt.starts), cut at random.
#pragma once

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "simd/attention_options.h"
#include "simd/bf16.h"
#include "tests/simd/attention_reference.h"
#include "tests/simd/emulated.h"
#include "tests/simd/error_bounds.h"
#include "tests/simd/flash_attention_bounds.h"

namespace llmcpu::simd_test {

struct OptionCase {
  FlashShape sh;
  AttentionOptions opt;
  std::string name() const {
    return " B=" + std::to_string(sh.B) + " T=" + std::to_string(sh.T) +
           " NH=" + std::to_string(sh.NH) + " NKV=" + std::to_string(sh.NKV) +
           " D=" + std::to_string(sh.D) + " scale=" + std::to_string(opt.scale) +
           " window=" + std::to_string(opt.window) + " softcap=" + std::to_string(opt.softcap);
  }
};

// The kernels' blocks: the fp32 forward's 64 queries x 256 keys, the backward's 64 x 64, the bf16
// forward's 6 queries x 256 keys from a panel of 64, its backward's 64 keys x 6 queries. Windows
// cut them (T and W multiples of none), W = 1, W = T, W just past a key block; soft-caps of 0.75 to
// 2 on scores of standard deviation scale sqrt(D) = 1.9 to 2.5 (q, k ~ N(0, 1)), several units in
// the tails, where tanh is far from linear; scales other than 1/sqrt(D); multi-head, grouped-query
// (2 and 3 query heads per key/value head) and multi-query; D = 24, 40 and 64.
inline const OptionCase kCases[] = {
    {{2, 150, 4, 2, 24}, {.window = 40}},
    {{1, 300, 3, 1, 40}, {.scale = 0.35f, .window = 100, .softcap = 1.5f}},
    {{1, 97, 2, 2, 24}, {.window = 1}},
    {{2, 70, 6, 3, 40}, {.window = 70}},
    {{1, 130, 4, 1, 24}, {.scale = 0.5f, .softcap = 0.75f}},
    {{1, 600, 2, 1, 40}, {.scale = 0.3f, .window = 300, .softcap = 2.0f}},
    {{2, 65, 2, 2, 64}, {.scale = 0.3f, .window = 17}},
    {{1, 520, 6, 2, 40}, {.window = 257}}};

// Under emulation (emulated.h) the cases of T <= 150 only, and the tests that take one multi-query
// case (the plain call, thread counts) take T = 130's for T = 300's.
inline bool run_case(const OptionCase& c) { return !testing::emulated_run() || c.sh.T <= 150; }
inline size_t multi_query_case() { return testing::emulated_run() ? 4 : 1; }

struct Reference {
  std::vector<double> qkv, dout;         // as the kernels see them (bf16 values in the bf16 case)
  std::vector<float> qkv_f, dout_f;      // the same, in fp32
  std::vector<bf16> qkv_h;               // the bf16 case's qkv
  std::vector<double> out, lse;          // the reference forward
  FlashForwardBounds bounds;             // its fp32 bounds
  std::vector<double> out_in, lse_in;    // the backward's inputs: out, lse rounded (out to bf16)
  std::vector<bf16> out_in_h;            // the bf16 case's out
  std::vector<double> dqkv, dqkv_bound;  // the reference backward on them, its fp32 bound
};

inline std::vector<double> widen_bf16_values(const std::vector<bf16>& v) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = bf16_to_float(v[i]);
  return r;
}

// The reference of case c on inputs drawn from `seed`; bf16_case: q, k, v and the backward's out
// rounded to bf16.
inline Reference make_reference(const OptionCase& c, unsigned seed, bool bf16_case) {
  const FlashShape& sh = c.sh;
  const size_t rows = size_t(sh.B) * size_t(sh.T);
  Random rnd(seed);
  Reference r;
  r.qkv_f = rnd.normal(rows * sh.row());
  r.dout_f = rnd.normal(rows * sh.out_row());
  if (bf16_case) {
    r.qkv_h = to_bf16_vector(r.qkv_f.data(), r.qkv_f.size());
    for (size_t j = 0; j < r.qkv_f.size(); ++j) r.qkv_f[j] = bf16_to_float(r.qkv_h[j]);
  }
  r.qkv = widen(r.qkv_f), r.dout = widen(r.dout_f);
  PlainForward f = plain_attention_forward(r.qkv, sh, c.opt);
  r.out = std::move(f.out), r.lse = std::move(f.lse);
  r.bounds = flash_forward_bounds(r.qkv, r.lse, sh, 0, c.opt);
  const std::vector<float> out_f(r.out.begin(), r.out.end()), lse_f(r.lse.begin(), r.lse.end());
  r.out_in = widen(out_f), r.lse_in = widen(lse_f);
  if (bf16_case) {
    r.out_in_h = to_bf16_vector(out_f.data(), out_f.size());
    r.out_in = widen_bf16_values(r.out_in_h);
  }
  r.dqkv = plain_attention_backward(r.qkv, r.dout, r.out_in, r.lse_in, sh, c.opt);
  r.dqkv_bound = flash_backward_bounds(r.qkv, r.dout, r.out_in, r.lse_in, sh, 0, c.opt);
  return r;
}

// Case i's reference, made once per process.
inline const Reference& reference(size_t i, bool bf16_case) {
  static std::map<std::pair<size_t, bool>, Reference> cache;
  const auto key = std::make_pair(i, bf16_case);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  return cache.emplace(key, make_reference(kCases[i], unsigned(i * 17 + 3), bf16_case))
      .first->second;
}

// Packed rows (opt.starts): each row of a case cut into examples of random lengths from 1 to its
// row's `longest` (cycled over the rows; 1: every token its own example; T: a few long ones, or
// one), drawn from `seed`: starts (B, T) as attention_options.h describes them.
inline std::vector<int> random_starts(int B, int T, const std::vector<int>& longest,
                                      unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<int> starts(size_t(B) * size_t(T));
  for (int b = 0; b < B; ++b) {
    const int most = longest[size_t(b) % longest.size()];
    for (int t0 = 0; t0 < T;) {
      const int n = std::uniform_int_distribution<int>(1, most)(gen);
      for (int t = t0; t < std::min(T, t0 + n); ++t) starts[size_t(b) * size_t(T) + size_t(t)] = t0;
      t0 += n;
    }
  }
  return starts;
}

struct PackedCase {
  OptionCase c;  // c.opt.starts points at starts
  std::vector<int> starts;
  std::string name() const {
    int examples = 0;
    for (size_t i = 0; i < starts.size(); ++i) examples += starts[i] == int(i % size_t(c.sh.T));
    return c.name() + " examples=" + std::to_string(examples);
  }
};

// Rows of several examples, with lengths 1 (alone, and rows of them) to past the kernels' blocks
// (the fp32 forward's 256 keys, the backward's 64, the bf16 kernels' 64 and 6), with and without
// the options of kCases: windows shorter and longer than the examples, soft-caps, scales;
// multi-head, grouped-query and multi-query.
inline const std::vector<PackedCase>& packed_cases() {
  static const std::vector<PackedCase> cases = [] {
    const std::pair<OptionCase, std::vector<int>> specs[] = {
        {{{2, 150, 4, 2, 24}, {}}, {60, 8}},
        {{{1, 300, 3, 1, 40}, {.scale = 0.35f, .window = 100, .softcap = 1.5f}}, {140}},
        {{{2, 97, 2, 2, 24}, {.window = 2}}, {40, 3}},
        {{{1, 130, 4, 1, 24}, {.scale = 0.5f, .softcap = 0.75f}}, {6}},
        {{{2, 200, 6, 3, 40}, {.window = 17}}, {90, 1}},
        {{{1, 520, 2, 1, 40}, {.window = 257}}, {400}},
        {{{3, 65, 2, 2, 64}, {.scale = 0.3f}}, {65, 20, 2}}};
    std::vector<PackedCase> r;
    for (const auto& [c, longest] : specs) {
      r.push_back({c, random_starts(c.sh.B, c.sh.T, longest, unsigned(r.size() + 1))});
    }
    for (PackedCase& p : r) p.c.opt.starts = p.starts.data();
    return r;
  }();
  return cases;
}

// Packed case i's reference, made once per process.
inline const Reference& packed_reference(size_t i, bool bf16_case) {
  static std::map<std::pair<size_t, bool>, Reference> cache;
  const auto key = std::make_pair(i, bf16_case);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  return cache.emplace(key, make_reference(packed_cases()[i].c, unsigned(i * 29 + 5), bf16_case))
      .first->second;
}

// A table's results on a case (out widened from bf16 in the bf16 tables).
struct Results {
  std::vector<float> out, lse, dqkv;
};

inline void expect_identical_results(const std::string& where, const Results& got,
                                     const Results& ref) {
  expect_identical("out" + where, got.out, ref.out);
  expect_identical("lse" + where, got.lse, ref.lse);
  expect_identical("dqkv" + where, got.dqkv, ref.dqkv);
}

// Rows of one example each (starts all 0) give the bits of the call without starts, on two cases
// (with and without a window and soft-cap): run(reference, shape, options) -> Results.
template <class Run>
void expect_one_example_per_row_is_plain(const std::string& table, bool bf16_case, Run run) {
  for (size_t i : {size_t(0), multi_query_case()}) {
    const OptionCase& c = kCases[i];
    const Reference& r = reference(i, bf16_case);
    const std::vector<int> zeros(size_t(c.sh.B) * size_t(c.sh.T), 0);
    AttentionOptions opt = c.opt;
    opt.starts = zeros.data();
    expect_identical_results(" " + table + c.name() + " one example per row", run(r, c.sh, opt),
                             run(r, c.sh, c.opt));
  }
}

}  // namespace llmcpu::simd_test
