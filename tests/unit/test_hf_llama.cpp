// Hugging Face Llama-family folders (core/io/hf_llama.h) against the files the PyTorch reference
// writes as save_pretrained lays them out (tests/fixtures/make_llama_fixture.py): read, written
// back byte-identical (safetensors), sharded folders equal to whole ones, the verify reference read
// into the flat layout, and every malformed folder refused naming the file and the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/io/debug_state.h"
#include "core/io/hf_llama.h"
#include "core/io/json_file.h"
#include "core/io/model_file.h"
#include "core/model/parameters.h"
#include "simd/error.h"
#include "tests/common/process.h"
#include "tests/common/temp_files.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class HfLlama : public testing::TempDirTest {
 protected:
  // The reference's fixture NAME of `args` in the test's folder: NAME_hf/ and the rest.
  std::string make(const std::string& name, const std::string& args) {
    const std::string cmd = std::string(LLMCPU_PYTHON) + " " +
                            testing::shell_quote(LLMCPU_FIXTURE_DIR "/make_llama_fixture.py") +
                            " --out-dir " + testing::shell_quote(dir_.string()) + " --name " +
                            name + " " + args + " --steps 1 2>&1";
    const testing::Outcome r = testing::run_shell(cmd);
    EXPECT_EQ(r.status, 0) << cmd << "\n" << r.output;
    return path(name + "_hf");
  }
  static std::vector<float> load(const std::string& folder) {
    const HfLlamaFile file(hf_model_paths(folder));
    std::vector<float> params(ParameterLayout(file.config()).total(), -1.0f);
    file.load(params.data());
    return params;
  }
};

// The files are equal byte for byte; else the first difference and the two headers.
void expect_same_bytes(const std::string& ours, const std::string& theirs) {
  const testing::Bytes a = testing::read_bytes(ours), b = testing::read_bytes(theirs);
  if (a == b) return;
  size_t at = 0;
  while (at < a.size() && at < b.size() && a[at] == b[at]) ++at;
  const auto header = [](const testing::Bytes& f) {
    uint64_t n = 0;
    if (f.size() >= 8) std::memcpy(&n, f.data(), 8);
    return std::string(f.begin() + 8, f.begin() + 8 + long(std::min<uint64_t>(n, f.size() - 8)));
  };
  ADD_FAILURE() << ours << " (" << a.size() << " bytes) differs from " << theirs << " ("
                << b.size() << " bytes) first at byte " << at << "\nours:   " << header(a)
                << "\ntheirs: " << header(b);
}

constexpr const char* kGqa =
    "--layers 2 --hidden 48 --heads 6 --kv-heads 2 --intermediate 80 --vocab 333 "
    "--max-seq-len 64 --batch 2 --seq-len 5 --seed 3";

TEST_F(HfLlama, ReadsTheFolderAndWritesItBackByteIdentical) {
  for (const std::string variant : {"--no-tie", "--tie --model-type qwen2",
                                     "--no-tie --attention-bias --mlp-bias --head-dim 24"}) {
    for (const std::string dtype : {"f32", "bf16", "f16"}) {
      SCOPED_TRACE(variant + " " + dtype);
      std::string name = "m";
      name += std::to_string(std::hash<std::string>{}(variant + dtype) % 1000);
      const std::string hf = make(name, std::string(kGqa) + " " + variant + " --dtype " + dtype);
      const ModelSource source = open_model_file(hf);
      ASSERT_NE(source.config.architecture, Architecture::kGpt2);
      const std::vector<float> params = load(hf);
      const ParameterLayout layout(source.config);
      // The padding rows of the embedding (333..383) are zero.
      const size_t C = 48;
      for (size_t i = 333 * C; i < 384 * C; ++i) ASSERT_EQ(params[layout.offset(kWte) + i], 0.0f);
      const TensorDtype d = dtype == "f32" ? TensorDtype::kF32
                            : dtype == "bf16" ? TensorDtype::kBf16
                                              : TensorDtype::kF16;
      const std::string out = path(name + "_out");
      save_hf_llama(out, source.config, params.data(), d,
                    read_json_file(hf + "/config.json"));
      expect_same_bytes(out + "/model.safetensors", hf + "/model.safetensors");
      // config.json: the same keys and values (the architecture's rewritten from the model).
      EXPECT_EQ(read_json_file(out + "/config.json"), read_json_file(hf + "/config.json"));
      EXPECT_EQ(open_model_file(out).config, source.config);
    }
  }
}

