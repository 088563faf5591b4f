// Every flag of every command at its edges, through the real program: for each command in the
// commands' own table (tools/llmcpu/commands.h) and each flag that takes a value, `llmcpu COMMAND`
// runs on small committed fixtures (one training step of a tiny model) with the flag set to 0, -1,
// 2^31-1, 2^31, 2^63, 1e308, nan, -inf, an empty string and a word; then pairs of flags whose
// product overflows 32 and 64 bits. Each run must end with exit status 0 or 2, and a 2 must come
// with a message that names the flag: never a signal, never silence. A run still going after
// kPatience is a hang, unless it is training (it printed a step): that one gets Ctrl-C after
// kTraining, as a user who asked for 2^31-1 steps would press it, and must then stop cleanly with
// status 0 (a run that ends by itself meanwhile must end with 0 as well: either way, the same
// verdict).
// One test per command, so that ctest runs them side by side.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/process.h"
#include "tests/common/temp_files.h"
#include "tools/llmcpu/commands.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// How long a run may take before it is judged: far above the slowest accepted run here (a training
// step of the tiny model, a bench of its kernels), so that only a run that would go on for good
// reaches it.
constexpr auto kPatience = 60s;
// How long a run that prints training steps goes on before it gets Ctrl-C.
constexpr auto kTraining = 1s;

const std::vector<std::string> kEdgeValues = {
    "0",     "-1",  "2147483647", "2147483648", "9223372036854775808",
    "1e308", "nan", "-inf",       "",           "word"};

std::string fixture(const std::string& name) {
  return std::string(LLMCPU_FIXTURE_DIR) + "/" + name;
}
std::string tiny_tokenizer() { return std::string(LLMCPU_FUZZ_DIR) + "/tiny_tokenizer"; }

struct Result {
  int status = -1;  // exit status; -1 if it ended by a signal
  int signal = 0;
  bool interrupted = false;  // it was training past kPatience and got SIGINT
  bool hung = false;
  std::string output;  // standard output and error
};

