// The Vulkan plugin at layer level (ABI version 2), through the engine's own C++ wrapper
// (core/plugin/offload.h), on lavapipe or a real GPU:
//   - the copy-compute pipeline's order: the submissions of a forward and a backward pass, with the
//     semaphore values each waited for, against the pipeline's design (stream.h): chunk i+1's
//     upload and chunk i-1's download are in flight while chunk i computes, and each stage waits
//     for exactly what it must;
//   - the device's AdamW against the CPU's (simd/scalar/adamw.h) on the device's own gradients:
//     the same bits where the device has shaderFloat64 (sqrt and division then round once, as the
//     CPU's), and within 2 ulps otherwise;
//   - the device's part of the gradient norm against the gradients read back;
//   - read_state/set_moments round trips, and the plan's numbers.
// The model's numbers against PyTorch are the CLI tests' (test_plugin_cli.cpp) and the fixtures'.
// Skips only where the plugin finds no Vulkan device at all.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/model/parameters.h"
#include "core/optim/adamw.h"
#include "core/plugin/offload.h"
#include "core/util/rng.h"
#include "plugins/vulkan/device.h"
#include "plugins/vulkan/stream.h"
#include "simd/error.h"
#include "simd/scalar/adamw.h"

namespace llmcpu {
namespace {

// The plugin this build made, or LLMCPU_VULKAN_PLUGIN's when set: tools/gpu-check.sh runs this binary
// from a packed folder on another machine, where the build's path does not exist.
const char* plugin_path() {
  const char* env = std::getenv("LLMCPU_VULKAN_PLUGIN");
  return env && *env ? env : LLMCPU_VULKAN_PLUGIN;
}

ModelConfig small_config() {
  ModelConfig c;
  c.max_seq_len = 16;
  c.vocab_size = 97;
  c.padded_vocab_size = 128;
  c.num_layers = 3;
  c.num_heads = 2;
  c.channels = 16;
  return c;
}

class VulkanLayers : public ::testing::Test {
 protected:
  void SetUp() override {
    OffloadOutcome outcome;
    device_ = OffloadDevice::open(plugin_path(), &outcome);
    if (!device_) {
      if (outcome.message.find("no usable device") != std::string::npos) {
        GTEST_SKIP() << outcome.message;
      }
      FAIL() << outcome.message;
    }
    layout_ = std::make_unique<ParameterLayout>(config_);
    params_.resize(layout_->total());
    Rng rng(5);
    for (float& p : params_) p = float(0.05 * rng.normal());
    tokens_.resize(size_t(B_) * T_);
    targets_.resize(tokens_.size());
    for (size_t i = 0; i < tokens_.size(); ++i) {
      tokens_[i] = int(rng.below(uint64_t(config_.vocab_size)));
      targets_[i] = int(rng.below(uint64_t(config_.vocab_size)));
    }
  }

  llmcpu_model_desc desc(const OffloadLayers& layers) const {
    return make_model_desc(config_, *layout_, B_, T_, Precision::kFp32, layers, 0);
  }

  // One forward and backward pass with the device owning everything: its gradients are set.
  void run_all_pass() {
    device_->configure(desc({config_.num_layers, true}), params_.data());
    std::vector<float> losses(tokens_.size());
    llmcpu_forward_args f{};
    f.struct_size = sizeof f;
    f.logits_position = LLMCPU_LOGITS_NONE;
    f.inputs = tokens_.data();
    f.targets = targets_.data();
    f.losses = losses.data();
    f.dloss = 1.0f / float(tokens_.size());
    device_->forward(f);
    device_->backward(nullptr, nullptr);
    for (float l : losses) ASSERT_TRUE(std::isfinite(l) && l > 0) << l;
  }

