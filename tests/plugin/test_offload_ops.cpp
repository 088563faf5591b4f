// Every offloaded op, run through the offload kernel table (the trampolines into the plugin),
// against the scalar CPU kernel from the same inputs, compared by normalized error ||ours - cpu|| /
// ||cpu||. Bounds come from fp32 rounding: u = 2^-24 times the reduction length (a first-order
// bound for any summation order), times 4 for the exp/division of the softmax; a wrong element or a
// missed "+=" is O(1). Also: weights served from the device copy follow weights_changed, and
// report() counts the ops. Runs on the fake plain-loop plugin always and on the Vulkan plugin where
// it is built; the latter is skipped, with the plugin's own message, only when it finds no Vulkan
// device at all.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/plugin/offload.h"
#include "core/util/rng.h"
#include "simd/error.h"
#include "simd/kernels.h"
#include "tests/plugin/plugin_paths.h"

namespace llmcpu {
namespace {

constexpr double kU = 0x1p-24;  // fp32 unit roundoff

std::vector<float> random_vector(size_t n, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = float(scale * rng.normal());
  return v;
}

double normalized_error(const std::vector<float>& ours, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(ours[i]) - ref[i];
    num += d * d;
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num) / std::sqrt(den);
}

#define EXPECT_CLOSE(ours, ref, bound)                                                        \
  do {                                                                                        \
    const double err_ = normalized_error(ours, ref);                                          \
    EXPECT_LE(err_, bound) << #ours " vs " #ref " (normalized error, bound " << bound << ")"; \
  } while (0)

std::vector<std::string> plugins_under_test() {
  std::vector<std::string> paths = {testing::fake_plugin("cpu")};
#ifdef LLMCPU_VULKAN_PLUGIN
  paths.push_back(LLMCPU_VULKAN_PLUGIN);
#endif
  return paths;
}

class OffloadOps : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    // A device that is simply not there skips; any other refusal is a failure.
    try {
      PluginLibrary::load(GetParam());
    } catch (const FileError& e) {
      const std::string m = e.what();
      if (m.find("no usable device") != std::string::npos) GTEST_SKIP() << m;
      FAIL() << m;
    }
    const OffloadOutcome r = enable_offload(GetParam());
    ASSERT_TRUE(r.active) << r.message;
    k_ = &offload_kernels(cpu_);
    ASSERT_NE(k_->matmul_forward, cpu_.matmul_forward) << "matmul is not routed to the plugin";
  }
  void TearDown() override { disable_offload(); }

  const KernelTable& cpu_ = scalar_kernels();
  const KernelTable* k_ = nullptr;
};

struct MatmulShape {
  size_t N;
  int C, OC;
};
// Ragged sizes, and GPT-2 124M's qkv and fc shapes on a few rows.
constexpr MatmulShape kMatmulShapes[] = {
    {1, 8, 8}, {7, 24, 40}, {33, 65, 129}, {64, 768, 2304}, {64, 3072, 768}};

TEST_P(OffloadOps, MatmulForward) {
  for (const MatmulShape& s : kMatmulShapes) {
    SCOPED_TRACE("N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) +
                 " OC=" + std::to_string(s.OC));
    const auto inp = random_vector(s.N * s.C, 1), w = random_vector((size_t)s.OC * s.C, 2, 0.05),
               b = random_vector(s.OC, 3);
    for (const float* bias : {b.data(), (const float*)nullptr}) {
      std::vector<float> ours(s.N * s.OC, NAN), ref(s.N * s.OC);
      k_->matmul_forward(ours.data(), inp.data(), w.data(), bias, s.N, s.C, s.OC);
      cpu_.matmul_forward(ref.data(), inp.data(), w.data(), bias, s.N, s.C, s.OC);
      EXPECT_CLOSE(ours, ref, 2 * kU * (s.C + 1));
    }
  }
}

TEST_P(OffloadOps, MatmulBackward) {
  for (const MatmulShape& s : kMatmulShapes) {
    SCOPED_TRACE("N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) +
                 " OC=" + std::to_string(s.OC));
    const auto dout = random_vector(s.N * s.OC, 4), inp = random_vector(s.N * s.C, 5),
               w = random_vector((size_t)s.OC * s.C, 6, 0.05);
    // dinp is overwritten (start it with garbage); dweight and dbias accumulate.
    std::vector<float> dinp(s.N * s.C, 1e3f), dw = random_vector((size_t)s.OC * s.C, 7),
                                              db = random_vector(s.OC, 8);
    std::vector<float> rdinp(s.N * s.C), rdw = dw, rdb = db;
    k_->matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), s.N,
                        s.C, s.OC);
    cpu_.matmul_backward(rdinp.data(), rdw.data(), rdb.data(), dout.data(), inp.data(), w.data(),
                         s.N, s.C, s.OC);
    EXPECT_CLOSE(dinp, rdinp, 2 * kU * s.OC);
    EXPECT_CLOSE(dw, rdw, 2 * kU * (s.N + 1));
    EXPECT_CLOSE(db, rdb, 2 * kU * (s.N + 1));
    // Without dinp and dbias (the engine skips them where nothing needs them).
    std::vector<float> dw2 = random_vector((size_t)s.OC * s.C, 9), rdw2 = dw2;
    k_->matmul_backward(nullptr, dw2.data(), nullptr, dout.data(), inp.data(), w.data(), s.N, s.C,
                        s.OC);
    cpu_.matmul_backward(rdinp.data(), rdw2.data(), rdb.data(), dout.data(), inp.data(), w.data(),
                         s.N, s.C, s.OC);
    EXPECT_CLOSE(dw2, rdw2, 2 * kU * (s.N + 1));
  }
}