TEST_F(HfLlama, ShardedFolderHoldsTheSameModel) {
  const std::string whole = make("whole", std::string(kGqa) + " --no-tie");
  const std::string sharded = make("sharded", std::string(kGqa) + " --no-tie --shards 3");
  ASSERT_FALSE(fs::exists(sharded + "/model.safetensors"));
  const ModelSource source = open_model_file(sharded);
  EXPECT_NE(source.description.find("3 shards"), std::string::npos) << source.description;
  EXPECT_EQ(load(sharded), load(whole));
}

// The reader goes tensor by tensor (a model freezing its base as it loads takes each at once): each
// element but the padding rows' is said exactly once, when it already holds its final value; the
// padding rows are zero and never said.
TEST_F(HfLlama, LoadSaysEachTensorOnceInPlace) {
  for (const std::string variant : {"--no-tie", "--tie"}) {
    SCOPED_TRACE(variant);
    const std::string hf = make(variant == "--tie" ? "tied" : "untied",
                                std::string(kGqa) + " " + variant + " --dtype bf16");
    const HfLlamaFile file(hf_model_paths(hf));
    const ParameterLayout layout(file.config());
    const std::vector<float> whole = load(hf);
    std::vector<float> params(layout.total(), std::nanf(""));
    std::vector<int> said(layout.total(), 0);
    size_t calls = 0;
    file.load(params.data(), [&](size_t offset, size_t count) {
      ++calls;
      ASSERT_LE(offset + count, params.size());
      for (size_t i = offset; i < offset + count; ++i) {
        ++said[i];
        ASSERT_EQ(std::memcmp(&params[i], &whole[i], sizeof(float)), 0) << "element " << i;
      }
    });
    EXPECT_EQ(calls, llama_tensor_names(file.config()).size());
    const size_t C = 48, V = 333;
    for (size_t i = 0; i < params.size(); ++i) {
      bool padding = false;
      for (const int role : {int(kWte), int(kLmHead)}) {
        const size_t at = layout.offset(role);
        padding = padding || (i >= at + V * C && i < at + layout.size(role));
      }
      ASSERT_EQ(said[i], padding ? 0 : 1) << "element " << i;
      if (padding) {
        ASSERT_EQ(params[i], 0.0f) << "element " << i;
      }
    }
  }
}

TEST_F(HfLlama, ReadsTheVerifyReference) {
  const std::string hf = make("ref", std::string(kGqa) + " --tie");
  const ModelConfig c = open_model_file(hf).config;
  const DebugState s = load_debug_state(path("ref_reference.safetensors"), c);
  EXPECT_EQ(s.B, 2);
  EXPECT_EQ(s.T, 5);
  EXPECT_EQ(s.logits.size(), size_t(2 * 5 * 333));
  const ParameterLayout layout(c);
  ASSERT_EQ(s.grads.size(), layout.total());
  // Every tensor slot the model has got its gradient (non-zero somewhere).
  for (int i = 0; i < kNumTensorRoles; ++i) {
    if (layout.size(i) == 0) continue;
    const float* g = s.grads.data() + layout.offset(i);
    EXPECT_TRUE(std::any_of(g, g + layout.size(i), [](float x) { return x != 0.0f; }))
        << layout.name(i);
  }
  // inputs are the first B*T tokens of the shard, targets the same shifted by one.
  for (size_t i = 0; i + 1 < s.inputs.size(); ++i) EXPECT_EQ(s.targets[i], s.inputs[i + 1]);
}

