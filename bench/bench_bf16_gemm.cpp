// The GEMMs of GPT-2 124M at B=4, T=64 (N = 256 rows; --tokens=N for others, 4096 for T=1024),
// forward and backward, in every engine this build has: llmcpu's fp32 GEMM (active_kernels()),
// each of llmcpu's bf16 tables (available_bf16_targets()), and, when oneDNN was found at build
// time, oneDNN's matmul in bf16 and in fp32, so that the bf16 path can keep the faster engine with
// the figures to show for it.
//   ./build/bench_bf16_gemm                                  everything (scalar tables: minutes)
//   ./build/bench_bf16_gemm --benchmark_filter='lm_head'     one shape, every engine
//   ./build/bench_bf16_gemm --benchmark_filter='/(onednn|llmcpu)_bf16'
//   ./build/bench_bf16_gemm --tokens=4096 --benchmark_filter='fcproj'   B=4, T=1024
// Names are SHAPE_DIR/ENGINE. forward: out (N,OC) = inp (N,C) W (OC,C)^T + bias; backward: dinp
// (N,C) = dout W and dW (OC,C) += dout^T inp (4 N C OC FLOPs; llmcpu also sums dbias, oneDNN does
// not, a few N OC additions). Operands are in the model's layouts (nn.Linear weights, row-major
// activations); oneDNN gets its bf16 operands already converted, while llmcpu's bf16 backward
// rounds its fp32 dout itself, as the model calls it. Each row reports GFLOP/s, roof% against the
// peak of its precision measured here at start with the same threads (fp32: the FMA loop of
// roofline.cc; bf16: the AMX tile loop where the CPU has AMX, else AVX512-BF16 dot products, else
// the fp32 peak), and the ratio to the fastest engine on that shape. A markdown summary is printed
// at the end. Not here: cold-cache effects (operands stay in cache where they fit, as in a GEMM
// microbenchmark; bench_kernels rotates copies), other layers (bench_layers, bench_kernels).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/roofs.h"
#include "core/util/aligned_buffer.h"
#include "simd/bf16.h"
#include "simd/kernels.h"
#if LLMCPU_HAVE_DNNL
#include <dnnl.hpp>
#endif

