// Every offloaded op, run on a plugin's device (OffloadDevice, what the offload executor calls),
// against the scalar CPU kernel from the same inputs, compared by normalized error ||ours - cpu|| /
// ||cpu||. Bounds come from fp32 rounding: u = 2^-24 times the reduction length (a first-order
// bound for any summation order), times 4 for the exp/division of the softmax; a wrong element or a
// missed "+=" is O(1). Also: weights served from the device copy follow weights_changed, and
// report() counts the ops; a model with a plugin computes what a model without one does, sends
// every matmul and attention of its layers to the device, refreshes the device's weights after an
// update by itself, and leaves a second model in the process alone. Runs on the fake plain-loop
// plugin always and on the Vulkan plugin where
// it is built; the latter is skipped, with the plugin's own message, only when it finds no Vulkan
// device at all.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/model/gpt2.h"
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
    OffloadOutcome r;
    device_ = OffloadDevice::open(GetParam(), &no_weights_, 1, &r);
    ASSERT_TRUE(r.active) << r.message;
    ASSERT_TRUE(device_->has_matmul() && device_->has_attention());
  }

  const KernelTable& cpu_ = scalar_kernels();
  float no_weights_ = 0;  // the ops below pass their weights, which the device uploads per call
  std::unique_ptr<OffloadDevice> device_;
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
      device_->matmul_forward(ours.data(), inp.data(), w.data(), bias, s.N, s.C, s.OC);
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
    device_->matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(),
                             s.N, s.C, s.OC);
    cpu_.matmul_backward(rdinp.data(), rdw.data(), rdb.data(), dout.data(), inp.data(), w.data(),
                         s.N, s.C, s.OC);
    EXPECT_CLOSE(dinp, rdinp, 2 * kU * s.OC);
    EXPECT_CLOSE(dw, rdw, 2 * kU * (s.N + 1));
    EXPECT_CLOSE(db, rdb, 2 * kU * (s.N + 1));
    // Without dinp and dbias (the engine skips them where nothing needs them).
    std::vector<float> dw2 = random_vector((size_t)s.OC * s.C, 9), rdw2 = dw2;
    device_->matmul_backward(nullptr, dw2.data(), nullptr, dout.data(), inp.data(), w.data(), s.N,
                             s.C, s.OC);
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
    device_->attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
    cpu_.attention_forward(rout.data(), ratt.data(), qkv.data(), s.B, s.T, s.C, s.NH);
    EXPECT_CLOSE(out, rout, bound);
    EXPECT_CLOSE(att, ratt, bound);

    const auto dout = random_vector(BT * s.C, 11);
    std::vector<float> dqkv(BT * 3 * s.C, 1e3f), rdqkv(BT * 3 * s.C),
        scratch((size_t)s.B * s.NH * s.T);
    device_->attention_backward(dqkv.data(), dout.data(), qkv.data(), ratt.data(), s.B, s.T, s.C,
                                s.NH);
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
  OffloadOutcome opened;
  device_ = OffloadDevice::open(GetParam(), params.data(), params.size(), &opened);
  ASSERT_TRUE(opened.active) << opened.message;
  const float* w = params.data();
  const float* b = params.data() + (size_t)OC * C;
  const auto inp = random_vector(N * C, 13);
  std::vector<float> ours(N * OC), ref(N * OC);
  device_->report();  // start counting here
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("after " + std::to_string(round) + " weight updates");
    device_->matmul_forward(ours.data(), inp.data(), w, b, N, C, OC);
    cpu_.matmul_forward(ref.data(), inp.data(), w, b, N, C, OC);
    EXPECT_CLOSE(ours, ref, 2 * kU * (C + 1));
    for (float& x : params) x = 0.5f * x + 0.01f;  // an "optimizer step"
    device_->weights_changed();
  }
  const llmcpu_offload_report rep = device_->report();
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

// A small model (L=2 NH=4 C=32 V=50 maxT=16), GPT-2-initialised, planned for 2 x 16.
std::unique_ptr<Gpt2> small_model(Precision precision = Precision::kFp32) {
  ModelConfig c;
  c.max_seq_len = 16;
  c.vocab_size = 50;
  c.padded_vocab_size = 128;
  c.num_layers = 2;
  c.num_heads = 4;
  c.channels = 32;
  auto m = std::make_unique<Gpt2>(c, scalar_kernels(), precision, &scalar_bf16_kernels());
  init_gpt2(*m, 5);
  m->plan_batch(2, 16, {.keep_logits = true});
  return m;
}

std::vector<float> logits_of(const Gpt2& m) {
  const size_t n = (size_t)m.batch() * m.seq_len() * m.config().padded_vocab_size;
  return std::vector<float>(m.logits(), m.logits() + n);
}

// The offload executor sends each layer's four matmuls and attention, and the head's matmul, to
// the device, forward and backward; the model refreshes the device's weights after an update by
// itself; a second model in the same process, without a plugin, is not touched by the first's.
TEST_P(OffloadOps, ModelWithPluginMatchesModelWithout) {
  auto dev = small_model(), cpu = small_model();
  const OffloadOutcome r = dev->enable_offload(GetParam());
  ASSERT_TRUE(r.active) << r.message;
  EXPECT_FALSE(cpu->offload_active());
  llmcpu_offload_report rep;
  EXPECT_FALSE(cpu->offload_report(&rep));
  ASSERT_TRUE(dev->offload_report(&rep));  // start counting here

  const int B = 2, T = 16, L = dev->config().num_layers;
  std::vector<int> in(B * T), tg(B * T);
  for (int i = 0; i < B * T; ++i) in[i] = (7 * i + 3) % 50, tg[i] = (11 * i + 1) % 50;
  // The bounds of the single ops above at this model's sizes (reductions of at most 4*C = 128
  // terms, or B*T = 32 rows for weight gradients), with room for the two layers they pass through.
  const double bound = 16 * kU * 128;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    for (Gpt2* m : {dev.get(), cpu.get()}) {
      m->zero_grad();
      m->forward_backward(in.data(), tg.data(), B, T);
    }
    EXPECT_CLOSE(logits_of(*dev), logits_of(*cpu), bound);
    const size_t P = dev->num_parameters();
    EXPECT_CLOSE(std::vector<float>(dev->grads_flat(), dev->grads_flat() + P),
                 std::vector<float>(cpu->grads_flat(), cpu->grads_flat() + P), bound);
    ASSERT_TRUE(dev->offload_report(&rep));
    EXPECT_EQ(rep.calls, 2u * (5 * L + 1)) << "ops that reached the device in one step";
    // An "optimizer step" on both: the device must compute with the new weights next round.
    for (Gpt2* m : {dev.get(), cpu.get()}) {
      float* w = m->weights_for_update().master;
      for (size_t i = 0; i < P; ++i) w[i] -= 0.5f * m->grads_flat()[i];
    }
  }
}

// The plugin computes in fp32: a bf16 model refuses it and stays on the CPU, saying why.
TEST_P(OffloadOps, Bf16ModelRefusesThePlugin) {
  auto m = small_model(Precision::kBf16);
  const OffloadOutcome r = m->enable_offload(GetParam());
  EXPECT_FALSE(r.active);
  EXPECT_FALSE(m->offload_active());
  EXPECT_EQ(r.message, "offload: " + GetParam() +
                           ": the plugin computes in fp32 only, not bf16; running on the CPU");
}

}  // namespace
}  // namespace llmcpu
