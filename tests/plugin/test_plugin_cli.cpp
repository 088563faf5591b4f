// --plugin through the `llmcpu` program as a user runs it: every unusable plugin gives one stderr
// line naming the file and the reason and the command still succeeds on the CPU; the fake
// plain-loop plugin carries verify and training end to end (same losses as the CPU, one
// weights_changed per optimizer step), --offload-report prints one line per step, and a plugin that
// fails mid-run stops the program with its message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/plugin_abi.h"
#include "tests/common/process.h"
#include "tests/plugin/plugin_paths.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using testing::fake_plugin;
using testing::fixture;
using testing::Outcome;
using testing::run_llmcpu;

class PluginCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("llmcpu_plugin_cli_" + std::to_string(getpid()) + "_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::string verify_args(const std::string& name = "tiny") const {
    return "verify --model " + fixture(name, "model.bin") + " --state " +
           fixture(name, "state.bin");
  }
  std::string train_args(int steps) const {
    return "train --model " + fixture("edge", "model.bin") + " --train-data " +
           fixture("edge", "train.bin") + " -b 1 -t 7 --steps " + std::to_string(steps) +
           " --no-shuffle --lr 1e-3";
  }
  fs::path dir_;
};

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

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The fake plugin's counters (LLMCPU_FAKE_PLUGIN_LOG).
std::map<std::string, int> read_counters(const std::string& file) {
  std::map<std::string, int> m;
  std::ifstream in(file);
  std::string name;
  int n;
  while (in >> name >> n) m[name] = n;
  return m;
}

struct Unusable {
  const char* variant;  // a fake plugin, or "text" (a text file named .so) or "missing"
  const char* reason;
};
const Unusable kUnusable[] = {
    {"missing", "no such file"},
    {"text", "not a loadable shared library ("},
    {"no_entry", "not an llmcpu plugin (it exports no llmcpu_plugin_query symbol)"},
    {"other_abi", "built for ABI version 2, this llmcpu needs 1"},
    {"null_entry", "built for another ABI version (it cannot serve version 1"},
    {"small_struct", "its function table is "},
    {"no_device", "no usable device: no fake device here (test plugin)"},
};

TEST_F(PluginCli, UnusablePluginsFallBackToTheCpuWithTheirReason) {
  static_assert(LLMCPU_PLUGIN_ABI_VERSION == 1, "update the expected messages");
  std::ofstream(path("text.so")) << "plain text\n";
  for (const Unusable& u : kUnusable) {
    SCOPED_TRACE(u.variant);
    const std::string file = std::string(u.variant) == "missing" ? path("missing.so")
                             : std::string(u.variant) == "text"  ? path("text.so")
                                                                 : fake_plugin(u.variant);
    const Outcome r = run_llmcpu(verify_args() + " --plugin " + file);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("verify: OK"), std::string::npos) << r.output;
    const std::regex line("(?:^|\n)offload: " +
                          std::regex_replace(file, std::regex("[.^$|()\\[\\]{}*+?\\\\]"), "\\$&") +
                          ": ([^\n]*); running on the CPU\n");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.output, m, line)) << r.output;
    EXPECT_NE(m[1].str().find(u.reason), std::string::npos) << m[1];
    // The CPU tolerances stay in force: the limits column shows 1e-05 for the logits.
    EXPECT_TRUE(std::regex_search(r.output, std::regex("\nlogits .* 1.00e-05 ok"))) << r.output;
  }
}

TEST_F(PluginCli, TrainingFallsBackToTheCpuWithTheSameLosses) {
  const Outcome cpu = run_llmcpu(train_args(3));
  ASSERT_EQ(cpu.status, 0) << cpu.output;
  for (const char* variant : {"no_device", "other_abi"}) {
    const Outcome r = run_llmcpu(train_args(3) + " --plugin " + fake_plugin(variant));
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("offload: " + fake_plugin(variant) + ": "), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("; running on the CPU\n"), std::string::npos) << r.output;
    EXPECT_EQ(losses(r.output), losses(cpu.output)) << r.output;  // the very same CPU run
  }
}

