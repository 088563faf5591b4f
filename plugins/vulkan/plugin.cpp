// The C ABI of core/plugin_abi.h (version 2, layer level) over the device's part of the model
// (model.h): the only exported symbol is llmcpu_plugin_query. Every entry point checks its
// arguments, catches what the C++ side throws and turns it into a status and a last_error()
// message; nothing but C types crosses the boundary. Not here: Vulkan calls (device.cpp,
// stream.cpp, model.cpp, passes.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "core/plugin_abi.h"
#include "plugins/vulkan/device.h"
#include "plugins/vulkan/kernels.h"
#include "plugins/vulkan/model.h"
#include "plugins/vulkan/stream.h"

namespace {

using llmcpu::vk::DeviceModel;

// One opened device: what configure() needs to build a model on it.
struct Engine {
  llmcpu::vk::Device dev;
  llmcpu::vk::Kernels kernels;
  llmcpu::vk::Stream stream;
  std::unique_ptr<DeviceModel> model;
  Engine(int index, bool verbose) : dev(index, verbose), kernels(dev), stream(dev) {}
};

}  // namespace

struct llmcpu_plugin {
  std::unique_ptr<Engine> engine;
  std::string error;
  std::string schedule;
};

namespace {

void copy_message(const llmcpu_plugin_open_args* args, const std::string& msg) {
  if (args && args->error && args->error_size > 0) {
    std::snprintf(args->error, args->error_size, "%s", msg.c_str());
  }
}

int fail(llmcpu_plugin* p, const std::string& msg) {
  if (p) p->error = msg;
  return LLMCPU_PLUGIN_ERROR;
}

// Runs f; on an exception records its message as the plugin's last error.
template <typename Fn>
int guarded(llmcpu_plugin* p, const char* what, Fn&& f) {
  if (!p || !p->engine) return LLMCPU_PLUGIN_ERROR;
  try {
    f(*p->engine);
    return LLMCPU_PLUGIN_OK;
  } catch (const std::exception& e) {
    p->error = std::string("vulkan ") + what + ": " + e.what();
  } catch (...) {
    p->error = std::string("vulkan ") + what + ": unknown error";
  }
  return LLMCPU_PLUGIN_ERROR;
}

// The same, for calls that need a configured model.
template <typename Fn>
int with_model(llmcpu_plugin* p, const char* what, Fn&& f) {
  if (p && p->engine && !p->engine->model) {
    return fail(p, std::string("vulkan ") + what + ": not configured (configure() first)");
  }
  return guarded(p, what, [&](Engine& e) { f(*e.model); });
}

int plugin_open(const llmcpu_plugin_open_args* args, llmcpu_plugin** out) {
  if (!args || !out) return LLMCPU_PLUGIN_ERROR;
  if (args->struct_size < sizeof(llmcpu_plugin_open_args)) {
    copy_message(args, "vulkan: open args struct_size " + std::to_string(args->struct_size) +
                           ", expected at least " +
                           std::to_string(sizeof(llmcpu_plugin_open_args)));
    return LLMCPU_PLUGIN_ERROR;
  }
  *out = nullptr;
  try {
    auto p = std::make_unique<llmcpu_plugin>();
    p->engine = std::make_unique<Engine>(args->device_index, args->verbose != 0);
    *out = p.release();
    return LLMCPU_PLUGIN_OK;
  } catch (const llmcpu::vk::NoDeviceError& e) {
    copy_message(args, std::string("vulkan: ") + e.what());
    return LLMCPU_PLUGIN_NO_DEVICE;
  } catch (const std::exception& e) {
    copy_message(args, std::string("vulkan: ") + e.what());
  } catch (...) {
    copy_message(args, "vulkan: unknown error while opening the device");
  }
  return LLMCPU_PLUGIN_ERROR;
}

void plugin_close(llmcpu_plugin* p) { delete p; }

const char* plugin_device_name(llmcpu_plugin* p) {
  return p && p->engine ? p->engine->dev.name() : "";
}

const char* plugin_last_error(llmcpu_plugin* p) { return p ? p->error.c_str() : ""; }

// A desc this plugin can run at all (the plan decides whether it fits).
std::string check_desc(const llmcpu_model_desc* d) {
  if (!d) return "no model description";
  if (d->struct_size < sizeof(llmcpu_model_desc)) {
    return "model_desc struct_size " + std::to_string(d->struct_size) + ", expected at least " +
           std::to_string(sizeof(llmcpu_model_desc));
  }
  if (d->precision != LLMCPU_PRECISION_FP32 && d->precision != LLMCPU_PRECISION_BF16) {
    return "precision " + std::to_string(d->precision) + ": expected fp32 (0) or bf16 (1)";
  }
  if (d->channels <= 0 || d->num_heads <= 0 || d->channels % d->num_heads != 0 ||
      d->num_layers <= 0 || d->vocab_size <= 0 || d->padded_vocab_size < d->vocab_size ||
      d->batch <= 0 || d->seq_len <= 0 || d->seq_len > d->max_seq_len) {
    return "model shape L=" + std::to_string(d->num_layers) + " C=" + std::to_string(d->channels) +
           " NH=" + std::to_string(d->num_heads) + " V=" + std::to_string(d->vocab_size) +
           " Vp=" + std::to_string(d->padded_vocab_size) + " B=" + std::to_string(d->batch) +
           " T=" + std::to_string(d->seq_len) + " maxT=" + std::to_string(d->max_seq_len) +
           ": expected positive sizes, C a multiple of NH, V <= Vp and T <= maxT";
  }
  if (d->first_layer < 0 || d->first_layer > d->num_layers) {
    return "first_layer " + std::to_string(d->first_layer) + " outside 0.." +
           std::to_string(d->num_layers);
  }
  if ((d->flags & LLMCPU_OFFLOAD_EMBEDDING) && d->first_layer != 0) {
    return "the embedding on the device needs every block there (first_layer 0)";
  }
  if (d->first_layer == d->num_layers) return "the device owns no block (first_layer = num_layers)";
  return "";
}

// check_desc, then what this device cannot hold or run: a buffer over its binding limit, bf16
// without 16-bit storage.
std::string desc_problem(const Engine& e, const llmcpu_model_desc* d) {
  std::string bad = check_desc(d);
  if (bad.empty()) bad = llmcpu::vk::buffer_over_binding(*d, e.dev.max_binding_bytes());
  if (bad.empty() && d->precision == LLMCPU_PRECISION_BF16 && !e.dev.bf16_storage()) {
    bad = std::string(e.dev.name()) +
          " has no 16-bit storage buffers (storageBuffer16BitAccess): bf16 cannot run on it, fp32 "
          "can";
  }
  return bad;
}

uint64_t available(const Engine& e, const llmcpu_model_desc* d) {
  return d->memory_limit ? d->memory_limit : e.dev.device_local_bytes();
}

int plugin_plan(llmcpu_plugin* p, const llmcpu_model_desc* d, llmcpu_memory_plan* out) {
  if (!p || !out) return LLMCPU_PLUGIN_ERROR;
  if (out->struct_size < sizeof(llmcpu_memory_plan)) {
    return fail(p, "vulkan plan: memory_plan struct_size " + std::to_string(out->struct_size) +
                       ", expected at least " + std::to_string(sizeof(llmcpu_memory_plan)));
  }
  if (!p->engine) return LLMCPU_PLUGIN_ERROR;
  const std::string bad = desc_problem(*p->engine, d);
  if (!bad.empty()) return fail(p, "vulkan plan: " + bad);
  return guarded(p, "plan", [&](Engine& e) {
    *out = llmcpu::vk::memory_plan(*d, e.dev.max_binding_bytes(), available(e, d));
  });
}

int plugin_configure(llmcpu_plugin* p, const llmcpu_model_desc* d, const float* params) {
  if (!p) return LLMCPU_PLUGIN_ERROR;
  if (!p->engine) return LLMCPU_PLUGIN_ERROR;
  const std::string bad = desc_problem(*p->engine, d);
  if (!bad.empty()) return fail(p, "vulkan configure: " + bad);
  if (!params) return fail(p, "vulkan configure: no parameters");
  return guarded(p, "configure", [&](Engine& e) {
    e.model.reset();
    const llmcpu_memory_plan plan =
        llmcpu::vk::memory_plan(*d, e.dev.max_binding_bytes(), available(e, d));
    if (!plan.fits) {
      throw llmcpu::vk::VulkanError("the plan needs " + std::to_string(plan.total_bytes >> 20) +
                                    " MiB, the device has " +
                                    std::to_string(plan.available_bytes >> 20) + " MiB; at most " +
                                    std::to_string(plan.max_layers) + " blocks fit");
    }
    e.model = std::make_unique<DeviceModel>(e.dev, e.kernels, e.stream, *d);
    e.model->upload_state(params, nullptr, nullptr);
    e.stream.take_totals();  // the report counts the steps, not the set-up
  });
}

int plugin_set_parameters(llmcpu_plugin* p, const float* params) {
  if (p && !params) return fail(p, "vulkan set_parameters: no parameters");
  return with_model(p, "set_parameters",
                    [&](DeviceModel& m) { m.upload_state(params, nullptr, nullptr); });
}

int plugin_set_moments(llmcpu_plugin* p, const float* mo, const float* v) {
  return with_model(p, "set_moments", [&](DeviceModel& m) { m.upload_state(nullptr, mo, v); });
}

int plugin_read_state(llmcpu_plugin* p, float* params, float* grads, float* mo, float* v) {
  return with_model(p, "read_state",
                    [&](DeviceModel& m) { m.download_state(params, grads, mo, v); });
}

int plugin_forward(llmcpu_plugin* p, const llmcpu_forward_args* a) {
  if (p && (!a || a->struct_size < sizeof(llmcpu_forward_args))) {
    return fail(p, "vulkan forward: no args, or forward_args from another ABI");
  }
  return with_model(p, "forward", [&](DeviceModel& m) { m.forward(*a); });
}

int plugin_backward(llmcpu_plugin* p, const float* top, float* bottom) {
  return with_model(p, "backward", [&](DeviceModel& m) { m.backward(top, bottom); });
}

int plugin_zero_grad(llmcpu_plugin* p) {
  return with_model(p, "zero_grad", [&](DeviceModel& m) { m.zero_grad(); });
}

int plugin_grad_sum_squares(llmcpu_plugin* p, double* out) {
  if (p && !out) return fail(p, "vulkan grad_sum_squares: no output");
  return with_model(p, "grad_sum_squares", [&](DeviceModel& m) { *out = m.grad_sum_squares(); });
}

int plugin_adamw_step(llmcpu_plugin* p, const llmcpu_adamw_args* a) {
  if (p && (!a || a->struct_size < sizeof(llmcpu_adamw_args) || a->t < 1)) {
    return fail(p, "vulkan adamw_step: no args, adamw_args from another ABI, or t < 1");
  }
  return with_model(p, "adamw_step", [&](DeviceModel& m) { m.adamw(*a); });
}

int plugin_report(llmcpu_plugin* p, llmcpu_offload_report* out) {
  if (!p || !out) return LLMCPU_PLUGIN_ERROR;
  if (out->struct_size < sizeof(llmcpu_offload_report)) {
    return fail(p, "vulkan report: struct_size " + std::to_string(out->struct_size) +
                       ", expected at least " + std::to_string(sizeof(llmcpu_offload_report)));
  }
  return guarded(p, "report", [&](Engine& e) {
    const llmcpu::vk::Totals t = e.stream.take_totals();
    out->calls = e.model ? e.model->passes() : 0;
    if (e.model) e.model->count_pass_reset();
    out->copy_ms = t.copy_ns * 1e-6;
    out->compute_ms = t.compute_ns * 1e-6;
    out->wall_ms = t.wall_ns * 1e-6;
    out->hidden_fraction = t.copy_ns > 0 ? std::min(1.0, t.hidden_ns / t.copy_ns) : 0.0;
    out->bytes_up = t.bytes_up;
    out->bytes_down = t.bytes_down;
  });
}

const char* plugin_schedule(llmcpu_plugin* p) {
  if (!p || !p->engine || !p->engine->model) return "";
  p->schedule = p->engine->model->schedule();
  return p->schedule.c_str();
}

const llmcpu_plugin_api kApi = {
    LLMCPU_PLUGIN_ABI_VERSION,
    sizeof(llmcpu_plugin_api),
    "vulkan",
    plugin_open,
    plugin_close,
    plugin_device_name,
    plugin_last_error,
    plugin_plan,
    plugin_configure,
    plugin_set_parameters,
    plugin_set_moments,
    plugin_read_state,
    plugin_forward,
    plugin_backward,
    plugin_zero_grad,
    plugin_grad_sum_squares,
    plugin_adamw_step,
    plugin_report,
    plugin_schedule,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const llmcpu_plugin_api* llmcpu_plugin_query(
    uint32_t engine_abi_version) {
  return engine_abi_version == LLMCPU_PLUGIN_ABI_VERSION ? &kApi : nullptr;
}
