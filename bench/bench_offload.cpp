// Offloaded ops against the CPU: matmul forward and backward on GPT-2 124M's four layer shapes and
// causal attention forward and backward, at B=4 T=64 (N=256 rows), each first on the CPU kernel
// table and then through the plugin named by --plugin PATH or LLMCPU_PLUGIN (the device calls
// `train --plugin` makes), with the weights resident on the device as in training. Plugin rows add
// the device's own figures per call from its timestamp queries (copy_ms, compute_ms, hidden% of
// copying behind compute, MB up and down) and x_cpu, the CPU time over the plugin's. Without a
// plugin, or when the plugin cannot be used (the reason is printed), only the CPU rows run. The
// per-step comparison is bench_step with a plugin.
//   ./build/bench_offload --plugin build/libllmcpu_vulkan.so
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/plugin_arg.h"
#include "core/plugin/offload.h"
#include "core/runtime/placement.h"
#include "core/util/rng.h"
#include "simd/error.h"
#include "simd/kernels.h"

namespace llmcpu {
namespace {

constexpr int kB = 4, kT = 64, kC = 768, kNH = 12;
constexpr size_t kN = size_t(kB) * kT;

struct MatmulShape {
  const char* name;
  int C, OC;
};
// GPT-2 124M's layer matmuls (the lm_head, 768 x 50304, is left out to keep the run short).
constexpr MatmulShape kShapes[] = {
    {"qkv", kC, 3 * kC}, {"attproj", kC, kC}, {"fc", kC, 4 * kC}, {"fcproj", 4 * kC, kC}};

std::vector<float> random_vector(size_t n, uint64_t seed, double scale) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = float(scale * rng.normal());
  return v;
}

// Every shape's weight and bias in one flat array, as the model's parameters are: handed to the
// plugin once, so its rows read the weights from the device copy.
struct Weights {
  std::vector<float> flat;
  std::vector<size_t> offset;  // per shape: weight at offset, bias right after it
  Weights() {
    size_t total = 0;
    for (const MatmulShape& s : kShapes) {
      offset.push_back(total);
      total += size_t(s.OC) * s.C + s.OC;
    }
    flat = random_vector(total, 1, 0.02);
  }
  const float* weight(int i) const { return flat.data() + offset[i]; }
  const float* bias(int i) const { return weight(i) + size_t(kShapes[i].OC) * kShapes[i].C; }
};

Weights& weights() {
  static Weights w;
  return w;
}

std::unique_ptr<OffloadDevice> g_device;      // the plugin the /plugin rows run on
std::map<std::string, double> g_cpu_seconds;  // per op: the CPU row's time per iteration

// Device figures per call, and the ratio to the CPU row of the same op.
void finish(benchmark::State& state, const std::string& op, bool on_plugin, double seconds) {
  const double per_iter = seconds / double(state.iterations());
  if (!on_plugin) {
    g_cpu_seconds[op] = per_iter;
    return;
  }
  const llmcpu_offload_report r = g_device->report();
  if (r.calls > 0) {
    const double calls = r.calls;
    state.counters["copy_ms"] = r.copy_ms / calls;
    state.counters["compute_ms"] = r.compute_ms / calls;
    state.counters["hidden%"] = 100 * r.hidden_fraction;
    state.counters["MB_up"] = double(r.bytes_up) / 1e6 / calls;
    state.counters["MB_down"] = double(r.bytes_down) / 1e6 / calls;
  }
  if (g_cpu_seconds.count(op)) state.counters["x_cpu"] = g_cpu_seconds[op] / per_iter;
}

template <typename F>
double timed_loop(benchmark::State& state, F&& body) {
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return seconds;
}

void BM_MatmulForward(benchmark::State& state, int shape, bool on_plugin) {
  const KernelTable& k = active_kernels();
  const MatmulShape& s = kShapes[shape];
  const auto inp = random_vector(kN * s.C, 2, 1.0);
  std::vector<float> out(kN * s.OC);
  if (on_plugin) g_device->report();  // count from here
  const double seconds = timed_loop(state, [&] {
    const float *w = weights().weight(shape), *b = weights().bias(shape);
    if (on_plugin) {
      g_device->matmul_forward(out.data(), inp.data(), w, b, kN, s.C, s.OC);
    } else {
      k.matmul_forward(out.data(), inp.data(), w, b, kN, s.C, s.OC);
    }
    benchmark::DoNotOptimize(out.data());
  });
  state.counters["GFLOP"] = benchmark::Counter(2.0 * kN * s.C * s.OC / 1e9,
                                               benchmark::Counter::kIsIterationInvariantRate);
  finish(state, std::string("fwd_") + s.name, on_plugin, seconds);
}

void BM_MatmulBackward(benchmark::State& state, int shape, bool on_plugin) {
  const KernelTable& k = active_kernels();
  const MatmulShape& s = kShapes[shape];
  const auto inp = random_vector(kN * s.C, 3, 1.0), dout = random_vector(kN * s.OC, 4, 1.0);
  std::vector<float> dinp(kN * s.C), dw(size_t(s.OC) * s.C), db(s.OC);
  if (on_plugin) g_device->report();  // count from here
  const double seconds = timed_loop(state, [&] {
    const float* w = weights().weight(shape);
    if (on_plugin) {
      g_device->matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w, kN,
                                s.C, s.OC);
    } else {
      k.matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w, kN, s.C,
                        s.OC);
    }
    benchmark::DoNotOptimize(dw.data());
  });
  state.counters["GFLOP"] = benchmark::Counter(4.0 * kN * s.C * s.OC / 1e9,
                                               benchmark::Counter::kIsIterationInvariantRate);
  finish(state, std::string("bwd_") + s.name, on_plugin, seconds);
}

