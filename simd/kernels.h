// The kernel boundary: the engine calls every layer through one table of function pointers, so a
// vectorized target (AVX2, AVX-512, NEON, ...) slots in by filling its own table. The scalar table
// is always present: it is the reference every other target is tested against. This header says
// nothing about how a kernel is implemented; see simd/scalar/ for the math.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "simd/attention_options.h"
#include "simd/scalar/adamw.h"
#include "simd/scratch.h"

namespace llmcpu {

using scalar::AdamWStep;

// fp32 kernels. Shapes use the project's letters: N rows (= B*T), C channels, OC output channels,
// V vocabulary, Vp padded vocabulary, NH (query) heads, NKV key/value heads, H the MLP's hidden
// width, D a head's size. "+="
// marks outputs that accumulate.
struct KernelTable {
  std::string_view target;  // "scalar", "avx2", "avx512", "avx512+xsmm", "neon", ...

  // out (B,T,C) = wte[inp] (Vp,C) + wpe[t] (maxT,C). A model without a position table (Llama)
  // passes wpe = null (out = wte[inp]) and dwpe = null (only dwte accumulated).
  void (*encoder_forward)(float* out, const int* inp, const float* wte, const float* wpe, int B,
                          int T, int C);
  void (*encoder_backward)(float* dwte /*+=*/, float* dwpe /*+=*/, const float* dout,
                           const int* inp, int B, int T, int C);

  void (*layernorm_forward)(float* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, size_t N, int C);
  // out = (inp - mean) * rstd * weight + bias with the statistics of a layernorm_forward: the
  // same bits as that forward's output (recomputation in the backward pass).
  void (*layernorm_apply)(float* out, const float* inp, const float* mean, const float* rstd,
                          const float* weight, const float* bias, size_t N, int C);
  void (*layernorm_backward)(float* dinp /*+=*/, float* dweight /*+=*/, float* dbias /*+=*/,
                             const float* dout, const float* inp, const float* weight,
                             const float* mean, const float* rstd, size_t N, int C);

  // RMSNorm (Llama): rstd = 1 / sqrt(mean_c(inp^2) + eps), out = inp * rstd * weight (no bias).
  void (*rmsnorm_forward)(float* out, float* rstd, const float* inp, const float* weight, size_t N,
                          int C, float eps);
  // out from a rmsnorm_forward's rstd: the same bits as that forward's output (recomputation).
  void (*rmsnorm_apply)(float* out, const float* inp, const float* rstd, const float* weight,
                        size_t N, int C);
  void (*rmsnorm_backward)(float* dinp /*+=*/, float* dweight /*+=*/, const float* dout,
                           const float* inp, const float* weight, const float* rstd, size_t N,
                           int C);
  // Per-head RMSNorm of q and k in place in the qkv rows (Qwen3's q_norm/k_norm; Gemma 3's with
  // weight_offset 1: the scale is w + 1). Row r < N holds heads h < NH + NKV of D values at
  // x + r * row_stride + h * D (the NH query heads, then the NKV key heads; the rest of the row,
  // the values, is untouched). Per head, with w = wq (D) for h < NH, else wk (D), and the pair's
  // index j = r (NH+NKV) + h:
  //   saved[j*D + i] = x_i                     (the input; saved (N, NH+NKV, D), contiguous)
  //   rstd[j] = 1 / sqrt(mean_i(x_i^2) + eps)  (rstd (N, NH+NKV))
  //   x_i = (x_i rstd) (w_i + weight_offset)
  // saved and rstd must not overlap x.
  void (*head_rmsnorm_forward)(float* x, float* saved, float* rstd, const float* wq,
                               const float* wk, size_t N, int NH, int NKV, int D, size_t row_stride,
                               float eps, float weight_offset);
  // dx holds dy at the forward's places and is overwritten with d(input) there (the rest of the row
  // untouched); dwq, dwk (D) accumulate over rows and the heads that use them, each element in one
  // fixed order (the same bits for any thread count). dx must not overlap saved, rstd or weights.
  void (*head_rmsnorm_backward)(float* dx, float* dwq /*+=*/, float* dwk /*+=*/, const float* saved,
                                const float* rstd, const float* wq, const float* wk, size_t N,
                                int NH, int NKV, int D, size_t row_stride, float weight_offset);

  void (*matmul_forward)(float* out, const float* inp, const float* weight, const float* bias,
                         size_t N, int C, int OC);
  // dinp overwritten, dweight and dbias accumulated; any of the three may be null (not wanted: a
  // frozen weight's backward is dinp alone).
  void (*matmul_backward)(float* dinp, float* dweight /*+=*/, float* dbias /*+=*/,
                          const float* dout, const float* inp, const float* weight, size_t N, int C,
                          int OC);

