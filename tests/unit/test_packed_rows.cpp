// Packed rows (Model::forward_backward with starts; core/model/packing.h): a row of several
// examples gives the loss and every parameter gradient of its examples run one by one, each as a
// batch of one sequence of its own length, with loss scales n / (B T) so that the mean over the
// packed batch is the sum of theirs. Each position's target is the next token of its example, and
// an example's last position predicts a fixed token in both runs, so every loss term depends on
// its own example alone. In fp32 both runs compute the same sums in other orders (the attention's
// blocks, the gradients' sums over tokens): they agree within 1e-6 relative (each tensor's
// 2-norm, as core/verify/verify.h compares), where an example that saw its neighbour, or a
// position counted from the row's start, moves the results by 1e-2 and more (checked below).
// Cases: the Llama family (grouped-query, llama3 rope scaling), Mistral with a sliding window
// shorter than the examples, Gemma 3 (sliding and full layers with two rope tables), and GPT-2's
// learned positions. Also: every --recompute mode gives the packed pass's bits; bf16 packed rows
// within verify.h's bf16 limits of the fp32 examples; starts that are not a packing and a device
// plugin are refused; rows of one example each are the pass without starts, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/model/llama_config.h"
#include "core/model/model.h"
#include "core/util/rng.h"
#include "core/verify/verify.h"
#include "simd/error.h"
#include "tests/unit/llama_files.h"

