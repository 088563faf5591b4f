// --plugin, --offload-layers, --device-memory-limit and --offload-report (plugin ABI version 2)
// through the `llmcpu` program as a user runs it.
// PluginCli (the fake plugins of fake_plugin.cpp, no GPU): every unusable plugin gives one stderr
// line naming the file and the reason and the command still succeeds on the CPU, with the CPU's
// numbers; a bad --offload-layers is a usage error; a plan that does not fit the (fake) device is
// refused naming the most blocks that fit, and that many get past the plan; a plugin whose
// configure() fails stops the run with its message; a model in a precision the plugin cannot run
// stays on the CPU without configuring it.
// VulkanCli (where the Vulkan plugin is built and a Vulkan device exists, lavapipe included):
// verify at every offload depth within the fp32 limits, 10 training steps tracking the CPU, the
// bytes each step moves, bit-exact resume, the device memory refusals, bf16 on the device within
// the bf16 limits.
// Deliberately not here: the loader's own checks (test_plugin_loader.cpp), the device's ops and
// blocks against the CPU's (vulkan_*_test.cpp), the copy/compute overlap (the report's "hidden"
// share depends on the device and is not asserted), large models.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "core/plugin_abi.h"
#include "tests/common/process.h"
#include "tests/common/temp_files.h"
#include "tests/plugin/plugin_paths.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using testing::fake_plugin;
using testing::fixture;
using testing::Outcome;
using testing::run_llmcpu;

// The limits `verify` holds fp32 to, and so the device (core/verify/verify.h): the logits and the
// loss, each gradient tensor.
constexpr double kLogitsLimit = 1e-5;
constexpr double kGradsLimit = 1e-4;
// The most two fp32 runs' losses may differ by after 10 AdamW steps
// (tests/cli/check_train_against_pytorch.py, LOSS_LIMIT).
constexpr double kLossLimit = 2e-4;

