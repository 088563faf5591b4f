// `llmcpu bench`'s measurements: every op of a training step (core/bench/layer_ops.h) and a whole
// step, on each kernel target asked for, timed call by call with the caches flushed before each,
// against this machine's roofs (simd/roofs.h) measured at start.
// Not here: the flags (tools/llmcpu/cmd_bench.cpp), the printing (core/bench/report.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/io/model_file.h"
#include "core/lora/adapter.h"
#include "core/model/config.h"
#include "core/model/precision.h"
#include "simd/roofs.h"

namespace llmcpu::bench {

struct BenchOptions {
  ModelConfig config;
  std::string model;   // the name the rows carry ("gpt2-d2", a file's name)
  ModelSource source;  // the weights for the step: a model file's, or for a preset GPT-2's
                       // initialisation
  int batch = 2, seq_len = 64;
  Precision precision = Precision::kFp32;
  std::vector<std::string> targets;  // kernel targets (resolve_targets)
  int reps = 3;                      // timed calls of each op, timed steps
  // A LoRA step (the base frozen): the adapter of `adapter` (a PEFT folder), or a new one of
  // lora's options (lora.r > 0).
  std::string adapter;
  LoraOptions lora;
  bool lora_step() const { return !adapter.empty() || lora.r > 0; }
  // The LoRA step's frozen base: its layers' weights quantized (int8, nf4) or as loaded. The
  // step times the quantized GEMMs; the op rows time the tables' GEMMs on unquantized weights.
  QuantFormat base_quant = QuantFormat::kNone;
};

// Seconds over the repetitions.
struct Timing {
  double median = 0, min = 0, max = 0;
};

struct BenchRow {
  std::string model, op, pass, target, shape;
  int per_step = 1;  // calls in one step (1 for the step itself)
  double flops = 0, bytes = 0;
  Timing time;
  double gflops = 0, gbs = 0;  // over the median time
  bool compute_bound = false;  // FLOPs / peak above bytes / bandwidth
  double roof_pct = 0;         // the roofline time over the median time, in percent
  double tokens_per_s = 0;     // the step only
};

// The roofs each target's rows are rated against.
struct TargetRoofs {
  std::string target;
  std::string bf16_table;  // bf16 only: the table its bf16 ops run on
  double fp32 = 0;         // FLOP/s, fp32 FMAs on the target's instruction set (the best
                           // target's for scalar, hwy_scalar and the libxsmm tables)
  double gemm = 0;         // FLOP/s, the matmuls' peak (fp32, or the bf16 table's)
};

struct BenchReport {
  BenchOptions options;
  int threads = 0;
  roofs::Roofs machine;
  std::vector<TargetRoofs> roofs;
  std::vector<BenchRow> rows;
};

// The targets a --targets list names (comma-separated; empty: every target this CPU runs, best
// last as available_targets() lists them). An unknown name, or one this CPU cannot run, is a
// UsageError naming it and the available ones.
std::vector<std::string> resolve_targets(const std::string& list);

// Runs everything; `progress` is told what is being measured (for a line on stderr).
BenchReport run_bench(const BenchOptions& options,
                      const std::function<void(const std::string&)>& progress = {});

}  // namespace llmcpu::bench
