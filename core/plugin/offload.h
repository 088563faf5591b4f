// One model's offload device (plugin ABI version 2): a loaded plugin that owns a span of the
// model's transformer blocks, and with "all" also the embedding and the head, and keeps their
// weights, gradients, AdamW moments and activations on its device. This is the C ABI in C++
// clothes: calls that throw DeviceError with the plugin's message, and the descriptor of what the
// device owns. Nothing here is global, so two models in one process may each have their own plugin.
// A plugin that cannot be loaded never stops the program (open() says why and the model stays on
// the CPU); a plan that does not fit the device does (the user asked for those layers).
// Deliberately not here: dlopen and the ABI checks (plugin_library.h), when the model calls what
// (core/model/gpt2.cpp), the optimizer's split (core/train), command-line flags.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/model/config.h"
#include "core/model/parameters.h"
#include "core/model/precision.h"
#include "core/optim/adamw.h"
#include "core/plugin/plugin_library.h"

namespace llmcpu {

// Which part of the model the device takes (--offload-layers N|all): the last `blocks` blocks,
// and with `all` the embedding, every block, the head and the loss.
struct OffloadLayers {
  int blocks = 0;
  bool all = false;
  // "all", or a number 0..L. Throws UsageError naming `flag` otherwise.
  static OffloadLayers parse(const std::string& text, int num_layers, const std::string& flag);
  std::string describe(int num_layers) const;  // "all: embedding, 12 blocks, head and loss"
};

struct OffloadOutcome {
  bool active = false;
  // One line: "offload: vulkan (DEVICE): ..." when active, else "offload: PATH: REASON; running on
  // the CPU".
  std::string message;
};

// The layers of activations the CPU keeps when a device owns `layers`: the CPU's blocks and one
// more (the landing place of the device's output); with all, one layer's worth (the losses').
int host_activation_layers(const OffloadLayers& layers, int num_layers);

// "1 block", "3 blocks".
std::string count_blocks(int n);

// The ABI's description of a model, its micro-batch and the device's part.
llmcpu_model_desc make_model_desc(const ModelConfig& c, const ParameterLayout& layout, int B, int T,
                                  Precision precision, const OffloadLayers& layers,
                                  size_t memory_limit);
// Whether tensor `tensor`'s slice of layer `layer` (-1 for the tensors outside the layers) is the
// device's under `layers` (the per-layer tensors from block L - blocks on, the rest with all).
bool device_owns(const OffloadLayers& layers, int num_layers, int tensor, int layer);

class OffloadDevice {
 public:
  // Loads the plugin at `path` and opens a device. Returns null when it cannot be used; `outcome`
  // says what happened either way.
  static std::unique_ptr<OffloadDevice> open(const std::string& path, OffloadOutcome* outcome,
                                             const PluginOpenOptions& options = {});

  std::string name() const { return lib_->name(); }
  std::string device_name() const { return lib_->device_name(); }
  const std::string& path() const { return lib_->path(); }

  // The plugin's calls (core/plugin_abi.h has their contracts); a failing call throws DeviceError.
  llmcpu_memory_plan plan(const llmcpu_model_desc& desc);
  // Checks the plan first: one that does not fit throws UsageError naming the numbers and the most
  // layers that fit.
  void configure(const llmcpu_model_desc& desc, const float* params);
  void set_parameters(const float* params);
  void set_moments(const float* m, const float* v);
  void read_state(float* params, float* grads, float* m, float* v);
  void forward(const llmcpu_forward_args& args);
  void backward(const float* dresidual_top, float* dresidual_bottom);
  void zero_grad();
  double grad_sum_squares();
  // One AdamW update of the device's part with the CPU's AdamW's hyperparameters, at step t (from
  // 1), each gradient times grad_scale first (clipping).
  void adamw_step(const AdamWConfig& config, double lr, long long t, float grad_scale);
  llmcpu_offload_report report();
  std::string schedule();

 private:
  explicit OffloadDevice(std::unique_ptr<PluginLibrary> lib) : lib_(std::move(lib)) {}
  std::unique_ptr<PluginLibrary> lib_;
};

// "offload: copy X ms, compute Y ms, hidden Z% of copying, up A kB|MB, down B kB|MB (N calls)".
std::string format_offload_report(const llmcpu_offload_report& r);
// "the plan needs 812 MiB on the device (weights, gradients and AdamW 600 MiB, activations
// 200 MiB, other 12 MiB) and it has 512 MiB"
std::string describe_memory_plan(const llmcpu_memory_plan& p);

}  // namespace llmcpu
