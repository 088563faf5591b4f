// llmcpu_vulkan_probe: describes the Vulkan devices the loader lists and times the plugin's own
// GEMM shader on GPT-2 124M's shapes, printing one JSON object on stdout (diagnostics on stderr).
// The two subcommands live in probe_devices.cpp and probe_gemm.cpp, the command line in probe.cpp.
// Not here: anything the plugin needs at run time (the probe is a separate executable, never linked
// into the plugin), tuning of the shader (the probe only measures it).
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "plugins/vulkan/probe_json.h"

namespace llmcpu::vk {

// A bad command line: exit code 2, the message names the argument.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The probe's exit codes.
inline constexpr int kExitOk = 0, kExitFailure = 1, kExitUsage = 2, kExitNoDevice = 3;

// A Vulkan instance of API version 1.2 (the plugin's) and the physical devices it lists, in the
// loader's order. Throws NoDeviceError when no instance can be created.
class ProbeInstance {
 public:
  ProbeInstance();
  ~ProbeInstance();
  ProbeInstance(const ProbeInstance&) = delete;
  ProbeInstance& operator=(const ProbeInstance&) = delete;

  VkInstance instance() const { return instance_; }
  const std::vector<VkPhysicalDevice>& devices() const { return devices_; }

 private:
  VkInstance instance_ = VK_NULL_HANDLE;
  std::vector<VkPhysicalDevice> devices_;
};

// "1.3.277" for a packed Vulkan version.
std::string version_string(uint32_t v);

// `devices`: every physical device with its properties, the one the plugin would pick ("chosen")
// and the loader's version. Returns the exit code.
int probe_devices(JsonWriter& out);

struct GemmOptions {
  bool quick = false;  // B=1, T=64, few reps, the lm_head's N capped: seconds on lavapipe
  int device = -1;     // a position in `devices`' list; -1: the plugin's choice
  int reps = 0;        // timed runs per GEMM after one warm-up; 0: the default of the mode
  int rows = 0;        // rows per dispatch; 0: as the plugin cuts a B=4 step into chunks
};

// `gemm`: the plugin's GEMM shader checked against a CPU GEMM on a small shape, then timed on
// GPT-2 124M's products in fp32 and bf16, against the device's fp32 FMA roof. Returns the exit
// code.
int probe_gemm(const GemmOptions& options, JsonWriter& out);

}  // namespace llmcpu::vk