  // LoRA adapters (rank r, typically 8..64): the low-rank passes around a linear map, each over a
  // block of `cols` columns of rows `ld_*` floats apart (ld >= cols: the block of a wider row, read
  // or written in place; the rest of a row is never touched). Every output element has one owner
  // and one summation order, the same for any thread count:
  //   lora_rank_update       out[n,c] += scale * sum_{k<r} u[n,k] w[k,c]     n < N, c < cols
  //                          out (N, ld_out), u (N, ld_u), w (r, cols); rows over threads.
  //   lora_project           out[n,k]  = scale * sum_{c<cols} d[n,c] b[c,k]   n < N, k < r
  //                          out (N, ld_out) overwritten, d (N, ld_d), b (cols, r); rows over
  //                          threads.
  //   lora_outer_accumulate  acc[c,k] += scale * sum_{n<N} d[n,c] u[n,k]     c < cols, k < r
  //                          acc (cols, r), d (N, ld_d), u (N, ld_u); blocks of c over threads.
  // Each sum runs in fp32 in index order (k = 0..r-1, c = 0..cols-1, n = 0..N-1) in one
  // accumulator (fused multiply-adds where the target has them), then is multiplied by scale and
  // added (or stored) once: |error| <= gamma(terms + 2) (|old| + |scale| sum |products|).
  // LoRA's y[:, cols] += scale (x A^T) B^T is lora_rank_update with u = x A^T and w = B^T; its
  // backward gB = scale dy B is lora_project, dB += scale dy^T u lora_outer_accumulate, and
  // dx += gB A lora_rank_update with w = A. No scratch.
  void (*lora_rank_update)(float* out, size_t ld_out, const float* u, size_t ld_u, const float* w,
                           size_t N, int r, int cols, float scale);
  void (*lora_project)(float* out, size_t ld_out, const float* d, size_t ld_d, const float* b,
                       size_t N, int cols, int r, float scale);
  void (*lora_outer_accumulate)(float* acc /*+=*/, const float* d, size_t ld_d, const float* u,
                                size_t ld_u, size_t N, int cols, int r, float scale);

  // Causal self-attention that keeps the (B, NH, T, T) softmax matrix `att` (the plugin ABI's
  // attention op and the reference for the flash kernels below; not used by the model).
  void (*attention_forward)(float* out, float* att, const float* qkv, int B, int T, int C, int NH);
  void (*attention_backward)(float* dqkv, float* scratch, const float* dout, const float* qkv,
                             const float* att, int B, int T, int C, int NH);
  // Causal self-attention without the (B, NH, T, T) matrix (FlashAttention-2): queries and keys in
  // blocks, blocks above the diagonal (and outside a sliding window) skipped, an online softmax.
  // Grouped-query: NH query heads and NKV key/value heads (NKV divides NH; NKV == NH is multi-head,
  // NKV == 1 multi-query attention), each of size D (any D > 0). A qkv row (B, T, (NH + 2*NKV)*D)
  // holds the NH query heads, then the NKV key heads, then the NKV value heads; query head h reads
  // key/value head h / (NH/NKV). out (B, T, NH*D). opt (attention_options.h): the scale (default
  // 1/sqrt(D)), a sliding window and a logit soft-cap of the scores s_u. Keeps per row the
  // log-sum-exp of its scores, lse (B, NH, T): lse[b,h,t] = log sum_u exp(s_u) over the keys it
  // sees.
  void (*flash_attention_forward)(float* out, float* lse, const float* qkv, int B, int T, int NH,
                                  int NKV, int D, const AttentionOptions& opt);
  // dqkv (B, T, (NH + 2*NKV)*D) overwritten; dout, out (B, T, NH*D); opt as the forward's. The
  // probabilities are recomputed block by block from lse, p = exp(s_u - lse_t), and
  // D_t = dout_t . out_t stands for sum_u p dp. The dk, dv of a key/value head sum over its group
  // of query heads.
  void (*flash_attention_backward)(float* dqkv, const float* dout, const float* out,
                                   const float* qkv, const float* lse, int B, int T, int NH,
                                   int NKV, int D, const AttentionOptions& opt);
  // One new query position against a KV cache (generation): q and out (NH*D), kcache and vcache
  // (positions, NKV*D) with rows 0..pos filled, scores (pos+1) scratch; heads and opt as above
  // (with a window the query sees rows max(0, pos - window + 1) .. pos).
  void (*attention_decode)(float* out, float* scores, const float* q, const float* kcache,
                           const float* vcache, int pos, int NH, int NKV, int D,
                           const AttentionOptions& opt);

  // Rotary position embedding (Llama), in place, Hugging Face's rotate_half layout: row r of the N
  // = B*T rows is at position pos0 + r % T; its `heads` heads of size D (even) start at
  // x + r * row_stride + h * D; cos and sin are (positions, D/2) tables the caller fills. The
  // backward applies the transpose rotation to the gradient, also in place.
  void (*rope_forward)(float* x, const float* cos, const float* sin, size_t N, int T, int pos0,
                       int heads, int D, size_t row_stride);
  void (*rope_backward)(float* dx, const float* cos, const float* sin, size_t N, int T, int pos0,
                        int heads, int D, size_t row_stride);

