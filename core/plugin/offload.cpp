#include "core/plugin/offload.h"

#include <cstdio>
#include <utility>

#include "simd/error.h"

namespace llmcpu {

std::unique_ptr<OffloadDevice> OffloadDevice::open(const std::string& path, OffloadOutcome* outcome,
                                                   const PluginOpenOptions& options) {
  std::unique_ptr<PluginLibrary> lib;
  try {
    lib = PluginLibrary::load(path, options);
  } catch (const Error& e) {
    *outcome = {false, std::string("offload: ") + e.what() + "; running on the CPU"};
    return nullptr;
  }
  *outcome = {true, "offload: " + lib->name() + " (" + lib->device_name() + ")"};
  return std::unique_ptr<OffloadDevice>(new OffloadDevice(std::move(lib)));
}

llmcpu_memory_plan OffloadDevice::plan(const llmcpu_model_desc& desc) {
  llmcpu_memory_plan p{};
  p.struct_size = sizeof p;
  lib_->check(lib_->api().plan(lib_->device(), &desc, &p), "plan");
  return p;
}

OffloadOutcome enable_offload(Model& model, const std::string& path,
                              const OffloadOptions& options) {
  // A model no plugin can run is refused whatever the plugin: asked for, the device is not quietly
  // left out.
  try {
    check_offloadable(model.config());
  } catch (const DeviceError& e) {
    throw UsageError("--plugin " + path + ": " + e.what());
  }
  const int L = model.config().num_layers;
  const OffloadLayers layers = OffloadLayers::parse(options.layers, L, "--offload-layers");
  model.disable_offload();
  OffloadOutcome out;
  std::unique_ptr<OffloadDevice> device = OffloadDevice::open(path, &out, options.open);
  if (!device) return out;
  // A plugin may not run this precision (or this shape) at all: then the model stays on the CPU,
  // as for a plugin that cannot be loaded. Whether it fits is attach_device's question.
  try {
    model.check_device(*device, layers);
  } catch (const DeviceError& e) {
    return {false, "offload: " + path + ": " + e.what() + "; running on the CPU"};
  }
  out.message += ": " + layers.describe(L);
  if (!layers.any()) out.message += " (the CPU computes everything)";
  model.attach_device(std::move(device), layers, options.memory_limit);
  return out;
}

std::string describe_memory_plan(const llmcpu_memory_plan& p) {
  auto mib = [](uint64_t b) { return std::to_string((b + (1u << 20) - 1) >> 20) + " MiB"; };
  return "the plan needs " + mib(p.total_bytes) + " on the device (weights, gradients and AdamW " +
         mib(p.weight_bytes) + ", activations " + mib(p.activation_bytes) + ", other " +
         mib(p.other_bytes) + ") and it has " + mib(p.available_bytes);
}

void OffloadDevice::configure(const llmcpu_model_desc& desc, const float* params) {
  const llmcpu_memory_plan p = plan(desc);
  if (!p.fits) {
    const bool all = desc.flags & LLMCPU_OFFLOAD_HEAD;
    const std::string what = all ? "all layers" : count_blocks(desc.num_layers - desc.first_layer);
    const std::string hint = p.all_fits ? "--offload-layers all fits"
                             : p.max_layers > 0
                                 ? "at most " + count_blocks(p.max_layers) +
                                       (p.max_layers == 1 ? " fits" : " fit") +
                                       " (--offload-layers " + std::to_string(p.max_layers) + ")"
                                 : "not even one block fits";
    throw UsageError("--offload-layers: " + what + " of batch " + std::to_string(desc.batch) +
                     " x " + std::to_string(desc.seq_len) + " on " + lib_->device_name() + ": " +
                     describe_memory_plan(p) + "; " + hint +
                     " (or a smaller --batch with the same --total-batch)");
  }
  lib_->check(lib_->api().configure(lib_->device(), &desc, params), "configure");
}

void OffloadDevice::set_parameters(const float* params) {
  lib_->check(lib_->api().set_parameters(lib_->device(), params), "set_parameters");
}

void OffloadDevice::set_moments(const float* m, const float* v) {
  lib_->check(lib_->api().set_moments(lib_->device(), m, v), "set_moments");
}

void OffloadDevice::read_state(float* params, float* grads, float* m, float* v) {
  lib_->check(lib_->api().read_state(lib_->device(), params, grads, m, v), "read_state");
}

void OffloadDevice::forward(const llmcpu_forward_args& args) {
  lib_->check(lib_->api().forward(lib_->device(), &args), "forward");
}

void OffloadDevice::backward(const float* dresidual_top, float* dresidual_bottom) {
  lib_->check(lib_->api().backward(lib_->device(), dresidual_top, dresidual_bottom), "backward");
}

void OffloadDevice::zero_grad() { lib_->check(lib_->api().zero_grad(lib_->device()), "zero_grad"); }

double OffloadDevice::grad_sum_squares() {
  double s = 0;
  lib_->check(lib_->api().grad_sum_squares(lib_->device(), &s), "grad_sum_squares");
  return s;
}

void OffloadDevice::adamw_step(const scalar::AdamWStep& step, float grad_scale) {
  llmcpu_adamw_args args{};
  args.struct_size = sizeof args;
  args.grad_scale = grad_scale;
  args.lr = step.lr, args.beta1 = step.beta1, args.beta2 = step.beta2, args.eps = step.eps;
  args.weight_decay = step.weight_decay;
  args.t = step.t;
  lib_->check(lib_->api().adamw_step(lib_->device(), &args), "adamw_step");
}

llmcpu_offload_report OffloadDevice::report() {
  llmcpu_offload_report out{};
  out.struct_size = sizeof(llmcpu_offload_report);
  lib_->check(lib_->api().report(lib_->device(), &out), "report");
  return out;
}

std::string OffloadDevice::schedule() {
  const char* s = lib_->api().schedule(lib_->device());
  return s ? s : "";
}

namespace {

// "2.05 kB", "25.17 MB": decimal units, as time -v and the benchmarks print.
std::string bytes_text(uint64_t b) {
  char buf[32];
  if (b < 1000000) {
    std::snprintf(buf, sizeof buf, "%.2f kB", double(b) / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f MB", double(b) / 1e6);
  }
  return buf;
}

}  // namespace

std::string format_offload_report(const llmcpu_offload_report& r) {
  char buf[192];
  std::snprintf(buf, sizeof buf,
                "offload: copy %.3f ms, compute %.3f ms, hidden %.1f%% of copying, up %s, down %s "
                "(%u calls)",
                r.copy_ms, r.compute_ms, 100.0 * r.hidden_fraction, bytes_text(r.bytes_up).c_str(),
                bytes_text(r.bytes_down).c_str(), r.calls);
  return buf;
}

}  // namespace llmcpu