namespace llmcpu::bench {

namespace {

size_t N = 256;  // B * T: 4 * 64 unless --tokens says otherwise
constexpr int C = 768, Vp = 50304;

struct Shape {
  const char* name;
  int C, OC;
  bool bias;
};
constexpr Shape kShapes[] = {{"qkv", C, 3 * C, true},
                             {"attproj", C, C, true},
                             {"fc", C, 4 * C, true},
                             {"fcproj", 4 * C, C, true},
                             {"lm_head", C, Vp, false}};

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

Roofs g_roofs;

// The operands of one shape, fp32 and bf16, made once per shape (benchmarks run shape by shape).
struct Operands {
  const Shape* shape = nullptr;
  AlignedBuffer<float> inp, weight, bias, out, dout, dinp, dweight, dbias;
  AlignedBuffer<bf16> inp16, weight16, dout16;
};

Operands& operands(const Shape& s) {
  static std::unique_ptr<Operands> current;
  if (current && current->shape == &s) return *current;
  current.reset();
  auto o = std::make_unique<Operands>();
  o->shape = &s;
  const size_t nin = N * s.C, nout = N * s.OC, nw = size_t(s.OC) * s.C;
  uint32_t state = 12345;
  auto fill = [&](AlignedBuffer<float>& b, size_t n, float scale) {
    b = AlignedBuffer<float>(n);
    for (size_t i = 0; i < n; ++i) {  // values in [-scale, scale): no denormals, no overflow
      state = state * 1664525u + 1013904223u;
      b[i] = scale * float(int32_t(state >> 8) - (1 << 23)) / float(1 << 23);
    }
  };
  auto narrow = [](AlignedBuffer<bf16>& d, const AlignedBuffer<float>& f) {
    d = AlignedBuffer<bf16>(f.size());
    for (size_t i = 0; i < f.size(); ++i) d[i] = float_to_bf16(f[i]);
  };
  fill(o->inp, nin, 1.0f), fill(o->weight, nw, 0.05f), fill(o->bias, s.OC, 0.1f);
  fill(o->out, nout, 0.0f), fill(o->dout, nout, 1e-3f), fill(o->dinp, nin, 0.0f);
  fill(o->dweight, nw, 0.0f), fill(o->dbias, s.OC, 0.0f);
  narrow(o->inp16, o->inp), narrow(o->weight16, o->weight), narrow(o->dout16, o->dout);
  current = std::move(o);
  return *current;
}

struct Row {
  std::string shape, engine;
  double ms, gflops, roof_pct;
};
std::vector<Row> g_rows;

// Checks 64 sampled outputs of the call just made against sums in double over the operands the
// engine saw (bf16 engines: the bf16 values): out (forward) or dinp (backward). The bound, 1e-3 of
// the sum of |terms|, is far above fp32 accumulation error (K eps = 2e-4 for K = 3072) and far
// below what a wrong layout or a missing term gives. Returns what is wrong, or "".
std::string check(const Operands& o, bool bf16, bool backward) {
  const Shape& s = *o.shape;
  auto in = [&](size_t i) { return bf16 ? double(bf16_to_float(o.inp16[i])) : double(o.inp[i]); };
  auto w = [&](size_t i) {
    return bf16 ? double(bf16_to_float(o.weight16[i])) : double(o.weight[i]);
  };
  auto d = [&](size_t i) { return bf16 ? double(bf16_to_float(o.dout16[i])) : double(o.dout[i]); };
  uint32_t state = 777;
  for (int k = 0; k < 64; ++k) {
    state = state * 1664525u + 1013904223u;
    const size_t n = (state >> 8) % N;
    state = state * 1664525u + 1013904223u;
    const size_t j = (state >> 8) % size_t(backward ? s.C : s.OC);
    double ref = 0, mag = 0;
    if (!backward) {  // out[n][j] = sum_c inp[n][c] W[j][c] + bias[j]
      ref = s.bias ? o.bias[j] : 0.0, mag = std::fabs(ref);
      for (int c = 0; c < s.C; ++c) {
        const double t = in(n * s.C + c) * w(j * s.C + c);
        ref += t, mag += std::fabs(t);
      }
    } else {  // dinp[n][j] = sum_oc dout[n][oc] W[oc][j]
      for (int oc = 0; oc < s.OC; ++oc) {
        const double t = d(n * s.OC + oc) * w(size_t(oc) * s.C + j);
        ref += t, mag += std::fabs(t);
      }
    }
    const double got = backward ? o.dinp[n * s.C + j] : o.out[n * s.OC + j];
    if (!(std::fabs(got - ref) <= 1e-3 * mag + 1e-30)) {
      return std::string(backward ? "dinp" : "out") + "[" + std::to_string(n) + "][" +
             std::to_string(j) + "] = " + std::to_string(got) + ", expected " + std::to_string(ref);
    }
  }
  return "";
}

// Times fn() (one untimed call first: JIT, scratch growth, and the check) and records the row.
void measure(benchmark::State& state, const std::string& shape, const std::string& engine,
             double flops, double roof, const std::function<void()>& fn,
             const std::function<std::string()>& verify) {
  fn();
  if (const std::string wrong = verify(); !wrong.empty()) {
    state.SkipWithError(("wrong result: " + wrong).c_str());
    return;
  }
  const auto t0 = Clock::now();
  for (auto _ : state) fn();
  const double secs = seconds(t0, Clock::now()) / double(state.iterations());
  state.counters["GFLOP/s"] = flops / secs / 1e9;
  state.counters["roof%"] = 100.0 * flops / roof / secs;
  Row row{shape, engine, secs * 1e3, flops / secs / 1e9, 100.0 * flops / roof / secs};
  auto it = std::find_if(g_rows.begin(), g_rows.end(),
                         [&](const Row& r) { return r.shape == shape && r.engine == engine; });
  if (it != g_rows.end())
    *it = row;  // the framework runs a benchmark more than once while sizing: keep the last
  else
    g_rows.push_back(row);
}

// An engine: a name and, per shape and direction, the call to time.
struct Engine {
  std::string name;
  bool bf16;  // which roof applies
  std::function<std::function<void()>(Operands&, bool backward)> make;
  std::string label;  // what it runs on, for the benchmark's label
};

Engine llmcpu_fp32(const KernelTable& k) {
  return {"llmcpu_fp32", false,
          [&k](Operands& o, bool backward) -> std::function<void()> {
            const Shape& s = *o.shape;
            if (!backward) {
              return [&k, &o, &s] {
                k.matmul_forward(o.out.data(), o.inp.data(), o.weight.data(),
                                 s.bias ? o.bias.data() : nullptr, N, s.C, s.OC);
              };
            }
            return [&k, &o, &s] {
              k.matmul_backward(o.dinp.data(), o.dweight.data(), s.bias ? o.dbias.data() : nullptr,
                                o.dout.data(), o.inp.data(), o.weight.data(), N, s.C, s.OC);
            };
          },
          std::string(k.target) + " fp32 table"};
}

Engine llmcpu_bf16(const Bf16Kernels& k) {
  return {"llmcpu_bf16:" + std::string(k.target), true,
          [&k](Operands& o, bool backward) -> std::function<void()> {
            const Shape& s = *o.shape;
            if (!backward) {
              return [&k, &o, &s] {
                k.matmul_forward(o.out.data(), o.inp16.data(), o.weight16.data(),
                                 s.bias ? o.bias.data() : nullptr, N, s.C, s.OC);
              };
            }
            return [&k, &o, &s] {
              k.matmul_backward(o.dinp.data(), o.dweight.data(), s.bias ? o.dbias.data() : nullptr,
                                o.dout.data(), o.inp16.data(), o.weight16.data(), N, s.C, s.OC);
            };
          },
          std::string(k.target) + " bf16 table"};
}

#if LLMCPU_HAVE_DNNL
// oneDNN matmul: dst (M,Nc) = src (M,K) x weights (K,Nc) [+ bias] [+ dst], every operand described
// by its strides so that the model's layouts are used as they are. Made once, outside the timing.
struct DnnlMatmul {
  dnnl::matmul prim;
  std::unordered_map<int, dnnl::memory> args;
  std::string impl;
};

using dnnl::memory;
memory::desc md(memory::dims dims, memory::data_type dt, bool transposed) {
  const memory::dims strides = transposed ? memory::dims{1, dims[0]} : memory::dims{dims[1], 1};
  return memory::desc(dims, dt, strides);
}

dnnl::engine& dnnl_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

DnnlMatmul dnnl_matmul(memory::dim M, memory::dim K, memory::dim Nc, memory::data_type dt,
                       void* src, bool src_t, void* wei, bool wei_t, float* dst, float* bias,
                       bool accumulate) {
  dnnl::engine& eng = dnnl_engine();
  const auto f32 = memory::data_type::f32;
  const memory::desc s = md({M, K}, dt, src_t), w = md({K, Nc}, dt, wei_t),
                     d = md({M, Nc}, f32, false);
  const memory::desc b = bias ? memory::desc({1, Nc}, f32, memory::format_tag::ab) : memory::desc();
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(s, w, b, d), attr, eng);
  DnnlMatmul m{dnnl::matmul(pd), {}, pd.impl_info_str()};
  m.args[DNNL_ARG_SRC] = memory(s, eng, src);
  m.args[DNNL_ARG_WEIGHTS] = memory(w, eng, wei);
  m.args[DNNL_ARG_DST] = memory(d, eng, dst);
  if (bias) m.args[DNNL_ARG_BIAS] = memory(b, eng, bias);
  return m;
}

Engine onednn(bool bf16) {
  auto make = [bf16](Operands& o, bool backward) -> std::function<void()> {
    const Shape& s = *o.shape;
    const auto dt = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    void* inp = bf16 ? static_cast<void*>(o.inp16.data()) : o.inp.data();
    void* wei = bf16 ? static_cast<void*>(o.weight16.data()) : o.weight.data();
    void* dout = bf16 ? static_cast<void*>(o.dout16.data()) : o.dout.data();
    std::vector<DnnlMatmul> ms;
    if (!backward) {  // out (N,OC) = inp (N,C) x W^T: W (OC,C) read as (C,OC) transposed
      ms.push_back(dnnl_matmul(N, s.C, s.OC, dt, inp, false, wei, true, o.out.data(),
                               s.bias ? o.bias.data() : nullptr, false));
    } else {  // dinp (N,C) = dout (N,OC) x W (OC,C); dW (OC,C) += dout^T (OC,N) x inp (N,C)
      ms.push_back(
          dnnl_matmul(N, s.OC, s.C, dt, dout, false, wei, false, o.dinp.data(), nullptr, false));
      ms.push_back(
          dnnl_matmul(s.OC, N, s.C, dt, dout, true, inp, false, o.dweight.data(), nullptr, true));
    }
    static std::map<std::string, std::string> impls;  // printed once per engine and direction
    const std::string key = std::string(bf16 ? "bf16 " : "fp32 ") + (backward ? "bwd" : "fwd");
    std::string impl;
    for (const DnnlMatmul& m : ms) impl += (impl.empty() ? "" : " + ") + m.impl;
    if (impls[key] != impl) {
      std::printf("oneDNN %s %s: %s\n", key.c_str(), s.name, impl.c_str());
      impls[key] = impl;
    }
    auto shared = std::make_shared<std::vector<DnnlMatmul>>(std::move(ms));
    auto stream = std::make_shared<dnnl::stream>(dnnl_engine());
    return [shared, stream] {
      for (DnnlMatmul& m : *shared) m.prim.execute(*stream, m.args);
      stream->wait();
    };
  };
  return {bf16 ? "onednn_bf16" : "onednn_fp32", bf16, make,
          std::string("oneDNN ") + std::to_string(dnnl::version()->major) + "." +
              std::to_string(dnnl::version()->minor) + "." +
              std::to_string(dnnl::version()->patch)};
}
#endif

std::vector<Engine> engines() {
  std::vector<Engine> r{llmcpu_fp32(active_kernels())};
  for (std::string_view name : available_bf16_targets())
    r.push_back(llmcpu_bf16(bf16_kernels_named(name)));
#if LLMCPU_HAVE_DNNL
  r.push_back(onednn(true));
  r.push_back(onednn(false));
#endif
  return r;
}

void print_summary() {
  if (g_rows.empty()) return;
  std::map<std::string, double> best;  // per shape: the fastest time
  for (const Row& r : g_rows) {
    auto [it, fresh] = best.emplace(r.shape, r.ms);
    if (!fresh) it->second = std::min(it->second, r.ms);
  }
  std::printf("\n| GEMM (N=%zu) | engine | ms | GFLOP/s | roof%% | vs fastest |\n", N);
  std::printf("|---|---|---|---|---|---|\n");
  for (const Row& r : g_rows) {
    std::printf("| %s | %s | %.3f | %.1f | %.0f | %.2f |\n", r.shape.c_str(), r.engine.c_str(),
                r.ms, r.gflops, r.roof_pct, best[r.shape] / r.ms);
  }
}

}  // namespace
}  // namespace llmcpu::bench

