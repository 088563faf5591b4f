// `llmcpu verify`: llm.c's test_gpt2 check of a model against a debug state.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/io/debug_state.h"
#include "core/io/model_file.h"
#include "core/lora/peft_files.h"
#include "core/model/precision.h"
#include "core/verify/verify.h"
#include "core/verify/verify_adapter.h"
#include "simd/error.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"
#include "tools/llmcpu/placement_flags.h"
#include "tools/llmcpu/plugin_flags.h"

namespace llmcpu {

namespace {

class VerifyCommand : public Command {
 public:
  void add_flags(ArgParser& p) override {
    p.option("model", 'e', &model_path_, "M.bin",
             "llm.c checkpoint (version 3 fp32 or 5 bf16), or model.safetensors or its folder");
    p.option("state", 's', &state_path_, "S.bin", "llm.c debug state (version 2) to compare with");
    p.option("adapter", 0, &adapter_, "DIR",
             "a PEFT LoRA adapter folder on the model (base frozen); --state is then a "
             "safetensors reference of its logits, loss and adapter gradients");
    p.option("base-quant", 0, &base_quant_, "Q",
             "with --adapter: hold the frozen base's layer weights as none (default), int8 or nf4, "
             "as train --base-quant does");
    p.option("write-state", 0, &write_state_, "OUT.bin",
             "also write this program's batch, logits, loss, gradients");
    p.option("precision", 0, &precision_, "P",
             "fp32 (default) or bf16 (mixed precision; limits default to 1.4e-2 and 1e-1 then)");
    p.option(
        "recompute", 0, &recompute_, "R",
        "none (default), gelu, all-pointwise or layers: recompute in the backward pass, as train "
        "does");
    add_placement_flags(p, &placement_);
    add_plugin_flags(p, &plugin_);
    add_tolerance_flags(p, &tol_);
  }
  void check(const ArgParser& p) override {
    check_plugin_flags(p, plugin_);
    if (model_path_.empty()) throw UsageError("--model is required");
    if (state_path_.empty()) throw UsageError("--state is required");
    parse_precision(precision_, "--precision");
    parse_recompute(recompute_, "--recompute");
    check_placement_flags(placement_);
    apply_offload_tolerances(p, /*offloading=*/false, &tol_);  // only checks them
    const QuantFormat f = parse_base_quant(base_quant_);
    if (adapter_.empty() && f != QuantFormat::kNone) {
      throw UsageError("--base-quant needs --adapter DIR (only a frozen base is quantized)");
    }
    if (!adapter_.empty() && !write_state_.empty()) {
      throw UsageError("--write-state with --adapter: an llm.c debug state has no adapter");
    }
  }
  const PlacementOptions* placement() const override { return &placement_; }
  int run(const ArgParser& p) override;

 private:
  int run_adapter(const ModelSource& source, Model& model, const Placement& placed, int nthreads,
                  Recompute rc);
  static void print_report(const VerifyReport& report) {
    size_t width = 10;
    for (const TensorComparison& c : report.rows) width = std::max(width, c.name.size());
    std::printf("%-*s %12s %14s %14s %10s\n", int(width), "tensor", "elements", "max|diff|",
                "rel.error", "limit");
    for (const TensorComparison& c : report.rows) {
      std::printf("%-*s %12zu %14.6e %14.6e %10.2e %s\n", int(width), c.name.c_str(), c.count,
                  c.max_abs_diff, c.rel_error, c.tolerance, c.ok ? "ok" : "FAIL");
    }
  }

  std::string model_path_, state_path_, adapter_, write_state_, precision_ = "fp32", recompute_ = "none";
  std::string base_quant_ = "none";
  PlacementOptions placement_;
  PluginFlags plugin_;
  VerifyTolerances tol_;
};

int VerifyCommand::run(const ArgParser& p) {
  const Precision prec = parse_precision(precision_, "--precision");
  const Recompute rc = parse_recompute(recompute_, "--recompute");
  const Placement placed = apply_placement_flags(placement_);  // printed once the files have loaded
  const int nthreads = placed.plan.num_threads();

  const ModelSource source = open_model_file(model_path_);
  const bool lora = !adapter_.empty();
  Model model(source.config, active_kernels(), prec, nullptr, /*base_gradients=*/!lora);
  load_model_file(source, model);
  if (lora && !p.given("plugin")) {
    model.freeze_base(parse_base_quant(base_quant_));
  }
  apply_plugin_flags(plugin_, model);
  apply_offload_tolerances(p, model.offload_active(), &tol_);
  if (prec == Precision::kBf16) {  // limits not given on the command line: the bf16 ones
    const VerifyTolerances& bf16 = bf16_tolerances(model.config(), lora);
    if (!p.given("tolerance-logits")) tol_.logits = bf16.logits;
    if (!p.given("tolerance-grads")) tol_.grads = bf16.grads;
  }
  if (!source.config.family().llmc_files && !write_state_.empty()) {
    throw UsageError("--write-state writes an llm.c debug state, which has no layout for a " +
                     std::string(architecture_name(source.config.architecture)) + " model");
  }
  if (lora) return run_adapter(source, model, placed, nthreads, rc);
  const DebugState ref = load_debug_state(state_path_, source.config);
  std::printf("%s\n", placed.summary.c_str());
  std::printf("verify: model %s (%s, %s), state %s (B=%d T=%d), %s, %d thread%s\n",
              model_path_.c_str(), describe(source.config).c_str(), source.description.c_str(),
              state_path_.c_str(), ref.B, ref.T, model.kernels_summary().c_str(), nthreads,
              nthreads == 1 ? "" : "s");

  DebugState ours;
  const VerifyReport report =
      verify_against_state(model, ref, tol_, write_state_.empty() ? nullptr : &ours, rc);
  print_offload_report(plugin_, model);
  print_report(report);
  if (!write_state_.empty()) {
    save_debug_state(write_state_, source.config, ours);
    std::printf("verify: wrote this program's state to %s\n", write_state_.c_str());
  }
  std::printf("verify: %s\n", report.ok ? "OK" : "FAIL");
  return report.ok ? 0 : 1;
}

int VerifyCommand::run_adapter(const ModelSource& source, Model& model, const Placement& placed,
                               int nthreads, Recompute rc) {
  if (model.offload_active()) {
    throw UsageError("--adapter with --plugin: the device runs no adapters yet");
  }
  PeftAdapterConfig read;
  LoraAdapter adapter = read_peft_adapter(adapter_, source.config, &read);
  const AdapterReferenceShape shape = adapter_reference_shape(state_path_);
  std::printf("%s\n", placed.summary.c_str());
  std::printf(
      "verify: model %s (%s, %s) + adapter %s (r=%d, alpha=%g, %zu modules), reference %s "
      "(B=%d T=%d), %s, %d thread%s\n",
      model_path_.c_str(), describe(source.config).c_str(), source.description.c_str(),
      adapter_.c_str(), adapter.options().r, adapter.options().lora_alpha(),
      adapter.modules().size(), state_path_.c_str(), shape.B, shape.T,
      model.kernels_summary().c_str(), nthreads, nthreads == 1 ? "" : "s");
  const VerifyReport report = verify_adapter_against(model, adapter, state_path_, tol_, rc);
  print_report(report);
  std::printf("verify: %s\n", report.ok ? "OK" : "FAIL");
  return report.ok ? 0 : 1;
}

}  // namespace

std::unique_ptr<Command> make_verify_command() { return std::make_unique<VerifyCommand>(); }

}  // namespace llmcpu