TEST_F(PluginCli, RunConfigKeyNamesThePlugin) {
  std::ofstream(path("run.toml")) << "plugin = \"" << path("nowhere.so") << "\"\nsteps = 2\n";
  const Outcome r = run_llmcpu(train_args(2) + " --config " + path("run.toml"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("offload: " + path("nowhere.so") + ": no such file; running on the CPU"),
            std::string::npos)
      << r.output;
  // The command line overrides the file.
  const Outcome over = run_llmcpu(train_args(2) + " --config " + path("run.toml") + " --plugin " +
                                  fake_plugin("cpu"));
  ASSERT_EQ(over.status, 0) << over.output;
  EXPECT_NE(over.output.find("offload: fake (plain loops on the CPU): matmul, attention"),
            std::string::npos)
      << over.output;
}

TEST_F(PluginCli, VerifyPassesThroughTheFakePlugin) {
  for (const char* name : {"tiny", "small", "edge"}) {
    SCOPED_TRACE(name);
    const std::string log = path(std::string(name) + "_counters.txt");
    const Outcome r =
        run_llmcpu(verify_args(name) + " --plugin " + fake_plugin("cpu") + " --offload-report",
                   "LLMCPU_FAKE_PLUGIN_LOG=" + log);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("offload: fake (plain loops on the CPU): matmul, attention\n"),
              std::string::npos)
        << r.output;
    EXPECT_TRUE(std::regex_search(r.output, std::regex("\\+fake kernels"))) << r.output;
    EXPECT_NE(r.output.find("verify: OK"), std::string::npos) << r.output;
    // The offload bound is in force: the fp32 limits (core/verify/verify.h, kOffloadTolerances) ...
    EXPECT_TRUE(std::regex_search(r.output, std::regex("\nlogits .* 1.00e-05 ok"))) << r.output;
    EXPECT_TRUE(std::regex_search(r.output, std::regex("\nqkvw .* 1.00e-04 ok"))) << r.output;
    // ... and one report line for the one forward + backward pass.
    EXPECT_EQ(count(r.output, "offload: copy "), 1u) << r.output;
    EXPECT_TRUE(std::regex_search(
        r.output, std::regex("offload: copy [0-9.]+ ms, compute [0-9.]+ ms, hidden 50.0% of "
                             "copying, up [0-9.]+ MB, down [0-9.]+ MB \\([1-9][0-9]* ops\\)")))
        << r.output;
    // The plugin really computed: every offloaded op was called, the weights handed over once.
    const auto c = read_counters(log);
    EXPECT_EQ(c.at("set_weights"), 1);
    EXPECT_EQ(c.at("weights_changed"), 0);
    for (const char* op :
         {"matmul_forward", "matmul_backward", "attention_forward", "attention_backward"}) {
      EXPECT_GT(c.at(op), 0) << op;
    }
  }
  // Explicit tolerances win over the offload bound.
  const Outcome tight = run_llmcpu(verify_args() + " --plugin " + fake_plugin("cpu") +
                                   " --tolerance-logits 2e-6 --tolerance-grads 3e-5");
  EXPECT_TRUE(std::regex_search(tight.output, std::regex("\nlogits .* 2.00e-06 (ok|FAIL)")))
      << tight.output;
  EXPECT_TRUE(std::regex_search(tight.output, std::regex("\nwte .* 3.00e-05 (ok|FAIL)")))
      << tight.output;
}

TEST_F(PluginCli, TrainingThroughTheFakePluginMatchesTheCpu) {
  const int steps = 4;
  const Outcome cpu = run_llmcpu(train_args(steps));
  ASSERT_EQ(cpu.status, 0) << cpu.output;
  const std::string log = path("counters.txt");
  const Outcome r =
      run_llmcpu(train_args(steps) + " --plugin " + fake_plugin("cpu") + " --offload-report",
                 "LLMCPU_FAKE_PLUGIN_LOG=" + log);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("offload: fake (plain loops on the CPU): matmul, attention"),
            std::string::npos);
  // One hand-over at the start, and one refresh before each forward pass that follows an
  // optimizer step (the last step's update is never computed with on the device).
  const auto c = read_counters(log);
  EXPECT_EQ(c.at("set_weights"), 1);
  EXPECT_EQ(c.at("weights_changed"), steps - 1);
  EXPECT_EQ(c.at("matmul_forward"), c.at("matmul_backward"));
  EXPECT_GT(c.at("attention_backward"), 0);
  // One report line after each step line.
  EXPECT_EQ(count(r.output, "offload: copy "), size_t(steps)) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("step +1/4 [^\n]*\noffload: copy ")))
      << r.output;
  // The fake plugin reads weights from its own copy: without the refresh after each step its
  // losses would drift from the CPU's. Equal up to fp32 summation order.
  const std::vector<double> a = losses(cpu.output), b = losses(r.output);
  ASSERT_EQ(a.size(), size_t(steps));
  ASSERT_EQ(b.size(), size_t(steps));
  for (int i = 0; i < steps; ++i) EXPECT_NEAR(b[i], a[i], 1e-5 * a[i]) << "step " << i + 1;
  EXPECT_NE(a.front(), a.back()) << "training did not move the weights";
}

TEST_F(PluginCli, ResumeHandsTheResumedWeightsOver) {
  const std::string ck = path("ck");
  const Outcome first =
      run_llmcpu(train_args(4) + " --checkpoint-dir " + ck + " --checkpoint-every 2");
  ASSERT_EQ(first.status, 0) << first.output;
  fs::remove(ck + "/model_00000004.bin");  // resume from step 2
  fs::remove(ck + "/state_00000004.bin");
  const Outcome resumed =
      run_llmcpu(train_args(4) + " --resume " + ck + " --plugin " + fake_plugin("cpu"));
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  const std::vector<double> a = losses(first.output), b = losses(resumed.output);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 2u) << resumed.output;
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(b[i], a[i + 2], 1e-5 * a[i + 2]) << "step " << i + 3;
}

