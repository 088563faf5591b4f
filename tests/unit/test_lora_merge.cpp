// Merging a LoRA adapter into its base (core/lora/merge.h) and `llmcpu convert --adapter`: the
// merge adds scaling B A to exactly the rows each module is of its fused weight (q, k and v row
// blocks of qkvw in the order q|k|v, gate and up of fcw, GPT-2's whole c_attn and c_proj), found
// here from parameters.h's description of the layout rather than from the modules' own row0, and
// leaves every other element's bits alone; the values are the float64 merge rounded to fp32 once.
// The merge against PEFT's own arithmetic on the fixtures is tests/lora_merge.cmake's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/lora/merge.h"
#include "core/lora/peft_files.h"
#include "core/model/llama_config.h"
#include "simd/error.h"
#include "tests/common/process.h"
#include "tests/common/temp_files.h"
#include "tests/common/tiny_config.h"
#include "tests/unit/llama_files.h"
#include "tests/unit/lora_configs.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using testing::Outcome;
using testing::run_llmcpu;
using testing::shell_quote;

// Values of every sign and a spread of exponents, different at each index.
void fill(float* x, size_t n, float salt) {
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::ldexp(std::sin(float(i) * 0.37f + salt), int(i % 7) - 3);
  }
}

// A module's block of rows, as the layout's description places it: rows [row0, row0 + rows) of
// layer `layer`'s (out, in) slice of `role`.
struct Block {
  int role, layer;
  size_t row0, rows, in;
};

// params after `blocks` (in the adapter's module order) each get scaling B A, computed here the
// plain way: the float64 value W + scaling * sum_k B[i, k] A[k, j], rounded to fp32.
std::vector<float> expected_merge(std::vector<float> params, const ParameterLayout& layout,
                                  const LoraAdapter& a, const std::vector<Block>& blocks,
                                  double scaling) {
  const size_t r = size_t(a.options().r);
  for (size_t m = 0; m < blocks.size(); ++m) {
    const Block& b = blocks[m];
    const float* A = a.params() + a.a_offset(m);
    const float* B = a.params() + a.b_offset(m);
    float* W = params.data() + layout.offset(b.role) + size_t(b.layer) * layout.layer_size(b.role);
    for (size_t i = 0; i < b.rows; ++i) {
      for (size_t j = 0; j < b.in; ++j) {
        double sum = 0;
        for (size_t k = 0; k < r; ++k) sum += double(B[i * r + k]) * double(A[k * b.in + j]);
        float& w = W[(b.row0 + i) * b.in + j];
        w = float(double(w) + sum * scaling);
      }
    }
  }
  return params;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && differ++ == 0) first = i;
  }
  EXPECT_EQ(differ, 0u) << "first at " << first << ": " << got[first] << " against " << want[first];
}

TEST(LoraMerge, LlamaModulesAreTheirRowBlocksOfTheFusedWeights) {
  const ModelConfig c = testing::lora_llama_config(2);  // C 32, q 4 x 8 rows, k and v 2 x 8, H 48
  const ParameterLayout layout(c);
  const LoraOptions o{
      .r = 3, .alpha = 7, .targets = {"k_proj", "up_proj", "o_proj"}, .rslora = true};
  LoraAdapter a(c, o);
  fill(a.params(), a.size(), 0.5f);
  std::vector<float> params(layout.total());
  fill(params.data(), params.size(), 1.5f);
  // In the model's order, per layer: k_proj rows 32..47 of qkvw (after q's 32), o_proj all of
  // attprojw, up_proj rows 48..95 of fcw (after gate's 48).
  std::vector<Block> blocks;
  for (int l = 0; l < 2; ++l) {
    blocks.push_back({kQkvw, l, 32, 16, 32});
    blocks.push_back({kAttprojw, l, 0, 32, 32});
    blocks.push_back({kFcw, l, 48, 48, 32});
  }
  const std::vector<float> want = expected_merge(params, layout, a, blocks, 7 / std::sqrt(3.0));
  merge_adapter(params.data(), layout, c, a);
  expect_same_bits(params, want);
}

