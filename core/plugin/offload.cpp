#include "core/plugin/offload.h"

#include <cstdio>
#include <utility>

#include "simd/error.h"

namespace llmcpu {

OffloadDevice::OffloadDevice(std::unique_ptr<PluginLibrary> lib)
    : lib_(std::move(lib)), ops_(lib_->ops()) {}

std::unique_ptr<OffloadDevice> OffloadDevice::open(const std::string& path, const float* params,
                                                   size_t count, OffloadOutcome* outcome,
                                                   const PluginOpenOptions& options) {
  std::unique_ptr<PluginLibrary> lib;
  try {
    lib = PluginLibrary::load(path, options);
  } catch (const Error& e) {
    *outcome = {false, std::string("offload: ") + e.what() + "; running on the CPU"};
    return nullptr;
  }
  if (lib->api().set_weights(lib->device(), params, count) != LLMCPU_PLUGIN_OK) {
    *outcome = {false, "offload: " + path + ": cannot keep the weights (" +
                           std::to_string(count * sizeof(float) >> 20) +
                           " MiB) on the device: " + lib->last_error() + "; running on the CPU"};
    return nullptr;
  }
  *outcome = {true, "offload: " + lib->name() + " (" + lib->device_name() +
                        "): " + describe_offloaded_ops(lib->ops())};
  return std::unique_ptr<OffloadDevice>(new OffloadDevice(std::move(lib)));
}

void OffloadDevice::matmul_forward(float* out, const float* inp, const float* weight,
                                   const float* bias, size_t N, int C, int OC) {
  lib_->check(lib_->api().matmul_forward(lib_->device(), out, inp, weight, bias, N, C, OC),
              "matmul_forward");
}

void OffloadDevice::matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                    const float* inp, const float* weight, size_t N, int C,
                                    int OC) {
  lib_->check(lib_->api().matmul_backward(lib_->device(), dinp, dweight, dbias, dout, inp, weight,
                                          N, C, OC),
              "matmul_backward");
}

void OffloadDevice::attention_forward(float* out, float* att, const float* qkv, int B, int T, int C,
                                      int NH) {
  lib_->check(lib_->api().attention_forward(lib_->device(), out, att, qkv, B, T, C, NH),
              "attention_forward");
}

void OffloadDevice::attention_backward(float* dqkv, const float* dout, const float* qkv,
                                       const float* att, int B, int T, int C, int NH) {
  lib_->check(lib_->api().attention_backward(lib_->device(), dqkv, dout, qkv, att, B, T, C, NH),
              "attention_backward");
}

void OffloadDevice::weights_changed() {
  lib_->check(lib_->api().weights_changed(lib_->device()), "weights_changed");
}

llmcpu_offload_report OffloadDevice::report() {
  llmcpu_offload_report out{};
  out.struct_size = sizeof(llmcpu_offload_report);
  lib_->check(lib_->api().report(lib_->device(), &out), "report");
  return out;
}

std::string format_offload_report(const llmcpu_offload_report& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "offload: copy %.3f ms, compute %.3f ms, hidden %.1f%% of copying, up %.2f MB, "
                "down %.2f MB (%u ops)",
                r.copy_ms, r.compute_ms, 100.0 * r.hidden_fraction, double(r.bytes_up) / 1e6,
                double(r.bytes_down) / 1e6, r.calls);
  return buf;
}

}  // namespace llmcpu
