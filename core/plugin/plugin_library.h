// Loading one offload plugin: dlopen, the entry symbol, the ABI checks (version and struct size),
// and opening a device. Every way this can fail is a FileError whose message is one line naming the
// file and the reason ("PATH: built for ABI version 1, this llmcpu needs 2 (rebuild the plugin)");
// the caller decides to fall back to the CPU. The object owns the dlopen handle and the opened
// device and closes both. Deliberately not here: which kernels are routed to the plugin
// (core/plugin/offload.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/plugin_abi.h"

namespace llmcpu {

struct PluginOpenOptions {
  int device_index = -1;  // -1: the plugin's choice
  bool verbose = false;   // let the plugin print diagnostics to stderr
};

class PluginLibrary {
 public:
  // Loads the shared object at `path`, checks its ABI and opens a device. Throws FileError(path,
  // reason) when the file is missing, is not a shared object, is not an llmcpu plugin, was built
  // for another ABI version, or has no usable device.
  static std::unique_ptr<PluginLibrary> load(const std::string& path,
                                             const PluginOpenOptions& options = {});
  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  const std::string& path() const { return path_; }
  const llmcpu_plugin_api& api() const { return *api_; }
  llmcpu_plugin* device() const { return device_; }
  std::string name() const;         // "vulkan"
  std::string device_name() const;  // "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string last_error() const;

  // Throws DeviceError "offload (NAME, PATH): CALL failed: LAST_ERROR" unless status is OK.
  void check(int status, const char* call) const;

 private:
  PluginLibrary() = default;

  std::string path_;
  void* handle_ = nullptr;
  const llmcpu_plugin_api* api_ = nullptr;
  llmcpu_plugin* device_ = nullptr;
};

}  // namespace llmcpu