TEST_F(PluginCli, Bf16RunsOnTheCpuWithoutLoadingThePlugin) {
  const std::string log = path("counters.txt");
  const std::string why =
      "offload: " + fake_plugin("cpu") +
      ": the plugin computes in fp32 only, not bf16; running on the CPU";
  const Outcome t = run_llmcpu(train_args(2) + " --precision bf16 --plugin " + fake_plugin("cpu"),
                               "LLMCPU_FAKE_PLUGIN_LOG=" + log);
  ASSERT_EQ(t.status, 0) << t.output;
  EXPECT_NE(t.output.find(why), std::string::npos) << t.output;
  EXPECT_EQ(losses(t.output).size(), 2u) << t.output;
  const Outcome v = run_llmcpu(verify_args() + " --precision bf16 --plugin " + fake_plugin("cpu"),
                               "LLMCPU_FAKE_PLUGIN_LOG=" + log);
  EXPECT_EQ(v.status, 0) << v.output;
  EXPECT_NE(v.output.find(why), std::string::npos) << v.output;
  EXPECT_FALSE(fs::exists(log)) << "the plugin was loaded";
}

TEST_F(PluginCli, FailingPluginStopsWithItsMessage) {
  const Outcome r = run_llmcpu(train_args(2) + " --plugin " + fake_plugin("fail_ops"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("offload (fake, " + fake_plugin("fail_ops") +
                          "): matmul_forward failed: fake device lost during matmul_forward"),
            std::string::npos)
      << r.output;
}

TEST_F(PluginCli, OffloadReportWithoutPluginSaysSo) {
  const Outcome r = run_llmcpu(verify_args() + " --offload-report");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("offload: nothing to report, no plugin is active"), std::string::npos)
      << r.output;
}

TEST_F(PluginCli, BadToleranceIsAUsageError) {
  const Outcome r = run_llmcpu(verify_args() + " --tolerance-grads 0");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--tolerance-grads: expected a positive relative error"),
            std::string::npos)
      << r.output;
}

#ifdef LLMCPU_VULKAN_PLUGIN
// The Vulkan plugin on the PyTorch fixtures: within the offload bound (the fp32 limits, logits
// 1e-5 and gradients 1e-4; core/verify/verify.h), and training through it tracks the CPU. Skipped,
// with the plugin's message, only where the plugin finds no Vulkan device at all (no driver
// installed); any other fallback is a failure.
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
    ASSERT_NE(probe.output.find("offload: vulkan ("), std::string::npos) << probe.output;
  }
  const std::string plugin_ = LLMCPU_VULKAN_PLUGIN;
};

TEST_F(VulkanCli, VerifyOnPyTorchFixturesWithinTheOffloadBound) {
  for (const char* name : {"tiny", "small", "edge"}) {
    SCOPED_TRACE(name);
    const Outcome r = run_llmcpu(verify_args(name) + " --plugin " + plugin_ + " --offload-report");
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(std::regex_search(r.output,
                                  std::regex("offload: vulkan \\([^\n]+\\): matmul, attention\n")))
        << r.output;
    EXPECT_NE(r.output.find("verify: OK"), std::string::npos) << r.output;
    EXPECT_TRUE(std::regex_search(r.output, std::regex("\nlogits .* 1.00e-05 ok"))) << r.output;
    EXPECT_TRUE(std::regex_search(r.output, std::regex("\nwte .* 1.00e-04 ok"))) << r.output;
    EXPECT_EQ(count(r.output, "offload: copy "), 1u) << r.output;
  }
}

TEST_F(VulkanCli, TrainingTracksTheCpu) {
  const int steps = 4;
  const Outcome cpu = run_llmcpu(train_args(steps));
  ASSERT_EQ(cpu.status, 0) << cpu.output;
  const Outcome r = run_llmcpu(train_args(steps) + " --plugin " + plugin_ + " --offload-report");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(count(r.output, "offload: copy "), size_t(steps)) << r.output;
  const std::vector<double> a = losses(cpu.output), b = losses(r.output);
  ASSERT_EQ(a.size(), size_t(steps));
  ASSERT_EQ(b.size(), size_t(steps)) << r.output;
  // The loss is a mean over the batch: the logits' offload bound (1e-5) bounds it too.
  for (int i = 0; i < steps; ++i) EXPECT_NEAR(b[i], a[i], 1e-5 * a[i]) << "step " << i + 1;
}
#endif

}  // namespace
}  // namespace llmcpu
