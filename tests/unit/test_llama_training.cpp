// A Llama-family model through train's files, in process: a checkpoint makes its folder a Hugging
// Face folder (model_NNNNNNNN.safetensors, config.json over the source's, the tokenizer files) that
// opens as a model holding the state's weights; resume is bit for bit in fp32 and bf16 (the
// safetensors, the state and the log of N steps equal those of K steps resumed to N); pruning, a
// corrupt newest checkpoint skipped, another model's folder refused; --save writes a folder that
// loads back (a .bin refused naming --save); and the KV-cache decode gives the full forward's
// logits for a model with grouped-query attention, an untied head and llama3 rope scaling.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "core/io/safetensors.h"
#include "core/io/train_state.h"
#include "core/model/generate.h"
#include "core/model/llama_config.h"
#include "core/train/interrupt.h"
#include "core/train/trainer.h"
#include "core/verify/verify.h"
#include "simd/bf16.h"
#include "simd/error.h"
#include "tests/common/temp_files.h"
#include "tests/unit/llama_files.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::read_bytes;

constexpr int kV = 311;

class LlamaTraining : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    config_ = testing::write_llama_folder(path("hf"), path("llama.toml"), kV);
    testing::write_random_shard(path("train_000000.bin"), 3000, kV, 5);
    testing::write_random_shard(path("val_000000.bin"), 600, kV, 6);
  }

  TrainOptions options(int steps, const std::string& model = "hf") const {
    TrainOptions o;
    o.model = path(model);
    o.train_data = path("train_*.bin");
    o.val_data = path("val_*.bin");
    o.val_every = 4;
    o.val_batches = 2;
    o.batch = 2;
    o.seq_len = 13;
    o.total_batch = 2 * 2 * 13;  // two micro-batches per step
    o.steps = steps;
    o.lr = 1e-3;
    o.weight_decay = 0.1;
    o.lr_schedule = LrScheduleKind::kCosine;
    o.warmup = 2;
    o.grad_clip = 1.0;
    return o;
  }

  std::set<std::string> files(const std::string& dir) const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(path(dir))) names.insert(e.path().filename());
    return names;
  }

  ModelConfig config_;
};

std::vector<float> state_weights(const std::string& state_path) {
  const TrainStateFile f(state_path);
  const size_t P = f.num_parameters();
  std::vector<float> w(P), m(P), v(P);
  f.read_tensors(w, m, v);
  return w;
}

TEST_F(LlamaTraining, CheckpointFolderOpensAsTheModel) {
  TrainOptions o = options(4);
  o.checkpoint_dir = path("ck");
  o.checkpoint_every = 2;
  Trainer t(o);
  EXPECT_EQ(t.model().config(), config_);
  ASSERT_TRUE(t.run({}));
  EXPECT_EQ(files("ck"),
            (std::set<std::string>{"config.json", "model_00000002.safetensors",
                                   "model_00000004.safetensors", "special_tokens_map.json",
                                   "state_00000002.bin", "state_00000004.bin", "tokenizer.json",
                                   "tokenizer_config.json", "train.lock"}));
  EXPECT_EQ(list_checkpoints(path("ck")), (std::vector<int64_t>{2, 4}));
  const std::string model = checkpoint_model_path(path("ck"), 4, true);
  EXPECT_EQ(find_checkpoint_model(path("ck"), 4), model);
  // The checkpoint opens as a model (config.json beside it) holding the state's fp32 weights.
  const ModelSource source = open_model_file(model);
  EXPECT_EQ(source.config, config_);
  EXPECT_EQ(source.tokenizer, path("ck"));
  EXPECT_EQ(testing::load_llama_weights(model),
            state_weights(checkpoint_state_path(path("ck"), 4)));
  EXPECT_EQ(SafetensorsFile(model).tensors().front().dtype, TensorDtype::kF32);
  // config.json over the source's: its other keys carried over; the tokenizer files copied.
  const json cfg = read_json_file(path("ck/config.json"));
  EXPECT_EQ(cfg["a_key_of_its_own"], "kept");
  EXPECT_EQ(cfg["bos_token_id"], 256);
  EXPECT_EQ(cfg["torch_dtype"], "float32");
  EXPECT_EQ(cfg["rope_scaling"]["rope_type"], "llama3");
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}) {
    EXPECT_EQ(read_bytes(path(std::string("ck/") + name)),
              read_bytes(path(std::string("hf/") + name)))
        << name;
  }
}

