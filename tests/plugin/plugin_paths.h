// Where the plugin tests find the fake plugins (built next to them by tests/plugin/CMakeLists.txt),
// the committed fixtures and, where it is built, the Vulkan plugin.
#pragma once

#include <string>

namespace llmcpu::testing {

// One of the fake plugins of fake_plugin.cpp: "other_abi", "null_entry", "v1", "v1_table",
// "small_struct", "no_entry", "no_device", "missing_fn", "fail_configure", "tiny_device".
inline std::string fake_plugin(const std::string& variant) {
  return std::string(LLMCPU_FAKE_PLUGIN_DIR) + "/libllmcpu_fake_plugin_" + variant + ".so";
}

inline std::string fixture(const std::string& name, const std::string& suffix) {
  return std::string(LLMCPU_FIXTURE_DIR) + "/" + name + "_" + suffix;
}

}  // namespace llmcpu::testing
