// This machine's roofs for the Google Benchmark suites, measured at start with the OpenMP team they
// run with (simd/roofs.h, which `llmcpu bench` shares), and the benchmarks' rows against them.
// Not here: the loops that measure the roofs (simd/), any kernel's cost model (each benchmark
// counts its own FLOPs and bytes).
#pragma once

#include <cstddef>
#include <string>

#include "simd/roofs.h"

namespace benchmark {
class State;
}

namespace llmcpu::bench {

using roofs::Roofs;

// roofs::measure(with_stream), and its line (roofs::describe) printed on stdout.
Roofs measure_roofs(bool with_stream);

// A kernel's time per call against the roofs (FLOP/s and B/s): sets the benchmark's GFLOP/s, GB/s
// and roof% counters and its compute-/memory-bound label, and keeps the row, the last run of each
// name (the framework runs a benchmark more than once while sizing), for print_roof_summary().
void report_against_roofs(benchmark::State& state, const std::string& name, double seconds,
                          double flops, double bytes, double flop_roof, double byte_roof);
// The kept rows as a markdown table on stdout (nothing when there are none).
void print_roof_summary();

}  // namespace llmcpu::bench