struct AttentionShape {
  int B, T, C, NH;
};
constexpr AttentionShape kAttentionShapes[] = {
    {1, 1, 8, 2}, {2, 17, 48, 4}, {3, 9, 60, 5}, {2, 64, 768, 12}};

TEST_P(OffloadOps, AttentionForwardAndBackward) {
  for (const AttentionShape& s : kAttentionShapes) {
    SCOPED_TRACE("B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) +
                 " C=" + std::to_string(s.C) + " NH=" + std::to_string(s.NH));
    const size_t BT = (size_t)s.B * s.T, A = (size_t)s.B * s.NH * s.T * s.T;
    const int hs = s.C / s.NH;
    const double bound = 4 * kU * (hs + s.T + 4);
    const auto qkv = random_vector(BT * 3 * s.C, 10);
    std::vector<float> out(BT * s.C, NAN), att(A, NAN), rout(BT * s.C), ratt(A);
    k_->attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
    cpu_.attention_forward(rout.data(), ratt.data(), qkv.data(), s.B, s.T, s.C, s.NH);
    EXPECT_CLOSE(out, rout, bound);
    EXPECT_CLOSE(att, ratt, bound);

    const auto dout = random_vector(BT * s.C, 11);
    std::vector<float> dqkv(BT * 3 * s.C, 1e3f), rdqkv(BT * 3 * s.C),
        scratch((size_t)s.B * s.NH * s.T);
    k_->attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), ratt.data(), s.B,
                           s.T, s.C, s.NH);
    cpu_.attention_backward(rdqkv.data(), scratch.data(), dout.data(), qkv.data(), ratt.data(), s.B,
                            s.T, s.C, s.NH);
    EXPECT_CLOSE(dqkv, rdqkv, bound);
  }
}

// A weight inside the array given to set_weights may come from the device copy: it must follow the
// host after weights_changed, and report() must count the ops run and the bytes they moved.
TEST_P(OffloadOps, ResidentWeightsFollowWeightsChanged) {
  const size_t N = 5;
  const int C = 32, OC = 48;
  std::vector<float> params = random_vector((size_t)OC * C + OC, 12, 0.1);
  ASSERT_EQ(offload_set_weights(params.data(), params.size()), "");
  const float* w = params.data();
  const float* b = params.data() + (size_t)OC * C;
  const auto inp = random_vector(N * C, 13);
  std::vector<float> ours(N * OC), ref(N * OC);
  llmcpu_offload_report rep;
  ASSERT_TRUE(offload_report(&rep));  // start counting here
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("after " + std::to_string(round) + " weight updates");
    k_->matmul_forward(ours.data(), inp.data(), w, b, N, C, OC);
    cpu_.matmul_forward(ref.data(), inp.data(), w, b, N, C, OC);
    EXPECT_CLOSE(ours, ref, 2 * kU * (C + 1));
    for (float& x : params) x = 0.5f * x + 0.01f;  // an "optimizer step"
    offload_weights_changed();
  }
  ASSERT_TRUE(offload_report(&rep));
  // Three ops (the weight refreshes are not ops); per round the input goes up and the output comes
  // down (weight and bias are resident), and weights_changed sends the whole array up again.
  EXPECT_EQ(rep.calls, 3u);
  EXPECT_EQ(rep.bytes_up, 3 * (N * C + params.size()) * sizeof(float));
  EXPECT_EQ(rep.bytes_down, 3 * N * OC * sizeof(float));
  if (GetParam() == testing::fake_plugin("cpu")) {
    // The fake plugin's figures are made from its byte and op counts (fake_plugin.cpp: 1 GB/s,
    // 0.01 ms per op, half of the copying hidden): the host must hand them over field by field.
    EXPECT_EQ(rep.copy_ms, double(rep.bytes_up + rep.bytes_down) / 1e6);
    EXPECT_EQ(rep.compute_ms, 0.01 * 3);
    EXPECT_EQ(rep.hidden_fraction, 0.5);
    EXPECT_EQ(rep.wall_ms, rep.compute_ms + 0.5 * rep.copy_ms);
  } else {
    // Copies and compute ran, so a device with timestamps (lavapipe has them) measured time in
    // both. The hidden fraction is checked against the raw timestamps in vulkan_ops_test.cpp.
    EXPECT_GT(rep.copy_ms, 0.0);
    EXPECT_GT(rep.compute_ms, 0.0);
    EXPECT_GT(rep.wall_ms, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Plugins, OffloadOps, ::testing::ValuesIn(plugins_under_test()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.find("fake") != std::string::npos
                                      ? std::string("fake")
                                      : std::string("vulkan");
                         });

// Without a plugin the hooks do nothing, and a table made while one was active computes on the CPU.
TEST(OffloadOff, HooksAreNoOpsAndTheTableFallsBackToTheCpu) {
  ASSERT_TRUE(enable_offload(testing::fake_plugin("cpu")).active);
  const KernelTable& k = offload_kernels(scalar_kernels());
  disable_offload();
  EXPECT_FALSE(offload_active());
  offload_weights_changed();
  llmcpu_offload_report r;
  EXPECT_FALSE(offload_report(&r));
  float p[4] = {};
  EXPECT_EQ(offload_set_weights(p, 4), "");
  EXPECT_EQ(&offload_kernels(scalar_kernels()), &k);
  const auto inp = random_vector(3 * 8, 14), w = random_vector(8 * 8, 15);
  std::vector<float> ours(3 * 8), ref(3 * 8);
  k.matmul_forward(ours.data(), inp.data(), w.data(), nullptr, 3, 8, 8);
  scalar_kernels().matmul_forward(ref.data(), inp.data(), w.data(), nullptr, 3, 8, 8);
  EXPECT_EQ(ours, ref);  // the very same CPU kernel
}

}  // namespace
}  // namespace llmcpu
