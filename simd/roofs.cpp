// The bf16 compute loops (register-resident, no memory traffic) and the measuring of every roof
// (roofs.h). One call of a loop per thread of the OpenMP team, all at once, gives the machine's
// roof.
//   dpbf16_loop: AVX512-BF16 VDPBF16PS, 16 fp32 lanes each += two bf16 products (64 FLOPs);
//   amx_loop:    AMX TDPBF16PS on 16x16 fp32 tiles, K = 32 (16,384 FLOPs per instruction).
// Not here: the fp32 FMA loop and the stream loops (hwy/roofline.cc), any GEMM.
#include "simd/roofs.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "simd/amx.h"
#include "simd/hwy/registry.h"
#include "simd/isa_cap.h"
#include "simd/kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace llmcpu::roofs {

#if defined(__x86_64__)

bool cpu_has_avx512bf16() {
  return __builtin_cpu_supports("avx512bf16") && isa_allows(IsaCap::kAvx512Bf16);
}

// Twelve independent accumulators cover the latency of VDPBF16PS times its issue width.
__attribute__((target("avx512bf16,avx512f,avx512bw"))) double dpbf16_loop(size_t iterations,
                                                                          float seed) {
  if (!cpu_has_avx512bf16()) return 0;
  // bf16 pairs of small values: the accumulators grow by 2e-6 per step and stay normal.
  const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  // Distinct starting values: identical chains would be merged by the compiler.
  __m512 a0 = _mm512_set1_ps(seed), a1 = _mm512_set1_ps(seed + 1), a2 = _mm512_set1_ps(seed + 2);
  __m512 a3 = _mm512_set1_ps(seed + 3), a4 = _mm512_set1_ps(seed + 4),
         a5 = _mm512_set1_ps(seed + 5);
  __m512 a6 = _mm512_set1_ps(seed + 6), a7 = _mm512_set1_ps(seed + 7),
         a8 = _mm512_set1_ps(seed + 8);
  __m512 a9 = _mm512_set1_ps(seed + 9), a10 = _mm512_set1_ps(seed + 10);
  __m512 a11 = _mm512_set1_ps(seed + 11);
  for (size_t i = 0; i < iterations; ++i) {
    a0 = _mm512_dpbf16_ps(a0, x, x), a1 = _mm512_dpbf16_ps(a1, x, x);
    a2 = _mm512_dpbf16_ps(a2, x, x), a3 = _mm512_dpbf16_ps(a3, x, x);
    a4 = _mm512_dpbf16_ps(a4, x, x), a5 = _mm512_dpbf16_ps(a5, x, x);
    a6 = _mm512_dpbf16_ps(a6, x, x), a7 = _mm512_dpbf16_ps(a7, x, x);
    a8 = _mm512_dpbf16_ps(a8, x, x), a9 = _mm512_dpbf16_ps(a9, x, x);
    a10 = _mm512_dpbf16_ps(a10, x, x), a11 = _mm512_dpbf16_ps(a11, x, x);
  }
  const __m512 s =
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                    _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)),
                                  _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11))));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  // Data-dependent result so the loop cannot be removed; never true for the values used.
  if (lanes[0] == 12345.0f) return 0;
  return 12.0 * 64.0 * double(iterations);
}

namespace {
// Palette 1 tile configuration (64 bytes, as LDTILECFG reads it).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
}  // namespace

// Tiles 0-3 accumulate 16x16 fp32; 4, 5 hold A (16 rows x 32 bf16), 6, 7 hold B (16 rows of 16
// bf16 pairs): four independent TDPBF16PS per iteration reuse each A and B tile twice.
__attribute__((target("amx-tile,amx-bf16,avx512f"))) double amx_loop(size_t iterations,
                                                                     float seed) {
  if (!cpu_has_amx_bf16()) return 0;
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  alignas(64) uint16_t operand[16 * 32];
  alignas(64) float acc[16 * 16];
  uint32_t bits;
  const float one = 1e-3f * seed;
  std::memcpy(&bits, &one, sizeof bits);
  for (uint16_t& v : operand) v = uint16_t(bits >> 16);
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  for (size_t i = 0; i < iterations; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, acc, 64);
  _tile_release();
  if (acc[0] == 12345.0f) return 0;
  return 4.0 * 16 * 16 * 32 * 2 * double(iterations);
}

#else  // no bf16 dot-product or tile instructions this benchmark knows of

bool cpu_has_avx512bf16() { return false; }
double dpbf16_loop(size_t, float) { return 0; }
double amx_loop(size_t, float) { return 0; }

#endif

// Also asks the kernel for AMX tile data (simd/amx.h), without which the first tile instruction
// faults; false on CPUs without AMX-BF16.
bool cpu_has_amx_bf16() { return request_amx_permission(); }

namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int64_t g_target = 0;  // the Highway target fp32_peak_of measures

double measure_peak(double (*loop)(size_t, float), size_t iterations) {
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    double flops = 0;
    const auto t0 = Clock::now();
#pragma omp parallel reduction(+ : flops)
    flops += loop(iterations, 1.0f + float(omp_get_thread_num()));
    best = std::max(best, flops / seconds(t0, Clock::now()));
  }
  return best;
}