  ModelConfig config_ = small_config();
  // B = 8: four chunks of two batch elements, more than the pipeline's three slots.
  int B_ = 8, T_ = 5;
  std::unique_ptr<ParameterLayout> layout_;
  std::unique_ptr<OffloadDevice> device_;
  std::vector<float> params_;
  std::vector<int> tokens_, targets_;
};

// A pass's line "forward: U0 U1 C0<U0 ..." as submissions in order, each with its waits.
struct Submission {
  char stage;
  int chunk;
  std::vector<std::pair<char, int>> waits;
};
std::vector<Submission> parse_pass(const std::string& schedule, const std::string& pass) {
  std::istringstream lines(schedule);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(pass + ": ", 0) != 0) continue;
    std::vector<Submission> out;
    std::istringstream words(line.substr(pass.size() + 2));
    std::string w;
    const std::regex token("([UCD])([0-9]+)(?:<(.*))?"), wait("([UCD])([0-9]+)");
    while (words >> w) {
      std::smatch m;
      EXPECT_TRUE(std::regex_match(w, m, token)) << w;
      Submission s{m[1].str()[0], std::stoi(m[2]), {}};
      const std::string waits = m[3];
      for (auto it = std::sregex_iterator(waits.begin(), waits.end(), wait);
           it != std::sregex_iterator(); ++it) {
        s.waits.push_back({(*it)[1].str()[0], std::stoi((*it)[2])});
      }
      out.push_back(s);
    }
    return out;
  }
  ADD_FAILURE() << "no '" << pass << "' line in:\n" << schedule;
  return {};
}

// The pipeline's design (plugins/vulkan/stream.h) with K slots over n chunks:
//   compute(i) waits upload(i), and download(i-K) (its output slot free again);
//   upload(i) waits compute(i-K) (its input slot free again); download(i) waits compute(i);
// and in submission order chunk i+1's upload comes before chunk i's compute completes (before its
// download is submitted), so the device may copy while it computes.
void expect_pipelined(const std::vector<Submission>& subs, int n, int K) {
  std::map<std::pair<char, int>, size_t> at;
  for (size_t k = 0; k < subs.size(); ++k) {
    EXPECT_TRUE(at.emplace(std::pair{subs[k].stage, subs[k].chunk}, k).second)
        << subs[k].stage << subs[k].chunk << " submitted twice";
  }
  ASSERT_EQ(subs.size(), size_t(3 * n));
  for (const Submission& s : subs) {
    std::vector<std::pair<char, int>> expected;
    if (s.stage == 'U' && s.chunk >= K) expected = {{'C', s.chunk - K}};
    if (s.stage == 'C') {
      expected = {{'U', s.chunk}};
      if (s.chunk >= K) expected.push_back({'D', s.chunk - K});
    }
    if (s.stage == 'D') expected = {{'C', s.chunk}};
    EXPECT_EQ(s.waits, expected) << s.stage << s.chunk;
    for (const auto& w : s.waits) {  // nothing waits for a stage submitted after it
      ASSERT_TRUE(at.count(w)) << w.first << w.second;
      const size_t waited = at[w], self = at[std::pair{s.stage, s.chunk}];
      EXPECT_LT(waited, self) << s.stage << s.chunk << " waits for a later one";
    }
  }
  auto pos = [&](char stage, int chunk) { return at[std::pair{stage, chunk}]; };
  for (int i = 0; i + 1 < n; ++i) {
    EXPECT_LT(pos('U', i + 1), pos('D', i)) << "upload " << i + 1 << " after download " << i;
    EXPECT_LT(pos('U', i + 1), pos('C', i + 1));
    if (i + 2 < n) {
      EXPECT_LT(pos('D', i), pos('C', i + 2)) << "download " << i << " late";
    }
  }
}

