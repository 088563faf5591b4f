#include "core/plugin/plugin_library.h"

#include <dlfcn.h>

#include <cstddef>
#include <filesystem>
#include <vector>

#include "simd/error.h"

namespace llmcpu {

namespace {

// dlerror() usually starts with the path it was given; the caller's message names the file already.
std::string dl_reason(const std::string& dl_path) {
  const char* e = dlerror();
  std::string s = e ? e : "unknown dlopen error";
  if (s.rfind(dl_path + ": ", 0) == 0) s.erase(0, dl_path.size() + 2);
  return s;
}

// The entries the engine calls; a plugin must fill them all.
void check_function_table(const llmcpu_plugin_api& api, const std::string& path) {
  std::vector<const char*> missing;
  auto need = [&](const void* fn, const char* name) {
    if (!fn) missing.push_back(name);
  };
  need(reinterpret_cast<const void*>(api.open), "open");
  need(reinterpret_cast<const void*>(api.close), "close");
  need(reinterpret_cast<const void*>(api.device_name), "device_name");
  need(reinterpret_cast<const void*>(api.last_error), "last_error");
  need(reinterpret_cast<const void*>(api.plan), "plan");
  need(reinterpret_cast<const void*>(api.configure), "configure");
  need(reinterpret_cast<const void*>(api.set_parameters), "set_parameters");
  need(reinterpret_cast<const void*>(api.set_moments), "set_moments");
  need(reinterpret_cast<const void*>(api.read_state), "read_state");
  need(reinterpret_cast<const void*>(api.forward), "forward");
  need(reinterpret_cast<const void*>(api.backward), "backward");
  need(reinterpret_cast<const void*>(api.zero_grad), "zero_grad");
  need(reinterpret_cast<const void*>(api.grad_sum_squares), "grad_sum_squares");
  need(reinterpret_cast<const void*>(api.adamw_step), "adamw_step");
  need(reinterpret_cast<const void*>(api.report), "report");
  need(reinterpret_cast<const void*>(api.schedule), "schedule");
  if (missing.empty()) return;
  std::string list;
  for (const char* m : missing) list += (list.empty() ? "" : ", ") + std::string(m);
  throw FileError(path, "not a usable llmcpu plugin: its function table has no " + list);
}

}  // namespace

std::unique_ptr<PluginLibrary> PluginLibrary::load(const std::string& path,
                                                   const PluginOpenOptions& options) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw FileError(path, "no such file");
  if (std::filesystem::is_directory(path, ec)) {
    throw FileError(
        path, "is a folder, expected a plugin (a shared library such as libllmcpu_vulkan.so)");
  }
  // A name without a slash would be searched for in the library path; we mean this file.
  const std::string dl_path = path.find('/') == std::string::npos ? "./" + path : path;

  std::unique_ptr<PluginLibrary> lib(new PluginLibrary());
  lib->path_ = path;
  dlerror();
  lib->handle_ = dlopen(dl_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib->handle_) {
    throw FileError(path, "not a loadable shared library (" + dl_reason(dl_path) + ")");
  }
  void* sym = dlsym(lib->handle_, LLMCPU_PLUGIN_ENTRY_NAME);
  if (!sym) {
    throw FileError(path, std::string("not an llmcpu plugin (it exports no ") +
                              LLMCPU_PLUGIN_ENTRY_NAME + " symbol)");
  }
  const std::string needs = std::to_string(LLMCPU_PLUGIN_ABI_VERSION);
  auto entry = reinterpret_cast<llmcpu_plugin_query_fn>(sym);
  const llmcpu_plugin_api* api = entry(LLMCPU_PLUGIN_ABI_VERSION);
  if (!api) {
    // It cannot serve ours: ask for the earlier versions to name the one it was built for.
    for (uint32_t v = LLMCPU_PLUGIN_ABI_VERSION - 1; v >= 1; --v) {
      const llmcpu_plugin_api* old = entry(v);
      if (old && old->abi_version == v) {
        throw FileError(path, "built for ABI version " + std::to_string(v) +
                                  ", this llmcpu needs " + needs + " (rebuild the plugin)");
      }
    }
    throw FileError(path, "built for another ABI version (it cannot serve version " + needs +
                              ", which this llmcpu needs)");
  }
  if (api->abi_version != LLMCPU_PLUGIN_ABI_VERSION) {
    throw FileError(path, "built for ABI version " + std::to_string(api->abi_version) +
                              ", this llmcpu needs " + needs + " (rebuild the plugin)");
  }
  if (api->struct_size < sizeof(llmcpu_plugin_api)) {
    throw FileError(path, "its function table is " + std::to_string(api->struct_size) +
                              " bytes, ABI version " + needs + " needs at least " +
                              std::to_string(sizeof(llmcpu_plugin_api)) +
                              " (built against another plugin_abi.h)");
  }
  check_function_table(*api, path);
  lib->api_ = api;

  char error[512] = {};
  llmcpu_plugin_open_args args{};
  args.struct_size = sizeof args;
  args.device_index = options.device_index;
  args.verbose = options.verbose ? 1u : 0u;
  args.error = error;
  args.error_size = sizeof error;
  llmcpu_plugin* device = nullptr;
  const int status = api->open(&args, &device);
  error[sizeof error - 1] = '\0';
  const std::string why = error[0] ? error : "no reason given";
  if (status == LLMCPU_PLUGIN_NO_DEVICE) throw FileError(path, "no usable device: " + why);
  if (status != LLMCPU_PLUGIN_OK || !device) {
    throw FileError(path, "cannot open a device: " + why);
  }
  lib->device_ = device;
  return lib;
}

PluginLibrary::~PluginLibrary() {
  if (device_ && api_) api_->close(device_);
  // The function table lives in the library: forget it before unloading.
  api_ = nullptr;
  if (handle_) dlclose(handle_);
}

std::string PluginLibrary::name() const { return api_->name ? api_->name : "plugin"; }

std::string PluginLibrary::device_name() const {
  const char* s = api_->device_name(device_);
  return s ? s : "unnamed device";
}

std::string PluginLibrary::last_error() const {
  const char* s = api_->last_error(device_);
  return s && *s ? s : "no message";
}

void PluginLibrary::check(int status, const char* call) const {
  if (status == LLMCPU_PLUGIN_OK) return;
  throw DeviceError("offload (" + name() + ", " + path_ + "): " + call +
                    " failed: " + last_error());
}

}  // namespace llmcpu
