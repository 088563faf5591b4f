// PluginLibrary (ABI version 2) against the fake plugins of fake_plugin.cpp: every file that is not
// a usable plugin is refused with one FileError naming the file and the reason, and OffloadDevice
// turns that into the CPU fallback line; a working fake loads, its plan() answers with the figures
// of the fake's documented formula, and a failing call (plan, configure, an uncomputed forward)
// reaches the caller through PluginLibrary::check as a DeviceError naming the plugin, the call and
// the plugin's message.
// Deliberately not here: training through a plugin (the fakes compute nothing; the Vulkan plugin's
// tests cover that), the command-line flags (test_plugin_cli.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/plugin/offload.h"
#include "core/plugin/plugin_library.h"
#include "simd/error.h"
#include "tests/plugin/plugin_paths.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using testing::fake_plugin;

const std::string kNeeds = std::to_string(LLMCPU_PLUGIN_ABI_VERSION);

// The message of the FileError that loading `path` throws ("" if it loads).
std::string load_error(const std::string& path, const PluginOpenOptions& options = {}) {
  try {
    PluginLibrary::load(path, options);
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), path);
    return e.what();
  }
  return "";
}

// Refused with exactly "PATH: REASON", on one line, and the same reason reaches the user as the
// fallback line of OffloadDevice::open.
void expect_refused(const std::string& path, const std::string& reason,
                    const PluginOpenOptions& options = {}) {
  const std::string message = load_error(path, options);
  EXPECT_EQ(message, path + ": " + reason);
  EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
  OffloadOutcome outcome;
  const std::unique_ptr<OffloadDevice> device = OffloadDevice::open(path, &outcome, options);
  EXPECT_EQ(device, nullptr);
  EXPECT_FALSE(outcome.active);
  EXPECT_EQ(outcome.message, "offload: " + message + "; running on the CPU");
}

// The message of the DeviceError that check(status, call) throws ("" if none).
std::string check_error(const PluginLibrary& lib, int status, const char* call) {
  try {
    lib.check(status, call);
  } catch (const DeviceError& e) {
    return e.what();
  }
  return "";
}

TEST(PluginLoader, MissingFile) {
  expect_refused(fake_plugin("tiny_device") + ".missing", "no such file");
}

TEST(PluginLoader, TextFileNamedSo) {
  const std::string path =
      (fs::path(::testing::TempDir()) / ("llmcpu_not_a_plugin_" + std::to_string(getpid()) + ".so"))
          .string();
  std::ofstream f(path);
  for (int i = 0; i < 20; ++i) f << "this is a text file, not a shared library\n";
  f.close();
  const std::string message = load_error(path);
  EXPECT_EQ(message.rfind(path + ": not a loadable shared library (", 0), 0u) << message;
  EXPECT_NE(message.find("invalid ELF header"), std::string::npos) << message;
  EXPECT_EQ(message.back(), ')') << message;
  fs::remove(path);
}

TEST(PluginLoader, Folder) {
  expect_refused(LLMCPU_FAKE_PLUGIN_DIR,
                 "is a folder, expected a plugin (a shared library such as libllmcpu_vulkan.so)");
}

TEST(PluginLoader, NoEntrySymbol) {
  expect_refused(fake_plugin("no_entry"),
                 "not an llmcpu plugin (it exports no llmcpu_plugin_query symbol)");
}

TEST(PluginLoader, OtherAbiVersion) {
  expect_refused(fake_plugin("other_abi"),
                 "built for ABI version " + std::to_string(LLMCPU_PLUGIN_ABI_VERSION + 1) +
                     ", this llmcpu needs " + kNeeds + " (rebuild the plugin)");
}

TEST(PluginLoader, EntryReturnsNullForEveryVersion) {
  expect_refused(fake_plugin("null_entry"),
                 "built for another ABI version (it cannot serve version " + kNeeds +
                     ", which this llmcpu needs)");
}

// A version-1 plugin answers only when asked for version 1: the loader probes for it.
TEST(PluginLoader, Version1PluginNamesBothVersions) {
  static_assert(LLMCPU_PLUGIN_ABI_VERSION == 2, "the messages below name version 2");
  const std::string message = load_error(fake_plugin("v1"));
  EXPECT_NE(message.find("ABI version 1"), std::string::npos) << message;
  EXPECT_NE(message.find("needs 2"), std::string::npos) << message;
  expect_refused(fake_plugin("v1"),
                 "built for ABI version 1, this llmcpu needs 2 (rebuild the plugin)");
}

