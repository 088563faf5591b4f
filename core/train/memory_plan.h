// The memory a training run will take, worked out from its shape before anything big is allocated,
// and the memory this process may use (a cgroup's limit, or the machine's MemAvailable), so that a
// run that cannot fit is refused at start with the numbers and the flags that would make it fit,
// instead of being killed by the kernel mid-run. Deliberately an account of the big allocations
// (the model's arrays, the optimizer's moments, the activation arenas, the kernels' per-thread
// scratch), not of every byte: the program itself is counted as what it holds when the plan is
// made. The kernels' scratch is what their own sizing entries (simd/scratch.h) say one step's calls
// leave allocated (step_scratch, core/model/kernel_scratch.h): the bf16 GEMMs pack their operands
// per call, the lm_head's whole bf16 weight among them.
//
// The plan is one process's. Ranks on one machine that share their weights (ZeRO-1 with shared
// memory, GradientSync::share_memory) hold one copy of the weights (and of the bf16 copy) between
// them: each rank is charged 1/local_ranks of it, so that the plans of the machine's ranks add up
// to what the machine holds, and memory_limit gives each rank 1/local_ranks of the machine.
#pragma once

#include <cstddef>
#include <string>

#include "core/model/activations.h"
#include "core/model/config.h"
#include "core/model/precision.h"
#include "simd/bf16.h"
#include "simd/kernels.h"
#include "simd/quant/block_quant.h"

namespace llmcpu {

// What a run asks of the planner: its model, shape and ranks.
struct MemoryRequest {
  ModelConfig config;
  Precision precision = Precision::kFp32;
  int batch = 0, seq_len = 0;
  long long total_batch = 0;  // tokens per optimizer step over all ranks
  Recompute recompute = Recompute::kNone;
  int ranks = 1;        // the world's
  int local_ranks = 1;  // the ranks on this machine, which share its memory
  bool zero = false;    // ZeRO-1: the moments (and in bf16 the master) sharded over the ranks
  // ZeRO-1 with every rank on this machine sharing one copy of the weights
  // (GradientSync::share_memory): each rank is charged 1/local_ranks of it.
  bool shared_weights = false;
  int threads = 1;
  // The kernel tables the run computes with (their sizing entries size the kernels' scratch);
  // null: active_kernels() and active_bf16_kernels().
  const KernelTable* kernels = nullptr;
  const Bf16Kernels* bf16_kernels = nullptr;
  // What the process holds before the run's allocations; < 0: measured now (its VmRSS).
  double program = -1;
  // The layers whose activations this process keeps: 0 for all of them; fewer when a device owns
  // the others (host_activation_layers, core/plugin/offload.h).
  int host_layers = 0;
  // A LoRA run (the base frozen): the adapter's parameters (each with a gradient and two moments)
  // and its activations' floats; the base then has no gradients.
  size_t lora_parameters = 0;
  size_t lora_activation_floats = 0;
  // A LoRA run's base, frozen once loaded (Model::freeze_base): its layers' matmul weights
  // quantized (int8, nf4) or kept in the bf16 copy alone (none, in bf16); their fp32 master is
  // held only while the base loads.
  QuantFormat base_quant = QuantFormat::kNone;
  // The frozen base is frozen tensor by tensor as it is drawn (a preset) or read (a Hugging Face
  // Llama-family file), rather than read whole first;
  bool base_streamed = false;
  // read from a mapped file, whose pages of the tensor being read are resident too.
  bool base_mapped = false;
};

// One process's bytes, by what they hold.
struct MemoryPlan {
  double parameters = 0;   // fp32 master weights (+ the bf16 working copy); this rank's share
                           // when the machine's ranks share them; in bf16 under ZeRO-1 without
                           // sharing, the master of the matmul weights for its own parts only
  double gradients = 0;    // fp32
  double optimizer = 0;    // AdamW's two moments (this rank's share under ZeRO-1)
  double activations = 0;  // the forward arena: what the backward pass reads
  double scratch = 0;      // one layer of activation gradients, the head's logits chunk, kernels
  double kernel_scratch = 0;  // of `scratch`: the kernels' per-thread scratch
  double program = 0;      // what the process holds already (code, libraries, data maps)
  // A frozen base: the fp32 weights while it loads, before the run's other arrays (the larger of
  // the two is the peak).
  double loading = 0;
  double total() const {
    const double run = parameters + gradients + optimizer + activations + scratch + program;
    return run > loading + program ? run : loading + program;
  }
};

MemoryPlan plan_memory(const MemoryRequest& request);

// The memory this process may use: the tightest of its cgroup's limit less the cgroup's usage and
// the machine's MemAvailable (plus what this process holds already), shared equally by the ranks
// on the machine. `source` says which one bound it.
struct MemoryLimit {
  double bytes = 0;
  std::string source;
};
MemoryLimit memory_limit(int local_ranks);

// "params 474.8 | grads 474.8 | AdamW 949.6 | activations 1302.2 | scratch 190.1 | program 35.0 |
// total 3406.5 MiB" (one line).
std::string describe(const MemoryPlan& plan);

// Throws UsageError when `plan` does not fit in `limit`: the numbers, and the changes to the run's
// flags that would make it fit (a smaller --batch with the same --total-batch by accumulation,
// --recompute, bf16), each checked against the limit with plan_memory.
void check_fits(const MemoryRequest& request, const MemoryPlan& plan, const MemoryLimit& limit);

// A size such as "12G", "800M", "65536K" or a plain number of bytes; UsageError naming `flag`.
double parse_memory_size(const std::string& text, const std::string& flag);

}  // namespace llmcpu
