// Running some of the model's blocks elsewhere, as the model sees it: which part a device takes
// (--offload-layers), how that part is described to it (core/plugin_abi.h's model descriptor), and
// the calls the model and the trainer make on it. The plugin host (core/plugin/offload.h)
// implements BlockDevice over a loaded plugin; the model knows only this interface, so that model/
// includes nothing from plugin/. Not here: loading a plugin, command-line flags, when the model
// calls what (model.cpp).
#pragma once

#include <cstddef>
#include <string>

#include "core/model/config.h"
#include "core/model/parameters.h"
#include "core/model/precision.h"
#include "core/plugin_abi.h"
#include "simd/scalar/adamw.h"

namespace llmcpu {

// Which part of the model the device takes (--offload-layers N|all): the last `blocks` blocks,
// and with `all` the embedding, every block, the head and the loss.
struct OffloadLayers {
  int blocks = 0;
  bool all = false;
  bool any() const { return all || blocks > 0; }  // the device takes some part of the model
  // "all", or a number 0..L. Throws UsageError naming `flag` otherwise.
  static OffloadLayers parse(const std::string& text, int num_layers, const std::string& flag);
  std::string describe(int num_layers) const;  // "all: embedding, 12 blocks, head and loss"
};

// The layers of activations the CPU keeps when a device owns `layers`: the CPU's blocks and one
// more (the landing place of the device's output); with all, one layer's worth (the losses').
int host_activation_layers(const OffloadLayers& layers, int num_layers);

// "1 block", "3 blocks".
std::string count_blocks(int n);

// Throws DeviceError saying why when the plugin ABI cannot describe the model's blocks (the Llama
// family's: the ABI describes GPT-2's block only).
void check_offloadable(const ModelConfig& c);

// The ABI's description of a model, its micro-batch and the device's part (check_offloadable's
// DeviceError for a model it cannot describe).
llmcpu_model_desc make_model_desc(const ModelConfig& c, const ParameterLayout& layout, int B, int T,
                                  Precision precision, const OffloadLayers& layers,
                                  size_t memory_limit);
// Whether tensor `tensor`'s slice of layer `layer` (-1 for the tensors outside the layers) is the
// device's under `layers` (the per-layer tensors from block L - blocks on, the rest with all).
bool device_owns(const OffloadLayers& layers, int num_layers, int tensor, int layer);

// A device that owns part of the model (core/plugin_abi.h has the contracts of these calls). A
// failing call throws DeviceError with the device's message.
class BlockDevice {
 public:
  virtual ~BlockDevice() = default;
  virtual std::string name() const = 0;  // "vulkan"
  virtual llmcpu_memory_plan plan(const llmcpu_model_desc& desc) = 0;
  // Checks the plan first: one that does not fit throws UsageError naming the numbers and the most
  // layers that fit.
  virtual void configure(const llmcpu_model_desc& desc, const float* params) = 0;
  virtual void set_parameters(const float* params) = 0;
  virtual void set_moments(const float* m, const float* v) = 0;
  virtual void read_state(float* params, float* grads, float* m, float* v) = 0;
  virtual void forward(const llmcpu_forward_args& args) = 0;
  virtual void backward(const float* dresidual_top, float* dresidual_bottom) = 0;
  virtual void zero_grad() = 0;
  virtual double grad_sum_squares() = 0;
  // One AdamW update of the device's part (the CPU's formula and constants), each gradient times
  // grad_scale first (clipping).
  virtual void adamw_step(const scalar::AdamWStep& step, float grad_scale) = 0;
  virtual llmcpu_offload_report report() = 0;
  virtual std::string schedule() = 0;
};

}  // namespace llmcpu