TEST_F(VulkanLayers, PassesArePipelinedOverChunksOfTheBatch) {
  const int K = vk::kSlots;
  for (const OffloadLayers layers :
       {OffloadLayers{config_.num_layers, true}, OffloadLayers{2, false}}) {
    SCOPED_TRACE(layers.describe(config_.num_layers));
    device_->configure(desc(layers), params_.data());
    const size_t BT = tokens_.size(), C = size_t(config_.channels);
    std::vector<float> residual(BT * C, 0.01f), out(BT * C), losses(BT), dres(BT * C, 1e-3f);
    llmcpu_forward_args f{};
    f.struct_size = sizeof f;
    f.logits_position = LLMCPU_LOGITS_NONE;
    f.dloss = 1.0f / float(BT);
    if (layers.all) {
      f.inputs = tokens_.data(), f.targets = targets_.data(), f.losses = losses.data();
    } else {
      f.residual_in = residual.data(), f.residual_out = out.data();
    }
    device_->report();
    device_->forward(f);
    device_->backward(layers.all ? nullptr : dres.data(), layers.all ? nullptr : dres.data());
    const std::string schedule = device_->schedule();
    const std::vector<Submission> fwd = parse_pass(schedule, "forward");
    const int n = int(fwd.size() / 3);
    ASSERT_GT(n, K) << "B = " << B_ << " should make more chunks than slots:\n" << schedule;
    expect_pipelined(fwd, n, K);
    expect_pipelined(parse_pass(schedule, "backward"), n, K);
    // What crossed: all: the tokens and targets up, the losses down; blocks: the residual and its
    // gradient, each way once.
    const llmcpu_offload_report r = device_->report();
    EXPECT_EQ(r.calls, 2u);
    if (layers.all) {
      EXPECT_EQ(r.bytes_up, 2 * BT * sizeof(int32_t));
      EXPECT_EQ(r.bytes_down, BT * sizeof(float));
    } else {
      EXPECT_EQ(r.bytes_up, 2 * BT * C * sizeof(float));
      EXPECT_EQ(r.bytes_down, 2 * BT * C * sizeof(float));
    }
  }
}

TEST_F(VulkanLayers, AdamWIsTheCpusOnTheDevicesGradients) {
  run_all_pass();
  const size_t P = params_.size();
  std::vector<float> grads(P, NAN), m(P), v(P);
  Rng rng(9);
  for (size_t i = 0; i < P; ++i) {  // moments as after a few steps
    m[i] = float(1e-3 * rng.normal());
    v[i] = float(1e-6 * std::abs(rng.normal()));
  }
  device_->set_moments(m.data(), v.data());
  device_->read_state(nullptr, grads.data(), nullptr, nullptr);
  for (size_t i = 0; i < P; ++i) ASSERT_TRUE(std::isfinite(grads[i])) << i;
  // The device's norm of its gradients against the read-back ones: fp32 sums within a block of
  // sum_squares' size (at most 4096 terms here), each term's relative error is gamma(n).
  double host = 0, abs_sum = 0;
  for (float g : grads) host += double(g) * double(g), abs_sum += double(g) * double(g);
  const double gamma = 4096 * 0x1p-24 / (1 - 4096 * 0x1p-24);
  EXPECT_NEAR(device_->grad_sum_squares(), host, gamma * abs_sum + 1e-30);

  AdamWConfig config;
  config.beta1 = 0.9, config.beta2 = 0.95, config.eps = 1e-8, config.weight_decay = 0.1;
  const double lr = 3e-4;
  const long long t = 4;
  const float grad_scale = 0.75f;
  device_->adamw_step(adamw_step_of(config, lr, t), grad_scale);
  std::vector<float> p_dev(P), m_dev(P), v_dev(P);
  device_->read_state(p_dev.data(), nullptr, m_dev.data(), v_dev.data());
  // The CPU's update of the same state: gradients scaled first, one rounding, as AdamW's pass does.
  std::vector<float> p_cpu = params_, m_cpu = m, v_cpu = v, g = grads;
  for (float& x : g) x *= grad_scale;
  scalar::adamw_update(
      p_cpu.data(), m_cpu.data(), v_cpu.data(), g.data(), P,
      scalar::AdamWStep{lr, config.beta1, config.beta2, config.eps, config.weight_decay, t});
  size_t differ = 0, beyond_two_ulps = 0;
  for (size_t i = 0; i < P; ++i) {
    EXPECT_EQ(m_dev[i], m_cpu[i]) << i;  // products and sums only: always the same
    EXPECT_EQ(v_dev[i], v_cpu[i]) << i;
    if (p_dev[i] != p_cpu[i]) ++differ;
    const double ulp = std::nextafter(std::abs(p_cpu[i]), INFINITY) - std::abs(p_cpu[i]);
    if (std::abs(double(p_dev[i]) - double(p_cpu[i])) > 2 * ulp) ++beyond_two_ulps;
  }
  EXPECT_EQ(beyond_two_ulps, 0u);
  if (vk::Device(-1, false).float64()) {
    EXPECT_EQ(differ, 0u) << "of " << P << " parameters";
  }
}

