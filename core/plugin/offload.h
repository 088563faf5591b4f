// The process's one active offload plugin, and the kernel table that routes the offloaded ops to
// it. A model built with offload_kernels() calls the plugin for matmul and attention (as far as the
// plugin offers them) and the CPU for everything else; the engine hands the plugin its weights once
// (offload_set_weights) and says when they change (offload_weights_changed, after every optimizer
// step or load). Without a plugin every call here is a no-op and offload_kernels(cpu) is cpu
// itself. A plugin that cannot be used never stops the program: enable_offload says why and the CPU
// runs. Deliberately not here: dlopen and the ABI checks (plugin_library.h), command-line flags.
#pragma once

#include <cstddef>
#include <string>

#include "core/plugin/plugin_library.h"
#include "simd/kernels.h"

namespace llmcpu {

struct OffloadOutcome {
  bool active = false;
  // One line: "offload: vulkan (llvmpipe ...): matmul, attention" when active, else
  // "offload: PATH: REASON; running on the CPU".
  std::string message;
};

// Loads the plugin at `path` and makes it the active one (replacing any other). Does not throw for
// a plugin that cannot be used: it returns the fallback message and leaves the CPU in charge.
OffloadOutcome enable_offload(const std::string& path, const PluginOpenOptions& options = {});
// Closes the active plugin; models built with offload_kernels() run on the CPU from then on.
void disable_offload();
bool offload_active();

// `cpu` with its offloaded entries (per the plugin's ops()) replaced by calls into the active
// plugin, and its target named "CPU+NAME" ("avx512+xsmm+vulkan"); `cpu` itself when no plugin is
// active. The table stays valid for the life of the process; once the plugin is gone its entries
// call `cpu`. One CPU table per process: asking for another one throws Error.
const KernelTable& offload_kernels(const KernelTable& cpu = active_kernels());

// Hands the model's flat parameters (count floats; same address until the plugin is closed) to the
// plugin, which keeps them resident on the device. If the plugin cannot take them, it is closed and
// the returned line says so ("offload: PATH: cannot keep the weights ...; running on the CPU");
// otherwise the line is empty. No-op without a plugin.
std::string offload_set_weights(const float* params, size_t count);
// The parameters changed on the host (an optimizer step, a load): the device copy is refreshed.
// Throws DeviceError if the plugin fails. No-op without a plugin.
void offload_weights_changed();

// The device figures since the last call (copy and compute time, overlap, bytes). False without a
// plugin. Throws DeviceError if the plugin fails.
bool offload_report(llmcpu_offload_report* out);
// "offload: copy X ms, compute Y ms, hidden Z% of copying, up A MB, down B MB (N ops)".
std::string format_offload_report(const llmcpu_offload_report& r);

}  // namespace llmcpu
