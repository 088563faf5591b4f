// Merging a LoRA adapter into its base model's weights (PEFT's merge_and_unload): for each module
// of the adapter, on rows [row0, row0 + rows) of its layer's matmul weight W (out, in),
//   W[row0 + i, j] += scaling * sum_k B[i, k] A[k, j]      A (r, in), B (rows, r)
// with scaling = lora_alpha / r, or lora_alpha / sqrt(r) (rsLoRA), in double. Each element's sum
// over k is accumulated in double and added to W in double, then rounded to fp32 once: the merged
// weight is the float64 merge (tests/fixtures/lora_reference.py's merged_weight) rounded to fp32.
// The trained copies of base tensors (--lora-train, PEFT's modules_to_save) replace those tensors.
// The base's other tensors are not touched; the adapter itself is not changed. Writing the merged
// model is the caller's (core/io).
#pragma once

#include <vector>

#include "core/lora/adapter.h"
#include "core/lora/trained_copies.h"
#include "core/model/config.h"
#include "core/model/parameters.h"

namespace llmcpu {

// Adds scaling B A to each of the adapter's modules' rows of `params` (fp32, laid out by
// `layout`, ParameterLayout(config)), in place. The adapter must be one for `config` (its modules
// are config's): ShapeError naming the module whose rows do not fit its weight.
void merge_adapter(float* params, const ParameterLayout& layout, const ModelConfig& config,
                   const LoraAdapter& adapter);

// UsageError when the merged model could not be written as `config`'s: a copy of the embedding
// or of the head of a model whose head is tied to its embedding (PEFT trains one apart from the
// other, and the merged model would need both).
void check_mergeable(const ModelConfig& config, const std::vector<TrainedPiece>& pieces);

}  // namespace llmcpu
