// The bf16 kernels (simd/bf16.h) of every bf16 table this CPU runs, on GPT-2 124M shapes (B=4,
// T=64, C=768, Vp=50304, 124,475,904 parameters), with % of this machine's roofline: the fp32
// kernels are in bench_kernels, the GEMM engines side by side (with oneDNN) in bench_bf16_gemm.
//   ./build/bench_layers                                    every table (scalar is slow: minutes)
//   ./build/bench_layers --benchmark_filter='^avx512bf16/'  one table
//   ./build/bench_layers --benchmark_filter='/(to_|adamw)'  conversions and AdamW, every table
//   ./build/bench_layers --benchmark_filter=attention       flash attention, T = 64 to 2048, and
//                                                           packed rows at 2048
// roof% is the time the kernel would take on the roofline, max(FLOPs / peak, bytes / bandwidth),
// over the measured time. The roofs are measured at start with the same threads (bench/roofs.h):
// the GEMMs against the bf16 peak (AMX where present, else AVX512-BF16 dot products), the other
// kernels, whose arithmetic is fp32, against the fp32 FMA peak; bytes are the compulsory traffic
// (every tensor read or written once, 2 bytes per bf16 value) against the stream bandwidth. Inputs
// rotate over copies larger than 128 MiB, so each call starts from DRAM as in a training step.
// Not here: the fp32 kernels (bench_kernels), whole steps (bench_step).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/roofs.h"
#include "core/util/aligned_buffer.h"
#include "simd/bf16.h"

