#include "core/plugin/offload.h"

#include <cstdio>
#include <memory>

#include "simd/error.h"

namespace llmcpu {

namespace {

// The one active plugin, the CPU table the offload table was made from, and that table. Kernel
// entries are plain function pointers without a context, so the trampolines below find the plugin
// here. Set up before a model runs; ops themselves only read these.
std::unique_ptr<PluginLibrary> g_plugin;
const KernelTable* g_cpu = nullptr;
KernelTable g_table{};
std::string g_target;
uint32_t g_ops = 0;  // the plugin's ops() when g_table was made

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, size_t N,
                    int C, int OC) {
  if (!g_plugin) return g_cpu->matmul_forward(out, inp, weight, bias, N, C, OC);
  g_plugin->check(
      g_plugin->api().matmul_forward(g_plugin->device(), out, inp, weight, bias, N, C, OC),
      "matmul_forward");
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, size_t N, int C, int OC) {
  if (!g_plugin) return g_cpu->matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  g_plugin->check(g_plugin->api().matmul_backward(g_plugin->device(), dinp, dweight, dbias, dout,
                                                  inp, weight, N, C, OC),
                  "matmul_backward");
}

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  if (!g_plugin) return g_cpu->attention_forward(out, att, qkv, B, T, C, NH);
  g_plugin->check(g_plugin->api().attention_forward(g_plugin->device(), out, att, qkv, B, T, C, NH),
                  "attention_forward");
}

// The CPU kernel's `scratch` (B,NH,T) is its own business; a device keeps such rows on the device.
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH) {
  if (!g_plugin) return g_cpu->attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
  g_plugin->check(
      g_plugin->api().attention_backward(g_plugin->device(), dqkv, dout, qkv, att, B, T, C, NH),
      "attention_backward");
}

void build_table(const KernelTable& cpu) {
  g_cpu = &cpu;
  g_ops = g_plugin->ops();
  g_table = cpu;
  if (g_ops & LLMCPU_PLUGIN_OP_MATMUL) {
    g_table.matmul_forward = matmul_forward;
    g_table.matmul_backward = matmul_backward;
  }
  if (g_ops & LLMCPU_PLUGIN_OP_ATTENTION) {
    g_table.attention_forward = attention_forward;
    g_table.attention_backward = attention_backward;
  }
  g_target = std::string(cpu.target) + "+" + g_plugin->name();
  g_table.target = g_target;
}

}  // namespace

OffloadOutcome enable_offload(const std::string& path, const PluginOpenOptions& options) {
  OffloadOutcome out;
  try {
    std::unique_ptr<PluginLibrary> lib = PluginLibrary::load(path, options);
    g_plugin = std::move(lib);
  } catch (const Error& e) {
    out.message = std::string("offload: ") + e.what() + "; running on the CPU";
    return out;
  }
  out.active = true;
  out.message = "offload: " + g_plugin->name() + " (" + g_plugin->device_name() +
                "): " + describe_offloaded_ops(g_plugin->ops());
  return out;
}

void disable_offload() { g_plugin.reset(); }

bool offload_active() { return g_plugin != nullptr; }

const KernelTable& offload_kernels(const KernelTable& cpu) {
  if (g_cpu && g_cpu != &cpu) {
    throw Error("offload: the offload kernel table was made from the '" +
                std::string(g_cpu->target) + "' CPU table; one CPU table per process, asked for '" +
                std::string(cpu.target) + "'");
  }
  if (!g_plugin) return g_cpu ? g_table : cpu;
  if (!g_cpu || g_ops != g_plugin->ops()) build_table(cpu);
  return g_table;
}

std::string offload_set_weights(const float* params, size_t count) {
  if (!g_plugin) return "";
  const int status = g_plugin->api().set_weights(g_plugin->device(), params, count);
  if (status == LLMCPU_PLUGIN_OK) return "";
  const std::string line = "offload: " + g_plugin->path() + ": cannot keep the weights (" +
                           std::to_string(count * sizeof(float) >> 20) +
                           " MiB) on the device: " + g_plugin->last_error() +
                           "; running on the CPU";
  disable_offload();
  return line;
}

void offload_weights_changed() {
  if (!g_plugin) return;
  g_plugin->check(g_plugin->api().weights_changed(g_plugin->device()), "weights_changed");
}

bool offload_report(llmcpu_offload_report* out) {
  if (!g_plugin) return false;
  *out = llmcpu_offload_report{};
  out->struct_size = sizeof(llmcpu_offload_report);
  g_plugin->check(g_plugin->api().report(g_plugin->device(), out), "report");
  return true;
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
