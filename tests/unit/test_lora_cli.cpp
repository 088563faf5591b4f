// LoRA through the `llmcpu` program as a user runs it, on a Llama-family folder made here: train
// --lora writes PEFT adapter folders (--save and each checkpoint) whose checkpoints resume bit for
// bit, also after a run killed while writing one; sample --adapter computes with the adapter (a
// new adapter, B = 0, samples exactly what the base does); and the flags and files that do not
// fit are refused by name. The adapter's numbers against PyTorch are tests/lora_fixtures.cmake's.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/io/safetensors.h"
#include "core/train/checkpoint_store.h"
#include "simd/bf16.h"
#include "tests/common/process.h"
#include "tests/common/temp_files.h"
#include "tests/unit/llama_files.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using testing::Outcome;
using testing::read_bytes;
using testing::run_llmcpu;
using testing::shell_quote;

constexpr int kV = 258;  // the byte tokenizer's: 256 bytes, <s>, </s>

class LoraCli : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    testing::write_llama_folder(path("hf"), path("llama.toml"), kV);
    testing::write_random_shard(path("train.bin"), 3000, kV, 9);
  }
  std::string data_args(int steps) const {
    return " --train-data " + shell_quote(path("train.bin")) +
           " -b 2 -t 13 --lr 1e-2 --threads 1 --steps " + std::to_string(steps);
  }
  std::string train_args(int steps, const std::string& lora = "--lora 4 --lora-alpha 8") const {
    return "train --model " + shell_quote(path("hf")) + " " + lora + data_args(steps);
  }
  std::string sample(const std::string& extra) const {
    const Outcome r = run_llmcpu("sample --model " + shell_quote(path("hf")) +
                                 " --prompt hello --tokens 12 --temperature 0 --threads 1 " +
                                 extra);
    EXPECT_EQ(r.status, 0) << r.output;
    return r.output.substr(0, r.output.find("\nsample:"));
  }
  std::string adapter_file(const std::string& dir) const {
    return dir + "/adapter_model.safetensors";
  }
};

TEST_F(LoraCli, TrainSavesPeftFoldersAndCheckpointsThatResumeBitForBit) {
  const std::string ref = path("ref"), out = path("out");
  const Outcome r =
      run_llmcpu(train_args(6) + " -n 2 -o " + shell_quote(ref) + " --save " + shell_quote(out));
  ASSERT_EQ(r.status, 0) << r.output;
  for (const std::string& dir : {out, checkpoint_adapter_path(ref, 2), checkpoint_adapter_path(ref, 6)}) {
    EXPECT_TRUE(fs::is_regular_file(dir + "/adapter_config.json")) << dir;
    EXPECT_TRUE(fs::is_regular_file(adapter_file(dir))) << dir;
  }
  // A LoRA checkpoint holds the adapter alone: no model file, no config.json.
  EXPECT_FALSE(fs::exists(checkpoint_model_path(ref, 2, true)));
  EXPECT_FALSE(fs::exists(ref + "/config.json"));
  EXPECT_EQ(read_bytes(adapter_file(out)), read_bytes(adapter_file(checkpoint_adapter_path(ref, 6))));
  // Resumed from step 2 alone (the base from --model), steps 4 and 6 are the same bytes.
  const std::string ck = path("ck");
  fs::create_directories(ck);
  fs::copy(checkpoint_adapter_path(ref, 2), checkpoint_adapter_path(ck, 2));
  fs::copy_file(checkpoint_state_path(ref, 2), checkpoint_state_path(ck, 2));
  const Outcome resumed = run_llmcpu("train --model " + shell_quote(path("hf")) + " --resume " +
                                     shell_quote(ck) + data_args(6) + " -n 2");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  for (int64_t step : {4, 6}) {
    EXPECT_EQ(read_bytes(checkpoint_state_path(ck, step)), read_bytes(checkpoint_state_path(ref, step)))
        << "state, step " << step;
    EXPECT_EQ(read_bytes(adapter_file(checkpoint_adapter_path(ck, step))),
              read_bytes(adapter_file(checkpoint_adapter_path(ref, step))))
        << "adapter, step " << step;
  }
  // --save-merged is convert --adapter's merge of the saved adapter, byte for byte.
  const std::string merged = path("merged"), converted = path("converted");
  ASSERT_EQ(run_llmcpu(train_args(2) + " --save " + shell_quote(path("two")) + " --save-merged " +
                       shell_quote(merged))
                .status,
            0);
  const Outcome c = run_llmcpu("convert " + shell_quote(path("hf")) + " " + shell_quote(converted) +
                               " --adapter " + shell_quote(path("two")));
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_EQ(read_bytes(merged + "/model.safetensors"), read_bytes(converted + "/model.safetensors"));
  EXPECT_NE(read_bytes(merged + "/model.safetensors"), read_bytes(path("hf") + "/model.safetensors"));
  // A checkpoint's adapter folder is an adapter --adapter starts from.
  const Outcome again = run_llmcpu("train --model " + shell_quote(path("hf")) + " --adapter " +
                                   shell_quote(checkpoint_adapter_path(ref, 6)) + data_args(1));
  EXPECT_EQ(again.status, 0) << again.output;
}