// Runs llmcpu with `args` in `dir` (files the flags name land there).
Result run_llmcpu(const std::vector<std::string>& args, const fs::path& dir) {
  const std::string log = (dir / "output.txt").string();
  const pid_t pid = testing::spawn_llmcpu(args, log, dir.string());
  Result r;
  if (pid < 0) {
    r.output = "posix_spawn failed";
    return r;
  }
  auto read_output = [&] {
    std::ifstream in(log, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  int status = 0;
  auto wait_until = [&](std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      if (waitpid(pid, &status, WNOHANG) == pid) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(5ms);
    }
  };
  // Until it ends, or kPatience passes, or it has been training for kTraining: a run that trains
  // is answering (a value such as --steps 2147483647 asks for that), and is stopped as a user would
  // stop it.
  const auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point training{};
  bool done = false;
  while (!done && std::chrono::steady_clock::now() - start < kPatience) {
    done = wait_until(std::chrono::steady_clock::now() + 100ms);
    if (done) break;
    const std::string so_far = read_output();
    const bool steps = so_far.rfind("step ", 0) == 0 || so_far.find("\nstep ") != std::string::npos;
    if (steps && training == std::chrono::steady_clock::time_point{}) {
      training = std::chrono::steady_clock::now();
    }
    if (steps && std::chrono::steady_clock::now() - training > kTraining) break;
  }
  if (!done && training != std::chrono::steady_clock::time_point{}) {
    r.interrupted = true;
    kill(pid, SIGINT);
    done = wait_until(std::chrono::steady_clock::now() + kPatience);
  }
  if (!done) {
    r.hung = true;
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  r.output = read_output();
  if (WIFEXITED(status)) r.status = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

std::string quoted(const std::vector<std::string>& args) {
  std::string s = "llmcpu";
  for (const std::string& a : args) s += " '" + a + "'";
  return s;
}

// One run's verdict: status 0, or 2 naming one of `flags`.
void expect_clean(const std::vector<std::string>& args, const std::vector<std::string>& flags,
                  const fs::path& dir) {
  const Result r = run_llmcpu(args, dir);
  const std::string what = quoted(args) + "\n" + r.output;
  ASSERT_FALSE(r.hung) << "no answer in " << kPatience.count() << " s: " << what;
  ASSERT_EQ(r.signal, 0) << "killed by signal " << r.signal << ": " << what;
  if (r.interrupted) {
    EXPECT_EQ(r.status, 0) << "interrupted while training, it did not stop cleanly: " << what;
    return;
  }
  ASSERT_TRUE(r.status == 0 || r.status == 2) << "exit status " << r.status << ": " << what;
  if (r.status == 2) {
    bool named = false;
    for (const std::string& flag : flags) named = named || r.output.find(flag) != std::string::npos;
    EXPECT_TRUE(named) << "the error does not name " << flags.front() << ": " << what;
  }
}

// What each command runs on when no flag is changed: small, quick and valid.
struct Base {
  std::vector<std::string> args;
  // Pairs of flags whose values multiply: each pair runs with both at each of kPairValues.
  std::vector<std::pair<std::string, std::string>> products;
  // Further runs: flags added to the base, and the flags whose name a refusal must carry.
  std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> extras = {};
};

// A prompt of about n tokens.
std::string long_prompt(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text += "ab ";
  return text;
}

// A model whose vocabulary is the tiny tokenizer's (sample decodes every id it draws), trained one
// step by the program itself; its path.
std::string model_of_the_tiny_tokenizer(const fs::path& dir) {
  std::ifstream in(tiny_tokenizer() + "/encoder.json");
  const std::string json((std::istreambuf_iterator<char>(in)), {});
  int vocab = 0;  // encoder.json's entries: one "TOKEN": ID pair each
  for (size_t at = 0; (at = json.find("\": ", at)) != std::string::npos; at += 3) ++vocab;
  std::ofstream(dir / "tok_model.toml") << "layers = 1\nheads = 2\nchannels = 16\n"
                                        << "max_seq_len = 32\nvocab_size = " << vocab << "\n";
  std::vector<uint16_t> tokens(2000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint16_t(i * 7 % vocab);
  testing::Bytes shard(256 * sizeof(int32_t), 0);
  const int32_t header[3] = {20240520, 1, int32_t(tokens.size())};
  std::memcpy(shard.data(), header, sizeof header);
  testing::append(shard, tokens.data(), tokens.size());
  testing::write_bytes((dir / "tok_train.bin").string(), shard);
  const std::string model = (dir / "tok_model.bin").string();
  const Result r = run_llmcpu({"train", "--model", (dir / "tok_model.toml").string(),
                               "--train-data", (dir / "tok_train.bin").string(), "-b", "1", "-t",
                               "16", "--steps", "1", "--threads", "1", "--save", model},
                              dir);
  EXPECT_EQ(r.status, 0) << r.output;
  return model;
}

std::map<std::string, Base> bases(const std::string& command, const fs::path& dir) {
  const std::string model = fixture("tiny_model.bin");
  {
    std::ofstream(dir / "text.txt") << "Hello, world. The quick brown fox.\n\nA second one.\n";
    std::ofstream(dir / "log.txt") << "s:0 trl:5.5\ns:0 tel:5.6\ns:1 trl:5.1\ns:1 tel:5.2\n";
  }
  // train, sample and chat print text: their model's vocabulary is the tiny tokenizer's.
  const std::string tok_model = command == "train" || command == "sample" || command == "chat"
                                    ? model_of_the_tiny_tokenizer(dir)
                                    : "";
  const std::string tok_train = (dir / "tok_train.bin").string();
  // A plugin that is not there: the run falls back to the CPU, and the offload flags' values are
  // still read and checked.
  const std::string no_plugin = (dir / "no_plugin.so").string();
  const std::string lr_config = (dir / "lr.toml").string();
  std::ofstream(lr_config) << "lr = 9007199254740993\n";
  return {
      {"train",
       {{"--model", tok_model, "--train-data", tok_train, "--batch", "2", "--seq-len", "8",
         "--steps", "1", "--threads", "1", "--tokenizer", tiny_tokenizer(), "--plugin", no_plugin},
        {{"--batch", "--seq-len"},
         {"--batch", "--total-batch"},
         {"--seq-len", "--total-batch"},
         {"--warmup", "--steps"},
         {"--sample-every", "--sample-tokens"},
         {"--val-every", "--val-batches"},
         {"--checkpoint-every", "--keep-checkpoints"}},
        // B*T past 32 bits with accumulation asked for (it once divided by a wrapped zero), a
        // thread count far past the machine, and a config whose real-valued key a double cannot
        // hold (it once became a learning rate of 0).
        {{{"--batch", "65536", "--seq-len", "65536", "--total-batch", "1"},
          {"--batch", "--seq-len"}},
         {{"--batch", "1048576", "--seq-len", "16777216", "--total-batch", "2147483647"},
          {"--batch", "--seq-len"}},
         {{"--threads", "100000000"}, {"--threads"}},
         {{"--config", lr_config}, {"'lr'"}}}}},
      {"verify",
       {{"--model", model, "--state", fixture("tiny_state.bin"), "--threads", "1", "--plugin",
         no_plugin},
        {{"--tolerance-logits", "--tolerance-grads"}}}},
      {"sample",
       {{"--model", tok_model, "--tokenizer", tiny_tokenizer(), "--tokens", "4", "--threads", "1"},
        {{"--tokens", "--top-k"}, {"--tokens", "--temperature"}},
        // The prompt's tokens plus --tokens against the context (maxT 32), in 64 bits.
        {{{"--prompt", long_prompt(40), "--tokens", "2147483647"}, {"--tokens"}},
         {{"--prompt", long_prompt(40), "--tokens", "16777216"}, {"--tokens"}},
         {{"--prompt", long_prompt(4000), "--tokens", "1"}, {"--tokens"}}}}},
      {"prepare",
       {{"--input", (dir / "text.txt").string(), "--out-dir", (dir / "shards").string(),
         "--tokenizer", tiny_tokenizer()},
        {{"--val-tokens", "--shard-tokens"}}}},
      {"tokenize", {{"--tokenizer", tiny_tokenizer(), (dir / "text.txt").string()}, {}}},
      {"topo", {{"--topology", "package:2 numa:2 core:4 pu:2"}, {{"--ranks", "--threads"}}}},
      {"convert", {{model, (dir / "converted").string()}, {}}},
      {"bench",
       {{"--model", model, "--batch", "1", "--seq-len", "4", "--reps", "1", "--targets", "scalar",
         "--threads", "1", "--format", "csv"},
        {{"--batch", "--seq-len"}, {"--batch", "--reps"}}}},
      {"plot",
       {{(dir / "log.txt").string(), "--output", (dir / "loss.svg").string()},
        {{"--width", "--height"}}}},
      {"version", {{}, {}}},
      // Standard input is empty: the model, tokenizer and template load, no turn runs.
      {"chat",
       {{"--model", tok_model, "--tokenizer", tiny_tokenizer(), "--max-tokens", "4", "--threads",
         "1"},
        {{"--max-tokens", "--context"}}}},
  };
}

// Values whose products overflow 32 bits (65536^2 = 2^32) and 64 bits (2^32 * 2^32), with the
// largest of each type.
const std::vector<std::string> kPairValues = {"65536", "4294967296", "2147483647",
                                              "9223372036854775807"};

class EdgeValues : public testing::TempDirTest,
                   public ::testing::WithParamInterface<std::string> {};

TEST_P(EdgeValues, EveryFlagAtEveryEdgeEndsInAnswer) {
  const std::string name = GetParam();
  const CommandInfo* info = find_command(name);
  ASSERT_NE(info, nullptr);
  const std::map<std::string, Base> all = bases(name, dir_);
  ASSERT_TRUE(all.count(name)) << "no base invocation for the command " << name
                               << " (add one to bases())";
  const Base& base = all.at(name);
  auto command = info->make();
  const ArgParser parser = command_parser(*info, *command);
  int n = 0;
  for (const FlagInfo& flag : parser.flags()) {
    if (flag.kind == FlagKind::kSwitch) continue;
    for (const std::string& value : kEdgeValues) {
      const fs::path dir = dir_ / ("run" + std::to_string(n++));
      fs::create_directories(dir);
      std::vector<std::string> args = {name};
      args.insert(args.end(), base.args.begin(), base.args.end());
      args.insert(args.end(), {"--" + flag.name, value});
      std::vector<std::string> named = {"--" + flag.name};
      if (flag.short_name) named.push_back(std::string("-") + flag.short_name + " ");
      expect_clean(args, named, dir);
      fs::remove_all(dir);
    }
  }
  for (const auto& [a, b] : base.products) {
    for (const std::string& va : kPairValues) {
      for (const std::string& vb : kPairValues) {
        const fs::path dir = dir_ / ("run" + std::to_string(n++));
        fs::create_directories(dir);
        std::vector<std::string> args = {name};
        args.insert(args.end(), base.args.begin(), base.args.end());
        args.insert(args.end(), {a, va, b, vb});
        expect_clean(args, {a, b}, dir);
        fs::remove_all(dir);
      }
    }
  }
  for (const auto& [flags, named] : base.extras) {
    const fs::path dir = dir_ / ("run" + std::to_string(n++));
    fs::create_directories(dir);
    std::vector<std::string> args = {name};
    args.insert(args.end(), base.args.begin(), base.args.end());
    args.insert(args.end(), flags.begin(), flags.end());
    expect_clean(args, named, dir);
    fs::remove_all(dir);
  }
  // Plain words where a command takes none, or too many.
  const fs::path dir = dir_ / "plain";
  fs::create_directories(dir);
  std::vector<std::string> args = {name};
  args.insert(args.end(), base.args.begin(), base.args.end());
  args.insert(args.end(), {"extra", "words", "2147483648"});
  const Result r = run_llmcpu(args, dir);
  EXPECT_EQ(r.status, 2) << quoted(args) << "\n" << r.output;
  EXPECT_EQ(r.signal, 0) << quoted(args) << "\n" << r.output;
}

std::vector<std::string> command_names() {
  std::vector<std::string> names;
  for (const CommandInfo& c : command_table()) names.push_back(c.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Commands, EdgeValues, ::testing::ValuesIn(command_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace llmcpu