// N steps equal K steps resumed to N, byte for byte: the model file, the state and the log.
TEST_F(LlamaTraining, ResumeIsBitExactInBothPrecisions) {
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    const std::string p = precision_name(precision);
    SCOPED_TRACE(p);
    TrainOptions a = options(8);
    a.precision = precision;
    a.checkpoint_dir = path("a_" + p);
    a.log_path = path("a_" + p + ".log");
    ASSERT_TRUE(Trainer(a).run({}));
    TrainOptions b = a;
    b.checkpoint_dir = path("b_" + p);
    b.log_path = path("b_" + p + ".log");
    TrainObserver stop_at_5;
    stop_at_5.on_step = [](const StepReport& r) {
      if (r.step == 4) request_interrupt();
    };
    EXPECT_FALSE(Trainer(b).run(stop_at_5));
    clear_interrupt();
    ASSERT_EQ(latest_checkpoint(b.checkpoint_dir), 5);
    TrainOptions c = a;
    c.model.clear();
    c.resume = b.checkpoint_dir;
    c.checkpoint_dir.clear();
    c.log_path = b.log_path;
    Trainer resumed(c);
    EXPECT_EQ(resumed.steps_done(), 5);
    EXPECT_NE(resumed.model_origin().find("resumed from"), std::string::npos);
    ASSERT_TRUE(resumed.run({}));
    const std::string model_a = checkpoint_model_path(a.checkpoint_dir, 8, true);
    EXPECT_EQ(read_bytes(model_a), read_bytes(checkpoint_model_path(b.checkpoint_dir, 8, true)));
    EXPECT_EQ(read_bytes(checkpoint_state_path(a.checkpoint_dir, 8)),
              read_bytes(checkpoint_state_path(b.checkpoint_dir, 8)));
    EXPECT_EQ(read_bytes(a.log_path), read_bytes(b.log_path));
    EXPECT_EQ(read_bytes(a.checkpoint_dir + "/config.json"),
              read_bytes(b.checkpoint_dir + "/config.json"));
    // A bf16 run's model file is BF16: its master weights rounded (nearest even).
    const SafetensorsFile file(model_a);
    const bool bf16 = precision == Precision::kBf16;
    EXPECT_EQ(file.tensors().front().dtype, bf16 ? TensorDtype::kBf16 : TensorDtype::kF32);
    EXPECT_EQ(read_json_file(a.checkpoint_dir + "/config.json")["torch_dtype"],
              bf16 ? "bfloat16" : "float32");
    std::vector<float> master = state_weights(checkpoint_state_path(a.checkpoint_dir, 8));
    if (bf16) {
      for (float& w : master) w = bf16_to_float(float_to_bf16(w));
    }
    EXPECT_EQ(testing::load_llama_weights(model_a), master);
  }
}

TEST_F(LlamaTraining, KeepsTheNewestAndSkipsACorruptOne) {
  TrainOptions o = options(6);
  o.checkpoint_dir = path("ck");
  o.checkpoint_every = 2;
  o.keep_checkpoints = 2;
  ASSERT_TRUE(Trainer(o).run({}));
  EXPECT_EQ(list_checkpoints(path("ck")), (std::vector<int64_t>{4, 6}));
  EXPECT_FALSE(fs::exists(checkpoint_model_path(path("ck"), 2, true)));
  EXPECT_TRUE(fs::exists(path("ck/config.json")));
  // The newest model file cut short: skipped, named, left in place; resume goes on from step 4.
  const std::string newest = checkpoint_model_path(path("ck"), 6, true);
  fs::resize_file(newest, fs::file_size(newest) - 100);
  std::vector<std::string> notes;
  const ResumePoint point = open_resume_point(path("ck"), &notes);
  EXPECT_EQ(point.step, 4);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find(newest), std::string::npos) << notes[0];
  EXPECT_TRUE(fs::exists(newest));
  // A model file of the wrong kind for its state: an llm.c file beside a Llama state.
  fs::rename(checkpoint_model_path(path("ck"), 4, true), checkpoint_model_path(path("ck"), 4));
  testing::expect_file_error([&] { open_checkpoint(path("ck"), 4); },
                             checkpoint_model_path(path("ck"), 4), {"bad magic"});
}