namespace llmcpu {
namespace {

using nlohmann::json;

constexpr int kV = 311, kT = 24;
constexpr int kLast = 7;  // the target of each example's last position
// Two rows of examples: lengths 1 (alone), past the rope tables' first rows, a whole row.
const std::vector<std::vector<int>> kRows = {{7, 1, 11, 5}, {9, 1, 1, 13}};

struct Batch {
  int B, T;
  std::vector<int> inputs, targets, starts;
};

// kRows' packing of random tokens, targets within each example.
Batch packed_batch(const std::vector<std::vector<int>>& rows, int T, int V) {
  Batch b{int(rows.size()), T, {}, {}, {}};
  Rng rng(11);
  for (const std::vector<int>& lengths : rows) {
    int t0 = 0;
    for (int n : lengths) {
      for (int t = t0; t < t0 + n; ++t) {
        b.inputs.push_back(int(rng.below(uint64_t(V))));
        b.starts.push_back(t0);
      }
      for (int t = t0; t < t0 + n; ++t) {
        b.targets.push_back(t + 1 < t0 + n ? b.inputs[b.inputs.size() - size_t(t0 + n - t - 1)]
                                           : kLast);
      }
      t0 += n;
    }
    EXPECT_EQ(t0, T) << "a row's lengths must fill it";
  }
  return b;
}

struct Pass {
  float loss;
  std::vector<float> grads;
};

Pass packed_pass(Model& m, const Batch& b, Recompute r = Recompute::kNone, bool packed = true) {
  m.plan_batch(b.B, b.T, {.recompute = r});
  m.zero_grad();
  const float loss = m.forward_backward(b.inputs.data(), b.targets.data(), b.B, b.T, 1.0f, nullptr,
                                        packed ? b.starts.data() : nullptr);
  return {loss, std::vector<float>(m.grads_flat(), m.grads_flat() + m.num_parameters())};
}

// Each example of b as a batch of one sequence, its loss and gradients weighted by n / (B T).
Pass separate_passes(Model& m, const Batch& b) {
  const size_t BT = b.inputs.size();
  m.zero_grad();
  double loss = 0;
  for (size_t i = 0; i < BT;) {
    size_t n = 1;
    while (i + n < BT && b.starts[i + n] == b.starts[i] && (i + n) % size_t(b.T) != 0) ++n;
    const float scale = float(n) / float(BT);
    m.plan_batch(1, int(n));
    loss += double(scale) *
            m.forward_backward(b.inputs.data() + i, b.targets.data() + i, 1, int(n), scale);
    i += n;
  }
  return {float(loss), std::vector<float>(m.grads_flat(), m.grads_flat() + m.num_parameters())};
}

// The largest relative error of the loss and of any gradient tensor (verify.h's comparison).
std::pair<double, std::string> worst_error(const Model& m, const Pass& got, const Pass& ref) {
  std::pair<double, std::string> worst{
      compare_tensors("loss", &got.loss, &ref.loss, 1, 0).rel_error, "loss"};
  double all2 = 0;
  for (float g : ref.grads) all2 += double(g) * double(g);
  const double floor = 1.1920929e-7 * std::sqrt(all2);
  const ParameterLayout& layout = m.layout();
  for (int i = 0; i < kNumTensorRoles; ++i) {
    if (layout.size(i) == 0) continue;
    const TensorComparison c =
        compare_tensors(layout.name(i), got.grads.data() + layout.offset(i),
                        ref.grads.data() + layout.offset(i), layout.size(i), 0, floor);
    if (!(c.rel_error <= worst.first)) worst = {c.rel_error, c.name};
  }
  return worst;
}

ModelConfig llama_config(const json& extra = json::object()) {
  json cfg = {{"model_type", "llama"},
              {"hidden_size", 48},
              {"intermediate_size", 80},
              {"num_hidden_layers", 3},
              {"num_attention_heads", 6},
              {"num_key_value_heads", 2},
              {"max_position_embeddings", 64},
              {"vocab_size", kV},
              {"rms_norm_eps", 1e-5},
              {"tie_word_embeddings", false},
              {"rope_scaling",
               {{"rope_type", "llama3"},
                {"factor", 4.0},
                {"low_freq_factor", 1.0},
                {"high_freq_factor", 4.0},
                {"original_max_position_embeddings", 16}}}};
  cfg.update(extra);
  return read_llama_config(cfg, "config.json");
}

ModelConfig gpt2_config() {
  return {.max_seq_len = 64,
          .vocab_size = kV,
          .padded_vocab_size = 384,
          .num_layers = 2,
          .num_heads = 4,
          .channels = 64};
}

// The configurations, and each model's weights (random, every op mattering).
std::vector<std::pair<std::string, ModelConfig>> configs() {
  return {
      {"llama", llama_config()},
      {"mistral window 5",
       llama_config({{"model_type", "mistral"}, {"sliding_window", 5}, {"rope_scaling", nullptr}})},
      {"gemma3", llama_config({{"model_type", "gemma3_text"},
                               {"head_dim", 16},
                               {"num_attention_heads", 4},
                               {"sliding_window", 4},
                               {"sliding_window_pattern", 2},
                               {"rope_local_base_freq", 100.0},
                               {"rope_scaling", nullptr}})},
      {"gpt2", gpt2_config()}};
}

std::unique_ptr<Model> model_of(const ModelConfig& c, Precision p = Precision::kFp32) {
  auto m = std::make_unique<Model>(c, active_kernels(), p);
  const std::vector<float> w = testing::random_llama_weights(c, 5);
  std::copy(w.begin(), w.end(), m->params_flat());
  return m;
}

TEST(PackedRows, EqualTheirExamplesOneByOne) {
  for (const auto& [name, c] : configs()) {
    SCOPED_TRACE(name);
    const Batch b = packed_batch(kRows, kT, kV);
    auto m = model_of(c);
    const Pass packed = packed_pass(*m, b), separate = separate_passes(*m, b);
    const auto [error, where] = worst_error(*m, packed, separate);
    EXPECT_LE(error, 1e-6) << where;
    // The same rows unpacked (every token sees the row before it, positions from the row's
    // start) are far from the examples: the comparison above can fail.
    const auto [apart, what] =
        worst_error(*m, packed_pass(*m, b, Recompute::kNone, false), separate);
    EXPECT_GT(apart, 1e-2) << what;
  }
}

TEST(PackedRows, EveryRecomputeModeGivesTheSameBits) {
  for (const auto& [name, c] : configs()) {
    SCOPED_TRACE(name);
    const Batch b = packed_batch(kRows, kT, kV);
    auto m = model_of(c);
    const Pass plain = packed_pass(*m, b);
    for (Recompute r : {Recompute::kGelu, Recompute::kAllPointwise, Recompute::kLayers}) {
      const Pass again = packed_pass(*m, b, r);
      EXPECT_EQ(again.loss, plain.loss) << recompute_name(r);
      EXPECT_EQ(again.grads, plain.grads) << recompute_name(r);
    }
  }
}

// Rows of one example each (starts all 0) are the pass without starts.
TEST(PackedRows, OneExamplePerRowIsThePlainPass) {
  for (const auto& [name, c] : configs()) {
    SCOPED_TRACE(name);
    Batch b = packed_batch({{kT}, {kT}}, kT, kV);
    auto m = model_of(c);
    const Pass packed = packed_pass(*m, b), plain = packed_pass(*m, b, Recompute::kNone, false);
    EXPECT_EQ(packed.loss, plain.loss);
    EXPECT_EQ(packed.grads, plain.grads);
  }
}

// bf16 packed rows against the fp32 examples within verify.h's bf16 limits (their loss by the
// logits' limit).
TEST(PackedRows, Bf16WithinTheBf16Limits) {
  for (const auto& [name, c] : configs()) {
    SCOPED_TRACE(name);
    const Batch b = packed_batch(kRows, kT, kV);
    auto m32 = model_of(c);
    auto m16 = model_of(c, Precision::kBf16);
    const Pass separate = separate_passes(*m32, b), packed = packed_pass(*m16, b);
    const VerifyTolerances& tol = bf16_tolerances(c);
    EXPECT_LE(compare_tensors("loss", &packed.loss, &separate.loss, 1, 0).rel_error, tol.logits);
    const auto [error, where] = worst_error(*m32, packed, separate);
    EXPECT_LE(error, tol.grads) << where;
  }
}

// Masked targets (-1: chat data's prompts and padding). The training pass runs only the counted
// rows through the head (Model::head); planned with keep_logits it runs every row, the masked ones
// with no loss and no gradient. Both give the same gradients but for the order of fp32 sums (the
// head's weight gradient sums over fewer rows): within 1e-6 as above, in fp32 and bf16. The loss is
// the mean over the counted targets of -log softmax, computed here in double from the kept logits.
TEST(PackedRows, MaskedTargetsSkipTheHeadAndCountOnlyTheirOwn) {
  for (const auto& [name, c] : configs()) {
    for (const Precision p : {Precision::kFp32, Precision::kBf16}) {
      SCOPED_TRACE(name + (p == Precision::kBf16 ? " bf16" : " fp32"));
      Batch b = packed_batch(kRows, kT, kV);
      size_t counted = 0;
      for (size_t i = 0; i < b.targets.size(); ++i) {
        if (i % 3 != 0 || i < size_t(kT) / 2) b.targets[i] = -1;
        counted += b.targets[i] >= 0;
      }
      auto m = model_of(c, p);
      const Pass skipped = packed_pass(*m, b);
      m->plan_batch(b.B, b.T, {.keep_logits = true});
      m->zero_grad();
      const float kept_loss = m->forward_backward(b.inputs.data(), b.targets.data(), b.B, b.T,
                                                  1.0f, nullptr, b.starts.data());
      const Pass kept{kept_loss,
                      std::vector<float>(m->grads_flat(), m->grads_flat() + m->num_parameters())};
      const auto [error, where] = worst_error(*m, skipped, kept);
      EXPECT_LE(error, 1e-6) << where;
      double total = 0;
      const int Vp = c.padded_vocab_size;
      for (size_t i = 0; i < b.targets.size(); ++i) {
        if (b.targets[i] < 0) continue;
        const float* z = m->logits() + i * Vp;
        double mx = z[0], sum = 0;
        for (int v = 1; v < kV; ++v) mx = std::max(mx, double(z[v]));
        for (int v = 0; v < kV; ++v) sum += std::exp(double(z[v]) - mx);
        total += mx + std::log(sum) - double(z[b.targets[i]]);
      }
      const double mean = total / double(counted);
      EXPECT_NEAR(skipped.loss, mean, 1e-6 * std::fabs(mean));
      EXPECT_NEAR(kept.loss, mean, 1e-6 * std::fabs(mean));
    }
  }
}

TEST(PackedRows, StartsThatAreNotAPackingAreRefused) {
  const ModelConfig c = llama_config();
  auto m = model_of(c);
  Batch b = packed_batch(kRows, kT, kV);
  m->plan_batch(b.B, b.T);
  const auto message = [&](std::vector<int> starts) {
    try {
      m->forward(b.inputs.data(), b.targets.data(), b.B, b.T, starts.data());
    } catch (const ShapeError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::vector<int> s = b.starts;
  s[kT + 3] = 2;  // row 1, token 3: neither its predecessor's start (0) nor 3
  EXPECT_EQ(message(s),
            "starts[row 1, token 3] = 2: expected 0 (the example of token 2) or 3 "
            "(a new example)");
  s = b.starts;
  s[kT] = 5;
  EXPECT_EQ(message(s), "starts[row 1, token 0] = 5: expected 0 (a row begins an example)");
}

// A device that owns blocks and does nothing: enough to be attached.
class IdleDevice final : public BlockDevice {
 public:
  std::string name() const override { return "idle"; }
  llmcpu_memory_plan plan(const llmcpu_model_desc&) override {
    llmcpu_memory_plan p{};
    p.struct_size = sizeof p;
    p.fits = p.all_fits = 1;
    return p;
  }
  void configure(const llmcpu_model_desc&, const float*) override {}
  void set_parameters(const float*) override {}
  void set_moments(const float*, const float*) override {}
  void read_state(float*, float*, float*, float*) override {}
  void forward(const llmcpu_forward_args&) override {}
  void backward(const float*, float*) override {}
  void zero_grad() override {}
  double grad_sum_squares() override { return 0; }
  void adamw_step(const scalar::AdamWStep&, float) override {}
  llmcpu_offload_report report() override { return {}; }
  std::string schedule() override { return ""; }
};

TEST(PackedRows, ADevicePluginIsRefused) {
  const Batch b = packed_batch(kRows, kT, kV);
  auto m = model_of(gpt2_config());
  m->plan_batch(b.B, b.T);
  m->attach_device(std::make_unique<IdleDevice>(), OffloadLayers{.blocks = 1}, 0);
  try {
    m->forward_backward(b.inputs.data(), b.targets.data(), b.B, b.T, 1.0f, nullptr,
                        b.starts.data());
    FAIL() << "packed rows ran with a device";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("packed rows are not supported with a device plugin"), 0u)
        << e.what();
  }
}

}  // namespace
}  // namespace llmcpu
