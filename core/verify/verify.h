// llm.c's test_gpt2 procedure: run the model on a debug state's batch and compare, tensor by
// tensor, the logits (first V of each row), the loss and the 16 parameter gradients with the
// state's. Comparison is by normalized error ||ours - ref|| / ||ref|| (2-norms, in double), with
// the largest absolute difference reported alongside. For a gradient tensor the denominator is
// max(||ref||, eps_fp32 * ||all reference gradients||): a tensor whose true gradient is zero (say,
// everything behind a LayerNorm over C = 1 channel) holds only rounding noise, whose size is set by
// the whole gradient, not by the tensor itself.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/io/debug_state.h"
#include "core/model/gpt2.h"

namespace llmcpu {

struct TensorComparison {
  std::string name;
  size_t count = 0;
  double max_abs_diff = 0;
  double rel_error = 0;  // ||ours - ref|| / max(||ref||, floor); infinite if both are zero
  double tolerance = 0;
  bool ok = false;  // rel_error <= tolerance (false for NaN)
};

TensorComparison compare_tensors(const std::string& name, const float* ours, const float* ref,
                                 size_t n, double tolerance, double norm_floor = 0);

struct VerifyTolerances {
  double logits = 1e-5;  // also used for the loss
  double grads = 1e-4;
};

// The limits of a bf16 model (Precision::kBf16) against an fp32 (or fp64) reference. With u = 2^-8
// (bf16's unit roundoff, round to nearest even), a rounding has an RMS relative error of at most
// u/sqrt(3) = 2.3e-3, so a GEMM over two freshly rounded operands is off by about sqrt(2) u/sqrt(3)
// = 3.3e-3 of its output's norm (errors of independent sign add in quadrature). The logits carry
// the lm-head GEMM's share plus the error of its input, which each layernorm renormalises rather
// than lets grow with depth: about 2 GEMMs' worth, 5e-3 to 7e-3 measured on 1 to 12 layers, C = 1
// to 384. Limit 2e-2 (about 5u, three times the largest seen). The gradients pass through two more
// roundings per GEMM (dout, and the saved activation): 4e-3 to 1e-2 measured for C >= 16, but the
// layernorm backward over few channels amplifies the noise (C = 4: 5e-2), so they keep the 1e-1
// ceiling on every shape.
inline constexpr VerifyTolerances kBf16Tolerances{2e-2, 1e-1};

struct VerifyReport {
  std::vector<TensorComparison> rows;  // logits, loss, then the 16 gradients in checkpoint order
  bool ok = false;
};

// Runs forward and backward on `ref`'s batch. If `ours` is non-null it receives this program's
// batch, logits, loss and gradients in debug-state form.
VerifyReport verify_against_state(Gpt2& model, const DebugState& ref, const VerifyTolerances& tol,
                                  DebugState* ours = nullptr);

}  // namespace llmcpu
