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
#include "core/model/model.h"

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

// The limits are relative errors in the 2-norm of a whole tensor. The errors they bound are sums of
// many roundings: a rounding errs by |d| <= u (u = 2^-24 in fp32, 2^-8 in bf16), with root mean
// square at most u/sqrt(3) for a value placed at random between two representable ones. A single
// element may reach the worst case (tests/simd/error_bounds.h: gamma(n) = n u for a sum of n terms,
// what the kernel tests bound element by element); a tensor's norm averages over its thousands to
// millions of elements, whose roundings fall independently, and so follows the root mean square:
// independent errors add in quadrature. A sum accumulated term after term over n terms of random
// sign then errs by sqrt(n/6) u of its value (the partial sum after k terms has size sqrt(k) times
// a term, and each of its n roundings adds u/sqrt(3) of it).
struct VerifyTolerances {
  // DESIGN's fp32 contract against PyTorch. The longest sums of an fp32 pass, even added one term
  // after the other, stay far below it: the logits' GEMMs sum over at most 4C = 6400 terms
  // (gpt2-1558m's fcproj), sqrt(6400/6) u = 1.9e-6 each, and a layernorm renormalises the residual
  // stream's error rather than letting depth add to it; every gradient carries the lm_head's dinp,
  // a sum over V terms: sqrt(V/6) u = 6.2e-6 at V = 65536, 9.5e-6 at Qwen2's 151936.
  double logits = 1e-5;  // also used for the loss
  double grads = 1e-4;
};

// `verify --plugin` holds an offload plugin to the same limits: the Vulkan plugin computes every op
// in fp32 with the sums above (its GEMM adds along k one term after the other in each invocation,
// the longest sum being that dinp over V; its exp and 1/x are within a few ulps of the attention
// weights, which the limits do not notice). Measured by `llmcpu verify --plugin
// build/libllmcpu_vulkan.so --tolerance-logits 1 --tolerance-grads 1` on lavapipe against fixtures
// of tests/fixtures/make_fixture.py (C = 1 to 768, L = 1 to 12, V = 100 to 50257): logits <= 1.5e-6
// and gradients <= 4.1e-6 (at V = 50257), as on the CPU (1.5e-6 and 1.6e-6).
inline constexpr VerifyTolerances kOffloadTolerances{};

// The limits of a bf16 model (Precision::kBf16) against an fp32 (or fp64) reference, with u = 2^-8.
// GEMM operands are rounded to bf16 and accumulated in fp32, so the rounding of the operands is all
// that counts: a GEMM over two rounded operands errs by sqrt(2) u of its output where its terms do
// not cancel (sum_k (a_k w_k)^2 <= (sum_k a_k w_k)^2 on average, as for terms of random sign).
// Logits. The lm_head rounds 2 operands (lnf, wte); its input carries the residual stream's error.
// Each of the 2L branches adds 4 roundings to its own output (ln1, qkvw, atty, attprojw; ln2, fcw,
// fch_gelu, fcprojw). The branches' errors are independent, so the stream's relative error is
// theirs averaged with weights ||branch||^2 / ||stream||^2 that sum to at most 1: one branch's
// worth, 4 roundings, at any depth. The later blocks carry it with a gain of about 1 (layernorm
// rescales it), at most doubling it: n = 2 + 2 * 4 = 10 roundings, sqrt(10) u = 1.24e-2 with every
// rounding at its largest (sqrt(10/3) u = 7.1e-3 at its root mean square): limit 1.25e-2 (it was
// 2e-2, three times the largest seen). It needs a layernorm over C >= 3 channels: over 2 it returns
// +-1 by the sign of x1 - x2, and a rounding that flips the sign changes a logit by O(1) (4.6e-2
// measured at C = 2, L = 8).
// Gradients. The backward rounds dout once more at every GEMM and reuses the rounded activations:
// the same count gives about 10 roundings forward, 10 backward and the GEMM's own 2, sqrt(22) u =
// 1.8e-2, above all that was measured for C >= 16 (at most 1.1e-2). Over few channels the layernorm
// backward, which scales by 1/sigma and removes the components along 1 and the normalised input,
// cancels most of its input and magnifies the noise by a factor set by the data (by how small sigma
// gets among C values): no closed form, so this limit is measured. Largest relative error of a
// gradient tensor over L = 1, 2, 4, 8: C = 12: 1.4e-2, C = 8: 1.7e-2, C = 6: 1.4e-2 to 3.9e-2,
// C = 4: 1.9e-2 to 0.23, C = 3: 2.6e-2 to 0.11, C = 2: up to 5.2 (its layernorm's input gradient is
// exactly zero, so everything behind it is noise). The limit 1e-1 holds from C = 6 up, 2.5 times
// the largest seen there because that largest varies by 2.8 times with depth alone; a bf16 model of
// C <= 4 may fail verify where its fp32 twin passes.
// Measured with `tests/fixtures/make_fixture.py --out-dir D --name N --layers L --heads 1
// --channels C --vocab 200 --max-seq-len 16 --batch 4 --seq-len 16 --steps 1 --seed 100C+L`, then
// `llmcpu verify --precision bf16 --model D/N_model.bin --state D/N_state.bin --tolerance-logits 1
// --tolerance-grads 1`, and likewise on wider shapes (C = 16 to 768, L up to 12, V up to 50257;
// gradients 6.7e-3 to 1.1e-2 there): logits 3.7e-3 to 7.8e-3 wherever C >= 3.
// Flash attention on AVX512-BF16 dot products (simd/x86/bf16_attention.h) also rounds P before P.V:
// one more rounded GEMM operand in the attention branch (ln1, qkvw, P, atty, attprojw: 5), so n =
// 2 + 2 * 5 = 12 there: sqrt(12) u = 1.35e-2 at most. Limit 1.4e-2 (it covers the tables that
// widen q, k, v too). Its backward rounds dO, P and dS as well: about 12 + 13 + 2 roundings,
// sqrt(27) u = 2.0e-2, still far below the measured gradient limit.
inline constexpr VerifyTolerances kBf16Tolerances{1.4e-2, 1e-1};