// Rewrites NAME_hf/model.safetensors with `edit` applied to the header's JSON (offsets kept) and
// `extra` zero bytes appended to the data.
void edit_header(const std::string& file, const std::function<void(json&)>& edit,
                 size_t extra = 0) {
  testing::Bytes bytes = testing::read_bytes(file);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  json header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + long(n));
  edit(header);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t m = text.size();
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&m), 8);
  out << text;
  out.write(reinterpret_cast<const char*>(bytes.data()) + 8 + n, std::streamsize(bytes.size() - 8 - n));
  out << std::string(extra, '\0');
}

TEST_F(HfLlama, MalformedFoldersAreRefusedByName) {
  const std::string hf = make("bad", std::string(kGqa) + " --no-tie");
  const std::string weights = hf + "/model.safetensors";
  const testing::Bytes good = testing::read_bytes(weights);
  const auto refused = [&](const std::vector<std::string>& words) {
    try {
      load(hf);
      ADD_FAILURE() << "not refused";
    } catch (const FileError& e) {
      const std::string what = e.what();
      for (const std::string& w : words) EXPECT_NE(what.find(w), std::string::npos) << what;
    }
    testing::write_bytes(weights, good);
  };
  edit_header(weights, [](json& h) { h.erase("model.layers.1.mlp.up_proj.weight"); });
  refused({weights, "missing tensor 'model.layers.1.mlp.up_proj.weight'"});
  edit_header(weights, [](json& h) {
    h["model.norm.weight"]["shape"] = {24, 2};
  });
  refused({weights, "'model.norm.weight' has shape (24, 2)", "implies (48,)"});
  const size_t end = good.size() - 8 - [&] {
    uint64_t n;
    std::memcpy(&n, good.data(), 8);
    return n;
  }();
  edit_header(
      weights,
      [end](json& h) {  // a buffer older checkpoints hold (skipped), and a tensor of nothing's
        h["model.layers.0.self_attn.rotary_emb.inv_freq"] = {
            {"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {end, end + 16}}};
        h["model.extra.weight"] = {
            {"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {end + 16, end + 32}}};
      },
      32);
  refused({weights, "unknown tensor 'model.extra.weight'"});
  // A config that says tied while an lm_head different from the embedding is stored.
  json cfg = read_json_file(hf + "/config.json");
  cfg["tie_word_embeddings"] = true;
  std::ofstream(hf + "/config.json") << cfg.dump(2);
  refused({weights, "'lm_head.weight' differs from model.embed_tokens.weight"});
  cfg["tie_word_embeddings"] = false;
  cfg["num_key_value_heads"] = 3;
  std::ofstream(hf + "/config.json") << cfg.dump(2);
  refused({"'model.layers.0.self_attn.k_proj.weight' has shape (16, 48)", "implies (24, 48)"});
  fs::remove(hf + "/config.json");
  refused({weights, "has no config.json"});
}

TEST_F(HfLlama, ShardIndexErrorsNameTheFile) {
  const std::string hf = make("idx", std::string(kGqa) + " --no-tie --shards 2");
  const std::string index = hf + "/model.safetensors.index.json";
  const auto refused = [&](const std::string& word) {
    try {
      load(hf);
      ADD_FAILURE() << "not refused";
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  // The index places a tensor in the other shard.
  const json good = read_json_file(index);
  json j = good;
  const std::string first = j["weight_map"]["model.embed_tokens.weight"];
  j["weight_map"]["model.embed_tokens.weight"] =
      first == "model-00001-of-00002.safetensors" ? "model-00002-of-00002.safetensors"
                                                  : "model-00001-of-00002.safetensors";
  std::ofstream(index) << j.dump();
  refused("holds tensor 'model.embed_tokens.weight', which " + index + " places elsewhere");
  // A shard the index names is gone.
  std::ofstream(index) << good.dump();
  fs::remove(hf + "/model-00002-of-00002.safetensors");
  refused("model-00002-of-00002.safetensors");
}

}  // namespace
}  // namespace llmcpu
