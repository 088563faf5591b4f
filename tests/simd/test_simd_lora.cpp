// LoRA's low-rank kernels (kernels.h's lora_*, bf16.h's lora_rank_update) of every table, the
// scalar reference's too, against the scalar reference in double: ranks 1, 3, 16, 17, 64 (and 300,
// more than one k tile of the outer accumulation), blocks of 1, 7, 64, 100, 1031 columns, 1, 5,
// 300 rows (37 under emulation, tests/simd/emulated.h: still several 16-row panels). Every operand
// with rows wider than the block (ld > cols) and the block at a column offset: the columns around
// it must come back untouched. Bounds from fp32 rounding (error_bounds.h): a sum of n products in
// any order, scaled and added once, errs by at most gamma(n + 2) (|old| + |scale| sum |products|).
// Then the determinism rule (the same bits for 1, 2 and 3 threads), and the bf16 rank update: the
// fp32 table's result rounded once.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "simd/bf16.h"
#include "simd/scalar/lora.h"
#include "tests/simd/bf16_rounding.h"
#include "tests/simd/emulated.h"
#include "tests/simd/error_bounds.h"

namespace llmcpu::simd_test {
namespace {

std::vector<std::string> all_targets() {
  std::vector<std::string> r;
  for (std::string_view name : available_targets()) r.emplace_back(name);
  return r;
}

// A block of `cols` columns at column `off` of N rows `ld` floats apart.
struct Block {
  size_t N, cols, ld, off;
  size_t size() const { return N * ld; }
  size_t at(size_t n, size_t c) const { return n * ld + off + c; }
};
Block block(size_t N, size_t cols, size_t pad, size_t off) { return {N, cols, cols + pad, off}; }

struct Shape {
  size_t N;
  int r, cols;
};
std::string where(const std::string& target, const Shape& s) {
  return target + " N=" + std::to_string(s.N) + " r=" + std::to_string(s.r) +
         " cols=" + std::to_string(s.cols);
}

// The most rows a shape has: several of the rank update's 16-row panels, fewer under emulation.
size_t many_rows() { return testing::emulated_run() ? 37 : 300; }

std::vector<Shape> ragged_shapes() {
  std::vector<Shape> r;
  for (const size_t N : {size_t(1), size_t(5), many_rows()}) {
    for (const int rank : {1, 3, 16, 17, 64}) {
      for (const int cols : {1, 7, 64, 100, 1031}) r.push_back({N, rank, cols});
    }
  }
  r.push_back({70, 300, 33});
  return r;
}

float scale_of(unsigned seed) { return seed % 2 ? 0.75f : -1.5f; }

std::vector<double> magnitudes(const std::vector<float>& v) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = std::fabs(double(v[i]));
  return r;
}

// The operands of one shape: out / acc, u, w / b and d, all random, with their blocks.
struct Operands {
  Block ob, ub, db, pb;  // rank update's out, u (also the outer's), d, the projection's out
  std::vector<float> out, u, w, d, proj, acc;
  Operands(const Shape& s, unsigned seed) {
    const size_t N = s.N, r = size_t(s.r), C = size_t(s.cols);
    ob = block(N, C, 5, 3);
    ub = block(N, r, 3, 1);
    db = block(N, C, 9, 4);
    pb = block(N, r, 2, 1);
    Random rnd(seed);
    out = rnd.normal(ob.size());
    u = rnd.normal(ub.size());
    w = rnd.normal(r * C, 0, 0.5);
    d = rnd.normal(db.size());
    proj = rnd.normal(pb.size());
    acc = rnd.normal(C * r);
    // The projection overwrites its block: NaN there until then.
    for (size_t n = 0; n < N; ++n) {
      for (size_t k = 0; k < r; ++k) proj[pb.at(n, k)] = NAN;
    }
  }
};

// The elements of a buffer inside the block (row by row), or the others.
template <typename T>
std::vector<T> part(const Block& b, const std::vector<T>& v, bool inside) {
  std::vector<T> r;
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t c = i % b.ld;
    if ((i / b.ld < b.N && c >= b.off && c < b.off + b.cols) == inside) r.push_back(v[i]);
  }
  return r;
}

// The block within gamma(roundings) * mag of the reference (a sum of n products, scaled and added:
// each term passes through at most n + 2 roundings), the columns around it untouched.
void expect_block(const std::string& what, const Block& b, const std::vector<float>& got,
                  const std::vector<float>& before, const std::vector<double>& ref,
                  const std::vector<double>& mag, double roundings) {
  expect_identical(what + ", around the block", part(b, got, false), part(b, before, false));
  std::vector<double> bound = part(b, mag, true);
  for (double& x : bound) x *= gamma(roundings);
  expect_within(what, part(b, got, true), part(b, ref, true), bound);
}