std::string regex_escape(const std::string& s) {
  return std::regex_replace(s, std::regex("[.^$|()\\[\\]{}*+?\\\\]"), "\\$&");
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// The losses of train's step lines, in order.
std::vector<double> losses(const std::string& output) {
  std::vector<double> out;
  const std::regex re("step +[0-9]+/[0-9]+ \\| loss ([0-9.]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), re);
       it != std::sregex_iterator(); ++it) {
    out.push_back(std::stod((*it)[1]));
  }
  return out;
}

// One row of verify's table: "qkvw  13824  8.66e-08  7.24e-07  1.00e-04 ok".
struct VerifyRow {
  std::string line;
  double limit;
  bool ok;
};
std::map<std::string, VerifyRow> verify_rows(const std::string& output) {
  std::map<std::string, VerifyRow> rows;
  const std::regex re(
      "(?:^|\n)(([a-z0-9]+) +[0-9]+ +[0-9.e+-]+ +[0-9.e+-]+ +([0-9.e+-]+) (ok|FAIL))(?=\n)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), re);
       it != std::sregex_iterator(); ++it) {
    rows[(*it)[2]] = {(*it)[1], std::stod((*it)[3]), (*it)[4] == "ok"};
  }
  return rows;
}

// Every row of verify's table says ok under the limits given: the logits and the loss, and the 16
// gradient tensors.
void expect_verify_within(const std::string& output, double logits_limit, double grads_limit) {
  const auto rows = verify_rows(output);
  ASSERT_EQ(rows.size(), 18u) << output;
  for (const auto& [name, row] : rows) {
    const double limit = name == "logits" || name == "loss" ? logits_limit : grads_limit;
    EXPECT_NEAR(row.limit, limit, 1e-3 * limit) << row.line;
    EXPECT_TRUE(row.ok) << row.line;
  }
  EXPECT_TRUE(contains(output, "\nverify: OK")) << output;
}

// One --offload-report line.
struct Report {
  double up_bytes, down_bytes;          // as printed: kB or MB with 2 decimals
  double up_half_unit, down_half_unit;  // half the last printed digit of each
  int calls;
};
std::vector<Report> reports(const std::string& output) {
  std::vector<Report> out;
  const std::regex re(
      "offload: copy [0-9.]+ ms, compute [0-9.]+ ms, hidden [0-9.]+% of copying, up ([0-9.]+) "
      "(kB|MB), down ([0-9.]+) (kB|MB) \\(([0-9]+) calls\\)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), re);
       it != std::sregex_iterator(); ++it) {
    const double up_unit = (*it)[2] == "kB" ? 1e3 : 1e6, down_unit = (*it)[4] == "kB" ? 1e3 : 1e6;
    out.push_back({std::stod((*it)[1]) * up_unit, std::stod((*it)[3]) * down_unit, 0.005 * up_unit,
                   0.005 * down_unit, std::stoi((*it)[5])});
  }
  return out;
}

std::string read_bytes(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// "1 block", "2 blocks": how the messages count blocks.
std::string blocks_text(int n) { return std::to_string(n) + (n == 1 ? " block" : " blocks"); }

// The hint of a refused plan: K of "at most K blocks fit (--offload-layers K)", 0 for "not even one
// block fits", -1 when the output has neither.
int most_blocks_that_fit(const std::string& output) {
  std::smatch m;
  if (std::regex_search(
          output, m, std::regex("; at most ([0-9]+) blocks? fits? \\(--offload-layers \\1\\)"))) {
    return std::stoi(m[1]);
  }
  return contains(output, "; not even one block fits") ? 0 : -1;
}

class PluginCli : public testing::TempDirTest {
 protected:
  static std::string verify_args(const std::string& name = "tiny") {
    return "verify --model " + fixture(name, "model.bin") + " --state " +
           fixture(name, "state.bin");
  }
  // `steps` steps of B x T on fixture `name`'s model and tokens, in order.
  static std::string train_args(int steps, const std::string& name = "edge", int B = 1, int T = 7) {
    return "train --model " + fixture(name, "model.bin") + " --train-data " +
           fixture(name, "train.bin") + " -b " + std::to_string(B) + " -t " + std::to_string(T) +
           " --steps " + std::to_string(steps) + " --no-shuffle --lr 1e-3";
  }
};

// The stderr line of a plugin that cannot be used: "offload: PATH: REASON; running on the CPU".
std::string fallback_reason(const std::string& output, const std::string& file) {
  std::smatch m;
  const std::regex line("(?:^|\n)offload: " + regex_escape(file) +
                        ": ([^\n]*); running on the CPU\n");
  return std::regex_search(output, m, line) ? m[1].str() : "(no fallback line)";
}

struct Unusable {
  const char* variant;  // a fake plugin, or "text" (a text file named .so) or "missing"
  std::string reason;
};
const std::string kAbi = std::to_string(LLMCPU_PLUGIN_ABI_VERSION);
const Unusable kUnusable[] = {
    {"missing", "no such file"},
    {"text", "not a loadable shared library ("},
    {"no_entry", "not an llmcpu plugin (it exports no llmcpu_plugin_query symbol)"},
    {"other_abi", "built for ABI version " + std::to_string(LLMCPU_PLUGIN_ABI_VERSION + 1) +
                      ", this llmcpu needs " + kAbi},
    {"v1", "built for ABI version 1, this llmcpu needs " + kAbi},
    {"v1_table", "built for ABI version 1, this llmcpu needs " + kAbi},
    {"null_entry", "built for another ABI version (it cannot serve version " + kAbi},
    {"small_struct", "its function table is "},
    {"missing_fn", "its function table has no read_state, schedule"},
    {"no_device", "no usable device: no fake device here (test plugin)"},
};

std::string unusable_file(const Unusable& u, const std::string& dir) {
  const std::string v = u.variant;
  return v == "missing" ? dir + "/missing.so" : v == "text" ? dir + "/text.so" : fake_plugin(v);
}

TEST_F(PluginCli, UnusablePluginsFallBackToTheCpuWithTheirReason) {
  std::ofstream(path("text.so")) << "plain text\n";
  const Outcome cpu = run_llmcpu(verify_args());
  ASSERT_EQ(cpu.status, 0) << cpu.output;
  const auto cpu_rows = verify_rows(cpu.output);
  ASSERT_EQ(cpu_rows.size(), 18u) << cpu.output;
  for (const Unusable& u : kUnusable) {
    const std::string file = unusable_file(u, dir_.string());
    SCOPED_TRACE(file);
    const Outcome r = run_llmcpu(verify_args() + " --plugin " + file);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(contains(fallback_reason(r.output, file), u.reason)) << r.output;
    EXPECT_EQ(count(r.output, "offload: "), 1u) << r.output;  // that line only
    // The CPU run's very numbers, under the CPU's limits.
    expect_verify_within(r.output, kLogitsLimit, kGradsLimit);
    for (const auto& [name, row] : verify_rows(r.output)) {
      EXPECT_EQ(row.line, cpu_rows.at(name).line);
    }
  }
}

TEST_F(PluginCli, TrainingFallsBackToTheCpuWithTheSameLosses) {
  const Outcome cpu = run_llmcpu(train_args(3));
  ASSERT_EQ(cpu.status, 0) << cpu.output;
  ASSERT_EQ(losses(cpu.output).size(), 3u) << cpu.output;
  for (const char* variant : {"no_device", "other_abi", "v1"}) {
    SCOPED_TRACE(variant);
    const Outcome r = run_llmcpu(train_args(3) + " --plugin " + fake_plugin(variant));
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(fallback_reason(r.output, fake_plugin(variant)), "(no fallback line)") << r.output;
    EXPECT_EQ(losses(r.output), losses(cpu.output)) << r.output;  // the very same CPU run
  }
}

TEST_F(PluginCli, RunConfigKeysNameThePluginAndItsLayers) {
  std::ofstream(path("run.toml")) << "plugin = \"" << path("nowhere.so") << "\"\nsteps = 2\n";
  const Outcome r = run_llmcpu(train_args(2) + " --config " + path("run.toml"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(fallback_reason(r.output, path("nowhere.so")), "no such file") << r.output;
  EXPECT_EQ(losses(r.output).size(), 2u) << r.output;
  // The command line overrides the file.
  const Outcome over = run_llmcpu(train_args(2) + " --config " + path("run.toml") + " --plugin " +
                                  fake_plugin("no_device"));
  ASSERT_EQ(over.status, 0) << over.output;
  EXPECT_TRUE(contains(fallback_reason(over.output, fake_plugin("no_device")), "no usable device"))
      << over.output;
  EXPECT_FALSE(contains(over.output, "nowhere.so")) << over.output;
  // offload_layers is read from the file too: 5 is not a layer count of the 1-layer model.
  std::ofstream(path("layers.toml"))
      << "plugin = \"" << fake_plugin("no_device") << "\"\noffload_layers = \"5\"\n";
  const Outcome bad = run_llmcpu(train_args(2) + " --config " + path("layers.toml"));
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output,
                       "--offload-layers: expected all or a number of blocks from 0 "
                       "to 1 (the model's layers), got '5'"))
      << bad.output;
}

TEST_F(PluginCli, BadOffloadLayersIsAUsageError) {
  // The tiny model has 2 layers. Checked even where the plugin then falls back to the CPU.
  for (const char* value : {"7", "3", "x", "-1", "1.5", "2x", "ALL"}) {
    SCOPED_TRACE(value);
    const Outcome r = run_llmcpu(verify_args() + " --plugin " + fake_plugin("no_device") +
                                 " --offload-layers '" + value + "'");
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_TRUE(contains(r.output,
                         "--offload-layers: expected all or a number of blocks from 0 to "
                         "2 (the model's layers), got '" +
                             std::string(value) + "'"))
        << r.output;
    EXPECT_FALSE(contains(r.output, "verify: OK")) << r.output;
  }
  for (const char* value : {"0", "2", "all"}) {
    SCOPED_TRACE(value);
    const Outcome r = run_llmcpu(verify_args() + " --plugin " + fake_plugin("no_device") +
                                 " --offload-layers " + value);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "\nverify: OK")) << r.output;
  }
  // train refuses before it makes its checkpoint folder.
  const Outcome t = run_llmcpu(train_args(2) + " --plugin " + fake_plugin("no_device") +
                               " --offload-layers 2 --checkpoint-dir " + path("ck"));
  EXPECT_EQ(t.status, 2) << t.output;
  EXPECT_TRUE(contains(t.output,
                       "--offload-layers: expected all or a number of blocks from 0 to 1 "
                       "(the model's layers), got '2'"))
      << t.output;
  EXPECT_TRUE(losses(t.output).empty()) << t.output;
  EXPECT_FALSE(fs::exists(path("ck"))) << t.output;
}

