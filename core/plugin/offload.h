// One model's offload device (plugin ABI version 2): a loaded plugin that owns a span of the
// model's transformer blocks, and with "all" also the embedding and the head, and keeps their
// weights, gradients, AdamW moments and activations on its device. This is the C ABI in C++
// clothes: calls that throw DeviceError with the plugin's message, and the descriptor of what the
// device owns. Nothing here is global, so two models in one process may each have their own plugin.
// A plugin that cannot be loaded never stops the program (open() says why and the model stays on
// the CPU); a plan that does not fit the device does (the user asked for those layers).
// Deliberately not here: dlopen and the ABI checks (plugin_library.h), when the model calls what
// (core/model/model.cpp), the optimizer's split (core/train), command-line flags.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/model/block_device.h"
#include "core/model/model.h"
#include "core/plugin/plugin_library.h"

namespace llmcpu {

struct OffloadOutcome {
  bool active = false;
  // One line: "offload: vulkan (DEVICE): ..." when active, else "offload: PATH: REASON; running on
  // the CPU".
  std::string message;
};

// What enable_offload gives a device.
struct OffloadOptions {
  std::string layers = "all";  // --offload-layers: "all" or how many of the last blocks
  size_t memory_limit = 0;     // --device-memory-limit in bytes; 0: what the device has
  PluginOpenOptions open;
};

class OffloadDevice final : public BlockDevice {
 public:
  // Loads the plugin at `path` and opens a device. Returns null when it cannot be used; `outcome`
  // says what happened either way.
  static std::unique_ptr<OffloadDevice> open(const std::string& path, OffloadOutcome* outcome,
                                             const PluginOpenOptions& options = {});

  std::string name() const override { return lib_->name(); }
  std::string device_name() const { return lib_->device_name(); }
  const std::string& path() const { return lib_->path(); }

  // The plugin's calls (core/plugin_abi.h has their contracts); a failing call throws DeviceError.
  llmcpu_memory_plan plan(const llmcpu_model_desc& desc) override;
  void configure(const llmcpu_model_desc& desc, const float* params) override;
  void set_parameters(const float* params) override;
  void set_moments(const float* m, const float* v) override;
  void read_state(float* params, float* grads, float* m, float* v) override;
  void forward(const llmcpu_forward_args& args) override;
  void backward(const float* dresidual_top, float* dresidual_bottom) override;
  void zero_grad() override;
  double grad_sum_squares() override;
  void adamw_step(const scalar::AdamWStep& step, float grad_scale) override;
  llmcpu_offload_report report() override;
  std::string schedule() override;

 private:
  explicit OffloadDevice(std::unique_ptr<PluginLibrary> lib) : lib_(std::move(lib)) {}
  std::unique_ptr<PluginLibrary> lib_;
};

// Loads the plugin at `path` and gives `model` a device for the layers options.layers names (a
// UsageError for a bad value). A plugin that cannot be loaded, or cannot run this model's precision
// or shape, leaves the model on the CPU, and the outcome says why; a plan that does not fit the
// device throws (the user asked for those layers), and so does (UsageError naming --plugin) a model
// whose blocks no plugin can run (check_offloadable: the Llama family).
OffloadOutcome enable_offload(Model& model, const std::string& path,
                              const OffloadOptions& options = {});

// "offload: copy X ms, compute Y ms, hidden Z% of copying, up A kB|MB, down B kB|MB (N calls)".
std::string format_offload_report(const llmcpu_offload_report& r);
// "the plan needs 812 MiB on the device (weights, gradients and AdamW 600 MiB, activations
// 200 MiB, other 12 MiB) and it has 512 MiB"
std::string describe_memory_plan(const llmcpu_memory_plan& p);

}  // namespace llmcpu
