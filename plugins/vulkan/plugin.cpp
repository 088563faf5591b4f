// The C ABI of core/plugin_abi.h over the Vulkan engine (ops.h): the only exported symbol is
// llmcpu_plugin_query. Every entry point catches what the C++ side throws and turns it into a
// status and a last_error() message; nothing but C types crosses the boundary. Not here: Vulkan
// calls (device.cpp, stream.cpp, ops.cpp).
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "core/plugin_abi.h"
#include "plugins/vulkan/ops.h"

struct llmcpu_plugin {
  std::unique_ptr<llmcpu::vk::Engine> engine;
  std::string error;
  uint32_t ops_run = 0;  // ops since the last report() (a backward streams twice: one op)
};

namespace {

using llmcpu::vk::Engine;

void copy_message(const llmcpu_plugin_open_args* args, const std::string& msg) {
  if (args && args->error && args->error_size > 0) {
    std::snprintf(args->error, args->error_size, "%s", msg.c_str());
  }
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

int fail(llmcpu_plugin* p, const std::string& msg) {
  if (p) p->error = msg;
  return LLMCPU_PLUGIN_ERROR;
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
  return p && p->engine ? p->engine->device().name() : "";
}

uint32_t plugin_ops(llmcpu_plugin*) { return LLMCPU_PLUGIN_OP_MATMUL | LLMCPU_PLUGIN_OP_ATTENTION; }

const char* plugin_last_error(llmcpu_plugin* p) { return p ? p->error.c_str() : ""; }

int plugin_set_weights(llmcpu_plugin* p, const float* params, size_t count) {
  if (p && (!params || count == 0)) return fail(p, "vulkan set_weights: empty parameter array");
  return guarded(p, "set_weights", [&](Engine& e) { e.resident().set(params, count); });
}

int plugin_weights_changed(llmcpu_plugin* p) {
  return guarded(p, "weights_changed", [&](Engine& e) { e.resident().refresh(); });
}

bool bad_dims(llmcpu_plugin* p, const char* op, long long a, long long b, long long c) {
  if (a >= 0 && b > 0 && c > 0) return false;
  fail(p, std::string("vulkan ") + op + ": dimensions " + std::to_string(a) + ", " +
              std::to_string(b) + ", " + std::to_string(c) + " must be positive");
  return true;
}

int plugin_matmul_forward(llmcpu_plugin* p, float* out, const float* inp, const float* weight,
                          const float* bias, size_t N, int C, int OC) {
  if (!p || bad_dims(p, "matmul_forward", (long long)N, C, OC)) return LLMCPU_PLUGIN_ERROR;
  if (N && (!out || !inp || !weight))
    return fail(p, "vulkan matmul_forward: null out, inp or weight");
  ++p->ops_run;
  return guarded(p, "matmul_forward",
                 [&](Engine& e) { e.matmul_forward(out, inp, weight, bias, N, C, OC); });
}

int plugin_matmul_backward(llmcpu_plugin* p, float* dinp, float* dweight, float* dbias,
                           const float* dout, const float* inp, const float* weight, size_t N,
                           int C, int OC) {
  if (!p || bad_dims(p, "matmul_backward", (long long)N, C, OC)) return LLMCPU_PLUGIN_ERROR;
  if (N && (!dweight || !dout || !inp || (dinp && !weight))) {
    return fail(p, "vulkan matmul_backward: null dweight, dout, inp, or weight with dinp");
  }
  ++p->ops_run;
  return guarded(p, "matmul_backward", [&](Engine& e) {
    e.matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  });
}

bool bad_attention(llmcpu_plugin* p, const char* op, int B, int T, int C, int NH) {
  if (B >= 0 && T >= 0 && C > 0 && NH > 0 && C % NH == 0) return false;
  fail(p, std::string("vulkan ") + op + ": B=" + std::to_string(B) + " T=" + std::to_string(T) +
              " C=" + std::to_string(C) + " NH=" + std::to_string(NH) +
              ": expected B, T >= 0 and C a positive multiple of NH");
  return true;
}

int plugin_attention_forward(llmcpu_plugin* p, float* out, float* att, const float* qkv, int B,
                             int T, int C, int NH) {
  if (!p || bad_attention(p, "attention_forward", B, T, C, NH)) return LLMCPU_PLUGIN_ERROR;
  ++p->ops_run;
  return guarded(p, "attention_forward",
                 [&](Engine& e) { e.attention_forward(out, att, qkv, B, T, C, NH); });
}

int plugin_attention_backward(llmcpu_plugin* p, float* dqkv, const float* dout, const float* qkv,
                              const float* att, int B, int T, int C, int NH) {
  if (!p || bad_attention(p, "attention_backward", B, T, C, NH)) return LLMCPU_PLUGIN_ERROR;
  ++p->ops_run;
  return guarded(p, "attention_backward",
                 [&](Engine& e) { e.attention_backward(dqkv, dout, qkv, att, B, T, C, NH); });
}

int plugin_report(llmcpu_plugin* p, llmcpu_offload_report* out) {
  if (!p || !out) return LLMCPU_PLUGIN_ERROR;
  if (out->struct_size < sizeof(llmcpu_offload_report)) {
    return fail(p, "vulkan report: struct_size " + std::to_string(out->struct_size) +
                       ", expected at least " + std::to_string(sizeof(llmcpu_offload_report)));
  }
  return guarded(p, "report", [&](Engine& e) {
    const llmcpu::vk::Totals t = e.stream().take_totals();
    out->calls = p->ops_run;
    p->ops_run = 0;
    out->copy_ms = t.copy_ns * 1e-6;
    out->compute_ms = t.compute_ns * 1e-6;
    out->wall_ms = t.wall_ns * 1e-6;
    out->hidden_fraction = t.copy_ns > 0 ? std::min(1.0, t.hidden_ns / t.copy_ns) : 0.0;
    out->bytes_up = t.bytes_up;
    out->bytes_down = t.bytes_down;
  });
}

const llmcpu_plugin_api kApi = {
    LLMCPU_PLUGIN_ABI_VERSION,
    sizeof(llmcpu_plugin_api),
    "vulkan",
    plugin_open,
    plugin_close,
    plugin_device_name,
    plugin_ops,
    plugin_last_error,
    plugin_set_weights,
    plugin_weights_changed,
    plugin_matmul_forward,
    plugin_matmul_backward,
    plugin_attention_forward,
    plugin_attention_backward,
    plugin_report,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const llmcpu_plugin_api* llmcpu_plugin_query(
    uint32_t engine_abi_version) {
  return engine_abi_version == LLMCPU_PLUGIN_ABI_VERSION ? &kApi : nullptr;
}