TEST_F(PluginCli, PlanThatDoesNotFitNamesTheBlocksThatDo) {
  // tiny_device: 1 MiB, and the fake's plan (fake_plugin.cpp) for the tiny model at B=2, T=13
  // needs about 1.4 MiB for everything but only about 0.53 MiB per block.
  const std::string plugin = fake_plugin("tiny_device");
  const Outcome all = run_llmcpu(verify_args() + " --plugin " + plugin);
  EXPECT_EQ(all.status, 2) << all.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      all.output, m,
      std::regex("--offload-layers: all layers of batch 2 x 13 on fake device \\(1 MiB\\): the "
                 "plan needs ([0-9]+) MiB on the device \\(weights, gradients and AdamW [0-9]+ "
                 "MiB, activations [0-9]+ MiB, other [0-9]+ MiB\\) and it has 1 MiB; ")))
      << all.output;
  EXPECT_GT(std::stoi(m[1]), 1);
  const int k = most_blocks_that_fit(all.output);
  ASSERT_GT(k, 0) << all.output;
  ASSERT_LT(k, 2) << all.output;
  EXPECT_FALSE(contains(all.output, "verify: OK")) << all.output;
  // K blocks get past the plan (and then stop: the fake computes nothing) ...
  const Outcome fits =
      run_llmcpu(verify_args() + " --plugin " + plugin + " --offload-layers " + std::to_string(k));
  EXPECT_NE(fits.status, 0) << fits.output;
  EXPECT_FALSE(contains(fits.output, "--offload-layers:")) << fits.output;
  EXPECT_TRUE(contains(fits.output, "not implemented (the fake plugin plans and configures only)"))
      << fits.output;
  // ... K + 1 do not, naming the same K.
  const Outcome more = run_llmcpu(verify_args() + " --plugin " + plugin + " --offload-layers " +
                                  std::to_string(k + 1));
  EXPECT_EQ(more.status, 2) << more.output;
  EXPECT_TRUE(contains(more.output, "--offload-layers: " + blocks_text(k + 1) + " of "))
      << more.output;
  EXPECT_EQ(most_blocks_that_fit(more.output), k) << more.output;
  // train refuses before it makes its checkpoint folder.
  const Outcome t = run_llmcpu(train_args(2, "tiny", 2, 13) + " --plugin " + plugin +
                               " --checkpoint-dir " + path("ck"));
  EXPECT_EQ(t.status, 2) << t.output;
  EXPECT_EQ(most_blocks_that_fit(t.output), k) << t.output;
  EXPECT_TRUE(losses(t.output).empty()) << t.output;
  EXPECT_FALSE(fs::exists(path("ck"))) << t.output;
}

