// llmcpu_vulkan_probe's command line: the subcommand and its options, and the one JSON object on
// stdout whatever happens (an error too, as {"error": ...}), with the exit codes of probe.h.
#include "plugins/vulkan/probe.h"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "plugins/vulkan/device.h"

namespace llmcpu::vk {

ProbeInstance::ProbeInstance() {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "llmcpu_vulkan_probe";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  const VkResult r = vkCreateInstance(&ici, nullptr, &instance_);
  if (r != VK_SUCCESS) {
    instance_ = VK_NULL_HANDLE;
    throw NoDeviceError(
        std::string("vkCreateInstance failed with ") + result_name(r) +
        " (no Vulkan driver installed? Debian: apt-get install mesa-vulkan-drivers)");
  }
  uint32_t count = 0;
  VkResult e = vkEnumeratePhysicalDevices(instance_, &count, nullptr);
  devices_.resize(count);
  if (e == VK_SUCCESS && count) e = vkEnumeratePhysicalDevices(instance_, &count, devices_.data());
  if (e != VK_SUCCESS && e != VK_INCOMPLETE) {
    vkDestroyInstance(instance_, nullptr);
    throw NoDeviceError(std::string("vkEnumeratePhysicalDevices failed with ") + result_name(e));
  }
  devices_.resize(count);
}

ProbeInstance::~ProbeInstance() {
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

std::string version_string(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) +
         "." + std::to_string(VK_API_VERSION_PATCH(v));
}

namespace {

constexpr const char* kUsage =
    "usage: llmcpu_vulkan_probe devices\n"
    "       llmcpu_vulkan_probe gemm [--quick] [--device N] [--reps R] [--rows M]\n"
    "  devices    every Vulkan device the loader lists, and the one the plugin picks\n"
    "  gemm       the plugin's GEMM shader on GPT-2 124M's products (B=4, T=1024), fp32 and bf16\n"
    "  --quick    B=1, T=64, two timed runs, the lm_head's N capped (seconds on lavapipe)\n"
    "  --device N the device at position N of `devices` (default: the plugin's choice)\n"
    "  --reps R   timed runs per GEMM after a warm-up, at most (default 20; --quick 2)\n"
    "  --rows M   rows per dispatch (default: one chunk of the step, as the plugin cuts it)\n"
    "Prints one JSON object on stdout. Exit codes: 0 ok, 1 failure, 2 usage, 3 no device.\n";

int parse_int(std::string_view flag, const char* text, int lo, int hi) {
  if (!text) throw UsageError(std::string(flag) + " needs a value");
  const std::string_view s(text);
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) {
    throw UsageError(std::string(flag) + " " + text + ": expected an integer from " +
                     std::to_string(lo) + " to " + std::to_string(hi));
  }
  return v;
}

int run(int argc, char** argv, JsonWriter& out) {
  if (argc < 2) throw UsageError("missing subcommand: devices or gemm");
  const std::string_view cmd = argv[1];
  if (cmd == "--help" || cmd == "-h") {
    std::fputs(kUsage, stderr);
    out.begin_object().field("usage", kUsage).end_object();
    return kExitOk;
  }
  if (cmd == "devices") {
    if (argc > 2) throw UsageError(std::string("devices takes no arguments, got ") + argv[2]);
    return probe_devices(out);
  }
  if (cmd != "gemm") throw UsageError("unknown subcommand " + std::string(cmd));
  GemmOptions o;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--device") {
      o.device = parse_int(a, next, 0, 1 << 20), ++i;
    } else if (a == "--reps") {
      o.reps = parse_int(a, next, 1, 1000), ++i;
    } else if (a == "--rows") {
      o.rows = parse_int(a, next, 1, 1 << 16), ++i;
    } else {
      throw UsageError("gemm: unknown argument " + std::string(a));
    }
  }
  return probe_gemm(o, out);
}

// The whole output replaced by {"error": message}.
void error_only(JsonWriter& out, const char* message) {
  out = JsonWriter();
  out.begin_object().field("error", message).end_object();
}

}  // namespace
}  // namespace llmcpu::vk

int main(int argc, char** argv) {
  using namespace llmcpu::vk;
  JsonWriter out;
  int code = kExitFailure;
  try {
    code = run(argc, argv, out);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "llmcpu_vulkan_probe: %s\n%s", e.what(), kUsage);
    error_only(out, e.what());
    code = kExitUsage;
  } catch (const NoDeviceError& e) {
    std::fprintf(stderr, "llmcpu_vulkan_probe: no device: %s\n", e.what());
    error_only(out, e.what());
    code = kExitNoDevice;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llmcpu_vulkan_probe: %s\n", e.what());
    error_only(out, e.what());
    code = kExitFailure;
  }
  std::printf("%s\n", out.str().c_str());
  return code;
}
