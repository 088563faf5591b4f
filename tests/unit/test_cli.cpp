// The `llmcpu` program as a user runs it: exit statuses, the verify report, train's log lines, and
// clear errors (naming the flag or the file) for bad flags and bad files.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/io/token_shard.h"
#include "simd/kernels.h"
#include "tests/common/process.h"
#include "tests/common/temp_files.h"
#include "tests/unit/fixture_paths.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using testing::fixture;

using testing::Outcome;
Outcome run(const std::string& args) { return testing::run_llmcpu(args); }

class Cli : public testing::TempDirTest {
 protected:
  void SetUp() override { TempDirTest::SetUp(); }
};

TEST_F(Cli, VerifyPassesOnFixture) {
  const Outcome r = run("verify --model " + fixture("tiny", "model.bin") + " --state " +
                        fixture("tiny", "state.bin"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("verify: OK"), std::string::npos) << r.output;
  // One line per compared tensor: logits, loss and the 16 gradients.
  for (const char* t : {"logits", "loss", "wte", "wpe", "qkvw", "fcprojb", "lnfb"}) {
    EXPECT_TRUE(std::regex_search(
        r.output, std::regex(std::string("\n") + t + " +[0-9]+ +[0-9.e+-]+ +[0-9.e+-]+")))
        << t << " missing in\n"
        << r.output;
  }
}

TEST_F(Cli, VerifyFailsOnWrongReferenceAndWritesItsOwnState) {
  // Perturb one gradient of the reference: verify must notice and exit 1.
  fs::copy_file(fixture("tiny", "state.bin"), path("bad_state.bin"));
  {
    std::fstream f(path("bad_state.bin"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-4 * 10, std::ios::end);  // inside lnfb's gradient
    const float big = 123.0f;
    f.write(reinterpret_cast<const char*>(&big), 4);
  }
  const Outcome bad = run("verify --model " + fixture("tiny", "model.bin") + " --state " +
                          path("bad_state.bin") + " --write-state " + path("ours.bin"));
  EXPECT_EQ(bad.status, 1) << bad.output;
  EXPECT_NE(bad.output.find("verify: FAIL"), std::string::npos) << bad.output;
  EXPECT_TRUE(std::regex_search(bad.output, std::regex("\nlnfb .* FAIL"))) << bad.output;
  // The state this program wrote is itself a valid reference that verifies exactly.
  const Outcome again =
      run("verify --model " + fixture("tiny", "model.bin") + " --state " + path("ours.bin"));
  EXPECT_EQ(again.status, 0) << again.output;
}

TEST_F(Cli, TrainWritesLlmcLogLines) {
  const Outcome r = run("train --model " + fixture("edge", "model.bin") + " --train-data " +
                        fixture("edge", "train.bin") + " -b 1 -t 7 --steps 3 --no-shuffle --log " +
                        path("log.txt") + " --save " + path("out.bin"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("step +3/3 \\| loss [0-9.]+ .*tok/s")))
      << r.output;
  std::ifstream log(path("log.txt"));
  std::string line;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(std::getline(log, line));
    EXPECT_TRUE(
        std::regex_match(line, std::regex("s:" + std::to_string(i) + " trl:[0-9]+\\.[0-9]{6}")))
        << line;
  }
  // The saved model is a checkpoint that verify accepts.
  EXPECT_EQ(fs::file_size(path("out.bin")), fs::file_size(fixture("edge", "model.bin")));
}

TEST_F(Cli, TrainFromPresetLearns) {
  // A repeating pattern over GPT-2's vocabulary: a small model from scratch must bring the loss
  // down.
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 4000; ++i) tokens.push_back(static_cast<uint16_t>((i % 17) * 2963 % 50257));
  write_token_shard(path("pattern.bin"), tokens);
  const Outcome r = run("train --model gpt2-d2 --train-data " + path("pattern.bin") +
                        " -b 2 -t 32 --steps 12 --lr 3e-3 --log " + path("log.txt"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("GPT-2 initialisation"), std::string::npos) << r.output;
  std::ifstream log(path("log.txt"));
  std::vector<double> losses;
  for (std::string line; std::getline(log, line);)
    losses.push_back(std::stod(line.substr(line.find("trl:") + 4)));
  ASSERT_EQ(losses.size(), 12u);
  EXPECT_NEAR(losses[0], std::log(50257.0), 0.5);  // GPT-2 initialisation starts near uniform
  EXPECT_LT(losses.back(), losses[0] - 1.0);
}

// llm.c's uint32 shards train a model of Llama 3's vocabulary, 128256 tokens (a multiple of 128:
// Vp = V), made from a preset with L = 1, C = 32: a repeating pattern of ids spread over the whole
// vocabulary, half of them past 65535. The loss starts near uniform, ln(128256) = 11.76, and comes
// down; validation reads a uint32 shard too.
TEST_F(Cli, TrainsA128kVocabularyFromUint32Shards) {
  constexpr int V = 128256;
  std::ofstream(path("vocab128k.toml"))
      << "layers = 1\nheads = 2\nchannels = 32\nmax_seq_len = 64\nvocab_size = " << V << "\n";
  std::vector<uint32_t> tokens;
  for (int i = 0; i < 4000; ++i) tokens.push_back(uint32_t((i % 17) * (V - 1) / 16));  // 0..V-1
  EXPECT_GT(std::count_if(tokens.begin(), tokens.end(), [](uint32_t t) { return t > 65535; }),
            4000 / 3);  // 8 of every 17
  write_token_shard(path("wide_train.bin"), tokens, 4);
  write_token_shard(path("wide_val.bin"),
                    std::vector<uint32_t>(tokens.begin(), tokens.begin() + 300), 4);
  const Outcome r = run("train --model " + path("vocab128k.toml") + " --train-data " +
                        path("wide_train.bin") + " --val-data " + path("wide_val.bin") +
                        " -b 2 -t 32 --steps 12 --lr 3e-3 --val-every 6 --val-batches 2 --log " +
                        path("log.txt") + " --save " + path("out.bin"));
  ASSERT_EQ(r.status, 0) << r.output;
  const CheckpointInfo saved = read_checkpoint_header(path("out.bin"));
  EXPECT_EQ(saved.config.vocab_size, V);
  EXPECT_EQ(saved.config.padded_vocab_size, V);
  std::ifstream log(path("log.txt"));
  std::vector<double> losses, val_losses;
  for (std::string line; std::getline(log, line);) {
    const size_t trl = line.find("trl:"), tel = line.find("tel:");
    if (trl != std::string::npos) losses.push_back(std::stod(line.substr(trl + 4)));
    if (tel != std::string::npos) val_losses.push_back(std::stod(line.substr(tel + 4)));
  }
  ASSERT_EQ(losses.size(), 12u);
  EXPECT_NEAR(losses[0], std::log(double(V)), 0.5);  // GPT-2 initialisation starts near uniform
  for (const double loss : losses) EXPECT_TRUE(std::isfinite(loss)) << loss;
  EXPECT_LT(losses.back(), losses[0] - 1.0);
  ASSERT_FALSE(val_losses.empty());
  EXPECT_TRUE(std::isfinite(val_losses.back()));
  EXPECT_LT(val_losses.back(), std::log(double(V)) - 1.0);
}

// A glob that also catches a shard too short for one batch trains on the others and says which it
// left out.
TEST_F(Cli, TrainGlobWithAShortShardSkipsIt) {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 400; ++i) tokens.push_back(static_cast<uint16_t>((i % 17) * 2963 % 50257));
  write_token_shard(path("d_train_000000.bin"), tokens);
  write_token_shard(path("d_train_000001.bin"),
                    std::vector<uint16_t>(tokens.begin(), tokens.begin() + 40));
  const Outcome r = run("train --model gpt2-d2 --train-data '" + path("d_train_*.bin") +
                        "' -b 2 -t 32 --steps 2 --log " + path("log.txt"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(path("d_train_000001.bin") +
                          " holds 40 tokens, fewer than one batch needs (B*T+1 = 65): skipped"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("d_train_000000.bin holds"), std::string::npos) << r.output;
  std::ifstream log(path("log.txt"));
  int lines = 0;
  for (std::string line; std::getline(log, line);) lines += line.find("trl:") != std::string::npos;
  EXPECT_EQ(lines, 2);
}

// What a bug report needs: the version and commit, the compiler, the kernel targets built in and
// those this CPU runs (every one the dispatcher offers), and the optional parts.
TEST_F(Cli, VersionNamesTheBuildAndTheCpu) {
  // Where the sources are a git checkout and git is installed, the commit named is one of its
  // commits (the one built; later commits may have followed); otherwise "unknown".
  const std::string git = "git -C " LLMCPU_FIXTURE_DIR " ";
  const bool checkout = testing::run_shell(git + "rev-parse HEAD >/dev/null 2>&1").status == 0;
  for (const char* cmd : {"--version", "version"}) {
    const Outcome r = run(cmd);
    ASSERT_EQ(r.status, 0) << r.output;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(
        r.output, m, std::regex("^llmcpu [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit ([^ ,]+)")))
        << r.output;
    if (checkout) {
      const std::string commit = m[1].str().substr(0, m[1].str().find("-dirty"));
      EXPECT_EQ(testing::run_shell(git + "cat-file -e " + commit + "^{commit}").status, 0)
          << commit << " is not a commit of this checkout\n"
          << r.output;
    } else {
      EXPECT_EQ(m[1].str(), "unknown") << r.output;
    }
    EXPECT_TRUE(std::regex_search(r.output, std::regex("\ncompiler: +(g\\+\\+|clang) [0-9]+\\.")))
        << r.output;
    std::smatch runs;
    ASSERT_TRUE(std::regex_search(r.output, runs, std::regex("\n  runs: +([^\n]*)\n"))) << r.output;
    std::string want;
    for (std::string_view t : available_targets())
      want += (want.empty() ? "" : ", ") + std::string(t);
    EXPECT_EQ(runs[1].str(), want);
    const std::string built = r.output.substr(r.output.find("kernels built:"));
    for (std::string_view t : available_targets()) {
      EXPECT_NE(built.substr(0, built.find('\n')).find(std::string(t)), std::string::npos) << t;
    }
    for (const char* part : {"\nlibxsmm: ", "\noneDNN: ", "\nMPI: ", "\nVulkan plugin: "}) {
      EXPECT_NE(r.output.find(part), std::string::npos) << part << " missing in\n" << r.output;
    }
  }
  EXPECT_EQ(run("version extra").status, 2);
}

// A mistyped command shows its error first: the placement line comes only once the flags and files
// were checked.
TEST_F(Cli, ErrorsComeBeforeThePlacementLine) {
  for (const std::string& args :
       {"train --model gpt2-d2 --train-data " + path("missing_*.bin"),
        "train --model " + path("nope.bin") + " --train-data " + fixture("tiny", "train.bin"),
        "verify --model " + fixture("tiny", "model.bin") + " --state " + path("nope.bin"),
        "sample --model " + path("nope.bin")}) {
    const Outcome r = run(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.output;
    EXPECT_EQ(r.output.find("placement:"), std::string::npos) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("error: "), std::string::npos) << args << "\n" << r.output;
  }
}

TEST_F(Cli, SampleContinuesThePromptReproducibly) {
  // Needs the GPT-2 tokenizer in the cache folder (tools/fetch-data.sh puts it there).
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 2000; ++i) tokens.push_back(static_cast<uint16_t>((i % 13) * 3571 % 50257));
  write_token_shard(path("pattern.bin"), tokens);
  Outcome r = run("train --model gpt2-d2 --train-data " + path("pattern.bin") +
                  " -b 1 -t 32 --steps 2 --save " + path("d2.bin"));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string cmd = "sample --model " + path("d2.bin") +
                          " --prompt 'Once upon a time' --tokens 12 --seed 5 --top-k 50";
  const Outcome a = run(cmd), b = run(cmd);
  ASSERT_EQ(a.status, 0) << a.output << "\n(is the tokenizer fetched? run tools/fetch-data.sh)";
  // After the placement line (on stderr), the prompt and its continuation.
  EXPECT_TRUE(std::regex_search(a.output, std::regex("(^|\\n)Once upon a time"))) << a.output;
  EXPECT_TRUE(
      std::regex_search(a.output, std::regex("sample: [0-9]+ tokens after a 5-token context")))
      << a.output;
  // Same seed, same text (the timing line aside).
  EXPECT_EQ(a.output.substr(0, a.output.find("\nsample:")),
            b.output.substr(0, b.output.find("\nsample:")));
  r = run("sample --model " + path("d2.bin") + " --tokens 5000");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("exceed the model's context of 1024"), std::string::npos) << r.output;
  // A 311-token model is not GPT-2's tokenizer's: its document token is past the model's rows.
  r = run("sample --model " + fixture("tiny", "model.bin"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("the document token 50256 (<|endoftext|>) of --tokenizer"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("is past the V=311 of --model"), std::string::npos) << r.output;
}

TEST_F(Cli, UnknownFlagIsNamed) {
  const Outcome r = run("train --modle x.bin");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("unknown flag '--modle'"), std::string::npos) << r.output;
}