TEST_F(LlamaTraining, CheckpointFolderOfAnotherModelIsRefused) {
  TrainOptions o = options(2);
  o.checkpoint_dir = path("ck");
  ASSERT_TRUE(Trainer(o).run({}));
  testing::write_llama_preset(path("other.toml"), kV, 3);
  TrainOptions other = options(2, "other.toml");
  other.checkpoint_dir = path("ck");
  try {
    Trainer t(other);
    FAIL() << "another model's checkpoint folder was taken";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--checkpoint-dir " + path("ck")), std::string::npos) << what;
    EXPECT_NE(what.find("NKV=2"), std::string::npos) << what;
  }
  // Its checkpoints are untouched.
  EXPECT_EQ(list_checkpoints(path("ck")), (std::vector<int64_t>{2}));
  EXPECT_EQ(open_model_file(checkpoint_model_path(path("ck"), 2, true)).config, config_);
}

TEST_F(LlamaTraining, SaveWritesAFolderThatLoadsBack) {
  TrainOptions o = options(3);
  o.save_path = path("out");
  Trainer t(o);
  ASSERT_TRUE(t.run({}));
  const Model& m = t.model();
  const std::vector<float> trained(m.params_flat(), m.params_flat() + m.num_parameters());
  EXPECT_EQ(files("out"),
            (std::set<std::string>{"config.json", "model.safetensors", "special_tokens_map.json",
                                   "tokenizer.json", "tokenizer_config.json"}));
  EXPECT_EQ(testing::load_llama_weights(path("out")), trained);
  EXPECT_EQ(open_model_file(path("out")).config, config_);
  EXPECT_EQ(read_json_file(path("out/config.json"))["eos_token_id"], 257);
  // Trained on from the saved folder, it is that model.
  TrainOptions again = options(1, "out");
  EXPECT_EQ(Trainer(again).model().config(), config_);
  // llm.c's file has no Llama layout: refused before training, naming --save.
  for (const std::string& bad : {path("model.bin"), path("train_000000.bin")}) {
    TrainOptions b = options(1);
    b.save_path = bad;
    try {
      Trainer refused(b);
      ADD_FAILURE() << "--save " << bad << " accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--save " + bad), std::string::npos) << e.what();
    }
  }
}

// From a preset: no config.json keys and no tokenizer to carry over, the folder still opens.
TEST_F(LlamaTraining, PresetRunWritesAFolderOfItsOwn) {
  TrainOptions o = options(2, "llama.toml");
  o.checkpoint_dir = path("ck");
  o.save_path = path("out");
  Trainer t(o);
  EXPECT_NE(t.model_origin().find("Llama initialisation"), std::string::npos) << t.model_origin();
  ASSERT_TRUE(t.run({}));
  EXPECT_EQ(files("ck"), (std::set<std::string>{"config.json", "model_00000002.safetensors",
                                                "state_00000002.bin", "train.lock"}));
  EXPECT_EQ(open_model_file(path("out")).config, config_);
  EXPECT_EQ(open_model_file(checkpoint_model_path(path("ck"), 2, true)).config, config_);
}

