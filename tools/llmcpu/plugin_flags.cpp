#include "tools/llmcpu/plugin_flags.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include "core/plugin/offload.h"
#include "core/train/memory_plan.h"
#include "simd/error.h"

namespace llmcpu {

void add_plugin_flags(ArgParser& p, PluginFlags* o) {
  p.option("plugin", 0, &o->path, "PATH",
           "run layers on a device through a plugin, e.g. build/libllmcpu_vulkan.so (falls back "
           "to the CPU, saying why, when it cannot be loaded)");
  p.option("offload-layers", 0, &o->layers, "N|all",
           "with --plugin: the last N transformer blocks run on the device, or all (default): the "
           "embedding, every block, the head and the loss");
  p.option("device-memory-limit", 0, &o->memory_limit, "SIZE",
           "with --plugin: plan against SIZE of device memory (e.g. 6G) instead of the device's");
  p.flag("offload-report", 0, &o->report,
         "print the device's copy and compute time, their overlap and the bytes moved after each "
         "step");
}

void check_plugin_flags(const ArgParser& p, const PluginFlags& o) {
  if (!o.path.empty()) return;
  for (const char* flag : {"offload-layers", "device-memory-limit"}) {
    if (p.given(flag)) {
      throw UsageError(std::string("--") + flag +
                       " needs --plugin (the device that takes the layers)");
    }
  }
}

size_t device_memory_limit(const PluginFlags& o) {
  if (o.memory_limit.empty()) return 0;
  return size_t(parse_memory_size(o.memory_limit, "--device-memory-limit"));
}

void apply_plugin_flags(const PluginFlags& o, Model& model) {
  if (o.path.empty()) return;
  OffloadOptions options;
  options.layers = o.layers;
  options.memory_limit = device_memory_limit(o);
  print_offload_outcome(enable_offload(model, o.path, options));
}

void print_offload_outcome(const OffloadOutcome& r) {
  if (r.message.empty()) return;
  std::fflush(stdout);  // the lines before this one come first
  std::fprintf(r.active ? stdout : stderr, "%s\n", r.message.c_str());
  std::fflush(r.active ? stdout : stderr);
}

void print_offload_report(const PluginFlags& o, Model& model) {
  if (!o.report) return;
  llmcpu_offload_report r;
  if (model.offload_report(&r)) {
    std::printf("%s\n", format_offload_report(r).c_str());
  } else {
    static bool said = false;
    if (!said) std::printf("offload: nothing to report, no plugin is active\n");
    said = true;
  }
  std::fflush(stdout);
}

void report_after_each_step(const PluginFlags& o, Model& model, TrainObserver* observer) {
  if (!o.report) return;
  observer->on_step = [inner = std::move(observer->on_step), o, &model](const StepReport& r) {
    if (inner) inner(r);
    print_offload_report(o, model);
  };
}

void add_tolerance_flags(ArgParser& p, VerifyTolerances* tol) {
  p.option("tolerance-logits", 0, &tol->logits, "R",
           "largest relative error of the logits and the loss (default 1e-5; positive)", {0, 1e6});
  p.option("tolerance-grads", 0, &tol->grads, "R",
           "largest relative error of each gradient tensor (default 1e-4; positive)", {0, 1e6});
}

void apply_offload_tolerances(const ArgParser& p, bool offloading, VerifyTolerances* tol) {
  for (auto [flag, value] :
       {std::pair{"tolerance-logits", tol->logits}, {"tolerance-grads", tol->grads}}) {
    if (!(value > 0) || !std::isfinite(value)) {
      throw UsageError(std::string("--") + flag + ": expected a positive relative error, got " +
                       std::to_string(value));
    }
  }
  if (!offloading) return;
  if (!p.given("tolerance-logits")) tol->logits = kOffloadTolerances.logits;
  if (!p.given("tolerance-grads")) tol->grads = kOffloadTolerances.grads;
}

}  // namespace llmcpu
