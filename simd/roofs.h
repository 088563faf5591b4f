// This machine's roofs: the compute peaks per instruction set and precision, and the memory
// bandwidth, measured by running register-resident and streaming loops on every thread of the
// OpenMP team at once. `llmcpu bench` (core/bench) and the Google Benchmark suites (bench/) rate
// their kernels against them. The loops live in simd/hwy/roofline.cc (fp32 FMA per Highway target,
// stream triad and update) and simd/roofs.cpp (bf16 dot products and AMX tiles, with intrinsics).
// Not here: any kernel's cost model (each benchmark counts its own FLOPs and bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmcpu::roofs {

// Register-resident loops; each returns the FLOPs it performed (2 per multiply-accumulate), or 0
// where this CPU (or, for AMX, the OS) lacks the instructions.
double fma_loop(size_t iterations, float seed);  // fp32 FMAs, best Highway target
// fp32 FMAs on one Highway target (a bit of hwy_tables::supported()'s targets).
double fma_loop_on(int64_t hwy_target, size_t iterations, float seed);
double dpbf16_loop(size_t iterations, float seed);  // AVX512-BF16 VDPBF16PS
double amx_loop(size_t iterations, float seed);     // AMX TDPBF16PS on 16x16 tiles
bool cpu_has_avx512bf16();
// One core's AVX512-BF16 dot-product FLOP rate over its fp32 FMA rate (the best Highway target),
// from short alternating runs of the two loops on the calling thread, the best of seven each
// (a few ms). 0 where the CPU lacks AVX512-BF16. The ratio is the core's: about 2 on Zen 4 and 5,
// about 0.5 on Sapphire and Emerald Rapids, whose VDPBF16PS issues at half the FMAs' rate.
double dpbf16_over_fma();
bool cpu_has_amx_bf16();  // also asks the kernel for the AMX tile-data permission

// Stream loops over one thread's slice (roofline.cc).
void triad(float* a, const float* b, const float* c, float s, size_t n);  // a = b + s c
void update(float* a, const float* b, float s, size_t n);                 // a += s b

struct Roofs {
  double fp32 = 0;          // FLOP/s, FMA loop on every thread (best target)
  double dpbf16 = 0;        // FLOP/s, AVX512-BF16 (0: absent)
  double amx = 0;           // FLOP/s, AMX bf16 (0: absent)
  double stream_triad = 0;  // B/s by STREAM's count (12 bytes per triad element)
  double bandwidth = 0;     // B/s actually moved: the larger of triad (16 B) and update (12 B)
  // The bf16 GEMM roof: AMX where present, else AVX512-BF16, else the fp32 peak.
  double bf16() const { return amx > 0 ? amx : dpbf16 > 0 ? dpbf16 : fp32; }
};

// Best of a few runs of each loop on every thread at once; `with_stream` adds the bandwidth (a few
// hundred ms over 384 MiB of arrays). Prints nothing (describe() gives the line).
Roofs measure(bool with_stream);

// The fp32 FMA peak (FLOP/s, every thread) of the instruction set a kernel target's table runs on
// (kernels_for_target's names: "avx512" and "avx512+xsmm" alike; "scalar" and "hwy_scalar" measure
// Highway's portable fallback). Throws UsageError for a name this CPU does not run.
double fp32_peak_of(std::string_view kernel_target);

// "roofs, 2 threads: fp32 FMA 232 GFLOP/s; bf16 AVX512-BF16 dot products 470 GFLOP/s; AMX bf16
// tiles absent; stream triad ..." (the bandwidth part only when it was measured).
std::string describe(const Roofs& r);

}  // namespace llmcpu::roofs