// out[n,c] += scale sum_k u[n,k] w[k,c] from `before` (the block's old values): the reference, and
// the magnitudes of the bound by the same kernel on |before|, |u|, |w|, |scale|.
struct Reference {
  std::vector<double> ref, mag;
};
Reference rank_update_reference(const Operands& o, const Shape& s, float scale,
                                const std::vector<float>& before) {
  Reference r{widen(before), magnitudes(before)};
  const std::vector<double> u = widen(o.u), w = widen(o.w), ua = magnitudes(o.u),
                            wa = magnitudes(o.w);
  scalar::lora_rank_update<double>(r.ref.data() + o.ob.off, o.ob.ld, u.data() + o.ub.off, o.ub.ld,
                                   w.data(), s.N, s.r, s.cols, scale);
  scalar::lora_rank_update<double>(r.mag.data() + o.ob.off, o.ob.ld, ua.data() + o.ub.off, o.ub.ld,
                                   wa.data(), s.N, s.r, s.cols, std::fabs(scale));
  return r;
}

void check_rank_update(const KernelTable& k, const Shape& s, unsigned seed) {
  const Operands o(s, seed);
  const float scale = scale_of(seed);
  std::vector<float> got = o.out;
  k.lora_rank_update(got.data() + o.ob.off, o.ob.ld, o.u.data() + o.ub.off, o.ub.ld, o.w.data(),
                     s.N, s.r, s.cols, scale);
  const Reference r = rank_update_reference(o, s, scale, o.out);
  expect_block("lora_rank_update " + where(std::string(k.target), s), o.ob, got, o.out, r.ref,
               r.mag, s.r + 2.0);
}

// out[n,k] = scale sum_c d[n,c] b[c,k] (b: the operands' w read as (cols, r)).
void check_project(const KernelTable& k, const Shape& s, unsigned seed) {
  const Operands o(s, seed);
  const float scale = scale_of(seed);
  std::vector<float> got = o.proj;
  k.lora_project(got.data() + o.pb.off, o.pb.ld, o.d.data() + o.db.off, o.db.ld, o.w.data(), s.N,
                 s.cols, s.r, scale);
  std::vector<double> ref = widen(o.proj), mag(ref.size());
  const std::vector<double> d = widen(o.d), b = widen(o.w), da = magnitudes(o.d),
                            ba = magnitudes(o.w);
  scalar::lora_project<double>(ref.data() + o.pb.off, o.pb.ld, d.data() + o.db.off, o.db.ld,
                               b.data(), s.N, s.cols, s.r, scale);
  scalar::lora_project<double>(mag.data() + o.pb.off, o.pb.ld, da.data() + o.db.off, o.db.ld,
                               ba.data(), s.N, s.cols, s.r, std::fabs(scale));
  // Nothing is added: cols + 1 roundings.
  expect_block("lora_project " + where(std::string(k.target), s), o.pb, got, o.proj, ref, mag,
               s.cols + 1.0);
}

// acc[c,k] += scale sum_n d[n,c] u[n,k].
void check_outer(const KernelTable& k, const Shape& s, unsigned seed) {
  const Operands o(s, seed);
  const float scale = scale_of(seed);
  std::vector<float> got = o.acc;
  k.lora_outer_accumulate(got.data(), o.d.data() + o.db.off, o.db.ld, o.u.data() + o.ub.off,
                          o.ub.ld, s.N, s.cols, s.r, scale);
  std::vector<double> ref = widen(o.acc), mag = magnitudes(o.acc);
  const std::vector<double> d = widen(o.d), u = widen(o.u), da = magnitudes(o.d),
                            ua = magnitudes(o.u);
  scalar::lora_outer_accumulate<double>(ref.data(), d.data() + o.db.off, o.db.ld,
                                        u.data() + o.ub.off, o.ub.ld, s.N, s.cols, s.r, scale);
  scalar::lora_outer_accumulate<double>(mag.data(), da.data() + o.db.off, o.db.ld,
                                        ua.data() + o.ub.off, o.ub.ld, s.N, s.cols, s.r,
                                        std::fabs(scale));
  const Block whole{size_t(s.cols), size_t(s.r), size_t(s.r), 0};
  expect_block("lora_outer_accumulate " + where(std::string(k.target), s), whole, got, o.acc, ref,
               mag, double(s.N) + 2);
}

class SimdLora : public ::testing::TestWithParam<std::string> {
 protected:
  const KernelTable& k() const { return kernels_for_target(GetParam()); }
};

TEST_P(SimdLora, RankUpdateOnRaggedColumnBlocks) {
  unsigned seed = 1;
  for (const Shape& s : ragged_shapes()) check_rank_update(k(), s, seed++);
}

TEST_P(SimdLora, ProjectOnRaggedColumnBlocks) {
  unsigned seed = 200;
  for (const Shape& s : ragged_shapes()) check_project(k(), s, seed++);
}

