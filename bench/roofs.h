// This machine's roofs, measured by the benchmarks themselves at start with the OpenMP team they
// run with: compute peaks per precision and the stream bandwidth. The loops live in roofline.cc
// (fp32 FMA, stream triad and update, written with Highway) and roofs.cpp (bf16 dot products and
// AMX tiles, with intrinsics).
// Not here: any kernel's cost model (each benchmark counts its own FLOPs and bytes).
#pragma once

#include <cstddef>
#include <string>

namespace benchmark {
class State;
}

namespace llmcpu::bench {

// Register-resident loops; each returns the FLOPs it performed (2 per multiply-accumulate), or 0
// where this CPU (or, for AMX, the OS) lacks the instructions.
double fma_loop(size_t iterations, float seed);     // fp32 FMAs, best Highway target
double dpbf16_loop(size_t iterations, float seed);  // AVX512-BF16 VDPBF16PS
double amx_loop(size_t iterations, float seed);     // AMX TDPBF16PS on 16x16 tiles
bool cpu_has_avx512bf16();
bool cpu_has_amx_bf16();  // also asks the kernel for the AMX tile-data permission

// Stream loops over one thread's slice (roofline.cc).
void triad(float* a, const float* b, const float* c, float s, size_t n);  // a = b + s c
void update(float* a, const float* b, float s, size_t n);                 // a += s b

struct Roofs {
  double fp32 = 0;          // FLOP/s, FMA loop on every thread
  double dpbf16 = 0;        // FLOP/s, AVX512-BF16 (0: absent)
  double amx = 0;           // FLOP/s, AMX bf16 (0: absent)
  double stream_triad = 0;  // B/s by STREAM's count (12 bytes per triad element)
  double bandwidth = 0;     // B/s actually moved: the larger of triad (16 B) and update (12 B)
  // The bf16 GEMM roof: AMX where present, else AVX512-BF16, else the fp32 peak.
  double bf16() const { return amx > 0 ? amx : dpbf16 > 0 ? dpbf16 : fp32; }
};

// Best of a few runs of each loop on every thread at once; `with_stream` adds the bandwidth (a few
// hundred ms over 384 MiB of arrays). Prints one line that names each roof ("absent" for 0).
Roofs measure_roofs(bool with_stream);

// A kernel's time per call against the roofs (FLOP/s and B/s): sets the benchmark's GFLOP/s, GB/s
// and roof% counters and its compute-/memory-bound label, and keeps the row, the last run of each
// name (the framework runs a benchmark more than once while sizing), for print_roof_summary().
void report_against_roofs(benchmark::State& state, const std::string& name, double seconds,
                          double flops, double bytes, double flop_roof, double byte_roof);
// The kept rows as a markdown table on stdout (nothing when there are none).
void print_roof_summary();

}  // namespace llmcpu::bench