TEST_F(PluginCli, FailingConfigureStopsWithItsMessage) {
  const std::string plugin = fake_plugin("fail_configure");
  const std::string why =
      "offload (fake, " + plugin + "): configure failed: fake device lost while allocating ";
  const Outcome v = run_llmcpu(verify_args() + " --plugin " + plugin);
  EXPECT_NE(v.status, 0) << v.output;
  EXPECT_TRUE(contains(v.output, why)) << v.output;
  EXPECT_FALSE(contains(v.output, "verify: OK")) << v.output;
  const Outcome t = run_llmcpu(train_args(2) + " --plugin " + plugin);
  EXPECT_NE(t.status, 0) << t.output;
  EXPECT_TRUE(contains(t.output, why)) << t.output;
  EXPECT_TRUE(losses(t.output).empty()) << t.output;
}

TEST_F(PluginCli, PrecisionThePluginCannotRunStaysOnTheCpu) {
  // fp32_only refuses a bf16 plan and, like fail_configure, stops any run that configures it:
  // these finish, so it was never configured.
  const std::string plugin = fake_plugin("fp32_only");
  const std::string why = "offload: " + plugin + ": offload (fake, " + plugin +
                          "): plan failed: fake device computes in fp32 only (test plugin); "
                          "running on the CPU";
  const Outcome cpu = run_llmcpu(train_args(2) + " --precision bf16");
  ASSERT_EQ(cpu.status, 0) << cpu.output;
  const Outcome t = run_llmcpu(train_args(2) + " --precision bf16 --plugin " + plugin);
  ASSERT_EQ(t.status, 0) << t.output;
  EXPECT_TRUE(contains(t.output, why)) << t.output;
  EXPECT_EQ(losses(t.output), losses(cpu.output)) << t.output;
  EXPECT_EQ(losses(t.output).size(), 2u) << t.output;
  const Outcome v = run_llmcpu(verify_args() + " --precision bf16 --plugin " + plugin);
  EXPECT_EQ(v.status, 0) << v.output;
  EXPECT_TRUE(contains(v.output, why)) << v.output;
  EXPECT_TRUE(contains(v.output, "\nverify: OK")) << v.output;
}

TEST_F(PluginCli, OffloadReportWithoutPluginSaysSo) {
  const std::string nothing = "offload: nothing to report, no plugin is active\n";
  const Outcome v = run_llmcpu(verify_args() + " --offload-report");
  EXPECT_EQ(v.status, 0) << v.output;
  EXPECT_EQ(count(v.output, nothing), 1u) << v.output;
  // Once per run, not once per step; the same where the plugin fell back to the CPU.
  for (const std::string& plugin : {std::string(), " --plugin " + fake_plugin("no_device")}) {
    const Outcome t = run_llmcpu(train_args(3) + plugin + " --offload-report");
    EXPECT_EQ(t.status, 0) << t.output;
    EXPECT_EQ(losses(t.output).size(), 3u) << t.output;
    EXPECT_EQ(count(t.output, nothing), 1u) << t.output;
    EXPECT_TRUE(reports(t.output).empty()) << t.output;
  }
}

TEST_F(PluginCli, BadToleranceIsAUsageError) {
  for (const char* flag : {"--tolerance-grads 0", "--tolerance-logits -1"}) {
    SCOPED_TRACE(flag);
    const Outcome r = run_llmcpu(verify_args() + " " + flag);
    EXPECT_EQ(r.status, 2) << r.output;
    const std::string name = std::string(flag).substr(0, std::string(flag).find(' '));
    EXPECT_TRUE(
        contains(r.output, name + ": expected a positive relative error") ||
        contains(r.output, std::string(flag) + " is out of range: expected a number in 0..1e+06"))
        << r.output;
  }
}

