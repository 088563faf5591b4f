// The offload flags of `train` and `verify` (--plugin, --offload-report; `plugin = "PATH"` in a run
// config) and the steps that turn them into an active plugin: load it before the model is built,
// hand it the weights once the model exists, print the device report after each step. Also verify's
// tolerance flags, whose defaults become the offload bound when a plugin computes.
// The loading and the kernel routing themselves are core/plugin; this only binds flags to them.
#pragma once

#include <string>

#include "core/model/gpt2.h"
#include "core/train/trainer.h"
#include "core/verify/verify.h"
#include "tools/llmcpu/args.h"

namespace llmcpu {

struct PluginFlags {
  std::string path;     // --plugin: an offload plugin (shared library); empty: CPU only
  bool report = false;  // --offload-report: device copy/compute times after each step
};

// Registers --plugin and --offload-report on p, bound to *o.
void add_plugin_flags(ArgParser& p, PluginFlags* o);

// When --plugin was given, loads it and prints what it offloads (stdout), or why the run stays on
// the CPU (stderr). The plugin computes in fp32: with another `precision` it is not loaded (stderr
// says so). Build the model afterwards with offload_kernels().
void apply_plugin_flags(const PluginFlags& o, const std::string& precision = "fp32");

// Hands the model's weights to the active plugin (no-op without one); prints to stderr if the
// plugin cannot keep them and the run falls back to the CPU.
void attach_plugin_weights(Gpt2& model);

// Prints the device report line (stdout) when --offload-report was given; without an active plugin
// it says once that there is nothing to report.
void print_offload_report(const PluginFlags& o);

// Makes observer->on_step also print the device report after each step (with --offload-report).
void report_after_each_step(const PluginFlags& o, TrainObserver* observer);

// Registers --tolerance-logits and --tolerance-grads on p, bound to *tol.
void add_tolerance_flags(ArgParser& p, VerifyTolerances* tol);
// With an active plugin, the tolerances not given on the command line become kOffloadTolerances'
// (core/verify/verify.h: the fp32 ones, which the plugin's fp32 arithmetic meets). Throws
// UsageError for a limit that is not a positive number.
void apply_offload_tolerances(const ArgParser& p, VerifyTolerances* tol);

}  // namespace llmcpu