void BM_Attention(benchmark::State& state, bool backward, bool on_plugin) {
  const KernelTable& k = active_kernels();
  const auto qkv = random_vector(kN * 3 * kC, 5, 1.0), dout = random_vector(kN * kC, 6, 1.0);
  std::vector<float> out(kN * kC), att(size_t(kB) * kNH * kT * kT), dqkv(kN * 3 * kC),
      scratch(size_t(kB) * kNH * kT);
  active_kernels().attention_forward(out.data(), att.data(), qkv.data(), kB, kT, kC, kNH);
  if (on_plugin) g_device->report();  // count from here
  const double seconds = timed_loop(state, [&] {
    if (backward && on_plugin) {
      g_device->attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), kB, kT, kC,
                                   kNH);
    } else if (backward) {
      k.attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), kB, kT,
                           kC, kNH);
    } else if (on_plugin) {
      g_device->attention_forward(out.data(), att.data(), qkv.data(), kB, kT, kC, kNH);
    } else {
      k.attention_forward(out.data(), att.data(), qkv.data(), kB, kT, kC, kNH);
    }
    benchmark::DoNotOptimize(dqkv.data());
  });
  finish(state, backward ? "attention_bwd" : "attention_fwd", on_plugin, seconds);
}

void register_benchmarks(bool with_plugin) {
  auto variants = [&](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark((name + "/cpu").c_str(), fn, false)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    if (with_plugin) {
      benchmark::RegisterBenchmark((name + "/plugin").c_str(), fn, true)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  };
  for (int i = 0; i < int(std::size(kShapes)); ++i) {
    variants(std::string("matmul_fwd/") + kShapes[i].name,
             [i](benchmark::State& s, bool p) { BM_MatmulForward(s, i, p); });
    variants(std::string("matmul_bwd/") + kShapes[i].name,
             [i](benchmark::State& s, bool p) { BM_MatmulBackward(s, i, p); });
  }
  variants("attention_fwd", [](benchmark::State& s, bool p) { BM_Attention(s, false, p); });
  variants("attention_bwd", [](benchmark::State& s, bool p) { BM_Attention(s, true, p); });
}

}  // namespace
}  // namespace llmcpu

int main(int argc, char** argv) {
  if (!llmcpu::bench::take_plugin_flag(argc, argv)) return 2;
  using namespace llmcpu;
  bool with_plugin = false;
  try {
    const Placement placement = apply_placement(PlacementOptions{});
    std::printf("%s\n", placement.summary.c_str());
    if (const char* path = std::getenv("LLMCPU_PLUGIN")) {
      OffloadOutcome r;
      g_device = OffloadDevice::open(path, weights().flat.data(), weights().flat.size(), &r);
      std::printf("%s\n", r.message.c_str());
      with_plugin = r.active;
      if (with_plugin) benchmark::AddCustomContext("offload", r.message.substr(9));
    } else {
      std::printf("offload: no --plugin (or LLMCPU_PLUGIN); CPU rows only\n");
    }
    std::fflush(stdout);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_offload: error: %s\n", e.what());
    return 2;
  }
  register_benchmarks(with_plugin);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  g_device.reset();
  return 0;
}