// A Llama-family model's blocks are not what the plugin ABI describes: --plugin is refused, naming
// the plugin and why, whatever the plugin (one that loads, one that is missing), in train and in
// verify (before its reference is read), instead of quietly running on the CPU.
void expect_llama_refused(const std::string& dir, const std::string& plugin) {
  const std::string preset = dir + "/llama.toml";
  std::ofstream(preset) << "model_type = \"llama\"\nhidden_size = 40\nintermediate_size = 64\n"
                           "num_hidden_layers = 1\nnum_attention_heads = 5\n"
                           "num_key_value_heads = 1\nmax_position_embeddings = 16\n"
                           "vocab_size = 256\n";
  const std::string train = "train --model " + preset + " --train-data " +
                            fixture("edge", "train.bin") + " -b 1 -t 7 --steps 1";
  const Outcome saved = run_llmcpu(train + " --save " + dir + "/llama_hf");
  ASSERT_EQ(saved.status, 0) << saved.output;
  for (const std::string& cmd :
       {train, "verify --model " + dir + "/llama_hf --state " + dir + "/none.safetensors"}) {
    for (const std::string layers : {"1", "all"}) {
      const Outcome r = run_llmcpu(cmd + " --plugin " + plugin + " --offload-layers " + layers);
      EXPECT_EQ(r.status, 2) << cmd << "\n" << r.output;
      EXPECT_TRUE(contains(r.output, "--plugin " + plugin +
                                         ": offloading runs GPT-2 blocks only; this llama model's "
                                         "blocks (RMSNorm, rotary positions, SwiGLU)"))
          << cmd << "\n"
          << r.output;
      EXPECT_FALSE(contains(r.output, "running on the CPU")) << r.output;
    }
  }
}

TEST_F(PluginCli, LlamaModelIsRefusedNamingThePlugin) {
  expect_llama_refused(dir_.string(), fake_plugin("tiny_device"));
  expect_llama_refused(dir_.string(), path("missing.so"));
}

#ifdef LLMCPU_VULKAN_PLUGIN
// The Vulkan plugin on the PyTorch fixtures. Skipped, with the plugin's message, only where it
// finds no Vulkan device at all (no driver installed); any other fallback is a failure.
class VulkanCli : public PluginCli {
 protected:
  void SetUp() override {
    PluginCli::SetUp();
    const Outcome probe = run_llmcpu(verify_args("edge") + " --plugin " + plugin_);
    const std::string fallback = "offload: " + plugin_ + ": no usable device: ";
    const size_t at = probe.output.find(fallback);
    if (at != std::string::npos) {
      GTEST_SKIP() << probe.output.substr(at, probe.output.find('\n', at) - at);
    }
    ASSERT_TRUE(contains(probe.output, "offload: vulkan (")) << probe.output;
  }
  // "offload: vulkan (DEVICE): WHAT\n", the stdout line of an active device.
  static std::regex active_line(const std::string& what) {
    return std::regex("(?:^|\n)offload: vulkan \\([^\n]+\\): " + regex_escape(what) + "\n");
  }
  // What --offload-layers `layers` puts on the device of an L-layer model, as the program says it.
  static std::string describe(const std::string& layers, int L) {
    if (layers == "all") {
      return "all: embedding, " + std::to_string(L) + (L == 1 ? " block" : " blocks") +
             ", head and loss";
    }
    const int n = std::stoi(layers);
    if (n == 0) return "no blocks (the CPU computes everything)";
    if (n == 1) return "block " + std::to_string(L - 1) + " of " + std::to_string(L);
    return "blocks " + std::to_string(L - n) + ".." + std::to_string(L - 1) + " of " +
           std::to_string(L);
  }
  const std::string plugin_ = LLMCPU_VULKAN_PLUGIN;
};

TEST_F(VulkanCli, LlamaModelIsRefusedNamingThePlugin) {
  expect_llama_refused(dir_.string(), plugin_);
}

