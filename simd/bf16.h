// bf16 mixed precision: the storage type, its conversions, and the kernels of the bf16 path.
//
// bf16 is the upper half of an IEEE fp32 (1 sign, 8 exponent, 7 mantissa bits), stored as uint16_t
// in little-endian order, as llm.c's version-5 checkpoints hold it. fp32 -> bf16 rounds to nearest,
// ties to even; a NaN stays a NaN with its quiet bit set (never rounds to infinity); infinities and
// signed zeros are kept; values above bf16's largest finite round to infinity as IEEE says.
// bf16 -> fp32 is exact.
//
// The bf16 path (core/model, `--precision bf16`) keeps fp32 master weights and AdamW moments, a
// bf16 working copy of the weights, and bf16 activations where they feed a GEMM (the layernorm
// outputs, the attention output, the GELU output). GEMMs take bf16 operands and accumulate in fp32;
// layernorm statistics, softmax, the loss and all gradients that are not GEMM operands stay fp32. A
// GEMM's fp32 gradient input (dout) is rounded to bf16 where it enters the product, as autocast
// does. Not here: which ops run in which precision (core/model/model.cpp), the fp32 kernels
// (kernels.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "simd/attention_options.h"
#include "simd/scalar/adamw.h"
#include "simd/scratch.h"

namespace llmcpu {

using bf16 = std::uint16_t;

inline bf16 float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16((u >> 16) | 0x0040u);  // NaN: quiet, keep sign
  u += 0x7fffu + ((u >> 16) & 1u);                                        // nearest, ties to even
  return bf16(u >> 16);
}

