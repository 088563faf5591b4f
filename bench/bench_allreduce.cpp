// The gradient all-reduce across ranks, measured, and what it predicts for more machines. Run under
// mpirun (one rank per process); rank 0 prints two tables:
//   1. Sum all-reduce of 1 MB .. 512 MB of fp32 (the Communicator the trainer uses): median time of
//      the repetitions, algorithm bandwidth (bytes / time) and bus bandwidth (2(N-1)/N x bytes /
//      time, what each link carries in a ring all-reduce); and ZeRO-1's reduce-scatter and
//      all-gather of the same sizes, whose bus bandwidth is (N-1)/N x bytes / time.
//   2. A cost model for data-parallel training of a model of --params parameters whose step takes
//      --step-ms on one machine: ring all-reduce time 2(N-1)/N x 4 x params / bandwidth + 2(N-1) x
//      latency (latency: the measured time of the smallest all-reduce) at 10, 25 and 100 Gb/s for N
//      machines with one rank each, the step time when none of it is hidden behind the backward
//      pass and when --hidden of it is, and the scaling efficiency step-ms / step.
//   mpirun -np 2 --bind-to none ./build/bench_allreduce --step-ms 820 --params 124475904
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "core/util/aligned_buffer.h"
#include "simd/error.h"

namespace llmcpu {
namespace {

enum class Op { kAllReduce, kReduceScatter, kAllGather };

double median_ms(Communicator& w, float* data, size_t n, int reps, Op op = Op::kAllReduce) {
  std::vector<double> ms;
  for (int r = 0; r < reps + 1; ++r) {
    w.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    if (op == Op::kAllReduce) w.all_reduce_sum(data, n);
    if (op == Op::kReduceScatter) w.reduce_scatter_sum(data, n);
    if (op == Op::kAllGather) w.all_gather(data, n);
    const double t =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) ms.push_back(t);  // the first one warms up the buffers
  }
  w.all_reduce_sum(ms.data(), ms.size());  // every rank's times, summed: the mean over ranks
  for (double& t : ms) t /= w.size();
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int run(int argc, char** argv) {
  double step_ms = 0, hidden = 0.5, backward_share = 0.6;
  size_t params = 124475904;  // GPT-2 124M
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw UsageError(a + ": needs a value");
      return argv[++i];
    };
    if (a == "--step-ms") {
      step_ms = std::atof(value());
    } else if (a == "--params") {
      params = std::strtoull(value(), nullptr, 10);
    } else if (a == "--hidden") {
      hidden = std::atof(value());
    } else if (a == "--backward-share") {
      backward_share = std::atof(value());
    } else {
      throw UsageError("unknown flag " + a +
                       " (expected --step-ms MS, --params N, --hidden F, --backward-share F)");
    }
  }
  std::unique_ptr<Communicator> w = world_communicator();
  const int N = w->size();
  const bool lead = w->rank() == 0;
  if (lead) std::printf("bench_allreduce: %s\n\n", w->describe().c_str());
  AlignedBuffer<float> data((size_t(512) << 20) / sizeof(float));
  for (size_t i = 0; i < data.size(); ++i) data[i] = 1.0f;
  const double latency_ms = median_ms(*w, data.data(), 1, 50);
  if (lead) {
    std::printf("| all-reduce | ms (median) | algbw GB/s | busbw GB/s | reduce-scatter ms | "
                "busbw GB/s | all-gather ms | busbw GB/s |\n|---|---|---|---|---|---|---|---|\n");
    std::printf("| 4 B | %.3f | - | - | - | - | - | - |\n", latency_ms);
  }
  for (size_t mb = 1; mb <= 512; mb *= 2) {
    const size_t n = (mb << 20) / sizeof(float);
    const int reps = mb >= 128 ? 3 : 10;
    const double ms = median_ms(*w, data.data(), n, reps);
    // ZeRO-1's halves of it: each moves (N-1)/N of the bytes over every link.
    const double rs = median_ms(*w, data.data(), n, reps, Op::kReduceScatter);
    const double ag = median_ms(*w, data.data(), n, reps, Op::kAllGather);
    const double algbw = double(mb << 20) / (ms * 1e6), half = double(N - 1) / N;
    if (lead) {
      std::printf("| %zu MB | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", mb, ms, algbw,
                  algbw * 2.0 * half, rs, double(mb << 20) / (rs * 1e6) * half, ag,
                  double(mb << 20) / (ag * 1e6) * half);
    }
  }
  if (!lead || step_ms <= 0) return 0;
  const double bytes = 4.0 * double(params);
  std::printf(
      "\nCost model: %zu parameters (%.0f MB of fp32 gradients), %.0f ms per step on one "
      "machine, which each machine keeps computing (its own micro-batches; the total batch "
      "grows with N), all-reduce latency %.3f ms, hidden share %.0f%%\n\n",
      params, bytes / 1e6, step_ms, latency_ms, 100 * hidden);
  std::printf(
      "| machines | link | all-reduce ms | step ms (none hidden) | efficiency | step ms "
      "(%.0f%% hidden) | efficiency |\n|---|---|---|---|---|---|---|\n",
      100 * hidden);
  for (int nodes : {2, 4, 8, 16, 64}) {
    for (double gbit : {10.0, 25.0, 100.0}) {
      const double comm = 2.0 * (nodes - 1) / nodes * bytes / (gbit * 1e9 / 8) * 1e3 +
                          2.0 * (nodes - 1) * latency_ms;
      const double hideable = std::min(hidden * comm, backward_share * step_ms);
      const double plain = step_ms + comm, overlapped = step_ms + comm - hideable;
      std::printf("| %d | %.0f Gb/s | %.0f | %.0f | %.0f%% | %.0f | %.0f%% |\n", nodes, gbit, comm,
                  plain, 100 * step_ms / plain, overlapped, 100 * step_ms / overlapped);
    }
  }
  return 0;
}

}  // namespace
}  // namespace llmcpu

int main(int argc, char** argv) {
  try {
    return llmcpu::run(argc, argv);
  } catch (const llmcpu::Error& e) {
    std::fprintf(stderr, "bench_allreduce: error: %s\n", e.what());
    return 2;
  }
}