TEST(LoraMerge, Gpt2ModulesAreWholeWeights) {
  const ModelConfig c = testing::tiny_config();  // C 12, 3C 36, 4C 48
  const ParameterLayout layout(c);
  LoraAdapter a(c, LoraOptions{.r = 2, .alpha = 5, .targets = {"c_attn", "mlp.c_proj"}});
  fill(a.params(), a.size(), 2.5f);
  std::vector<float> params(layout.total());
  fill(params.data(), params.size(), 3.5f);
  std::vector<Block> blocks;
  for (int l = 0; l < 2; ++l) {
    blocks.push_back({kQkvw, l, 0, 36, 12});
    blocks.push_back({kFcprojw, l, 0, 12, 48});
  }
  const std::vector<float> want = expected_merge(params, layout, a, blocks, 2.5);
  merge_adapter(params.data(), layout, c, a);
  expect_same_bits(params, want);
}

TEST(LoraMerge, AnAdapterOfAnotherShapeIsRefused) {
  const ModelConfig c = testing::lora_llama_config(2);
  const ParameterLayout layout(c);
  std::vector<float> params(layout.total());
  // Layer 2 of a 3-layer model's adapter: not in a 2-layer model.
  const LoraAdapter a(testing::lora_llama_config(3), LoraOptions{.r = 2, .alpha = 2, .targets = {"v_proj"}});
  try {
    merge_adapter(params.data(), layout, c, a);
    FAIL() << "merged an adapter of another model";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.2.self_attn.v_proj"), std::string::npos)
        << e.what();
  }
}

// `llmcpu convert --adapter` on a Llama folder: the merged weights, config.json and tokenizer kept;
// and what it refuses, writing nothing.
class ConvertAdapter : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    config_ = testing::write_llama_folder(path("hf"), path("llama.toml"), 258);
    LoraAdapter a(config_, LoraOptions{.r = 2, .alpha = 3, .targets = {"q_proj", "down_proj"}});
    fill(a.params(), a.size(), 4.5f);
    write_peft_adapter(path("adapter"), config_, a, {});
  }
  Outcome convert(const std::string& in, const std::string& out, const std::string& adapter) {
    return run_llmcpu("convert " + shell_quote(in) + " " + shell_quote(out) + " --adapter " +
                      shell_quote(adapter));
  }
  ModelConfig config_;
};

TEST_F(ConvertAdapter, MergesIntoTheFolderItWrites) {
  const Outcome r = convert(path("hf"), path("out"), path("adapter"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("+ adapter " + path("adapter") + " (r=2, alpha=3, 4 modules merged)"),
            std::string::npos)
      << r.output;
  std::vector<float> want = testing::load_llama_weights(path("hf"));
  merge_adapter(want.data(), ParameterLayout(config_), config_,
                read_peft_adapter(path("adapter"), config_));
  expect_same_bits(testing::load_llama_weights(path("out")), want);
  EXPECT_EQ(testing::read_bytes(path("out/tokenizer.json")),
            testing::read_bytes(path("hf/tokenizer.json")));
}

TEST_F(ConvertAdapter, RefusesWhatDoesNotMakeSense) {
  testing::write_bytes(path("a_file"), {1, 2, 3});
  const struct {
    std::string in, out, adapter, words;
  } cases[] = {
      {path("hf"), path("out"), path("none"), "--adapter " + path("none")},
      {path("hf"), path("out"), path("a_file"), "not a file"},
      {path("hf"), path("adapter"), path("adapter"), "OUT would be written into the adapter's"},
      {path("hf"), path("hf"), path("adapter"), "IN and OUT are both"},
      {path("adapter"), path("out"), path("adapter"), "is IN"},
      // An adapter of another model: its tensors do not fit, named.
      {path("hf"), path("out"), path("adapter_c32"),
       "model.layers.0.mlp.gate_proj.lora_A.weight is (2, 32)"},
  };
  LoraAdapter other(testing::lora_llama_config(1), LoraOptions{.r = 2, .alpha = 3, .targets = {"gate_proj"}});
  write_peft_adapter(path("adapter_c32"), testing::lora_llama_config(1), other, {});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.words);
    const Outcome r = convert(c.in, c.out, c.adapter);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(c.words), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(path("out"))) << r.output;
  }
}

}  // namespace
}  // namespace llmcpu