TEST_P(SimdLora, OuterAccumulateOnRaggedColumnBlocks) {
  unsigned seed = 400;
  for (const Shape& s : ragged_shapes()) check_outer(k(), s, seed++);
}

// The three kernels' outputs for `threads` threads, one after the other.
std::vector<float> run_all(const KernelTable& k, const Shape& s, const Operands& o, int threads) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  std::vector<float> out = o.out, proj = o.proj, acc = o.acc;
  k.lora_rank_update(out.data() + o.ob.off, o.ob.ld, o.u.data() + o.ub.off, o.ub.ld, o.w.data(),
                     s.N, s.r, s.cols, 0.75f);
  k.lora_project(proj.data() + o.pb.off, o.pb.ld, o.d.data() + o.db.off, o.db.ld, o.w.data(), s.N,
                 s.cols, s.r, 0.75f);
  k.lora_outer_accumulate(acc.data(), o.d.data() + o.db.off, o.db.ld, o.u.data() + o.ub.off,
                          o.ub.ld, s.N, s.cols, s.r, 0.75f);
  omp_set_num_threads(saved);
  out.insert(out.end(), proj.begin(), proj.end());
  out.insert(out.end(), acc.begin(), acc.end());
  return out;
}

// Every element has one owner and one order: the same bits for any thread count (the outer
// accumulation cuts its column tiles by the team's size), and for a repeated call. Shapes: many
// rows; one long row (the rank update's column blocks over threads); many k tiles.
TEST_P(SimdLora, IdenticalBitsForAnyThreadCount) {
  for (const Shape& s : {Shape{many_rows(), 17, 1031}, Shape{1, 16, 4100}, Shape{70, 300, 33}}) {
    const Operands o(s, 7);
    const std::vector<float> one = run_all(k(), s, o, 1);
    expect_identical(where(GetParam(), s) + ": 1 thread, repeated", run_all(k(), s, o, 1), one);
    expect_identical(where(GetParam(), s) + ": 2 threads vs 1", run_all(k(), s, o, 2), one);
    expect_identical(where(GetParam(), s) + ": 3 threads vs 1", run_all(k(), s, o, 3), one);
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, SimdLora, ::testing::ValuesIn(all_targets()), param_name);

class SimdLoraBf16 : public ::testing::TestWithParam<std::string> {
 protected:
  const Bf16Kernels& k() const { return bf16_kernels_named(GetParam()); }
};

// The bf16 rank update gives the bits of the fp32 table's update of the widened block rounded once
// (the columns around the block untouched), within one rounding of the double reference, and the
// same bits for 1, 2 and 3 threads.
TEST_P(SimdLoraBf16, RankUpdateRoundsTheFp32ResultOnce) {
  const KernelTable& f32 = fp32_table_of(GetParam());
  unsigned seed = 600;
  for (const Shape& s : ragged_shapes()) {
    const Operands o(s, seed);
    const float scale = scale_of(seed++);
    const std::vector<bf16> out0 = round_bf16(o.out);
    auto update = [&](int threads) {
      const int saved = omp_get_max_threads();
      omp_set_num_threads(threads);
      std::vector<bf16> got = out0;
      k().lora_rank_update(got.data() + o.ob.off, o.ob.ld, o.u.data() + o.ub.off, o.ub.ld,
                           o.w.data(), s.N, s.r, s.cols, scale);
      omp_set_num_threads(saved);
      return got;
    };
    const std::vector<bf16> got = update(1);
    std::vector<float> wide = widen_bf16(out0);
    f32.lora_rank_update(wide.data() + o.ob.off, o.ob.ld, o.u.data() + o.ub.off, o.ub.ld,
                         o.w.data(), s.N, s.r, s.cols, scale);
    const std::string at = where(GetParam(), s);
    expect_same_bf16("bits of " + std::string(f32.target) + "'s, rounded: " + at, got,
                     round_bf16(wide));
    // Within one rounding to bf16 of the fp32 bound (bf16_rounding.h).
    const Reference r = rank_update_reference(o, s, scale, widen_bf16(out0));
    const std::vector<double> ref = part(o.ob, r.ref, true);
    std::vector<double> bound = part(o.ob, r.mag, true);
    for (double& x : bound) x *= gamma(s.r + 2.0);
    expect_within("bound: " + at, part(o.ob, widen_bf16(got), true), ref,
                  plus_bf16_rounding(ref, bound));
    if (s.N == many_rows() && s.r == 17 && s.cols == 1031) {
      expect_same_bf16("2 threads vs 1: " + at, update(2), got);
      expect_same_bf16("3 threads vs 1: " + at, update(3), got);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, SimdLoraBf16, ::testing::ValuesIn(all_bf16_tables()), param_name);

}  // namespace
}  // namespace llmcpu::simd_test