TEST_F(VulkanLayers, StateRoundTripsAndOnlyTheOwnedPartIsTouched) {
  const OffloadLayers layers{1, false};  // the last block only
  device_->configure(desc(layers), params_.data());
  const size_t P = params_.size();
  std::vector<float> m(P), v(P);
  for (size_t i = 0; i < P; ++i) m[i] = float(i), v[i] = float(2 * i);
  device_->set_moments(m.data(), v.data());
  std::vector<float> p_back(P, -1.0f), m_back(P, -1.0f), v_back(P, -1.0f), g_back(P, -1.0f);
  device_->zero_grad();
  device_->read_state(p_back.data(), g_back.data(), m_back.data(), v_back.data());
  for (const ParameterSpan& s : layout_->spans()) {
    const bool owned = device_owns(layers, config_.num_layers, s.tensor, s.layer);
    for (size_t i = s.offset; i < s.offset + s.count; ++i) {
      if (owned) {
        ASSERT_EQ(p_back[i], params_[i]) << layout_->name(s.tensor) << " " << s.layer;
        ASSERT_EQ(m_back[i], m[i]);
        ASSERT_EQ(v_back[i], v[i]);
        ASSERT_EQ(g_back[i], 0.0f);
      } else {
        ASSERT_EQ(p_back[i], -1.0f) << layout_->name(s.tensor) << " written";
        ASSERT_EQ(g_back[i], -1.0f);
      }
    }
  }
}

TEST_F(VulkanLayers, PlanCountsWhatTheLayersNeedAndTheLargestThatFits) {
  llmcpu_model_desc all = desc({config_.num_layers, true});
  const llmcpu_memory_plan whole = device_->plan(all);
  EXPECT_TRUE(whole.fits);
  EXPECT_TRUE(whole.all_fits);
  EXPECT_EQ(whole.max_layers, config_.num_layers);
  EXPECT_EQ(whole.total_bytes, whole.weight_bytes + whole.activation_bytes + whole.other_bytes);
  // Parameters, gradients and two moments of every parameter.
  EXPECT_EQ(whole.weight_bytes, 4 * params_.size() * sizeof(float));
  // Each block adds the same; a limit between two and three blocks' plans fits two.
  llmcpu_model_desc two = desc({2, false}), three = desc({3, false});
  const uint64_t t2 = device_->plan(two).total_bytes, t3 = device_->plan(three).total_bytes;
  ASSERT_LT(t2, t3);
  three.memory_limit = (t2 + t3) / 2;
  const llmcpu_memory_plan p = device_->plan(three);
  EXPECT_FALSE(p.fits);
  EXPECT_FALSE(p.all_fits);
  EXPECT_EQ(p.max_layers, 2);
  EXPECT_EQ(p.available_bytes, three.memory_limit);
  try {
    device_->configure(three, params_.data());
    ADD_FAILURE() << "a plan that does not fit was configured";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 2 blocks fit (--offload-layers 2)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace llmcpu
