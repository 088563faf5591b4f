// `llmcpu --version` (and `llmcpu version`): what a bug report needs to say about this build and
// this machine: the version and the commit it was built from, the compiler, the kernel targets
// compiled in and the ones this CPU gets, and which optional parts were built.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "llmcpu/git_commit.h"  // generated at build time by cmake/git_commit.cmake
#include "simd/bf16.h"
#include "simd/isa_cap.h"
#include "simd/kernels.h"
#include "tools/llmcpu/commands.h"

namespace llmcpu {

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

// /proc/cpuinfo's "model name" (x86), or "unknown".
std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      return line.substr(line.find(':') + 2);
    }
  }
  return "unknown";
}

#if LLMCPU_VULKAN_PLUGIN_BUILT
// The Vulkan plugin next to this executable, where the build puts it; "" when absent.
std::string plugin_next_to_program() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const std::filesystem::path plugin = self.parent_path() / "libllmcpu_vulkan.so";
  return std::filesystem::exists(plugin, ec) ? plugin.string() : "";
}
#endif

class VersionCommand : public Command {
 public:
  void add_flags(ArgParser&) override {}
  int run(const ArgParser& p) override;
};

int VersionCommand::run(const ArgParser&) {
  std::printf("llmcpu %s (commit %s, %s build)\n", LLMCPU_VERSION, LLMCPU_GIT_COMMIT,
              LLMCPU_BUILD_TYPE);
#if defined(__clang__)
  std::printf("compiler:        clang %s, C++%ld\n", __clang_version__,
              __cplusplus / 100 % 100 + 0L);
#elif defined(__GNUC__)
  std::printf("compiler:        g++ %s, C++%ld\n", __VERSION__, __cplusplus / 100 % 100 + 0L);
#endif
  std::vector<std::string> available;
  for (std::string_view t : available_targets()) available.emplace_back(t);
  std::vector<std::string> bf16;
  for (std::string_view t : available_bf16_targets()) bf16.emplace_back(t);
  std::printf("kernels built:   %s\n", join(compiled_targets()).c_str());
  std::printf("this CPU:        %s%s%s\n", cpu_model().c_str(),
              *isa_cap_setting() ? ", capped by " : "", isa_cap_setting());
  std::printf("  runs:          %s\n", join(available).c_str());
  std::printf("  fp32 kernels:  %s (LLMCPU_TARGET overrides)\n",
              std::string(active_kernels().target).c_str());
  std::printf("  bf16 kernels:  %s (of %s)\n", std::string(active_bf16_kernels().target).c_str(),
              join(bf16).c_str());
  const SimdBuild simd = simd_build();
  const std::string mpi = mpi_build();
  std::printf("libxsmm:         %s\n", simd.libxsmm ? "built in" : "not built");
  std::printf("oneDNN:          %s\n", simd.onednn ? "built in" : "not built");
  std::printf("MPI:             %s\n",
              mpi.empty() ? "not built (single process only)" : mpi.c_str());
#if LLMCPU_VULKAN_PLUGIN_BUILT
  const std::string plugin = plugin_next_to_program();
  std::printf("Vulkan plugin:   built%s%s\n", plugin.empty() ? "" : ", ",
              plugin.empty() ? " (not found next to this program)" : plugin.c_str());
#else
  std::printf("Vulkan plugin:   not built\n");
#endif
  return 0;
}

}  // namespace

std::unique_ptr<Command> make_version_command() { return std::make_unique<VersionCommand>(); }

}  // namespace llmcpu
