// End-to-end training step (forward, backward, gradient norm, AdamW) for model presets, with the
// time split by phase. Tokens are random ids; the model is GPT-2-initialised. Reports the median
// step time over repetitions, tokens/s, and each phase's share.
//   ./build/bench_step --benchmark_filter=124m --benchmark_repetitions=3
// Threads are placed as `llmcpu train` places them; the environment picks the policy:
//   LLMCPU_BIND=compact|spread|none (default compact), LLMCPU_NUMA=local|interleave|off (default
//   local), LLMCPU_THREADS=N (default one per core). The plan is printed in one line at start.
// LLMCPU_PLUGIN=PATH or --plugin PATH hands layers to a plugin's device (as `train --plugin`;
// LLMCPU_OFFLOAD_LAYERS=N|all, default all): the device then also runs their AdamW, and the rows
// show the device's copy and compute time per step, the share of copying hidden by compute and
// the bytes each way.
// LLMCPU_PRECISION=bf16 runs the bf16 mixed-precision step (as `train --precision bf16`).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "bench/plugin_arg.h"
#include "core/model/model.h"
#include "core/model/preset.h"
#include "core/optim/adamw.h"
#include "core/plugin/offload.h"
#include "core/runtime/placement.h"
#include "core/util/rng.h"
#include "simd/error.h"

namespace llmcpu {
namespace {

using Clock = std::chrono::steady_clock;
BindPolicy g_bind = BindPolicy::kCompact;  // the policy main() applied
Precision g_precision = Precision::kFp32;  // LLMCPU_PRECISION
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void BM_TrainStep(benchmark::State& state, const char* preset) {
  const int B = static_cast<int>(state.range(0)), T = static_cast<int>(state.range(1));
  Model model(load_model_preset(find_conf_file("models", preset)), active_kernels(), g_precision);
  init_model(model, 1);
  // The plugin belongs to this model (and keeps its weights): a fresh one per benchmark.
  model.plan_batch(B, T);
  if (const char* plugin = std::getenv("LLMCPU_PLUGIN")) {
    OffloadOptions o;
    if (const char* n = std::getenv("LLMCPU_OFFLOAD_LAYERS")) o.layers = n;
    const OffloadOutcome r = enable_offload(model, plugin, o);
    if (!r.active) {
      state.SkipWithError(r.message.c_str());
      return;
    }
  }
  AdamWConfig cfg;
  cfg.weight_decay = 0.1;
  AdamW opt(model.num_parameters(), cfg, model.kernels(), model.bf16_kernels());
  // The device's part is updated where it lives (as the trainer does): the CPU's AdamW skips it.
  BlockDevice* device = model.offload_device();
  opt.skip(model.device_spans());
  llmcpu_offload_report dev;
  model.offload_report(&dev);  // count from the first step on, not the upload of the weights
  std::vector<int> inputs((size_t)B * T), targets((size_t)B * T);
  Rng rng(7);
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs[i] = int(rng.below(model.config().vocab_size));
    targets[i] = int(rng.below(model.config().vocab_size));
  }
  double passes = 0, upd = 0;
  auto step = [&] {
    auto t0 = Clock::now();
    model.zero_grad();
    benchmark::DoNotOptimize(model.forward_backward(inputs.data(), targets.data(), B, T));
    passes += seconds_since(t0);
    t0 = Clock::now();
    benchmark::DoNotOptimize(global_norm(model.grads_flat(), model.num_parameters()));
    if (device) benchmark::DoNotOptimize(device->grad_sum_squares());
    const Model::UpdateSpans w = model.weights_for_update();  // bf16: the copy in the same pass
    // As the trainer's update: without a device the same pass zeroes the gradients.
    opt.step(w.master, model.grads_flat(), 1e-4, w.copy, {}, {1.0f, device == nullptr});
    if (!device) model.mark_gradients_zero();
    if (device) {
      device->adamw_step(adamw_step_of(cfg, 1e-4, opt.steps_taken()), 1.0f);
      model.device_parameters_changed();
    }
    upd += seconds_since(t0);
  };
  // One untimed step first, as in a training run's steady state: libxsmm JIT, scratch growth and
  // the first touch of the activation arena and the AdamW moments happen there.
  step();
  passes = upd = 0;
  model.offload_report(&dev);
  for (auto _ : state) step();
  if (model.offload_report(&dev) && state.iterations() > 0) {
    const double n = double(state.iterations());
    state.counters["copy_ms"] = dev.copy_ms / n;
    state.counters["compute_ms"] = dev.compute_ms / n;
    state.counters["hidden%"] = 100 * dev.hidden_fraction;
    state.counters["MB_up"] = double(dev.bytes_up) / 1e6 / n;
    state.counters["MB_down"] = double(dev.bytes_down) / 1e6 / n;
  }
  const double total = passes + upd;
  state.counters["tok/s"] =
      benchmark::Counter(double(B) * T, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["fwd+bwd%"] = 100 * passes / total;
  state.counters["adamw%"] = 100 * upd / total;
  state.counters["threads"] = omp_get_max_threads();
  state.SetLabel(model.kernels_summary() + ", bind " + bind_policy_name(g_bind));
}

// Wall-clock time (UseRealTime): with a plugin the CPU mostly waits for the device, and the tok/s
// rate must count that waiting.
BENCHMARK_CAPTURE(BM_TrainStep, gpt2_d2, "gpt2-d2")
    ->Args({4, 64})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TrainStep, gpt2_d6, "gpt2-d6")
    ->Args({4, 64})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TrainStep, gpt2_124m, "gpt2-124m")
    ->Args({4, 64})
    ->Iterations(5)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Placement from LLMCPU_BIND, LLMCPU_NUMA and LLMCPU_THREADS; UsageErrors name the variable.
Placement place_from_environment() {
  PlacementOptions o;
  if (const char* s = std::getenv("LLMCPU_BIND")) o.bind = s;
  if (const char* s = std::getenv("LLMCPU_NUMA")) o.numa = s;
  if (const char* s = std::getenv("LLMCPU_THREADS")) {
    char* end = nullptr;
    const long v = std::strtol(s, &end, 10);
    if (!*s || *end || v < 0 || v > 1 << 20) {
      throw UsageError(std::string("LLMCPU_THREADS '") + s + "' is not a non-negative integer");
    }
    o.threads = int(v);
  }
  g_bind = parse_bind_policy(o.bind, "LLMCPU_BIND");
  if (const char* s = std::getenv("LLMCPU_PRECISION")) {
    g_precision = parse_precision(s, "LLMCPU_PRECISION");
  }
  parse_numa_mode(o.numa, "LLMCPU_NUMA");
  return apply_placement(o);
}

}  // namespace
}  // namespace llmcpu

int main(int argc, char** argv) {
  if (!llmcpu::bench::take_plugin_flag(argc, argv)) return 2;
  try {
    const llmcpu::Placement placement = llmcpu::place_from_environment();
    std::printf("%s\n", placement.summary.c_str());
    std::fflush(stdout);
    benchmark::AddCustomContext("placement",
                                placement.summary.substr(placement.summary.find(' ') + 1));
  } catch (const llmcpu::Error& e) {
    std::fprintf(stderr, "bench_step: error: %s\n", e.what());
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
