// End-to-end training step (forward, backward, gradient norm, AdamW) for model presets, with the time
// split by phase. Tokens are random ids; the model is GPT-2-initialised. Reports the median step
// time over repetitions, tokens/s, and each phase's share.
//   ./build/bench_step --benchmark_filter=124m --benchmark_repetitions=3
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <memory>
#include <vector>

#include "core/model/gpt2.h"
#include "core/model/preset.h"
#include "core/optim/adamw.h"
#include "core/util/rng.h"

namespace llmcpu {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void BM_TrainStep(benchmark::State& state, const char* preset) {
  const int B = static_cast<int>(state.range(0)), T = static_cast<int>(state.range(1));
  Gpt2 model(load_model_preset(find_conf_file("models", preset)));
  init_gpt2(model, 1);
  model.plan_batch(B, T);
  AdamWConfig cfg;
  cfg.weight_decay = 0.1;
  AdamW opt(model.num_parameters(), cfg);
  std::vector<int> inputs((size_t)B * T), targets((size_t)B * T);
  Rng rng(7);
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs[i] = int(rng.below(model.config().vocab_size));
    targets[i] = int(rng.below(model.config().vocab_size));
  }
  double fwd = 0, bwd = 0, upd = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    benchmark::DoNotOptimize(model.forward(inputs.data(), targets.data(), B, T));
    fwd += seconds_since(t0);
    t0 = Clock::now();
    model.zero_grad();
    model.backward();
    bwd += seconds_since(t0);
    t0 = Clock::now();
    benchmark::DoNotOptimize(global_norm(model.grads_flat(), model.num_parameters()));
    opt.step(model.params_flat(), model.grads_flat(), 1e-4);
    upd += seconds_since(t0);
  }
  const double total = fwd + bwd + upd;
  state.counters["tok/s"] = benchmark::Counter(double(B) * T, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["fwd%"] = 100 * fwd / total;
  state.counters["bwd%"] = 100 * bwd / total;
  state.counters["adamw%"] = 100 * upd / total;
  state.counters["threads"] = omp_get_max_threads();
  state.SetLabel(std::string(model.kernels().target) + " kernels");
}

BENCHMARK_CAPTURE(BM_TrainStep, gpt2_d2, "gpt2-d2")->Args({4, 64})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TrainStep, gpt2_d6, "gpt2-d6")->Args({4, 64})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TrainStep, gpt2_124m, "gpt2-124m")
    ->Args({4, 64})
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace llmcpu

BENCHMARK_MAIN();