// A plugin that answers every version with its version-1 table.
TEST(PluginLoader, Version1TableNamesBothVersions) {
  expect_refused(fake_plugin("v1_table"),
                 "built for ABI version 1, this llmcpu needs 2 (rebuild the plugin)");
}

TEST(PluginLoader, FunctionTableTooSmall) {
  expect_refused(fake_plugin("small_struct"),
                 "its function table is " + std::to_string(offsetof(llmcpu_plugin_api, forward)) +
                     " bytes, ABI version " + kNeeds + " needs at least " +
                     std::to_string(sizeof(llmcpu_plugin_api)) +
                     " (built against another plugin_abi.h)");
}

TEST(PluginLoader, FunctionTableMissingEntries) {
  expect_refused(fake_plugin("missing_fn"),
                 "not a usable llmcpu plugin: its function table has no read_state, schedule");
}

TEST(PluginLoader, NoDevice) {
  expect_refused(fake_plugin("no_device"), "no usable device: no fake device here (test plugin)");
}

TEST(PluginLoader, NoSuchDeviceIndex) {
  PluginOpenOptions options;
  options.device_index = 1;
  expect_refused(fake_plugin("tiny_device"),
                 "no usable device: the fake plugin has one device (index 0), asked for 1",
                 options);
}

// The micro-batch shape of the plan tests: C 32, NH 4, L 6, maxT 16, V 50 (Vp 64), B 2, T 8.
// Per the formula at the top of fake_plugin.cpp:
constexpr uint64_t kBlockParams = 12 * 32 * 32 + 13 * 32;        // 12704 floats
constexpr uint64_t kBlockWeightBytes = kBlockParams * 16;        // params, grads, m, v: 203264
constexpr uint64_t kBlockTokenFloats = 18 * 32 + 2 * 4 * 8 + 4;  // 644 per token
constexpr uint64_t kTokens = 2 * 8;
constexpr uint64_t kBlockActivationBytes = 4 * kTokens * kBlockTokenFloats;  // 41216
constexpr uint64_t kStagingBytes = 4 * 4 * kTokens * 32;                     // 8192
constexpr uint64_t kDeviceBytes = 1 << 20;                                   // tiny_device

llmcpu_model_desc tiny_desc(int first_layer, uint32_t flags = 0) {
  llmcpu_model_desc d{};
  d.struct_size = sizeof d;
  d.precision = LLMCPU_PRECISION_FP32;
  d.max_seq_len = 16;
  d.vocab_size = 50;
  d.padded_vocab_size = 64;
  d.num_layers = 6;
  d.num_heads = 4;
  d.channels = 32;
  d.batch = 2;
  d.seq_len = 8;
  d.first_layer = first_layer;
  d.flags = flags;
  // llm.c's order: wte (Vp, C), wpe (maxT, C), the per-layer tensors (L, ...), lnfw, lnfb (C).
  const uint64_t C = 32, L = 6;
  // ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb
  const uint64_t per_layer[12] = {C, C, 3 * C * C, 3 * C, C * C,     C,
                                  C, C, 4 * C * C, 4 * C, 4 * C * C, C};
  d.tensor_offset[0] = 0;
  d.tensor_offset[1] = 64 * C;
  uint64_t offset = d.tensor_offset[1] + 16 * C;
  for (int i = 0; i < 12; ++i) {
    d.tensor_offset[2 + i] = offset;
    offset += L * per_layer[i];
  }
  d.tensor_offset[14] = offset;
  d.tensor_offset[15] = offset + C;
  return d;
}

llmcpu_memory_plan plan_of(const PluginLibrary& lib, const llmcpu_model_desc& desc) {
  llmcpu_memory_plan plan{};
  plan.struct_size = sizeof plan;
  lib.check(lib.api().plan(lib.device(), &desc, &plan), "plan");
  return plan;
}