TEST_F(VulkanCli, VerifyAtEveryOffloadDepthWithinTheFp32Limits) {
  for (const char* name : {"tiny", "small", "edge"}) {
    SCOPED_TRACE(name);
    const Outcome cpu = run_llmcpu(verify_args(name));
    ASSERT_EQ(cpu.status, 0) << cpu.output;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(cpu.output, m, std::regex("\\(L=([0-9]+) "))) << cpu.output;
    const int L = std::stoi(m[1]);
    std::vector<std::string> depths = {"0", "1", std::to_string(L), "all"};
    depths.erase(std::unique(depths.begin(), depths.end()), depths.end());  // L = 1
    for (const std::string& layers : depths) {
      SCOPED_TRACE("--offload-layers " + layers);
      const Outcome r = run_llmcpu(verify_args(name) + " --plugin " + plugin_ +
                                   " --offload-layers " + layers + " --offload-report");
      EXPECT_EQ(r.status, 0) << r.output;
      EXPECT_TRUE(std::regex_search(r.output, active_line(describe(layers, L)))) << r.output;
      expect_verify_within(r.output, kLogitsLimit, kGradsLimit);
      const std::vector<Report> rep = reports(r.output);
      ASSERT_EQ(rep.size(), 1u) << r.output;  // one forward and backward pass
      if (layers == "0") {
        // Nothing on the device: the CPU's very numbers.
        EXPECT_EQ(rep[0].calls, 0) << r.output;
        const auto cpu_rows = verify_rows(cpu.output);
        for (const auto& [tensor, row] : verify_rows(r.output)) {
          EXPECT_EQ(row.line, cpu_rows.at(tensor).line);
        }
      } else {
        EXPECT_TRUE(contains(r.output, ", vulkan " + describe(layers, L) + ", ")) << r.output;
        EXPECT_GT(rep[0].calls, 0) << r.output;
      }
    }
  }
  // Explicit tolerances win over the defaults.
  const Outcome tight = run_llmcpu(verify_args() + " --plugin " + plugin_ +
                                   " --tolerance-logits 2e-6 --tolerance-grads 3e-5");
  EXPECT_TRUE(std::regex_search(tight.output, std::regex("\nlogits .* 2.00e-06 (ok|FAIL)\n")))
      << tight.output;
  EXPECT_TRUE(std::regex_search(tight.output, std::regex("\nwte .* 3.00e-05 (ok|FAIL)\n")))
      << tight.output;
}

// Training through the device follows the CPU; with part of the model on it, each step's report
// shows the residual stream crossing (up: the input of the first owned block and the gradient of
// the last one's output; down: the reverse).
TEST_F(VulkanCli, TenTrainingStepsTrackTheCpu) {
  const int steps = 10, B = 3, T = 32, C = 64;  // the small fixture (L=3)
  const std::string args = train_args(steps, "small", B, T);
  const Outcome cpu = run_llmcpu(args);
  ASSERT_EQ(cpu.status, 0) << cpu.output;
  const std::vector<double> a = losses(cpu.output);
  ASSERT_EQ(a.size(), size_t(steps)) << cpu.output;
  EXPECT_GT(std::abs(a.front() - a.back()), 100 * kLossLimit) << "training did not move";
  for (const char* layers : {"all", "1"}) {
    SCOPED_TRACE(std::string("--offload-layers ") + layers);
    const Outcome r = run_llmcpu(args + " --plugin " + plugin_ + " --offload-layers " + layers +
                                 " --offload-report");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(std::regex_search(r.output, active_line(describe(layers, 3)))) << r.output;
    const std::vector<double> b = losses(r.output);
    ASSERT_EQ(b.size(), size_t(steps)) << r.output;
    for (int i = 0; i < steps; ++i) EXPECT_NEAR(b[i], a[i], kLossLimit) << "step " << i + 1;
    // One report line right after each step line.
    const std::vector<Report> rep = reports(r.output);
    ASSERT_EQ(rep.size(), size_t(steps)) << r.output;
    for (int i = 1; i <= steps; ++i) {
      EXPECT_TRUE(std::regex_search(
          r.output, std::regex("\nstep +" + std::to_string(i) + "/" + std::to_string(steps) +
                               " [^\n]*\noffload: copy ")))
          << "step " << i << "\n"
          << r.output;
    }
    if (std::string(layers) == "1") {
      const double residual = 2.0 * B * T * C * 4;  // (B,T,C) fp32, forward and backward
      for (const Report& x : rep) {
        EXPECT_NEAR(x.up_bytes, residual, x.up_half_unit) << r.output;
        EXPECT_NEAR(x.down_bytes, residual, x.down_half_unit) << r.output;
        EXPECT_EQ(x.calls, 2) << r.output;
      }
    }
  }
}

// With the whole model on the device only the tokens (inputs and targets, int32) go up and the
// per-token losses (fp32) come down: at 1536 tokens a step that is 12 KB up and 6 KB down, where
// one residual stream would be 245 kB.
TEST_F(VulkanCli, OffloadAllMovesOnlyTokensAndLosses) {
  const int B = 4, T = 16, tokens = 1536, C = 40;  // the edge fixture, 24 micro-batches a step
  const Outcome r = run_llmcpu(train_args(2, "edge", B, T) + " -d " + std::to_string(tokens) +
                               " --plugin " + plugin_ + " --offload-report");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "24 micro-batches per step (1536 tokens)")) << r.output;
  const std::vector<Report> rep = reports(r.output);
  ASSERT_EQ(rep.size(), 2u) << r.output;
  const double up = 2.0 * tokens * 4, down = 1.0 * tokens * 4;
  const double residual = 1.0 * tokens * C * 4;
  for (const Report& x : rep) {
    // One forward and one backward call per micro-batch, and nothing else crosses (the norm's
    // partial sums and the optimizer are not part of a pass).
    EXPECT_EQ(x.calls, 2 * tokens / (B * T)) << r.output;
    const double slack = 0;
    EXPECT_GE(x.up_bytes, up - x.up_half_unit) << r.output;
    EXPECT_LE(x.up_bytes, up + x.up_half_unit + slack) << r.output;
    EXPECT_GE(x.down_bytes, down - x.down_half_unit) << r.output;  // nonzero
    EXPECT_LE(x.down_bytes, down + x.down_half_unit + slack) << r.output;
    EXPECT_LT(up + x.up_half_unit + slack, residual);  // the bounds tell the two apart
  }
}