// Every later family trains from its folder, checkpoints, and resumes bit for bit: its
// architecture (windows, soft-caps, two rotary bases, a pad token, q/k norms, fused files) goes
// through the training state's config.json and back.
TEST_F(LlamaTraining, ResumeIsBitExactInEveryFamily) {
  const json base = {{"hidden_size", 48},        {"intermediate_size", 80},
                     {"num_hidden_layers", 3},   {"num_attention_heads", 4},
                     {"num_key_value_heads", 2}, {"head_dim", 16},
                     {"max_position_embeddings", 64}, {"vocab_size", kV},
                     {"rms_norm_eps", 1e-6},     {"bos_token_id", 256},
                     {"eos_token_id", 257}};
  const json extras[] = {
      {{"model_type", "qwen3"}},
      {{"model_type", "phi3"}, {"sliding_window", 7}},
      {{"model_type", "gemma"}, {"pad_token_id", 3}},
      {{"model_type", "gemma2"}, {"sliding_window", 6}, {"attn_logit_softcapping", 1.0},
       {"final_logit_softcapping", 2.0}, {"query_pre_attn_scalar", 24}},
      {{"model_type", "gemma3_text"}, {"sliding_window", 5}, {"sliding_window_pattern", 2},
       {"rope_local_base_freq", 100.0}, {"final_logit_softcapping", 3.0},
       {"tie_word_embeddings", false}},
  };
  for (const json& extra : extras) {
    json cfg = base;
    cfg.update(extra);
    const std::string type = extra["model_type"];
    SCOPED_TRACE(type);
    const ModelConfig c = read_llama_config(cfg, "config.json");
    const std::vector<float> w = testing::random_llama_weights(c, 7);
    save_hf_llama(path(type), c, w.data(), TensorDtype::kF32, cfg);
    testing::write_byte_tokenizer(path(type));
    TrainOptions a = options(6, type);
    a.checkpoint_dir = path(type + "_a");
    a.log_path = path(type + "_a.log");
    ASSERT_TRUE(Trainer(a).run({}));
    TrainOptions b = a;
    b.checkpoint_dir = path(type + "_b");
    b.log_path = path(type + "_b.log");
    TrainObserver stop_at_3;
    stop_at_3.on_step = [](const StepReport& r) {
      if (r.step == 2) request_interrupt();
    };
    EXPECT_FALSE(Trainer(b).run(stop_at_3));
    clear_interrupt();
    ASSERT_EQ(latest_checkpoint(b.checkpoint_dir), 3);
    TrainOptions r = a;
    r.model.clear();
    r.resume = b.checkpoint_dir;
    r.checkpoint_dir.clear();
    r.log_path = b.log_path;
    Trainer resumed(r);
    EXPECT_EQ(resumed.model().config(), c);
    ASSERT_TRUE(resumed.run({}));
    EXPECT_EQ(read_bytes(checkpoint_model_path(a.checkpoint_dir, 6, true)),
              read_bytes(checkpoint_model_path(b.checkpoint_dir, 6, true)));
    EXPECT_EQ(read_bytes(checkpoint_state_path(a.checkpoint_dir, 6)),
              read_bytes(checkpoint_state_path(b.checkpoint_dir, 6)));
    EXPECT_EQ(read_bytes(a.log_path), read_bytes(b.log_path));
    // The checkpoint's folder is the family's again.
    EXPECT_EQ(open_model_file(checkpoint_model_path(a.checkpoint_dir, 6, true)).config, c);
  }
}


// The KV-cache decode (one position at a time, grouped-query heads, rotary tables of each
// position) against the full forward pass of the same tokens: the same logits up to fp32 rounding
// of another summation order (GPT-2's test holds them to 1e-5 relative, as here).
TEST(LlamaGenerator, KvCacheMatchesFullForward) {
  const std::string preset =
      ::testing::TempDir() + "/llmcpu_llama_generator_" + std::to_string(::getpid()) + ".toml";
  const ModelConfig c = testing::write_llama_preset(preset, kV);
  fs::remove(preset);
  ASSERT_TRUE(c.architecture != Architecture::kGpt2 && !c.tied_head && c.kv_heads() < c.num_heads);
  ASSERT_EQ(c.rope.type, RopeType::kLlama3);
  Model model(c);
  const std::vector<float> w = testing::random_llama_weights(c, 3);
  std::memcpy(model.params_flat(), w.data(), w.size() * sizeof(float));
  const int n = 40, Vp = c.padded_vocab_size;  // past the original context of 16
  Rng rng(3);
  std::vector<int> tokens(n);
  for (int& t : tokens) t = int(rng.below(c.vocab_size));
  model.plan_batch(1, n, {.keep_logits = true});
  model.forward(tokens.data(), nullptr, 1, n);
  std::vector<float> full(model.logits(), model.logits() + size_t(n) * Vp);
  Generator gen(model, n);
  for (int t = 0; t < n; ++t) {
    const float* logits = gen.step(tokens[t]);
    const TensorComparison cmp =
        compare_tensors("logits", logits, full.data() + size_t(t) * Vp, c.vocab_size, 1e-5);
    EXPECT_TRUE(cmp.ok) << "position " << t << ": rel. error " << cmp.rel_error;
  }
  EXPECT_THROW(gen.step(0), ShapeError);
}