TEST(PluginLoader, WorkingPluginLoadsAndPlans) {
  const std::string path = fake_plugin("tiny_device");
  auto lib = PluginLibrary::load(path);
  EXPECT_EQ(lib->path(), path);
  EXPECT_EQ(lib->name(), "fake");
  EXPECT_EQ(lib->device_name(), "fake device (1 MiB)");
  EXPECT_EQ(lib->last_error(), "no message");

  // The last two blocks, nothing else.
  const llmcpu_memory_plan p = plan_of(*lib, tiny_desc(4));
  EXPECT_EQ(p.struct_size, sizeof p);
  EXPECT_EQ(p.weight_bytes, 2 * kBlockWeightBytes);
  EXPECT_EQ(p.activation_bytes, 2 * kBlockActivationBytes);
  EXPECT_EQ(p.other_bytes, kStagingBytes);
  EXPECT_EQ(p.total_bytes, 497152u);
  EXPECT_EQ(p.available_bytes, kDeviceBytes);
  EXPECT_EQ(p.fits, 1u);
  // (1 MiB - staging) / (203264 + 41216) = 4.26 blocks.
  EXPECT_EQ(p.max_layers, 4);
  EXPECT_EQ(p.all_fits, 0u);
}

TEST(PluginLoader, PlanOfTheWholeModel) {
  auto lib = PluginLibrary::load(fake_plugin("tiny_device"));
  const llmcpu_memory_plan p =
      plan_of(*lib, tiny_desc(0, LLMCPU_OFFLOAD_EMBEDDING | LLMCPU_OFFLOAD_HEAD));
  // wte (64*32), wpe (16*32) and lnf (2*32) besides the six blocks.
  EXPECT_EQ(p.weight_bytes, 6 * kBlockWeightBytes + (64 * 32 + 16 * 32 + 2 * 32) * 16);
  // The head keeps Vp + C + 2 floats per token, the embedding C.
  EXPECT_EQ(p.activation_bytes, 6 * kBlockActivationBytes + 4 * kTokens * (64 + 32 + 2 + 32));
  // Tokens up, targets up and losses down.
  EXPECT_EQ(p.other_bytes, kStagingBytes + 4 * 3 * kTokens);
  EXPECT_EQ(p.total_bytes, 1525568u);
  EXPECT_EQ(p.total_bytes, p.weight_bytes + p.activation_bytes + p.other_bytes);
  EXPECT_EQ(p.fits, 0u);
  EXPECT_EQ(p.max_layers, 4);
  EXPECT_EQ(p.all_fits, 0u);
}

TEST(PluginLoader, PlanUnderAMemoryLimit) {
  auto lib = PluginLibrary::load(fake_plugin("tiny_device"));
  llmcpu_model_desc d = tiny_desc(4);
  d.memory_limit = 400000;
  const llmcpu_memory_plan p = plan_of(*lib, d);
  EXPECT_EQ(p.total_bytes, 497152u);
  EXPECT_EQ(p.available_bytes, 400000u);
  EXPECT_EQ(p.fits, 0u);
  EXPECT_EQ(p.max_layers, 1);  // (400000 - 8192) / 244480
  // A limit above the device's size leaves the device's size.
  d.memory_limit = 4 * kDeviceBytes;
  EXPECT_EQ(plan_of(*lib, d).available_bytes, kDeviceBytes);
}

TEST(PluginLoader, PlanInBf16) {
  auto lib = PluginLibrary::load(fake_plugin("tiny_device"));
  llmcpu_model_desc d = tiny_desc(4);
  d.precision = LLMCPU_PRECISION_BF16;
  const llmcpu_memory_plan p = plan_of(*lib, d);
  EXPECT_EQ(p.weight_bytes, 2 * kBlockParams * 18);      // and a bf16 copy of the weights
  EXPECT_EQ(p.activation_bytes, kBlockActivationBytes);  // 2 blocks at half the size
  EXPECT_EQ(p.other_bytes, kStagingBytes);
}