TEST_F(VulkanCli, ResumeIsBitExact) {
  const std::string args = train_args(6, "tiny", 2, 13) + " --plugin " + plugin_;
  for (const auto& [layers, precision] :
       {std::pair{"all", "fp32"}, {"1", "fp32"}, {"all", "bf16"}}) {
    SCOPED_TRACE(std::string("--offload-layers ") + layers + " --precision " + precision);
    const std::string run = args + " --offload-layers " + layers + " --precision " + precision;
    const std::string tag = std::string(layers) + "_" + precision;
    const std::string split = path("split_" + tag);
    const std::string whole = path("whole_" + tag);
    const Outcome first = run_llmcpu(run + " --checkpoint-dir " + split + " --checkpoint-every 3");
    ASSERT_EQ(first.status, 0) << first.output;
    const Outcome straight = run_llmcpu(run + " --checkpoint-dir " + whole);
    ASSERT_EQ(straight.status, 0) << straight.output;
    ASSERT_TRUE(fs::remove(split + "/model_00000006.bin")) << first.output;
    ASSERT_TRUE(fs::remove(split + "/state_00000006.bin")) << first.output;
    const Outcome resumed = run_llmcpu(run + " --resume " + split);
    ASSERT_EQ(resumed.status, 0) << resumed.output;
    EXPECT_TRUE(contains(resumed.output, "at step 3")) << resumed.output;
    EXPECT_TRUE(std::regex_search(resumed.output, active_line(describe(layers, 2))))
        << resumed.output;
    EXPECT_EQ(losses(resumed.output).size(), 3u) << resumed.output;
    for (const char* file : {"/model_00000006.bin", "/state_00000006.bin"}) {
      const std::string x = read_bytes(split + file), y = read_bytes(whole + file);
      ASSERT_FALSE(x.empty()) << split + file;
      EXPECT_TRUE(x == y) << file << " differs after the resume";
    }
    // The checkpoint really holds the device's state: step 6 is not step 3.
    EXPECT_FALSE(read_bytes(split + "/model_00000003.bin") ==
                 read_bytes(whole + "/model_00000006.bin"));
  }
}

TEST_F(VulkanCli, DeviceMemoryLimitRefusesNamingTheBlocksThatFit) {
  const int L = 3;  // the small fixture at B=3, T=32
  const std::string args = train_args(1, "small", 3, 32) + " --plugin " + plugin_;
  const Outcome tiny =
      run_llmcpu(args + " --device-memory-limit 1M --checkpoint-dir " + path("ck"));
  EXPECT_EQ(tiny.status, 2) << tiny.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      tiny.output, m,
      std::regex("--offload-layers: all layers of batch 3 x 32 on [^\n]+: the plan needs "
                 "([0-9]+) MiB on the device \\(weights, gradients and AdamW ([0-9]+) MiB, "
                 "activations ([0-9]+) MiB, other ([0-9]+) MiB\\) and it has 1 MiB; ")))
      << tiny.output;
  // Each figure is rounded up to whole MiB.
  const int needs = std::stoi(m[1]);
  const int parts = std::stoi(m[2]) + std::stoi(m[3]) + std::stoi(m[4]);
  EXPECT_GT(needs, 1);
  EXPECT_GE(parts, needs);
  EXPECT_LE(parts, needs + 2);
  EXPECT_EQ(most_blocks_that_fit(tiny.output), 0) << tiny.output;
  EXPECT_TRUE(losses(tiny.output).empty()) << tiny.output;
  EXPECT_FALSE(fs::exists(path("ck"))) << "a refused run left its checkpoint folder";

  // From just under what everything needs downwards: the most blocks that fit never grows, and
  // some limit fits some blocks but not all.
  int previous = L, some = -1;
  std::string some_limit;
  for (int mib = needs - 1; mib >= 1 && some < 0; --mib) {
    const std::string limit = std::to_string(mib) + "M";
    const Outcome r = run_llmcpu(args + " --device-memory-limit " + limit);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_TRUE(contains(r.output, "and it has " + std::to_string(mib) + " MiB; ")) << r.output;
    const int k = most_blocks_that_fit(r.output);
    ASSERT_GE(k, 0) << r.output;
    EXPECT_LE(k, previous) << r.output;
    previous = k;
    if (k == 0) break;
    if (k < L) {
      some = k;
      some_limit = limit;
    }
  }
  ASSERT_GT(some, 0) << "no limit from " << needs - 1 << " MiB down fits only some blocks";
  SCOPED_TRACE("--device-memory-limit " + some_limit);
  // Exactly that many run ...
  const Outcome fits = run_llmcpu(args + " --device-memory-limit " + some_limit +
                                  " --offload-layers " + std::to_string(some));
  EXPECT_EQ(fits.status, 0) << fits.output;
  EXPECT_TRUE(std::regex_search(fits.output, active_line(describe(std::to_string(some), L))))
      << fits.output;
  EXPECT_EQ(losses(fits.output).size(), 1u) << fits.output;
  // ... one more is refused, naming the same number.
  const Outcome more = run_llmcpu(args + " --device-memory-limit " + some_limit +
                                  " --offload-layers " + std::to_string(some + 1));
  EXPECT_EQ(more.status, 2) << more.output;
  EXPECT_TRUE(contains(more.output, "--offload-layers: " + blocks_text(some + 1) + " of "))
      << more.output;
  EXPECT_EQ(most_blocks_that_fit(more.output), some) << more.output;
}

