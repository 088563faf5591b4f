#include "core/train/run_memory.h"

#include <omp.h>

#include "core/model/block_device.h"
#include "core/model/model.h"
#include "simd/error.h"

namespace llmcpu {

void RunMemory::replan() {
  plan = plan_memory(request);
  check_fits(request, plan, limit);
}

RunMemory plan_run_memory(const TrainOptions& o, const ModelConfig& config,
                          const Communicator& world, WeightsOrigin weights) {
  llmcpu::validate(config, "model");
  if (o.seq_len > config.max_seq_len) {
    throw UsageError("--seq-len " + std::to_string(o.seq_len) + " exceeds the model's maxT " +
                     std::to_string(config.max_seq_len));
  }
  // The kernel tables are chosen first (the bf16 GEMM engines are measured then, and oneDNN's code
  // and JIT kernels stay resident): what that takes is part of the program the plan measures.
  active_kernels();
  if (o.precision == Precision::kBf16) active_bf16_kernels();
  MemoryRequest r;
  r.config = config;
  r.precision = o.precision;
  r.batch = o.batch;
  r.seq_len = o.seq_len;
  r.recompute = o.recompute;
  r.ranks = world.size();
  r.local_ranks = world.local_size();
  r.zero = r.ranks > 1 && o.zero != ZeroMode::kOff;
  // As GradientSync::share_memory will (checked again once it has).
  r.shared_weights = r.zero && o.plugin.empty() && world.may_share_memory();
  r.threads = omp_get_max_threads();
  r.total_batch = (long long)micro_batches_per_step(o, r.ranks) * o.batch * o.seq_len;
  if (!o.plugin.empty()) {  // planned as if the plugin takes its layers (checked again if not)
    r.host_layers = host_activation_layers(
        OffloadLayers::parse(o.offload_layers, config.num_layers, "--offload-layers"),
        config.num_layers);
  }
  if (o.lora()) {
    const LoraOptions lora = lora_options_of(o);
    const std::string flag = o.adapter.empty() ? "--lora-train " + o.lora_train : "--adapter " + o.adapter;
    try {  // a module this model does not have
      select_trained_pieces(config, lora.train);
    } catch (const UsageError& e) {
      throw UsageError(flag + ": " + e.what());
    }
    const LoraFootprint f = [&] {
      try {
        return lora_footprint(config, lora, o.batch, o.seq_len);
      } catch (const UsageError& e) {  // a target this model does not have
        throw UsageError((o.adapter.empty() ? "--lora-targets: " : "--adapter " + o.adapter + ": ") +
                         std::string(e.what()));
      }
    }();
    r.lora_parameters = f.parameters;
    r.lora_activation_floats = f.activation_floats;
    r.base_quant = o.base_quant;
    r.base_streamed = weights != WeightsOrigin::kFileWhole;
    r.base_mapped = weights == WeightsOrigin::kFileByTensor;
  }
  RunMemory m;
  m.plan = plan_memory(r);
  r.program = m.plan.program;  // a plan made again later, when the model is allocated too
  m.request = r;
  m.limit = o.memory_limit > 0 ? MemoryLimit{o.memory_limit, "--memory-limit"}
                               : memory_limit(r.local_ranks);
  check_fits(r, m.plan, m.limit);
  return m;
}

}  // namespace llmcpu