TEST(PluginLoader, PlanOfADescThePluginCannotRunIsADeviceError) {
  const std::string path = fake_plugin("tiny_device");
  auto lib = PluginLibrary::load(path);
  llmcpu_model_desc d = tiny_desc(4);
  d.channels = 30;
  llmcpu_memory_plan p{};
  p.struct_size = sizeof p;
  EXPECT_EQ(
      check_error(*lib, lib->api().plan(lib->device(), &d, &p), "plan"),
      "offload (fake, " + path + "): plan failed: channels 30 is not a multiple of num_heads 4");
  d = tiny_desc(2, LLMCPU_OFFLOAD_EMBEDDING);
  EXPECT_EQ(check_error(*lib, lib->api().plan(lib->device(), &d, &p), "plan"),
            "offload (fake, " + path + "): plan failed: the embedding needs first_layer 0, got 2");
  d = tiny_desc(4);
  d.struct_size = offsetof(llmcpu_model_desc, tensor_offset);
  EXPECT_EQ(check_error(*lib, lib->api().plan(lib->device(), &d, &p), "plan"),
            "offload (fake, " + path + "): plan failed: llmcpu_model_desc is " +
                std::to_string(offsetof(llmcpu_model_desc, tensor_offset)) + " bytes, expected " +
                std::to_string(sizeof(llmcpu_model_desc)));
}

TEST(PluginLoader, ConfigureRefusesAPlanThatDoesNotFit) {
  const std::string path = fake_plugin("tiny_device");
  auto lib = PluginLibrary::load(path);
  const llmcpu_model_desc d = tiny_desc(0, LLMCPU_OFFLOAD_EMBEDDING | LLMCPU_OFFLOAD_HEAD);
  const std::vector<float> params(d.tensor_offset[15] + 32, 0.0f);
  EXPECT_EQ(check_error(*lib, lib->api().configure(lib->device(), &d, params.data()), "configure"),
            "offload (fake, " + path +
                "): configure failed: the plan needs 1525568 bytes on the fake device (weights and "
                "AdamW 1261568, activations 255616, other 8384) but it has 1048576; at most 4 "
                "blocks fit");
}

TEST(PluginLoader, ConfiguredFakeComputesNothing) {
  const std::string path = fake_plugin("tiny_device");
  auto lib = PluginLibrary::load(path);
  const std::string prefix = "offload (fake, " + path + "): ";
  EXPECT_EQ(check_error(*lib, lib->api().zero_grad(lib->device()), "zero_grad"),
            prefix + "zero_grad failed: not configured");
  const llmcpu_model_desc d = tiny_desc(4);
  const std::vector<float> params(d.tensor_offset[15] + 32, 0.0f);
  EXPECT_EQ(check_error(*lib, lib->api().configure(lib->device(), &d, params.data()), "configure"),
            "");
  llmcpu_forward_args args{};
  args.struct_size = sizeof args;
  args.logits_position = LLMCPU_LOGITS_NONE;
  args.dloss = NAN;
  EXPECT_EQ(check_error(*lib, lib->api().forward(lib->device(), &args), "forward"),
            prefix + "forward failed: not implemented (the fake plugin plans and configures only)");
  llmcpu_offload_report r{};
  r.struct_size = sizeof r;
  r.calls = 7;
  EXPECT_EQ(check_error(*lib, lib->api().report(lib->device(), &r), "report"), "");
  EXPECT_EQ(r.calls, 0u);
  EXPECT_EQ(r.struct_size, sizeof r);
}

TEST(PluginLoader, FailingConfigureIsADeviceErrorWithThePluginsMessage) {
  const std::string path = fake_plugin("fail_configure");
  auto lib = PluginLibrary::load(path);
  EXPECT_EQ(lib->device_name(), "fake device (1 TiB)");
  const llmcpu_model_desc d = tiny_desc(0, LLMCPU_OFFLOAD_EMBEDDING | LLMCPU_OFFLOAD_HEAD);
  const llmcpu_memory_plan p = plan_of(*lib, d);
  EXPECT_EQ(p.fits, 1u);
  EXPECT_EQ(p.all_fits, 1u);
  EXPECT_EQ(p.max_layers, 6);
  const std::vector<float> params(d.tensor_offset[15] + 32, 0.0f);
  try {
    lib->check(lib->api().configure(lib->device(), &d, params.data()), "configure");
    ADD_FAILURE() << "no DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(std::string(e.what()),
              "offload (fake, " + path +
                  "): configure failed: fake device lost while allocating 1525568 bytes (test "
                  "plugin)");
  }
  EXPECT_EQ(lib->last_error(), "fake device lost while allocating 1525568 bytes (test plugin)");
}

}  // namespace
}  // namespace llmcpu