// The CPU keeps the activations of its own blocks only (and one landing layer for the device's
// output; with all, one layer's worth): the memory plan's activations fall by the same amount for
// each layer the device takes (3 on the CPU, then 2, then 1), and a plugin that falls back keeps
// them all.
TEST_F(VulkanCli, TheCpuKeepsActivationsOfItsOwnBlocksOnly) {
  auto activations = [&](const std::string& extra) {
    const Outcome r = run_llmcpu(train_args(1, "small", 3, 64) + extra);
    EXPECT_EQ(r.status, 0) << r.output;
    std::smatch m;
    EXPECT_TRUE(std::regex_search(r.output, m, std::regex("\\| activations ([0-9.]+) \\|")))
        << r.output;
    return m.empty() ? -1.0 : std::stod(m[1]);
  };
  const double cpu = activations("");
  const double two = activations(" --plugin " + plugin_ + " --offload-layers 2");
  const double all = activations(" --plugin " + plugin_ + " --offload-layers all");
  const double fallback = activations(" --plugin " + path("missing.so"));
  EXPECT_GT(cpu, two);
  EXPECT_GT(two, all);
  EXPECT_NEAR(cpu - two, two - all, 0.1 + 1e-9);  // one layer each; printed to 0.1 MiB
  EXPECT_EQ(fallback, cpu);
}

// bf16 on the device: the CPU's mixed precision (bf16 weights' copy and GEMM inputs, fp32
// accumulation), held to the CPU bf16 run's limits: verify's bf16 defaults (logits 1.4e-2,
// gradients 1e-1, core/verify/verify.h) and, for the losses of a few steps, 1e-2 from the CPU's
// bf16 run (the limit the bf16 trajectories against PyTorch use, tests/CMakeLists.txt).
TEST_F(VulkanCli, Bf16RunsOnTheDeviceWithinTheBf16Limits) {
  for (const char* layers : {"all", "1"}) {
    SCOPED_TRACE(layers);
    const Outcome v = run_llmcpu(verify_args() + " --precision bf16 --plugin " + plugin_ +
                                 " --offload-layers " + layers);
    EXPECT_EQ(v.status, 0) << v.output;
    EXPECT_TRUE(contains(v.output, "offload: vulkan (")) << v.output;
    EXPECT_TRUE(std::regex_search(v.output, std::regex("\nlogits .* 1.40e-02 ok"))) << v.output;
    EXPECT_TRUE(std::regex_search(v.output, std::regex("\nqkvw .* 1.00e-01 ok"))) << v.output;
    EXPECT_TRUE(contains(v.output, "\nverify: OK")) << v.output;
    const Outcome cpu = run_llmcpu(train_args(3) + " --precision bf16");
    ASSERT_EQ(cpu.status, 0) << cpu.output;
    const Outcome t = run_llmcpu(train_args(3) + " --precision bf16 --plugin " + plugin_ +
                                 " --offload-layers " + layers);
    ASSERT_EQ(t.status, 0) << t.output;
    const std::vector<double> a = losses(cpu.output), b = losses(t.output);
    ASSERT_EQ(a.size(), 3u);
    ASSERT_EQ(b.size(), 3u) << t.output;
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(b[i], a[i], 1e-2) << "step " << i + 1;
  }
}
#endif

}  // namespace
}  // namespace llmcpu
