#include "core/model/block_device.h"

#include <exception>

#include "simd/error.h"

namespace llmcpu {

OffloadLayers OffloadLayers::parse(const std::string& text, int num_layers,
                                   const std::string& flag) {
  if (text == "all") return {num_layers, true};
  size_t used = 0;
  int n = -1;
  try {
    n = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || n < 0 || n > num_layers) {
    throw UsageError(flag + ": expected all or a number of blocks from 0 to " +
                     std::to_string(num_layers) + " (the model's layers), got '" + text + "'");
  }
  return {n, false};
}

int host_activation_layers(const OffloadLayers& layers, int num_layers) {
  if (layers.all) return 1;
  return layers.blocks == 0 ? num_layers : num_layers - layers.blocks + 1;
}

std::string count_blocks(int n) { return std::to_string(n) + (n == 1 ? " block" : " blocks"); }

std::string OffloadLayers::describe(int num_layers) const {
  if (all) return "all: embedding, " + count_blocks(num_layers) + ", head and loss";
  if (blocks == 0) return "no blocks";
  if (blocks == 1)
    return "block " + std::to_string(num_layers - 1) + " of " + std::to_string(num_layers);
  return "blocks " + std::to_string(num_layers - blocks) + ".." + std::to_string(num_layers - 1) +
         " of " + std::to_string(num_layers);
}

void check_offloadable(const ModelConfig& c) {
  if (c.family().plugin_block) return;
  // The plugin ABI describes GPT-2's block: a plugin would run it on these weights.
  throw DeviceError("offloading runs GPT-2 blocks only; this " +
                    std::string(architecture_name(c.architecture)) + " model's blocks (" +
                    describe_blocks(c.family()) +
                    ") are not what the plugin ABI describes: run it without --plugin");
}

llmcpu_model_desc make_model_desc(const ModelConfig& c, const ParameterLayout& layout, int B, int T,
                                  Precision precision, const OffloadLayers& layers,
                                  size_t memory_limit) {
  check_offloadable(c);
  llmcpu_model_desc d{};
  d.struct_size = sizeof d;
  d.precision = precision == Precision::kBf16 ? LLMCPU_PRECISION_BF16 : LLMCPU_PRECISION_FP32;
  d.max_seq_len = c.max_seq_len;
  d.vocab_size = c.vocab_size;
  d.padded_vocab_size = c.padded_vocab_size;
  d.num_layers = c.num_layers;
  d.num_heads = c.num_heads;
  d.channels = c.channels;
  d.batch = B;
  d.seq_len = T;
  d.first_layer = layers.all ? 0 : c.num_layers - layers.blocks;
  d.flags = layers.all ? LLMCPU_OFFLOAD_EMBEDDING | LLMCPU_OFFLOAD_HEAD : 0u;
  d.memory_limit = memory_limit;
  for (size_t i = 0; i < kLlmcTensors.size(); ++i) {
    d.tensor_offset[i] = layout.offset(kLlmcTensors[i]);
  }
  return d;
}

bool device_owns(const OffloadLayers& layers, int num_layers, int tensor, int layer) {
  if (layers.all) return true;
  return ParameterLayout::per_layer(tensor) && layer >= num_layers - layers.blocks;
}

}  // namespace llmcpu
