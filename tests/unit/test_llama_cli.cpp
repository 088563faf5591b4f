// A Llama-family folder through the `llmcpu` program as a user runs it: train's startup lines,
// checkpoints and --save, and `sample` from each of them with the tokenizer.json the folders carry
// (the context starts at BOS, generation stops at EOS); `convert` to another dtype keeping
// config.json's keys and the tokenizer files, and refusing an llm.c .bin with the reason; a run
// killed at each point of a checkpoint write resumes to the bytes of one never disturbed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <regex>
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

class LlamaCli : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    config_ = testing::write_llama_folder(path("hf"), path("llama.toml"), kV);
    testing::write_random_shard(path("train.bin"), 3000, kV, 9);
  }
  std::string train_args(const std::string& model, int steps) const {
    return "train --model " + shell_quote(path(model)) + " --train-data " +
           shell_quote(path("train.bin")) + " -b 2 -t 13 --lr 1e-3 --threads 1 --steps " +
           std::to_string(steps);
  }
  ModelConfig config_;
};

TEST_F(LlamaCli, TrainSavesFoldersThatSampleWithTheirTokenizer) {
  const Outcome t =
      run_llmcpu(train_args("hf", 4) + " -n 2 -o " + shell_quote(path("ck")) + " --save " +
                 shell_quote(path("out")) + " --sample-every 2 --sample-tokens 8");
  ASSERT_EQ(t.status, 0) << t.output;
  EXPECT_NE(t.output.find("train: llama L=2 NH=6 NKV=2 D=8 C=48 H=80 V=258 Vp=384 maxT=64"),
            std::string::npos)
      << t.output;
  EXPECT_NE(t.output.find("checkpoint: " + path("ck/model_00000002.safetensors") + " (step 2)"),
            std::string::npos)
      << t.output;
  EXPECT_NE(t.output.find("sample at step 2:"), std::string::npos) << t.output;
  // The samples are decoded by the folder's tokenizer.json, not shown as ids.
  EXPECT_EQ(t.output.find("token ids"), std::string::npos) << t.output;
  for (const std::string model : {"hf", "out", "ck/model_00000004.safetensors"}) {
    SCOPED_TRACE(model);
    const std::string cmd = "sample --model " + shell_quote(path(model)) +
                            " --prompt hello --tokens 8 --seed 3 --top-k 20";
    const Outcome a = run_llmcpu(cmd), b = run_llmcpu(cmd);
    ASSERT_EQ(a.status, 0) << a.output;
    EXPECT_TRUE(std::regex_search(a.output, std::regex("(^|\\n)hello"))) << a.output;
    // <s> and the five bytes of the prompt.
    EXPECT_TRUE(
        std::regex_search(a.output, std::regex("sample: [0-9]+ tokens after a 6-token context")))
        << a.output;
    EXPECT_EQ(a.output.substr(0, a.output.find("\nsample:")),
              b.output.substr(0, b.output.find("\nsample:")));
  }
  // The checkpoint folder itself is not a model file: the error names its newest one.
  const Outcome folder = run_llmcpu("sample --model " + shell_quote(path("ck")));
  EXPECT_EQ(folder.status, 2) << folder.output;
  EXPECT_NE(folder.output.find("a checkpoint folder: name one of its model files, e.g. " +
                               path("ck/model_00000004.safetensors")),
            std::string::npos)
      << folder.output;
}

// A model whose every position predicts </s>: the residual stream is the embedding (the
// projections into it zero), every row of which is the same vector e, and the head's row of </s>
// is 10 e (the others zero). Greedy sampling stops after its first token.
TEST_F(LlamaCli, SampleStopsAtEos) {
  const ParameterLayout layout(config_);
  std::vector<float> w = testing::random_llama_weights(config_, 4);
  const size_t C = config_.channels;
  for (int slot : {kAttprojw, kFcprojw})
    std::fill_n(w.begin() + long(layout.offset(slot)), layout.size(slot), 0);
  std::fill_n(w.begin() + long(layout.offset(kLmHead)), layout.size(kLmHead), 0.0f);
  const std::vector<float> e(w.begin() + long(layout.offset(kWte)),
                             w.begin() + long(layout.offset(kWte) + C));
  for (int r = 0; r < kV; ++r) std::copy(e.begin(), e.end(), w.begin() + long(r * C));
  for (size_t j = 0; j < C; ++j) w[layout.offset(kLmHead) + 257 * C + j] = 10 * e[j];
  save_hf_llama(path("hf"), config_, w.data(), TensorDtype::kF32,
                read_json_file(path("hf/config.json")));
  const Outcome r = run_llmcpu("sample --model " + shell_quote(path("hf")) +
                               " --prompt 'Once upon' --tokens 20 --temperature 0");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("sample: 1 tokens after a 10-token context"), std::string::npos)
      << r.output;
}