// Killed halfway through the adapter's tensors, and between the adapter folder and the state
// file: the previous checkpoint stays whole and the run resumes to the same bytes.
TEST_F(LoraCli, KilledCheckpointWriteResumesToTheSameBytes) {
  const std::string ref = path("ref");
  ASSERT_EQ(run_llmcpu(train_args(6) + " -n 2 -o " + shell_quote(ref)).status, 0);
  for (const char* point : {"model-write", "between-renames"}) {
    SCOPED_TRACE(point);
    const std::string ck = path(std::string("ck_") + point);
    const Outcome killed = run_llmcpu(train_args(6) + " -n 2 -o " + shell_quote(ck),
                                      std::string("LLMCPU_FAULT=kill@") + point + "#2");
    ASSERT_TRUE(killed.status == -1 || killed.status == 128 + SIGKILL) << killed.output;
    EXPECT_EQ(latest_checkpoint(ck), 2);
    EXPECT_NO_THROW(open_checkpoint(ck, 2));
    const Outcome resumed = run_llmcpu("train --model " + shell_quote(path("hf")) + " --resume " +
                                       shell_quote(ck) + data_args(6) + " -n 2");
    ASSERT_EQ(resumed.status, 0) << resumed.output;
    if (std::string(point) == "model-write") {
      EXPECT_NE(resumed.output.find("left by a killed run"), std::string::npos) << resumed.output;
    }
    EXPECT_TRUE(stale_temporary_files(checkpoint_adapter_path(ck, 4)).empty());
    for (int64_t step : {4, 6}) {
      EXPECT_EQ(read_bytes(checkpoint_state_path(ck, step)),
                read_bytes(checkpoint_state_path(ref, step)))
          << "state, step " << step;
      EXPECT_EQ(read_bytes(adapter_file(checkpoint_adapter_path(ck, step))),
                read_bytes(adapter_file(checkpoint_adapter_path(ref, step))))
          << "adapter, step " << step;
    }
  }
}

// The non-finite guard on the adapter: a NaN in its gradient skips the step, naming the module,
// and the checkpoint after it holds the adapter of the step before.
TEST_F(LoraCli, NonFiniteAdapterGradientSkipsTheUpdateAndNamesTheModule) {
  const std::string ck = path("ck");
  const Outcome r = run_llmcpu(train_args(4) + " -n 1 -o " + shell_quote(ck),
                               "LLMCPU_FAULT=nan@grad-lora#3");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const std::string w : {"warning: step 3/4: loss ", "gradient norm nan",
                              "the first non-finite gradient is the adapter's "
                              "model.layers.1.mlp.down_proj",
                              "update skipped (1 in a row"}) {
    EXPECT_NE(r.output.find(w), std::string::npos) << r.output;
  }
  auto state = [&](int64_t step) {
    TrainStateFile f(checkpoint_state_path(ck, step));
    const size_t P = f.num_parameters();
    std::vector<float> all(3 * P);
    f.read_tensors({all.data(), P}, {all.data() + P, P}, {all.data() + 2 * P, P});
    return std::pair{all, f.state().adamw_t};
  };
  EXPECT_EQ(state(3).first, state(2).first);
  EXPECT_EQ(state(3).second, 2);
  EXPECT_NE(state(4).first, state(3).first);
}

