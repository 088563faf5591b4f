// PluginLibrary::load on every kind of file that is not a usable plugin: each is refused with one
// FileError that names the file and the reason, and a model's enable_offload turns it into the
// fallback line.
// The working fake plugin loads, names itself and its ops.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/model/gpt2.h"
#include "core/plugin/offload.h"
#include "core/plugin/plugin_library.h"
#include "simd/error.h"
#include "tests/common/tiny_config.h"
#include "tests/plugin/plugin_paths.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using testing::fake_plugin;

using testing::tiny_config;  // a small fp32 model to enable a plugin on

// The message of the FileError that loading `path` throws ("" if it loads).
std::string load_error(const std::string& path) {
  try {
    PluginLibrary::load(path);
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), path);
    return e.what();
  }
  return "";
}

void expect_refused(const std::string& path, const std::string& reason) {
  const std::string message = load_error(path);
  EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << "does not start with the path: " << message;
  EXPECT_NE(message.find(reason), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
  // The same reason reaches the user as the fallback line.
  Gpt2 model(tiny_config());
  const OffloadOutcome r = model.enable_offload(path);
  EXPECT_FALSE(r.active);
  EXPECT_FALSE(model.offload_active());
  EXPECT_EQ(r.message, "offload: " + message + "; running on the CPU");
}

TEST(PluginLoader, MissingFile) { expect_refused(fake_plugin("cpu") + ".missing", "no such file"); }

TEST(PluginLoader, TextFileNamedSo) {
  const std::string path =
      (fs::path(::testing::TempDir()) / ("llmcpu_not_a_plugin_" + std::to_string(getpid()) + ".so"))
          .string();
  std::ofstream f(path);
  for (int i = 0; i < 20; ++i) f << "this is a text file, not a shared library\n";
  f.close();
  expect_refused(path, "not a loadable shared library (");
  expect_refused(path, "invalid ELF header");
  fs::remove(path);
}

TEST(PluginLoader, Folder) { expect_refused(LLMCPU_FAKE_PLUGIN_DIR, "is a folder"); }

TEST(PluginLoader, NoEntrySymbol) {
  expect_refused(fake_plugin("no_entry"),
                 "not an llmcpu plugin (it exports no llmcpu_plugin_query");
}

TEST(PluginLoader, OtherAbiVersion) {
  const std::string want = "built for ABI version " +
                           std::to_string(LLMCPU_PLUGIN_ABI_VERSION + 1) + ", this llmcpu needs " +
                           std::to_string(LLMCPU_PLUGIN_ABI_VERSION);
  expect_refused(fake_plugin("other_abi"), want);
}

TEST(PluginLoader, EntryReturnsNull) {
  expect_refused(fake_plugin("null_entry"),
                 "built for another ABI version (it cannot serve version " +
                     std::to_string(LLMCPU_PLUGIN_ABI_VERSION) + ", which this llmcpu needs)");
}

TEST(PluginLoader, FunctionTableTooSmall) {
  expect_refused(fake_plugin("small_struct"),
                 "its function table is " +
                     std::to_string(offsetof(llmcpu_plugin_api, matmul_forward)) +
                     " bytes, ABI version " + std::to_string(LLMCPU_PLUGIN_ABI_VERSION) +
                     " needs at least " + std::to_string(sizeof(llmcpu_plugin_api)));
}

TEST(PluginLoader, NoDevice) {
  expect_refused(fake_plugin("no_device"), "no usable device: no fake device here (test plugin)");
}

TEST(PluginLoader, WorkingPluginLoads) {
  const std::string path = fake_plugin("cpu");
  auto lib = PluginLibrary::load(path);
  EXPECT_EQ(lib->name(), "fake");
  EXPECT_EQ(lib->device_name(), "plain loops on the CPU");
  EXPECT_EQ(lib->ops(), LLMCPU_PLUGIN_OP_MATMUL | LLMCPU_PLUGIN_OP_ATTENTION);
  EXPECT_EQ(describe_offloaded_ops(lib->ops()), "matmul, attention");
  lib.reset();
  Gpt2 model(tiny_config());
  const OffloadOutcome r = model.enable_offload(path);
  EXPECT_TRUE(r.active);
  EXPECT_EQ(r.message, "offload: fake (plain loops on the CPU): matmul, attention");
  EXPECT_TRUE(model.offload_active());
  EXPECT_EQ(model.kernels_summary(),
            "fp32, " + std::string(model.kernels().target) + "+fake kernels");
  model.disable_offload();
  EXPECT_FALSE(model.offload_active());
}

TEST(PluginLoader, FailingOpIsADeviceErrorWithThePluginsMessage) {
  auto lib = PluginLibrary::load(fake_plugin("fail_ops"));
  float out[4], inp[4] = {}, w[16] = {};
  try {
    lib->check(lib->api().matmul_forward(lib->device(), out, inp, w, nullptr, 1, 4, 4),
               "matmul_forward");
    ADD_FAILURE() << "no DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(std::string(e.what()), "offload (fake, " + fake_plugin("fail_ops") +
                                         "): matmul_forward failed: fake device lost during "
                                         "matmul_forward");
  }
}

TEST(PluginLoader, DescribesOps) {
  EXPECT_EQ(describe_offloaded_ops(0), "nothing");
  EXPECT_EQ(describe_offloaded_ops(LLMCPU_PLUGIN_OP_MATMUL), "matmul");
  EXPECT_EQ(describe_offloaded_ops(LLMCPU_PLUGIN_OP_ATTENTION), "attention");
}

}  // namespace
}  // namespace llmcpu