// Sampling among the first ids only (a tokenizer with fewer tokens than the model has rows):
// greedy picks the likeliest of them, and no draw at any temperature or top-k is past them, even
// where the likeliest token of all is.
TEST(LlamaGenerator, SamplesOnlyAmongTheCandidates) {
  const std::string preset =
      ::testing::TempDir() + "/llmcpu_llama_candidates_" + std::to_string(::getpid()) + ".toml";
  const ModelConfig c = testing::write_llama_preset(preset, kV);
  fs::remove(preset);
  Model model(c);
  const std::vector<float> w = testing::random_llama_weights(c, 5);
  std::memcpy(model.params_flat(), w.data(), w.size() * sizeof(float));
  Generator gen(model, 4);
  const float* logits = gen.step(7);
  const int best = int(std::max_element(logits, logits + c.vocab_size) - logits);
  ASSERT_GT(best, 0) << "choose another seed: the likeliest token must not be the first";
  const int candidates = best;  // the likeliest token is just past them
  const int best_candidate = int(std::max_element(logits, logits + candidates) - logits);
  Rng rng(11);
  EXPECT_EQ(gen.sample(0.0f, 0, rng), best);
  EXPECT_EQ(gen.sample(0.0f, 0, rng, candidates), best_candidate);
  for (int i = 0; i < 500; ++i) {
    const float temperature = i % 2 ? 1.0f : 5.0f;
    const int top_k = i % 3 ? 0 : 3;
    const int t = gen.sample(temperature, top_k, rng, candidates);
    ASSERT_GE(t, 0);
    ASSERT_LT(t, candidates) << "temperature " << temperature << ", top-k " << top_k;
  }
}

// The same for the later families' ops: sliding windows shorter than the sequence, Gemma 2's
// soft-caps and post-norms, Gemma 3's q/k norms and two rotary bases, Qwen3's q/k norms, Phi-3.
TEST(LlamaGenerator, KvCacheMatchesFullForwardInEveryFamily) {
  const json base = {{"hidden_size", 48},
                     {"intermediate_size", 80},
                     {"num_hidden_layers", 3},
                     {"num_attention_heads", 4},
                     {"num_key_value_heads", 2},
                     {"head_dim", 16},
                     {"max_position_embeddings", 64},
                     {"vocab_size", kV},
                     {"rms_norm_eps", 1e-6}};
  const json extras[] = {
      {{"model_type", "qwen3"}},
      {{"model_type", "phi3"}, {"sliding_window", 7}},
      {{"model_type", "mistral"}, {"sliding_window", 5}},
      {{"model_type", "gemma"}},
      {{"model_type", "gemma2"},
       {"sliding_window", 6},
       {"attn_logit_softcapping", 1.0},
       {"final_logit_softcapping", 2.0},
       {"query_pre_attn_scalar", 24}},
      {{"model_type", "gemma3_text"},
       {"sliding_window", 5},
       {"sliding_window_pattern", 2},
       {"rope_local_base_freq", 100.0},
       {"final_logit_softcapping", 3.0}},
  };
  for (const json& extra : extras) {
    json cfg = base;
    cfg.update(extra);
    SCOPED_TRACE(cfg.dump());
    const ModelConfig c = read_llama_config(cfg, "config.json");
    Model model(c);
    const std::vector<float> w = testing::random_llama_weights(c, 5);
    std::memcpy(model.params_flat(), w.data(), w.size() * sizeof(float));
    const int n = 24, Vp = c.padded_vocab_size;  // past every window
    Rng rng(5);
    std::vector<int> tokens(n);
    for (int& t : tokens) t = int(rng.below(c.vocab_size));
    model.plan_batch(1, n, {.keep_logits = true});
    model.forward(tokens.data(), nullptr, 1, n);
    std::vector<float> full(model.logits(), model.logits() + size_t(n) * Vp);
    Generator gen(model, n);
    for (int t = 0; t < n; ++t) {
      const float* logits = gen.step(tokens[t]);
      const TensorComparison cmp =
          compare_tensors("logits", logits, full.data() + size_t(t) * Vp, c.vocab_size, 1e-5);
      EXPECT_TRUE(cmp.ok) << "position " << t << ": rel. error " << cmp.rel_error;
    }
  }
}

}  // namespace
}  // namespace llmcpu