// A quantized base's run records its format in its checkpoints (state version 6): resumed without
// the flag, it goes on on the same base, to the same bytes as the run that was not interrupted.
TEST_F(LoraCli, AQuantizedBasesRunResumesOnTheSameBase) {
  const std::string lora = "--lora 4 --lora-alpha 8 --base-quant nf4";
  const std::string ref = path("ref"), ck = path("ck");
  ASSERT_EQ(run_llmcpu(train_args(4, lora) + " -n 2 -o " + shell_quote(ref)).status, 0);
  ASSERT_EQ(run_llmcpu(train_args(2, lora) + " -n 2 -o " + shell_quote(ck)).status, 0);
  EXPECT_EQ(TrainStateFile(checkpoint_state_path(ck, 2)).state().base_quant, QuantFormat::kNf4);
  const Outcome resumed = run_llmcpu("train --model " + shell_quote(path("hf")) + " --resume " +
                                     shell_quote(ck) + " -n 2" + data_args(4));
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(read_bytes(adapter_file(checkpoint_adapter_path(ck, 4))),
            read_bytes(adapter_file(checkpoint_adapter_path(ref, 4))));
  EXPECT_EQ(read_bytes(checkpoint_state_path(ck, 4)), read_bytes(checkpoint_state_path(ref, 4)));
  // The same steps on the base as loaded are another run.
  ASSERT_EQ(run_llmcpu(train_args(4) + " -n 2 -o " + shell_quote(path("plain"))).status, 0);
  EXPECT_NE(read_bytes(adapter_file(checkpoint_adapter_path(path("plain"), 4))),
            read_bytes(adapter_file(checkpoint_adapter_path(ref, 4))));
}

// Base modules trained in full beside the adapters (--lora-train, PEFT's modules_to_save): saved in
// the adapter folder under PEFT's names, resumed bit for bit, in bf16 too, and --save-merged puts
// the copies in the base's place (as convert --adapter does).
TEST_F(LoraCli, TrainedModulesResumeBitForBitAndMerge) {
  for (const std::string precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    const std::string lora = "--lora 4 --lora-alpha 8 --lora-train embed_tokens,lm_head,norm "
                             "--precision " + precision;
    const std::string ref = path("ref" + precision), ck = path("ck" + precision);
    const std::string merged = path("merged" + precision);
    ASSERT_EQ(run_llmcpu(train_args(4, lora) + " -n 2 -o " + shell_quote(ref) + " --save-merged " +
                         shell_quote(merged))
                  .status,
              0);
    ASSERT_EQ(run_llmcpu(train_args(2, lora) + " -n 2 -o " + shell_quote(ck)).status, 0);
    const Outcome resumed = run_llmcpu("train --model " + shell_quote(path("hf")) + " --resume " +
                                       shell_quote(ck) + " -n 2 --precision " + precision +
                                       data_args(4));
    ASSERT_EQ(resumed.status, 0) << resumed.output;
    const std::string at4 = checkpoint_adapter_path(ref, 4);
    EXPECT_EQ(read_bytes(adapter_file(checkpoint_adapter_path(ck, 4))), read_bytes(adapter_file(at4)));
    EXPECT_EQ(read_bytes(checkpoint_state_path(ck, 4)), read_bytes(checkpoint_state_path(ref, 4)));
    const testing::Bytes file = read_bytes(adapter_file(at4));
    const std::string text(file.begin(), file.end());
    for (const char* name : {"base_model.model.model.embed_tokens.weight",
                             "base_model.model.lm_head.weight",
                             "base_model.model.model.layers.1.post_attention_layernorm.weight",
                             "base_model.model.model.norm.weight"}) {
      EXPECT_NE(text.find(name), std::string::npos) << name;
    }
    const std::string converted = path("converted" + precision);
    const Outcome c = run_llmcpu("convert " + shell_quote(path("hf")) + " " +
                                 shell_quote(converted) + " --adapter " + shell_quote(at4));
    ASSERT_EQ(c.status, 0) << c.output;
    if (precision == "fp32") {
      EXPECT_EQ(read_bytes(merged + "/model.safetensors"),
                read_bytes(converted + "/model.safetensors"));
      continue;
    }
    // A bf16 run merges into the layer weights it computed with (rounded to bf16) and writes the
    // model in bf16: the trained copies there are the fp32 copies rounded once.
    const SafetensorsFile a(merged + "/model.safetensors"), b(converted + "/model.safetensors");
    for (const char* name : {"model.embed_tokens.weight", "lm_head.weight",
                             "model.layers.0.input_layernorm.weight", "model.norm.weight"}) {
      ASSERT_NE(a.find(name), nullptr) << name;
      ASSERT_NE(b.find(name), nullptr) << name;
      std::vector<float> x(a.find(name)->count), y(b.find(name)->count);
      tensor_to_f32(*a.find(name), x.data());
      tensor_to_f32(*b.find(name), y.data());
      for (float& v : y) v = bf16_to_float(float_to_bf16(v));
      EXPECT_EQ(x, y) << name;
    }
  }
}

