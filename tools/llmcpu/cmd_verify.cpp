// `llmcpu verify`: llm.c's test_gpt2 check of a model against a debug state.
#include <cstdio>
#include <string>
#include <vector>

#include "core/io/debug_state.h"
#include "core/io/model_file.h"
#include "core/model/precision.h"
#include "core/verify/verify.h"
#include "simd/error.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"
#include "tools/llmcpu/placement_flags.h"
#include "tools/llmcpu/plugin_flags.h"

namespace llmcpu {

int run_verify(const std::vector<std::string>& args) {
  std::string model_path, state_path, write_state, precision = "fp32", recompute = "none";
  PlacementOptions placement;
  PluginFlags plugin;
  VerifyTolerances tol;
  ArgParser p("verify",
              "Runs forward and backward on a debug state's batch and compares logits, loss and all\n"
              "16 gradient tensors with it. Exit status 0: OK, 1: FAIL, 2: error.");
  p.option("model", 'e', &model_path, "M.bin",
           "llm.c checkpoint (version 3 fp32 or 5 bf16), or model.safetensors or its folder");
  p.option("state", 's', &state_path, "S.bin", "llm.c debug state (version 2) to compare with");
  p.option("write-state", 0, &write_state, "OUT.bin", "also write this program's batch, logits, loss, gradients");
  p.option("precision", 0, &precision, "P",
           "fp32 (default) or bf16 (mixed precision; limits default to 1.25e-2 and 1e-1 then)");
  p.option("recompute", 0, &recompute, "R",
           "none (default), gelu or all-pointwise: recompute in the backward pass, as train does");
  add_placement_flags(p, &placement);
  add_plugin_flags(p, &plugin);
  add_tolerance_flags(p, &tol);
  if (!p.parse(args)) return 0;
  check_plugin_flags(p, plugin);
  if (model_path.empty()) throw UsageError("--model is required");
  if (state_path.empty()) throw UsageError("--state is required");
  const Precision prec = parse_precision(precision, "--precision");
  const Recompute rc = parse_recompute(recompute, "--recompute");
  const Placement placed = apply_placement_flags(placement);  // printed once the files have loaded
  const int nthreads = placed.plan.num_threads();

  const ModelFileInfo info = read_model_file_header(model_path);
  Gpt2 model(info.config, active_kernels(), prec);
  load_model_file(model_path, model);
  apply_plugin_flags(plugin, model);
  apply_offload_tolerances(p, model.offload_active(), &tol);
  if (prec == Precision::kBf16) {  // limits not given on the command line: the bf16 ones
    if (!p.given("tolerance-logits")) tol.logits = kBf16Tolerances.logits;
    if (!p.given("tolerance-grads")) tol.grads = kBf16Tolerances.grads;
  }
  const DebugState ref = load_debug_state(state_path, info.config);
  std::printf("%s\n", placed.summary.c_str());
  std::printf("verify: model %s (%s, %s), state %s (B=%d T=%d), %s, %d threads\n",
              model_path.c_str(), describe(info.config).c_str(), info.description.c_str(),
              state_path.c_str(), ref.B, ref.T, model.kernels_summary().c_str(), nthreads);

  DebugState ours;
  const VerifyReport report =
      verify_against_state(model, ref, tol, write_state.empty() ? nullptr : &ours, rc);
  print_offload_report(plugin, model);
  std::printf("%-10s %12s %14s %14s %10s\n", "tensor", "elements", "max|diff|", "rel.error", "limit");
  for (const TensorComparison& c : report.rows) {
    std::printf("%-10s %12zu %14.6e %14.6e %10.2e %s\n", c.name.c_str(), c.count, c.max_abs_diff,
                c.rel_error, c.tolerance, c.ok ? "ok" : "FAIL");
  }
  if (!write_state.empty()) {
    save_debug_state(write_state, info.config, ours);
    std::printf("verify: wrote this program's state to %s\n", write_state.c_str());
  }
  std::printf("verify: %s\n", report.ok ? "OK" : "FAIL");
  return report.ok ? 0 : 1;
}

}  // namespace llmcpu