int main(int argc, char** argv) {
  using namespace llmcpu;
  using namespace llmcpu::bench;
  benchmark::Initialize(&argc, argv);
  // --tokens=N (B * T rows), taken out before Google Benchmark sees what it does not know.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--tokens=", 0) == 0) {
      char* end = nullptr;
      const unsigned long long n = std::strtoull(a.c_str() + 9, &end, 10);
      if (end == a.c_str() + 9 || *end != '\0' || n == 0 || n > (1ull << 24)) {
        std::fprintf(stderr,
                     "bench_bf16_gemm: --tokens wants a row count in [1, 16777216], got "
                     "'%s'\n",
                     a.c_str() + 9);
        return 2;
      }
      N = size_t(n);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  g_roofs = measure_roofs(false);
  auto gf = [](double f) { return f > 0 ? std::to_string(f / 1e9) : std::string("absent"); };
  benchmark::AddCustomContext("fp32_fma_peak_gflops", gf(g_roofs.fp32));
  benchmark::AddCustomContext("avx512bf16_peak_gflops", gf(g_roofs.dpbf16));
  benchmark::AddCustomContext("amx_bf16_peak_gflops", gf(g_roofs.amx));
  static const std::vector<Engine> list = engines();
  for (const Shape& s : kShapes) {
    for (bool backward : {false, true}) {
      const std::string shape = std::string(s.name) + (backward ? "_bwd" : "_fwd");
      const double flops = (backward ? 4.0 : 2.0) * double(N) * s.C * s.OC;
      for (const Engine& e : list) {
        const double roof = e.bf16 ? g_roofs.bf16() : g_roofs.fp32;
        benchmark::RegisterBenchmark((shape + "/" + e.name).c_str(),
                                     [&s, &e, shape, flops, roof, backward](benchmark::State& st) {
                                       Operands& o = operands(s);
                                       const std::function<void()> fn = e.make(o, backward);
                                       st.SetLabel(e.label);
                                       measure(st, shape, e.name, flops, roof, fn,
                                               [&] { return check(o, e.bf16, backward); });
                                     })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.3);
      }
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary();
  return 0;
}