inline float bf16_to_float(bf16 h) {
  const std::uint32_t u = std::uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The bf16 kernels. Shapes as in kernels.h: N rows, C channels, OC output channels.
struct Bf16Kernels {
  std::string_view target;  // "scalar", "avx512bf16", "avx512", "avx2", "neon_bf16", "neon", ...

  void (*to_bf16)(bf16* out, const float* in, size_t N);
  void (*to_f32)(float* out, const bf16* in, size_t N);

  // out (N,OC) = inp (N,C) weight^T + bias, fp32 accumulation; weight (OC,C) row-major as
  // nn.Linear; bias (OC) fp32 or null.
  void (*matmul_forward)(float* out, const bf16* inp, const bf16* weight, const float* bias,
                         size_t N, int C, int OC);
  // The same product with its output rounded once to bf16 in the GEMM's epilogue (the bits of
  // matmul_forward's output rounded by to_bf16, without an fp32 pass over memory); null in a table
  // without such an epilogue, where the caller rounds matmul_forward's output.
  void (*matmul_forward_bf16)(bf16* out, const bf16* inp, const bf16* weight, const float* bias,
                              size_t N, int C, int OC);
  // With d = dout rounded to bf16:  dinp (N,C) = d weight (overwritten; null: skipped),
  // dweight (OC,C) += d^T inp, dbias (OC) += column sums of dout in fp32 (null: skipped).
  void (*matmul_backward)(float* dinp, float* dweight /*+=*/, float* dbias /*+=*/,
                          const float* dout, const bf16* inp, const bf16* weight, size_t N, int C,
                          int OC);

  // As the fp32 kernels, with the output rounded to bf16 (statistics stay fp32).
  void (*layernorm_forward)(bf16* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, size_t N, int C);
  void (*gelu_forward)(bf16* out, const float* inp, size_t N);

  // Storage kernels of the bf16 activations: the layernorm output recomputed from its saved
  // statistics (the same bits as layernorm_forward's), GELU of a bf16 input (forward and
  // recomputation alike), and GELU's backward from the saved bf16 input.
  void (*layernorm_apply)(bf16* out, const float* inp, const float* mean, const float* rstd,
                          const float* weight, const float* bias, size_t N, int C);
  void (*gelu_forward_bf16)(bf16* out, const bf16* inp, size_t N);
  void (*gelu_backward)(float* dinp, const bf16* inp, const float* dout, size_t N);

  // The Llama family's storage kernels: the fp32 kernels' math (kernels.h) on bf16 inputs widened
  // exactly, each bf16 output rounded once. RMSNorm reads the fp32 residual and keeps rstd (N) in
  // fp32; rmsnorm_apply gives the same bits as rmsnorm_forward's output from its saved rstd. RoPE
  // rotates bf16 q or k rows in place (layout as kernels.h's rope_forward). SwiGLU reads the bf16
  // fc output (N, 2H) = [gate | up]: forward and recomputation alike, out (N, H) in bf16; the
  // backward overwrites fp32 dinp (N, 2H) = [dgate | dup]. The backward passes of RMSNorm (on the
  // fp32 residual) and RoPE (on the fp32 dqkv) are the fp32 table's.
  void (*rmsnorm_forward)(bf16* out, float* rstd, const float* inp, const float* weight, size_t N,
                          int C, float eps);
  void (*rmsnorm_apply)(bf16* out, const float* inp, const float* rstd, const float* weight,
                        size_t N, int C);
  void (*rope_forward)(bf16* x, const float* cos, const float* sin, size_t N, int T, int pos0,
                       int heads, int D, size_t row_stride);
  void (*swiglu_forward)(bf16* out, const bf16* inp, size_t N, int H);
  void (*swiglu_backward)(float* dinp, const float* dout, const bf16* inp, size_t N, int H);
  // The Qwen3 / Gemma family's: per-head RMSNorm of the bf16 q and k heads in place (layout,
  // saved and rstd as kernels.h's head_rmsnorm_forward): saved holds the bf16 input widened
  // exactly, each output rounded once to bf16; its backward (on the fp32 dqkv, from saved) is the
  // fp32 table's head_rmsnorm_backward. GeGLU as SwiGLU above, with kernels.h's gelu for silu.
  void (*head_rmsnorm_forward)(bf16* x, float* saved, float* rstd, const float* wq, const float* wk,
                               size_t N, int NH, int NKV, int D, size_t row_stride, float eps,
                               float weight_offset);
  void (*geglu_forward)(bf16* out, const bf16* inp, size_t N, int H);
  void (*geglu_backward)(float* dinp, const float* dout, const bf16* inp, size_t N, int H);

  // Flash attention (kernels.h's flash_attention_*, the same shapes: qkv rows of (NH + 2*NKV)*D,
  // out rows of NH*D) on bf16 q, k, v: products of bf16 operands, fp32 accumulation, softmax and
  // lse in fp32; the output rounded to bf16. Backward reads the saved bf16 output for
  // D_t = dout_t . out_t and gives fp32 dqkv (overwritten). opt: scale, window, soft-cap, as there.
  void (*flash_attention_forward)(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH,
                                  int NKV, int D, const AttentionOptions& opt);
  void (*flash_attention_backward)(float* dqkv, const float* dout, const bf16* out, const bf16* qkv,
                                   const float* lse, int B, int T, int NH, int NKV, int D,
                                   const AttentionOptions& opt);

  // kernels.h's lora_rank_update on a bf16 output: each out[n,c] widened exactly, updated in fp32
  // as there (the same bits as the fp32 table's), then rounded once to bf16 (as to_bf16).
  void (*lora_rank_update)(bf16* out, size_t ld_out, const float* u, size_t ld_u, const float* w,
                           size_t N, int r, int cols, float scale);

  // AdamW on the fp32 master weights (as kernels.h), then param_bf16[i] = bf16(param[i]) when
  // param_bf16 is not null.
  void (*adamw_update)(float* param, bf16* param_bf16, float* m, float* v, float* grad, size_t N,
                       const scalar::AdamWStep& step);

  // Sizing entries, as KernelTable's (simd/kernels.h): the scratch one call of the entry of that
  // name asks for.
  ScratchUse (*matmul_forward_scratch)(size_t N, int C, int OC, bool bias, int threads);
  ScratchUse (*matmul_backward_scratch)(size_t N, int C, int OC, bool dinp, bool dbias,
                                        int threads);
  ScratchUse (*flash_attention_forward_scratch)(int B, int T, int NH, int NKV, int D, int threads);
  ScratchUse (*flash_attention_backward_scratch)(int B, int T, int NH, int NKV, int D, int threads);
};

// The scalar reference: converts each operand exactly to fp32 and runs the scalar fp32 math (each
// GEMM sum in order, one fp32 accumulator).
const Bf16Kernels& scalar_bf16_kernels();

// The bf16 table that goes with an fp32 target name (kernels_for_target's names): the best bf16
// GEMM this CPU runs for that target ("avx512" -> AVX512-BF16 dot products where the CPU has them
// and they outrun its fp32 FMAs, bf16_dot_products_first; the best Arm target -> BFMMLA where the
// CPU has Arm BF16; else the portable Highway GEMM), or the scalar reference for "scalar". Throws
// UsageError as kernels_for_target does.
const Bf16Kernels& bf16_kernels_for_target(std::string_view name,
                                           std::string_view what = "kernel target");

// The bf16 table that goes with active_kernels(), or the one the environment variable
// LLMCPU_BF16_TARGET names (a name from available_bf16_targets(), for tests and benchmarks).
const Bf16Kernels& active_bf16_kernels();

// This core's AVX512-BF16 dot-product FLOP rate over its fp32 FMA rate, measured once on first use
// (roofs::dpbf16_over_fma; 0 without AVX512-BF16), and whether the tables on those dot products
// therefore rank before the portable ones, which widen bf16 onto the fp32 FMAs: where the ratio is
// at least 1 (Zen 4 and 5, about 2). Sapphire and Emerald Rapids issue VDPBF16PS at half their FMA
// rate (about 0.5): there the portable GEMMs are the faster ones (bench/RESULTS.md), and with AMX
// oneDNN's AMX table ranks first anyway.
double bf16_dot_product_ratio();
bool bf16_dot_products_first();

// Every bf16 table this CPU runs, by its own name: "scalar", then per vectorized target the
// AVX512-BF16 table ("avx512bf16") or the Arm BF16 one ("neon_bf16", with the best Arm target)
// where the CPU has it, and the portable one ("avx512", "avx2", "sve2", "neon", ...).
std::vector<std::string_view> available_bf16_targets();
const Bf16Kernels& bf16_kernels_named(std::string_view name,
                                      std::string_view what = "bf16 kernel table");

// Bulk conversion on one thread (llm.c files, tests, tools); the kernels above are the fast ones.
std::vector<bf16> to_bf16_vector(const float* in, size_t N);

}  // namespace llmcpu