// As bench_kernels: the triad a = b + s c moves 16 bytes per element (a's lines are read before
// they are written; STREAM counts 12), the in-place update a += s b moves 12. Best of 10.
void measure_stream(Roofs& r) {
  const size_t n = size_t(32) << 20;
  // Left uninitialised here: the threads that stream them touch them first (their NUMA node).
  const std::unique_ptr<float[]> a(new float[n]), b(new float[n]), c(new float[n]);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) a[i] = 0, b[i] = 1, c[i] = 2;
  double best_triad = 0, best_update = 0;
  for (int rep = 0; rep < 10; ++rep) {
    const float s = 0.5f + float(rep);
    auto t0 = Clock::now();
#pragma omp parallel
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      const size_t i0 = n * t / nt, i1 = n * (t + 1) / nt;
      triad(a.get() + i0, b.get() + i0, c.get() + i0, s, i1 - i0);
    }
    best_triad = std::max(best_triad, double(n) / seconds(t0, Clock::now()));
    t0 = Clock::now();
#pragma omp parallel
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      const size_t i0 = n * t / nt, i1 = n * (t + 1) / nt;
      update(a.get() + i0, b.get() + i0, s, i1 - i0);
    }
    best_update = std::max(best_update, double(n) / seconds(t0, Clock::now()));
  }
  if (a[n / 2] == 12345.0f) std::printf(" ");  // keeps the stores
  r.stream_triad = 12.0 * best_triad;
  r.bandwidth = std::max(16.0 * best_triad, 12.0 * best_update);
}

std::string gflops(double f) {
  return f > 0 ? std::to_string(int(f / 1e9 + 0.5)) + " GFLOP/s" : std::string("absent");
}

}  // namespace

double dpbf16_over_fma() {
  if (!cpu_has_avx512bf16()) return 0;
  // Bursts of 0.1-0.5 ms: long enough for the clock's resolution and the AVX-512 power licence,
  // short enough that seven of each cost a few ms when the dispatcher first asks.
  const size_t iterations = size_t(1) << 15;
  double fma = 0, dot = 0;
  for (int rep = 0; rep < 7; ++rep) {
    auto t0 = Clock::now();
    double flops = fma_loop(iterations, 1.0f + float(rep));
    fma = std::max(fma, flops / seconds(t0, Clock::now()));
    t0 = Clock::now();
    flops = dpbf16_loop(iterations, 1.0f + float(rep));
    dot = std::max(dot, flops / seconds(t0, Clock::now()));
  }
  return fma > 0 ? dot / fma : 0;
}

Roofs measure(bool with_stream) {
  Roofs r;
  r.fp32 = measure_peak(fma_loop, size_t(1) << 24);
  r.dpbf16 = measure_peak(dpbf16_loop, size_t(1) << 23);
  r.amx = measure_peak(amx_loop, size_t(1) << 20);
  if (with_stream) measure_stream(r);
  return r;
}

double fp32_peak_of(std::string_view kernel_target) {
  const KernelTable& table = kernels_for_target(kernel_target);  // validates the name
  std::string_view base = table.target;
  if (const size_t plus = base.find('+'); plus != std::string_view::npos)
    base = base.substr(0, plus);
  int64_t bit = 0;
  if (base == "scalar") {
    // The reference table is plain C++; Highway's portable fallback is the nearest loop to it.
    for (const auto& [b, name] : hwy_tables::compiled()) {
      if (name == "hwy_scalar" || name == "emu128") bit = b;
    }
  } else {
    for (const hwy_tables::TargetTables* t : hwy_tables::supported()) {
      if (hwy_tables::target_name(t->hwy_target) == base) bit = t->hwy_target;
    }
  }
  if (bit == 0) return measure_peak(fma_loop, size_t(1) << 24);
  // The portable fallback does a lane at a time: fewer iterations take as long.
  const bool vector = base != "scalar" && base != "hwy_scalar" && base != "emu128";
  g_target = bit;
  return measure_peak([](size_t n, float seed) { return fma_loop_on(g_target, n, seed); },
                      vector ? size_t(1) << 24 : size_t(1) << 20);
}

std::string describe(const Roofs& r) {
  char line[512];
  int n = std::snprintf(
      line, sizeof line,
      "roofs, %d threads: fp32 FMA %s; bf16 AVX512-BF16 dot products %s; AMX bf16 tiles %s",
      omp_get_max_threads(), gflops(r.fp32).c_str(), gflops(r.dpbf16).c_str(),
      gflops(r.amx).c_str());
  if (r.bandwidth > 0 && n > 0 && size_t(n) < sizeof line) {
    std::snprintf(
        line + n, sizeof line - size_t(n),
        "; stream triad %.1f GB/s by STREAM's count, bandwidth roof %.1f GB/s (bytes moved)",
        r.stream_triad / 1e9, r.bandwidth / 1e9);
  }
  return line;
}

}  // namespace llmcpu::roofs
