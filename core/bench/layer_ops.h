// The kernels one GPT-2 training step runs, as `llmcpu bench` measures them: one entry per op, pass
// and shape (zeroing the gradients, encoder, layernorm, the five matmuls, attention, GELU, residual,
// softmax + cross-entropy, the gradient norm, AdamW) at a model's shapes, with the FLOPs and the
// compulsory bytes of one call, how many calls a step makes, and how to set up inputs and run one
// call on a given kernel table.
// The entries are not listed here: they are recorded from the step itself,
// core/model/transformer.h's passes run over a recording executor (core/bench/step_recorder.h), so
// an op added to the transformer appears in the table. The calls are the ones the executors make
// (core/bench/op_calls.h). Not here: timing and roofs (core/bench/run.h), the printing.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "core/lora/adapter.h"
#include "core/model/config.h"
#include "core/model/precision.h"
#include "simd/bf16.h"
#include "simd/kernels.h"

namespace llmcpu::bench {

// What limits an op on the roofline model, before it is measured.
enum class Roof {
  kFp32,  // its FLOPs against the target's fp32 FMA peak
  kBf16,  // its FLOPs against the bf16 GEMM peak of the target's bf16 table
};

struct LayerOp {
  std::string op;     // "matmul qkv", "attention", ...
  std::string pass;   // "forward", "backward" or "update"
  std::string shape;  // "N=256 C=128 OC=384"
  int per_step = 1;   // calls in one training step (L for a block's op)
  double flops = 0;   // of one call (2 per multiply-accumulate)
  double bytes = 0;   // compulsory: every tensor read or written once
  Roof roof = Roof::kFp32;
  // Allocates and fills the inputs (random, valid for the op) and returns the call on them; the
  // buffers live as long as the returned function.
  std::function<std::function<void()>()> prepare;
};

// Every op of a training step of `config` at B x T in `precision` (as run_bench's step runs it:
// nothing recomputed, the head over chunks of rows), in the order of their first call: forward, the
// head and its loss, backward, then the optimizer; the calls go to `k` and (bf16) `h`, which must
// outlive the ops. With `lora`, the LoRA step of a new adapter of those options: the base's matmuls
// give their input's gradient alone, the adapters' ops are rows of their own, and the norm and
// AdamW run over the adapter.
std::vector<LayerOp> layer_ops(const ModelConfig& config, int B, int T, Precision precision,
                               const KernelTable& k, const Bf16Kernels& h,
                               const LoraOptions* lora = nullptr);

}  // namespace llmcpu::bench