namespace llmcpu::bench {
namespace {

constexpr int B = 4, T = 64, C = 768, Vp = 50304;
constexpr size_t BT = size_t(B) * T, NC = BT * C, N4C = 4 * NC;
constexpr size_t kParams = 124475904;  // GPT-2 124M with the vocabulary padded to Vp
constexpr size_t kColdBytes = size_t(128) << 20;

using Clock = std::chrono::steady_clock;
Roofs g_roofs;

// A tensor of a benchmark: n values, fp32 or bf16.
struct Tensor {
  size_t n;
  bool bf16;
};
constexpr Tensor f32(size_t n) { return {n, false}; }
constexpr Tensor b16(size_t n) { return {n, true}; }

// The tensors of one benchmark, `copies` times over; the last benchmark's are freed when the next
// one with other tensors starts. Values in [-1, 1): no denormals, no overflow.
struct Work {
  std::string key;
  size_t copies = 1;
  std::vector<Tensor> spec;
  std::vector<AlignedBuffer<float>> data;  // copy-major; a bf16 tensor uses the first n/2 floats
  float* f(size_t copy, size_t t) { return data[copy * spec.size() + t].data(); }
  bf16* h(size_t copy, size_t t) { return reinterpret_cast<bf16*>(f(copy, t)); }
};

Work& work(const std::string& key, const std::vector<Tensor>& spec,
           const std::function<void(Work&)>& init) {
  static std::unique_ptr<Work> current;
  if (current && current->key == key) return *current;
  current.reset();
  auto w = std::make_unique<Work>();
  w->key = key;
  w->spec = spec;
  size_t bytes = 0;
  for (const Tensor& t : spec) bytes += t.n * (t.bf16 ? 2 : 4);
  w->copies = std::max<size_t>(1, (kColdBytes + bytes - 1) / bytes);
  uint32_t state = 12345;
  for (size_t c = 0; c < w->copies; ++c) {
    for (const Tensor& t : spec) {
      AlignedBuffer<float> buf(t.bf16 ? (t.n + 1) / 2 : t.n);
      bf16* h = reinterpret_cast<bf16*>(buf.data());
      for (size_t i = 0; i < t.n; ++i) {
        state = state * 1664525u + 1013904223u;
        const float v = float(int32_t(state >> 8) - (1 << 23)) / float(1 << 23);
        if (t.bf16)
          h[i] = float_to_bf16(v);
        else
          buf[i] = v;
      }
      w->data.push_back(std::move(buf));
    }
  }
  if (init) init(*w);
  current = std::move(w);
  return *current;
}

struct Cost {
  double flops, bytes;
  bool gemm = false;  // FLOPs against the bf16 GEMM peak instead of the fp32 FMA peak
};

// Times fn(copy) over rotating copies; one untimed call first (scratch growth, first touch).
void measure(benchmark::State& state, const std::string& name, Work& w, Cost cost,
             const std::function<void(size_t)>& fn) {
  fn(0);
  size_t copy = 0;
  const auto t0 = Clock::now();
  for (auto _ : state) {
    copy = (copy + 1) % w.copies;
    fn(copy);
  }
  const double secs =
      std::chrono::duration<double>(Clock::now() - t0).count() / double(state.iterations());
  report_against_roofs(state, name, secs, cost.flops, cost.bytes,
                       cost.gemm ? g_roofs.bf16() : g_roofs.fp32, g_roofs.bandwidth);
}

// One benchmark: its tensors (with what makes their values valid for it, or null), its cost, and
// the call on copy c of the tensors.
struct Layer {
  std::string name, key;
  std::vector<Tensor> spec;
  Cost cost;
  std::function<void(const Bf16Kernels&, Work&, size_t)> call;
  std::function<void(Work&)> init = nullptr;
};

std::vector<Layer> layers() {
  const scalar::AdamWStep step{1e-4, 0.9, 0.999, 1e-8, 0.1, 10};
  // Parameters: param, bf16 copy, m, v, grad (as AdamW sees them); the conversions use the first
  // two.
  const std::vector<Tensor> params = {f32(kParams), b16(kParams), f32(kParams), f32(kParams),
                                      f32(kParams)};
  const auto moments = [](Work& w) {  // second moments >= 0
    for (size_t c = 0; c < w.copies; ++c) {
      float* v = w.f(c, 3);
      for (size_t i = 0; i < kParams; ++i) v[i] = std::fabs(v[i]) * 1e-4f;
    }
  };
  std::vector<Layer> r = {
      {"to_bf16",
       "params",
       params,
       {2.0 * kParams, 6.0 * kParams},
       [](const Bf16Kernels& k, Work& w, size_t c) { k.to_bf16(w.h(c, 1), w.f(c, 0), kParams); },
       moments},
      {"to_f32",
       "params",
       params,
       {1.0 * kParams, 6.0 * kParams},
       [](const Bf16Kernels& k, Work& w, size_t c) { k.to_f32(w.f(c, 0), w.h(c, 1), kParams); },
       moments},
      {"adamw_bf16_copy",
       "params",
       params,
       {17.0 * kParams, 30.0 * kParams},
       [step](const Bf16Kernels& k, Work& w, size_t c) {
         k.adamw_update(w.f(c, 0), w.h(c, 1), w.f(c, 2), w.f(c, 3), w.f(c, 4), kParams, step);
       },
       moments},
      {"layernorm_fwd",
       "layernorm",
       {f32(NC), f32(C), f32(C), f32(BT), f32(BT), b16(NC)},
       {9.0 * NC, 6.0 * NC},
       [](const Bf16Kernels& k, Work& w, size_t c) {
         k.layernorm_forward(w.h(c, 5), w.f(c, 3), w.f(c, 4), w.f(c, 0), w.f(c, 1), w.f(c, 2), BT,
                             C);
       }},
      {"gelu_fwd",
       "gelu",
       {f32(N4C), b16(N4C)},
       {22.0 * N4C, 6.0 * N4C},
       [](const Bf16Kernels& k, Work& w, size_t c) { k.gelu_forward(w.h(c, 1), w.f(c, 0), N4C); }},
  };
  struct Gemm {
    const char* name;
    int C, OC;
    bool bias;
  };
  for (const Gemm g :
       {Gemm{"qkv", C, 3 * C, true}, Gemm{"attproj", C, C, true}, Gemm{"fc", C, 4 * C, true},
        Gemm{"fcproj", 4 * C, C, true}, Gemm{"lm_head", C, Vp, false}}) {
    const size_t in = BT * g.C, out = BT * g.OC, wn = size_t(g.OC) * g.C;
    const double flops = 2.0 * BT * g.C * g.OC;
    // out, inp, W, bias, dinp, dW, dbias, dout
    const std::vector<Tensor> spec = {f32(out), b16(in), b16(wn),   f32(g.OC),
                                      f32(in),  f32(wn), f32(g.OC), f32(out)};
    const std::string key = std::string("matmul_") + g.name;
    r.push_back({key + "_fwd",
                 key,
                 spec,
                 {flops, 2.0 * (in + wn) + 4.0 * out, true},
                 [g](const Bf16Kernels& k, Work& w, size_t c) {
                   k.matmul_forward(w.f(c, 0), w.h(c, 1), w.h(c, 2), g.bias ? w.f(c, 3) : nullptr,
                                    BT, g.C, g.OC);
                 }});
    r.push_back({key + "_bwd",
                 key,
                 spec,
                 {2 * flops, 2.0 * (in + wn) + 4.0 * (in + out + 2 * wn), true},
                 [g](const Bf16Kernels& k, Work& w, size_t c) {
                   k.matmul_backward(w.f(c, 4), w.f(c, 5), g.bias ? w.f(c, 6) : nullptr, w.f(c, 7),
                                     w.h(c, 1), w.h(c, 2), BT, g.C, g.OC);
                 }});
  }
  // Flash attention on bf16 q, k, v, against the FMA peak (the portable tables widen to fp32; the
  // AVX512-BF16 ones run bf16 dot products, whose peak is about twice that), GPT-2's heads
  // (NH = 12, hs = 64) at the bench's T = 64 (B = 4) and at T = 256, 1024, 2048 with B*T = 4096
  // (B = 16, 4, 2), and at T = 2048 over packed rows of 4 examples of 512 (AttentionOptions::
  // starts: the blocks of other examples skipped). FLOPs: causal products of hs*n(n+1) per head and
  // example of n tokens, 2 forward and 5 backward (as bench_kernels, where the fp32 and the
  // materialized kernels are). Bytes: qkv and out in bf16, lse, dout and dqkv in fp32. The
  // backward's out and lse come from the default bf16 table.
  for (const auto& [t, examples] : {std::pair{T, 1}, {256, 1}, {1024, 1}, {2048, 1}, {2048, 4}}) {
    const int b = t == T ? B : 4096 / t, nh = 12, hs = C / nh, n = t / examples;
    const size_t nc = size_t(b) * t * C, n3c = 3 * nc, nl = size_t(b) * nh * t;
    const double prod = double(hs) * n * (n + 1) * examples * b * nh;
    std::vector<int> starts(size_t(b) * t);
    for (size_t i = 0; i < starts.size(); ++i) starts[i] = int(i % size_t(t)) / n * n;
    const std::string key = "flash_attention" + std::string(examples > 1 ? "_packed4" : "") +
                            (t == T ? "" : "_T" + std::to_string(t));
    const auto options = [=] {
      return AttentionOptions{.starts = examples > 1 ? starts.data() : nullptr};
    };
    // out, lse, qkv, dqkv, dout
    const std::vector<Tensor> spec = {b16(nc), f32(nl), b16(n3c), f32(n3c), f32(nc)};
    const auto forward = [=](Work& w) {
      for (size_t c = 0; c < w.copies; ++c) {
        active_bf16_kernels().flash_attention_forward(w.h(c, 0), w.f(c, 1), w.h(c, 2), b, t, nh, nh,
                                                      hs, options());
      }
    };
    r.push_back({key + "_fwd",
                 key,
                 spec,
                 {2 * prod, 2.0 * (n3c + nc) + 4.0 * nl},
                 [=](const Bf16Kernels& k, Work& w, size_t c) {
                   k.flash_attention_forward(w.h(c, 0), w.f(c, 1), w.h(c, 2), b, t, nh, nh, hs,
                                             options());
                 },
                 forward});
    r.push_back({key + "_bwd",
                 key,
                 spec,
                 {5 * prod, 2.0 * (n3c + nc) + 4.0 * (n3c + nc + nl)},
                 [=](const Bf16Kernels& k, Work& w, size_t c) {
                   k.flash_attention_backward(w.f(c, 3), w.f(c, 4), w.h(c, 0), w.h(c, 2), w.f(c, 1),
                                              b, t, nh, nh, hs, options());
                 },
                 forward});
  }
  return r;
}

}  // namespace
}  // namespace llmcpu::bench

int main(int argc, char** argv) {
  using namespace llmcpu;
  using namespace llmcpu::bench;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  g_roofs = measure_roofs(true);
  benchmark::AddCustomContext("fp32_fma_peak_gflops", std::to_string(g_roofs.fp32 / 1e9));
  benchmark::AddCustomContext("bf16_gemm_peak_gflops", std::to_string(g_roofs.bf16() / 1e9));
  benchmark::AddCustomContext("bandwidth_roof_gbs", std::to_string(g_roofs.bandwidth / 1e9));
  static const std::vector<Layer> list = layers();
  for (std::string_view target : available_bf16_targets()) {
    const Bf16Kernels& table = bf16_kernels_named(target);
    for (const Layer& l : list) {
      const std::string full = std::string(target) + "/" + l.name;
      benchmark::RegisterBenchmark(full.c_str(),
                                   [&l, &table, full](benchmark::State& s) {
                                     Work& w = work(l.key, l.spec, l.init);
                                     measure(s, full, w, l.cost,
                                             [&](size_t c) { l.call(table, w, c); });
                                   })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.5);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_roof_summary();
  return 0;
}