// The Llama family in bf16, by the same count. Its attention branch rounds one operand more: q and
// k, rounded to bf16 by the qkv GEMM, are rotated and rounded again (ln1, qkvw, rotated q and k,
// atty, attprojw: 5, and P on the AVX512-BF16 attention: 6); the MLP branch rounds ln2, fcw, the
// SwiGLU output and fcprojw (4). So n = 2 + 2 * 6 = 14 roundings: sqrt(14) u = 1.46e-2 at most
// (8.2e-3 to 9.1e-3 measured on the fixtures of tests/llama_fixtures.cmake with the attention that
// widens q, k, v: GQA 3:1, Qwen2, head_dim 24 with biases, T = 1024). Limit 1.5e-2. The gradients
// keep GPT-2's limit (1.1e-2 to 1.5e-2 measured there).
inline constexpr VerifyTolerances kBf16LlamaTolerances{1.5e-2, 1e-1};

// A model with LoRA adapters in bf16. An adapted map adds s B (A x) to W x: x is the map's own
// rounded input and u = A x, B and the sum stay fp32, but A is rounded to bf16, one rounding more
// per adapted map, weighed by the adapter's share of the map's output (at most 1; the fixtures
// start from adapters as large as the base). With every map adapted the Llama family's attention
// branch rounds 6 + 2 operands (the qkv and o adapters' A) and its MLP 4 + 2 (gate/up, down):
// n = 2 + 2 * 8 = 18, sqrt(18) u = 1.66e-2 at most; GPT-2's branches 5 + 2 and 4 + 2: n = 16,
// sqrt(16) u = 1.56e-2. Limits 1.7e-2 and 1.6e-2. Measured on tests/lora_fixtures.cmake's
// cases (2026-12-07, the avx512bf16 table and the widening avx512+xsmm one): logits 5.4e-3 to
// 1.42e-2, and 1.51e-2 on the nf4 base (all-linear, C = 96: over the plain Llama limit of 1.5e-2,
// which has no adapters' roundings). The gradients keep the measured 1e-1.
inline constexpr VerifyTolerances kBf16LoraTolerances{1.6e-2, 1e-1};
inline constexpr VerifyTolerances kBf16LoraLlamaTolerances{1.7e-2, 1e-1};

// The bf16 limits of a model's ops: with rotated q and k (one more rounding), the Llama family's;
// with LoRA adapters (`adapters`), those counting the adapters' roundings too.
inline const VerifyTolerances& bf16_tolerances(const ModelConfig& c, bool adapters = false) {
  const bool rope = c.family().positions == PositionKind::kRope;
  if (adapters) return rope ? kBf16LoraLlamaTolerances : kBf16LoraTolerances;
  return rope ? kBf16LlamaTolerances : kBf16Tolerances;
}

struct VerifyReport {
  std::vector<TensorComparison> rows;  // logits, loss, then the gradients in checkpoint order
  bool ok = false;
};

// Runs forward and backward on `ref`'s batch (packed rows with its starts, if any; with
// `recompute`, as training would). If `ours` is
// non-null it receives this program's batch, logits, loss and gradients in debug-state form.
VerifyReport verify_against_state(Model& model, const DebugState& ref, const VerifyTolerances& tol,
                                  DebugState* ours = nullptr,
                                  Recompute recompute = Recompute::kNone);

}  // namespace llmcpu
