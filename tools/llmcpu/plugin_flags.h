// The offload flags of `train` and `verify` (--plugin, --offload-layers, --device-memory-limit,
// --offload-report; `plugin = "PATH"` and the others in a run config) and the steps that turn them
// into an active plugin on a model and print the device report after each step. Also verify's
// tolerance flags, whose defaults become the offload bound when a plugin computes.
// The loading and the kernel routing themselves are core/plugin; this only binds flags to them.
#pragma once

#include <string>

#include "core/model/model.h"
#include "core/train/trainer.h"
#include "core/verify/verify.h"
#include "tools/llmcpu/args.h"

namespace llmcpu {

struct PluginFlags {
  std::string path;            // --plugin: an offload plugin (shared library); empty: CPU only
  std::string layers = "all";  // --offload-layers: "all" or how many of the last blocks
  std::string memory_limit;    // --device-memory-limit: plan against this much device memory
  bool report = false;         // --offload-report: device copy/compute times after each step
};

// Registers --plugin and --offload-report on p, bound to *o.
void add_plugin_flags(ArgParser& p, PluginFlags* o);

// --offload-layers or --device-memory-limit without --plugin: UsageError.
void check_plugin_flags(const ArgParser& p, const PluginFlags& o);

// --device-memory-limit in bytes; 0 when it was not given. Throws UsageError for a size that is
// not one.
size_t device_memory_limit(const PluginFlags& o);

// When --plugin was given, hands the layers --offload-layers names to it and prints what the
// device owns (stdout), or why the model stays on the CPU (stderr; a plugin that cannot run the
// model's precision, for one). A bad --offload-layers or --device-memory-limit, or a plan that does
// not fit the device, throws UsageError.
void apply_plugin_flags(const PluginFlags& o, Model& model);
// The outcome's line: stdout when the device is active, stderr when the model stays on the CPU;
// nothing without a plugin.
void print_offload_outcome(const OffloadOutcome& r);

// Prints the model's device report line (stdout) when --offload-report was given; without an
// active plugin it says once that there is nothing to report.
void print_offload_report(const PluginFlags& o, Model& model);

// Makes observer->on_step also print the device report after each step (with --offload-report).
void report_after_each_step(const PluginFlags& o, Model& model, TrainObserver* observer);

// Registers --tolerance-logits and --tolerance-grads on p, bound to *tol.
void add_tolerance_flags(ArgParser& p, VerifyTolerances* tol);
// When `offloading` (a plugin active on the model verified), the tolerances not given on the
// command line become kOffloadTolerances' (core/verify/verify.h: the fp32 ones, which the plugin's
// fp32 arithmetic meets). Throws UsageError for a limit that is not a positive number.
void apply_offload_tolerances(const ArgParser& p, bool offloading, VerifyTolerances* tol);

}  // namespace llmcpu