  void (*gelu_forward)(float* out, const float* inp, size_t N);
  void (*gelu_backward)(float* dinp, const float* inp, const float* dout, size_t N);
  // SwiGLU (the Llama MLP): inp (N, 2H) holds [gate | up] per row, out (N, H) = silu(gate) * up.
  // The backward overwrites dinp (N, 2H) with [dgate | dup].
  void (*swiglu_forward)(float* out, const float* inp, size_t N, int H);
  void (*swiglu_backward)(float* dinp, const float* dout, const float* inp, size_t N, int H);
  // GeGLU (the Gemma MLP): as SwiGLU with gelu (the tanh form, gelu_forward's) for silu:
  // out (N, H) = gelu(gate) * up; the backward overwrites dinp (N, 2H) with [dgate | dup].
  void (*geglu_forward)(float* out, const float* inp, size_t N, int H);
  void (*geglu_backward)(float* dinp, const float* dout, const float* inp, size_t N, int H);

  void (*residual_forward)(float* out, const float* a, const float* b, size_t N);

  // Logit soft-capping (Gemma 2/3's final logits), in place: x = cap tanh(x / cap). The backward
  // from the capped values: dx *= 1 - (capped / cap)^2.
  void (*softcap_forward)(float* x, size_t N, float cap);
  void (*softcap_backward)(float* dx, const float* capped, size_t N, float cap);

  // Fused softmax and cross-entropy over the first V of Vp logits (simd/scalar/softmax_xent.h). A
  // negative target masks its row (PyTorch's ignore_index): loss 0 and a zero gradient row.
  void (*softmax_xent_forward)(float* losses, float* lse, const float* logits, const int* targets,
                               size_t N, int V, int Vp);
  void (*softmax_xent_backward)(float* logits, const float* lse, const int* targets, float dloss,
                                size_t N, int V, int Vp);

  // grad is read, scaled by step.grad_scale, and set to zero when step.clear_grad.
  void (*adamw_update)(float* param, float* m, float* v, float* grad, size_t N,
                       const AdamWStep& step);
  double (*sum_squares)(const float* x, size_t N);
  void (*scale)(float* x, float factor, size_t N);

  // Sizing entries (simd/scratch.h): the per-thread scratch one call of the entry of that name
  // asks for, by the call's shape and the size of the OpenMP team it runs on (`threads`:
  // omp_get_max_threads() where it is called), without running it. For the memory plan; {} where
  // the entry has no scratch (the scalar table's allocate per call: a reference, not a path).
  // bias, dinp, dbias: whether the call passes them (not null).
  ScratchUse (*matmul_forward_scratch)(size_t N, int C, int OC, bool bias, int threads);
  ScratchUse (*matmul_backward_scratch)(size_t N, int C, int OC, bool dinp, bool dbias,
                                        int threads);
  ScratchUse (*flash_attention_forward_scratch)(int B, int T, int NH, int NKV, int D, int threads);
  ScratchUse (*flash_attention_backward_scratch)(int B, int T, int NH, int NKV, int D, int threads);
  ScratchUse (*sum_squares_scratch)(size_t N, int threads);
};

// The scalar reference table.
const KernelTable& scalar_kernels();

// The table the engine uses: the one named by the environment variable LLMCPU_TARGET when it is
// set, else the best target this CPU runs. Throws UsageError naming LLMCPU_TARGET and the valid
// values when the name is unknown or this CPU cannot run it.
const KernelTable& active_kernels();

// The table of one target: "scalar" (the reference), a Highway target ("avx512", "avx2",
// "hwy_scalar", "neon", ...) or one of those with libxsmm GEMMs ("avx512+xsmm", "avx2+xsmm").
// Throws UsageError (naming `what`, e.g. "LLMCPU_TARGET") when unknown or not supported here.
const KernelTable& kernels_for_target(std::string_view name,
                                      std::string_view what = "kernel target");

// The names kernels_for_target accepts on this CPU: "scalar" first, then the vectorized tables,
// best ISA first.
std::vector<std::string_view> available_targets();

// What this build holds, whether or not this CPU runs it (`llmcpu --version`): every kernel target
// compiled in ("scalar", the Highway targets best first, each with "+xsmm" where libxsmm was built
// in), and the optional GEMM libraries.
std::vector<std::string> compiled_targets();
struct SimdBuild {
  bool libxsmm = false;  // libxsmm's JIT GEMMs (the "+xsmm" tables)
  bool onednn = false;   // oneDNN's bf16 matmul (the "onednn" bf16 table, AMX where present)
};
SimdBuild simd_build();

}  // namespace llmcpu
