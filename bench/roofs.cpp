// The benchmarks' roofs (measured by simd/roofs.h) and the rows they keep against them for the
// summary table.
#include "bench/roofs.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace llmcpu::bench {

Roofs measure_roofs(bool with_stream) {
  const Roofs r = roofs::measure(with_stream);
  std::printf("%s\n", roofs::describe(r).c_str());
  std::fflush(stdout);
  return r;
}

namespace {

struct RoofRow {
  std::string name;
  double ms, gflops, gbs, roof_pct;
  bool compute_bound;
};
std::vector<RoofRow> g_roof_rows;

}  // namespace

void report_against_roofs(benchmark::State& state, const std::string& name, double seconds,
                          double flops, double bytes, double flop_roof, double byte_roof) {
  const double t_flops = flops / flop_roof, t_bytes = bytes / byte_roof;
  const RoofRow row{name,
                    seconds * 1e3,
                    flops / seconds / 1e9,
                    bytes / seconds / 1e9,
                    100.0 * std::max(t_flops, t_bytes) / seconds,
                    t_flops > t_bytes};
  state.counters["GFLOP/s"] = row.gflops;
  state.counters["GB/s"] = row.gbs;
  state.counters["roof%"] = row.roof_pct;
  state.SetLabel(row.compute_bound ? "compute-bound" : "memory-bound");
  auto it = std::find_if(g_roof_rows.begin(), g_roof_rows.end(),
                         [&](const RoofRow& r) { return r.name == name; });
  if (it != g_roof_rows.end()) {
    *it = row;
  } else {
    g_roof_rows.push_back(row);
  }
}

void print_roof_summary() {
  if (g_roof_rows.empty()) return;
  std::printf("\n| kernel (table/layer) | ms | GFLOP/s | GB/s | bound | roof%% |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const RoofRow& r : g_roof_rows) {
    std::printf("| %s | %.3f | %.1f | %.1f | %s | %.0f |\n", r.name.c_str(), r.ms, r.gflops, r.gbs,
                r.compute_bound ? "compute" : "memory", r.roof_pct);
  }
}

}  // namespace llmcpu::bench