TEST_F(Cli, BadValuesAreNamed) {
  Outcome r = run("train --model gpt2-d2 --train-data x.bin --lr fast");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--lr 'fast' is not a number"), std::string::npos) << r.output;
  r = run("train --model gpt2-d2 --train-data " + fixture("tiny", "train.bin") +
          " --lr-schedule linear");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--lr-schedule"), std::string::npos) << r.output;
  r = run("train --model no-such-preset --train-data " + fixture("tiny", "train.bin"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("no-such-preset"), std::string::npos) << r.output;
  r = run("verify --model " + fixture("tiny", "model.bin"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--state is required"), std::string::npos) << r.output;
  r = run("frobnicate");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("unknown command 'frobnicate'"), std::string::npos) << r.output;
}

TEST_F(Cli, BadFilesAreNamed) {
  // A truncated checkpoint.
  fs::copy_file(fixture("tiny", "model.bin"), path("cut.bin"));
  fs::resize_file(path("cut.bin"), fs::file_size(path("cut.bin")) - 100);
  Outcome r = run("verify --model " + path("cut.bin") + " --state " + fixture("tiny", "state.bin"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find(path("cut.bin")), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("truncated"), std::string::npos) << r.output;
  // A state made for another model shape.
  r = run("verify --model " + fixture("tiny", "model.bin") + " --state " +
          fixture("small", "state.bin"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find(fixture("small", "state.bin")), std::string::npos) << r.output;
  // A shard with tokens beyond the model's vocabulary (small has V=500, tiny V=311).
  r = run("train --model " + fixture("tiny", "model.bin") + " --train-data " +
          fixture("small", "train.bin") + " -b 1 -t 8 --steps 1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("outside the model's vocabulary"), std::string::npos) << r.output;
  // A missing file.
  r = run("train --model " + fixture("tiny", "model.bin") + " --train-data " + path("none.bin") +
          " -b 1 -t 8");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find(path("none.bin")), std::string::npos) << r.output;
  // A sequence longer than the model's context.
  r = run("train --model " + fixture("edge", "model.bin") + " --train-data " +
          fixture("edge", "train.bin") + " -t 17");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("maxT"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace llmcpu