TEST_F(LoraCli, SampleComputesWithTheAdapter) {
  // A new adapter (B = 0) adds exactly zero: the base's samples, token for token.
  ASSERT_EQ(run_llmcpu(train_args(0) + " --save " + shell_quote(path("new"))).status, 0);
  const std::string base = sample("");
  EXPECT_EQ(sample("--adapter " + shell_quote(path("new"))), base);
  // Trained at a high rate, it changes what the model says.
  ASSERT_EQ(run_llmcpu(train_args(20) + " --save " + shell_quote(path("trained"))).status, 0);
  EXPECT_NE(sample("--adapter " + shell_quote(path("trained"))), base);
}

TEST_F(LoraCli, FlagsAndFilesThatDoNotFitAreRefusedByName) {
  ASSERT_EQ(run_llmcpu(train_args(2) + " -n 2 -o " + shell_quote(path("ck")) + " --save " +
                       shell_quote(path("ad")))
                .status,
            0);
  std::ofstream(path("file")) << "x";
  struct Case {
    std::string args;
    std::vector<std::string> words;
  };
  const std::string hf = shell_quote(path("hf"));
  const std::vector<Case> cases = {
      {train_args(1, "--lora 4 --adapter " + shell_quote(path("ad"))),
       {"--lora with --adapter", "adapter_config.json gives it"}},
      {train_args(1, "--lora-alpha 8"), {"--lora-alpha needs --lora"}},
      {train_args(1, "--lora 4 --lora-targets q_proj,bogus"),
       {"--lora-targets", "'bogus'", "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj"}},
      {train_args(1, "--lora 4 --resume " + shell_quote(path("ck"))),
       {"--lora with --resume", "the checkpoint holds the adapter"}},
      {"train --resume " + shell_quote(path("ck")) + data_args(4),
       {"a LoRA run's checkpoint holds its adapter", "give --model"}},
      {train_args(1) + " --save " + shell_quote(path("file")), {"--save", "is a file", "PEFT"}},
      {train_args(1, "--adapter " + shell_quote(path("hf"))),
       {"adapter_config.json", "--adapter takes a PEFT adapter folder"}},
      {"verify --model " + hf + " --adapter " + shell_quote(path("ad")) + " --state " +
           shell_quote(path("file")) + " --write-state " + shell_quote(path("w.bin")),
       {"--write-state with --adapter"}},
      {train_args(1, "--base-quant nf4"), {"--base-quant needs --lora R"}},
      {train_args(1, "--lora-train norm"), {"--lora-train needs --lora R"}},
      {train_args(1, "--lora 4 --lora-train q_proj"),
       {"--lora-train q_proj", "model.layers.0.self_attn.q_proj", "embed_tokens, input_layernorm"}},
      {train_args(1, "--lora 4 --lora-train layers.1.input_layernorm"),
       {"--lora-train layers.1.input_layernorm", "in every layer or in none"}},
      {train_args(1, "--adapter " + shell_quote(path("ad")) + " --lora-train norm"),
       {"--lora-train with --adapter", "adapter_config.json gives it"}},
      {train_args(1, "--lora 4 --base-quant nf5"),
       {"--base-quant 'nf5'", "expected none, int8 or nf4"}},
      {"verify --model " + hf + " --state " + shell_quote(path("file")) + " --base-quant int8",
       {"--base-quant needs --adapter"}},
      {"train --model " + hf + " --resume " + shell_quote(path("ck")) + " --base-quant nf4" +
           data_args(4),
       {"saved with --base-quant none, now nf4", "exact resume needs the same base"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const Outcome r = run_llmcpu(c.args);
    EXPECT_NE(r.status, 0) << r.output;
    for (const std::string& w : c.words) EXPECT_NE(r.output.find(w), std::string::npos) << r.output;
  }
  // An adapter whose rank does not fit its tensors: refused naming the tensor and the shapes.
  const std::string bad = path("bad");
  fs::copy(path("ad"), bad);
  const testing::Bytes text = read_bytes(bad + "/adapter_config.json");
  std::string config(text.begin(), text.end());
  config.replace(config.find("\"r\": 4"), 6, "\"r\": 3");
  std::ofstream(bad + "/adapter_config.json") << config;
  const Outcome r = run_llmcpu(train_args(1, "--adapter " + shell_quote(bad)));
  EXPECT_NE(r.status, 0) << r.output;
  for (const std::string w : {"adapter_model.safetensors", "lora_A.weight is (4, 48)",
                              "expected (3, 48)"}) {
    EXPECT_NE(r.output.find(w), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace llmcpu