TEST_F(LlamaCli, ConvertKeepsConfigAndTokenizer) {
  const std::vector<float> source = testing::load_llama_weights(path("hf"));
  for (const std::string dtype : {"fp32", "bf16", "fp16"}) {
    SCOPED_TRACE(dtype);
    const std::string out = path("out_" + dtype);
    const Outcome r = run_llmcpu("convert " + shell_quote(path("hf")) + " " + shell_quote(out) +
                                 " --dtype " + dtype);
    ASSERT_EQ(r.status, 0) << r.output;
    const SafetensorsFile file(out + "/model.safetensors");
    const TensorDtype d = dtype == "fp32"   ? TensorDtype::kF32
                          : dtype == "bf16" ? TensorDtype::kBf16
                                            : TensorDtype::kF16;
    EXPECT_EQ(file.tensors().front().dtype, d);
    const nlohmann::json cfg = read_json_file(out + "/config.json");
    EXPECT_EQ(cfg["a_key_of_its_own"], "kept");
    EXPECT_EQ(cfg["eos_token_id"], 257);
    EXPECT_EQ(cfg["torch_dtype"], dtype == "fp32"   ? "float32"
                                  : dtype == "bf16" ? "bfloat16"
                                                    : "float16");
    for (const char* name :
         {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}) {
      EXPECT_EQ(read_bytes(out + "/" + name), read_bytes(path("hf/") + name)) << name;
    }
    std::vector<float> expected = source;
    for (float& x : expected) {
      if (d == TensorDtype::kBf16) x = bf16_to_float(float_to_bf16(x));
      if (d == TensorDtype::kF16) x = f16_to_float(float_to_f16(x));
    }
    EXPECT_EQ(testing::load_llama_weights(out), expected);
  }
  // fp32 to fp32 writes the very bytes (safetensors as the library lays them out).
  EXPECT_EQ(read_bytes(path("out_fp32/model.safetensors")),
            read_bytes(path("hf/model.safetensors")));
  // The written folder trains as the model it holds.
  const Outcome t = run_llmcpu(train_args("out_bf16", 1) + " --precision bf16");
  EXPECT_EQ(t.status, 0) << t.output;
  // llm.c's file has no Llama layout: refused with the reason, nothing written.
  for (const std::string bad : {"x.bin", "y.safetensors"}) {
    const Outcome r = run_llmcpu("convert " + shell_quote(path("hf")) + " " + path(bad));
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("is a Llama model (model_type llama)"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(path(bad)));
  }
  const Outcome bin = run_llmcpu("convert " + shell_quote(path("hf")) + " " + path("x.bin"));
  EXPECT_NE(bin.output.find("llm.c's Llama 3 checkpoint layout is not adopted"), std::string::npos)
      << bin.output;
  const Outcome help = run_llmcpu("convert --help");
  EXPECT_NE(help.output.find("Llama family"), std::string::npos) << help.output;
}

// As test_faults.cpp's GPT-2 case: killed halfway through the model file, and between its rename
// and the state's, the previous checkpoint stays whole and the run resumes to the same bytes.
TEST_F(LlamaCli, KilledCheckpointWriteResumesToTheSameBytes) {
  const std::string ref = path("ref");
  const Outcome r = run_llmcpu(train_args("hf", 6) + " -n 2 -o " + shell_quote(ref));
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* point : {"model-write", "between-renames"}) {
    SCOPED_TRACE(point);
    const std::string ck = path(std::string("ck_") + point);
    const Outcome killed = run_llmcpu(train_args("hf", 6) + " -n 2 -o " + shell_quote(ck),
                                      std::string("LLMCPU_FAULT=kill@") + point + "#2");
    ASSERT_TRUE(killed.status == -1 || killed.status == 128 + SIGKILL) << killed.output;
    EXPECT_EQ(latest_checkpoint(ck), 2);
    EXPECT_NO_THROW(open_checkpoint(ck, 2));
    EXPECT_EQ(fs::exists(checkpoint_model_path(ck, 4, true)),
              std::string(point) == "between-renames");
    const Outcome resumed = run_llmcpu("train --resume " + shell_quote(ck) + " --train-data " +
                                       shell_quote(path("train.bin")) +
                                       " -b 2 -t 13 --lr 1e-3 --threads 1 --steps 6 -n 2");
    ASSERT_EQ(resumed.status, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("left by a killed run"), std::string::npos) << resumed.output;
    EXPECT_TRUE(stale_temporary_files(ck).empty());
    for (int64_t step : {4, 6}) {
      EXPECT_EQ(read_bytes(checkpoint_model_path(ck, step, true)),
                read_bytes(checkpoint_model_path(ref, step, true)))
          << "model, step " << step;
      EXPECT_EQ(read_bytes(checkpoint_state_path(ck, step)),
                read_bytes(checkpoint_state_path(ref, step)))
          << "state, step " << step;
    }
    EXPECT_EQ(read_bytes(ck + "/config.json"), read_bytes(ref + "/config.json"));
  }
}

}  // namespace
}  // namespace llmcpu
