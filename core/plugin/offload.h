// One model's offload device: a loaded plugin that keeps the model's weights resident and computes
// the ops it offers (matmul, attention) for that model's offload executor
// (core/model/executors.h). Each model that offloads owns one; nothing here is global, so two
// models in one process may each have their own plugin, or one may have none. A plugin that cannot
// be used never stops the program: open() says why and the model stays on the CPU.
// Deliberately not here: dlopen and the ABI checks (plugin_library.h), which model ops go to the
// device (the executor), command-line flags.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/plugin/plugin_library.h"

namespace llmcpu {

struct OffloadOutcome {
  bool active = false;
  // One line: "offload: vulkan (llvmpipe ...): matmul, attention" when active, else
  // "offload: PATH: REASON; running on the CPU".
  std::string message;
};

class OffloadDevice {
 public:
  // Loads the plugin at `path` and hands it the flat parameters (count floats, at the same address
  // for the device's life), which it keeps on the device. Returns null when the plugin cannot be
  // loaded or cannot keep the weights; `outcome` says what happened either way.
  static std::unique_ptr<OffloadDevice> open(const std::string& path, const float* params,
                                             size_t count, OffloadOutcome* outcome,
                                             const PluginOpenOptions& options = {});

  bool has_matmul() const { return ops_ & LLMCPU_PLUGIN_OP_MATMUL; }
  bool has_attention() const { return ops_ & LLMCPU_PLUGIN_OP_ATTENTION; }
  std::string name() const { return lib_->name(); }

  // The plugin's ops (core/plugin_abi.h has their contracts); a failing call throws DeviceError.
  // A weight inside the array given to open() is served from the device copy.
  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                      size_t N, int C, int OC);
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, size_t N, int C, int OC);
  void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH);
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B,
                          int T, int C, int NH);

  // The parameters changed on the host (an optimizer step, a load): the device copy is refreshed.
  void weights_changed();
  // The device figures since the last call (copy and compute time, overlap, bytes).
  llmcpu_offload_report report();

 private:
  explicit OffloadDevice(std::unique_ptr<PluginLibrary> lib);
  std::unique_ptr<PluginLibrary> lib_;
  uint32_t ops_ = 0;
};

// "offload: copy X ms, compute Y ms, hidden Z% of copying, up A MB, down B MB (N ops)".
std::string format_offload_report(const llmcpu_offload_report& r);

}  // namespace llmcpu
