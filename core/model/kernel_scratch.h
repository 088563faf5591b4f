// The kernels' per-thread scratch (simd/scratch.h) that a training step of GPT-2 leaves allocated,
// worked out before anything is allocated from the shapes of the step's kernel calls and the
// tables' own sizing entries (KernelTable::matmul_forward_scratch, ...): the memory plan's count of
// the kernels' workspace (core/train/memory_plan.h). The block's calls are the ones
// core/model/transformer.h makes (run here over an executor that only sizes, so its shapes are
// never written twice); the head's are Model::head's chunks of rows. Not here: the activation
// arenas (activations.h), which the plan counts apart, and the optimizer's reductions (the
// trainer's).
#pragma once

#include "core/model/activations.h"
#include "core/model/config.h"
#include "simd/bf16.h"
#include "simd/kernels.h"
#include "simd/scratch.h"

namespace llmcpu {

// The asks of one training step at (B, T) (forward, the head with its loss gradient, backward)
// with the arena layout `options` (its precision picks the tables: `k` runs an fp32 model, `h` the
// GEMMs and attention of a bf16 one), the calls made by one thread on a team of `threads`.
// Validation asks for less (the same shapes, forward only), and so does sampling (one token at a
// time). bytes(threads) of the result is what the buffers then hold.
ScratchUse step_scratch(const ModelConfig& config, int B, int T, const ActivationOptions& options,
                        const KernelTable& k, const Bf16Kernels& h, int threads);

}  // namespace llmcpu
