// resolve_model and open_model_file (core/io/model_file.h): what --model names becomes one
// ModelSource (format, path, shape, description, tokenizer hint), and load_model_file loads by it
// the same weights as the format's own reader.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/io/hf_gpt2.h"
#include "core/io/model_file.h"
#include "core/model/model.h"
#include "core/model/parameters.h"
#include "core/model/preset.h"
#include "simd/error.h"
#include "tests/common/temp_files.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;

const ModelConfig kShape{.max_seq_len = 4,
                         .vocab_size = 10,
                         .padded_vocab_size = 128,
                         .num_layers = 1,
                         .num_heads = 2,
                         .channels = 8};

class ModelSourceTest : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    params_.resize(ParameterLayout(kShape).total());
    for (size_t i = 0; i < params_.size(); ++i) params_[i] = 0.125f * float(i % 17) - 1.0f;
    // wte's padding rows (V..Vp-1) zero: safetensors does not store them.
    std::fill(params_.begin() + kShape.vocab_size * kShape.channels,
              params_.begin() + kShape.padded_vocab_size * kShape.channels, 0.0f);
  }
  // The parameters load_model_file gives a model built from `source`.
  std::vector<float> loaded(const ModelSource& source) {
    Model model(source.config);
    load_model_file(source, model);
    const float* p = static_cast<const Model&>(model).params_flat();
    return std::vector<float>(p, p + model.num_parameters());
  }
  std::vector<float> params_;
};

TEST_F(ModelSourceTest, AnLlmcCheckpointIsReadOnce) {
  save_checkpoint(path("m.bin"), kShape, params_.data(), kCheckpointFp32);
  const ModelSource s = resolve_model(path("m.bin"));
  EXPECT_EQ(s.format, ModelFormat::kLlmc);
  EXPECT_TRUE(s.is_file());
  EXPECT_EQ(s.spec, path("m.bin"));
  EXPECT_EQ(s.path, path("m.bin"));
  EXPECT_EQ(s.config, kShape);
  EXPECT_EQ(s.description, "llm.c checkpoint version 3");
  EXPECT_EQ(s.tokenizer, "");  // no tokenizer beside it: GPT-2's default
  EXPECT_EQ(loaded(s), params_);
}

TEST_F(ModelSourceTest, AHuggingFaceFolderAndItsFileAreSafetensors) {
  fs::create_directories(path("hf"));
  save_hf_gpt2(path("hf/model.safetensors"), path("hf/config.json"), kShape, params_.data(),
               TensorDtype::kF32);
  for (const std::string& spec : {path("hf"), path("hf/model.safetensors")}) {
    SCOPED_TRACE(spec);
    const ModelSource s = resolve_model(spec);
    EXPECT_EQ(s.format, ModelFormat::kSafetensors);
    EXPECT_EQ(s.path, spec);
    EXPECT_EQ(s.config, kShape);
    EXPECT_NE(s.description.find("safetensors F32"), std::string::npos) << s.description;
    EXPECT_EQ(loaded(s), params_);
    std::vector<float> flat(params_.size());
    load_model_parameters(s, flat.data());
    EXPECT_EQ(flat, params_);
  }
}

// A folder whose config.json names a family llmcpu does not read (its tensors named as that
// family names them) is refused by that model_type, not read as a GPT-2 and refused for a missing
// GPT-2 tensor.
TEST_F(ModelSourceTest, AnUnknownModelTypeIsRefusedByName) {
  fs::create_directories(path("hf"));
  const std::string header =
      R"({"model.embed_tokens.weight":{"dtype":"F32","shape":[2,4],"data_offsets":[0,32]}})";
  testing::Bytes file;
  const uint64_t n = header.size();
  testing::append(file, &n, 1);
  file.insert(file.end(), header.begin(), header.end());
  file.resize(file.size() + 32, 0);
  testing::write_bytes(path("hf/model.safetensors"), file);
  const std::string falcon = R"({"model_type": "falcon", "hidden_size": 4, "vocab_size": 2})";
  testing::write_bytes(path("hf/config.json"), testing::Bytes(falcon.begin(), falcon.end()));
  for (const std::string& spec : {path("hf"), path("hf/model.safetensors")}) {
    SCOPED_TRACE(spec);
    testing::expect_file_error(
        [&] { resolve_model(spec); }, path("hf/config.json"),
        {"model_type is \"falcon\"", "\"gpt2\"", "\"llama\"", "\"qwen2\"", "\"mistral\"",
         "\"phi3\"", "\"qwen3\"", "\"gemma\"", "\"gemma2\"", "\"gemma3_text\""});
  }
}

TEST_F(ModelSourceTest, TheTokenizerHintIsTheModelsFolderWhenItHoldsGpt2sFiles) {
  fs::create_directories(path("hf"));
  save_hf_gpt2(path("hf/model.safetensors"), path("hf/config.json"), kShape, params_.data(),
               TensorDtype::kF32);
  EXPECT_EQ(resolve_model(path("hf")).tokenizer, "");
  testing::write_bytes(path("hf/encoder.json"), {'{', '}'});
  EXPECT_EQ(resolve_model(path("hf")).tokenizer, "");  // encoder.json alone cannot encode
  testing::write_bytes(path("hf/vocab.bpe"), {'#'});
  EXPECT_EQ(resolve_model(path("hf")).tokenizer, path("hf"));
  EXPECT_EQ(resolve_model(path("hf/model.safetensors")).tokenizer, path("hf"));
}

TEST_F(ModelSourceTest, APresetNameOrFileIsAShapeWithoutWeights) {
  const ModelSource named = resolve_model("gpt2-d2");
  EXPECT_EQ(named.format, ModelFormat::kPreset);
  EXPECT_FALSE(named.is_file());
  EXPECT_EQ(named.spec, "gpt2-d2");
  EXPECT_EQ(named.path, find_conf_file("models", "gpt2-d2"));
  EXPECT_EQ(named.config, load_model_preset(named.path));
  EXPECT_EQ(named.description, "preset " + named.path);
  const ModelSource file = resolve_model(named.path);
  EXPECT_EQ(file.format, ModelFormat::kPreset);
  EXPECT_EQ(file.path, named.path);
  EXPECT_EQ(file.config, named.config);
}

TEST_F(ModelSourceTest, NeitherAFileNorAPresetIsAUsageError) {
  EXPECT_THROW(resolve_model(""), UsageError);
  try {
    resolve_model(path("nope.bin"));
    ADD_FAILURE() << "resolved";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no such checkpoint file, and no preset"),
              std::string::npos)
        << e.what();
  }
  // A folder without model.safetensors is no model, and no preset either.
  EXPECT_THROW(resolve_model(dir_.string()), UsageError);
}

TEST_F(ModelSourceTest, OpenModelFileReadsAnyPathAsAModelFile) {
  testing::expect_file_error([&] { open_model_file(path("nope.bin")); }, path("nope.bin"), {});
  save_checkpoint(path("m.bin"), kShape, params_.data(), kCheckpointBf16);
  const ModelSource s = open_model_file(path("m.bin"));
  EXPECT_EQ(s.format, ModelFormat::kLlmc);
  EXPECT_EQ(s.description, "llm.c checkpoint version 5");
}

}  // namespace
}  // namespace llmcpu
