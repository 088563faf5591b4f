// The scalar reference of the bf16 kernels (simd/bf16.h): every bf16 operand is converted exactly to
// fp32 and the scalar fp32 math runs on it; outputs that are bf16 are rounded once at the end. The
// vectorized bf16 kernels are tested against this table. Allocates per call: a reference, not a path
// for training.
#include <vector>

#include "simd/bf16.h"
#include "simd/scalar/adamw.h"
#include "simd/scalar/attention.h"
#include "simd/scalar/geglu.h"
#include "simd/scalar/gelu.h"
#include "simd/scalar/head_rmsnorm.h"
#include "simd/scalar/layernorm.h"
#include "simd/scalar/lora.h"
#include "simd/scalar/matmul.h"
#include "simd/scalar/rmsnorm.h"
#include "simd/scalar/rope.h"
#include "simd/scalar/swiglu.h"

namespace llmcpu {
namespace {

std::vector<float> widen(const bf16* x, size_t n) {
  std::vector<float> r(n);
  for (size_t i = 0; i < n; ++i) r[i] = bf16_to_float(x[i]);
  return r;
}

void to_bf16(bf16* out, const float* in, size_t N) {
  for (size_t i = 0; i < N; ++i) out[i] = float_to_bf16(in[i]);
}

void to_f32(float* out, const bf16* in, size_t N) {
  for (size_t i = 0; i < N; ++i) out[i] = bf16_to_float(in[i]);
}

void matmul_forward(float* out, const bf16* inp, const bf16* weight, const float* bias, size_t N,
                    int C, int OC) {
  const std::vector<float> x = widen(inp, N * size_t(C)), w = widen(weight, size_t(OC) * C);
  scalar::matmul_forward<float>(out, x.data(), w.data(), bias, N, C, OC);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const bf16* inp,
                     const bf16* weight, size_t N, int C, int OC) {
  std::vector<float> d(N * size_t(OC));
  for (size_t i = 0; i < d.size(); ++i) d[i] = bf16_to_float(float_to_bf16(dout[i]));
  const std::vector<float> x = widen(inp, N * size_t(C)), w = widen(weight, size_t(OC) * C);
  scalar::matmul_backward<float>(dinp, dweight, nullptr, d.data(), x.data(), w.data(), N, C, OC);
  if (dbias) {
    for (int o = 0; o < OC; ++o) {
      float s = 0.0f;
      for (size_t n = 0; n < N; ++n) s += dout[n * OC + o];
      dbias[o] += s;
    }
  }
}

void layernorm_forward(bf16* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, size_t N, int C) {
  std::vector<float> y(N * size_t(C));
  scalar::layernorm_forward<float>(y.data(), mean, rstd, inp, weight, bias, N, C);
  to_bf16(out, y.data(), y.size());
}

void gelu_forward(bf16* out, const float* inp, size_t N) {
  std::vector<float> y(N);
  scalar::gelu_forward<float>(y.data(), inp, N);
  to_bf16(out, y.data(), N);
}

void layernorm_apply(bf16* out, const float* inp, const float* mean, const float* rstd,
                     const float* weight, const float* bias, size_t N, int C) {
  std::vector<float> y(N * size_t(C));
  scalar::layernorm_apply<float>(y.data(), inp, mean, rstd, weight, bias, N, C);
  to_bf16(out, y.data(), y.size());
}

void gelu_forward_bf16(bf16* out, const bf16* inp, size_t N) {
  const std::vector<float> x = widen(inp, N);
  gelu_forward(out, x.data(), N);
}

void gelu_backward(float* dinp, const bf16* inp, const float* dout, size_t N) {
  const std::vector<float> x = widen(inp, N);
  scalar::gelu_backward<float>(dinp, x.data(), dout, N);
}

void rmsnorm_forward(bf16* out, float* rstd, const float* inp, const float* weight, size_t N, int C,
                     float eps) {
  std::vector<float> y(N * size_t(C));
  scalar::rmsnorm_forward<float>(y.data(), rstd, inp, weight, N, C, eps);
  to_bf16(out, y.data(), y.size());
}

void rmsnorm_apply(bf16* out, const float* inp, const float* rstd, const float* weight, size_t N,
                   int C) {
  std::vector<float> y(N * size_t(C));
  scalar::rmsnorm_apply<float>(y.data(), inp, rstd, weight, N, C);
  to_bf16(out, y.data(), y.size());
}

// The rows widened (the gaps between their heads too, untouched), rotated in fp32, and only the
// heads' elements rounded back.
void rope_forward(bf16* x, const float* cos, const float* sin, size_t N, int T, int pos0, int heads,
                  int D, size_t row_stride) {
  if (N == 0) return;
  const size_t used = size_t(heads) * size_t(D);
  std::vector<float> v = widen(x, (N - 1) * row_stride + used);
  scalar::rope_forward<float>(v.data(), cos, sin, N, T, pos0, heads, D, row_stride);
  for (size_t r = 0; r < N; ++r) to_bf16(x + r * row_stride, v.data() + r * row_stride, used);
}

void swiglu_forward(bf16* out, const bf16* inp, size_t N, int H) {
  const std::vector<float> x = widen(inp, N * 2 * size_t(H));
  std::vector<float> y(N * size_t(H));
  scalar::swiglu_forward<float>(y.data(), x.data(), N, H);
  to_bf16(out, y.data(), y.size());
}

void swiglu_backward(float* dinp, const float* dout, const bf16* inp, size_t N, int H) {
  const std::vector<float> x = widen(inp, N * 2 * size_t(H));
  scalar::swiglu_backward<float>(dinp, dout, x.data(), N, H);
}

// The rows widened (the values after the heads too, untouched), normalized in fp32, and only the
// heads' elements rounded back.
void head_rmsnorm_forward(bf16* x, float* saved, float* rstd, const float* wq, const float* wk,
                          size_t N, int NH, int NKV, int D, size_t row_stride, float eps,
                          float weight_offset) {
  if (N == 0) return;
  const size_t used = size_t(NH + NKV) * size_t(D);
  std::vector<float> v = widen(x, (N - 1) * row_stride + used);
  scalar::head_rmsnorm_forward<float>(v.data(), saved, rstd, wq, wk, N, NH, NKV, D, row_stride, eps,
                                      weight_offset);
  for (size_t r = 0; r < N; ++r) to_bf16(x + r * row_stride, v.data() + r * row_stride, used);
}

void geglu_forward(bf16* out, const bf16* inp, size_t N, int H) {
  const std::vector<float> x = widen(inp, N * 2 * size_t(H));
  std::vector<float> y(N * size_t(H));
  scalar::geglu_forward<float>(y.data(), x.data(), N, H);
  to_bf16(out, y.data(), y.size());
}

void geglu_backward(float* dinp, const float* dout, const bf16* inp, size_t N, int H) {
  const std::vector<float> x = widen(inp, N * 2 * size_t(H));
  scalar::geglu_backward<float>(dinp, dout, x.data(), N, H);
}

// Attention on the bf16 q, k, v widened exactly: the fp32 reference, then out rounded once.
void flash_attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, int NKV,
                             int D, const AttentionOptions& opt) {
  const size_t rows = size_t(B) * T, N = rows * NH * D;
  const std::vector<float> x = widen(qkv, rows * (NH + 2 * NKV) * D);
  std::vector<float> y(N);
  scalar::flash_attention_forward<float>(y.data(), lse, x.data(), B, T, NH, NKV, D, opt);
  to_bf16(out, y.data(), N);
}

// D_t from the saved bf16 out, widened exactly, as the vectorized kernels read it.
void flash_attention_backward(float* dqkv, const float* dout, const bf16* out, const bf16* qkv,
                              const float* lse, int B, int T, int NH, int NKV, int D,
                              const AttentionOptions& opt) {
  const size_t rows = size_t(B) * T;
  const std::vector<float> x = widen(qkv, rows * (NH + 2 * NKV) * D), y = widen(out, rows * NH * D);
  scalar::flash_attention_backward<float>(dqkv, dout, y.data(), x.data(), lse, B, T, NH, NKV, D,
                                          opt);
}

// The block widened into a contiguous copy, updated by the fp32 reference, and rounded back.
void lora_rank_update(bf16* out, size_t ld_out, const float* u, size_t ld_u, const float* w,
                      size_t N, int r, int cols, float scale) {
  const size_t C = size_t(cols);
  std::vector<float> y(N * C);
  for (size_t n = 0; n < N; ++n) to_f32(y.data() + n * C, out + n * ld_out, C);
  scalar::lora_rank_update<float>(y.data(), C, u, ld_u, w, N, r, cols, scale);
  for (size_t n = 0; n < N; ++n) to_bf16(out + n * ld_out, y.data() + n * C, C);
}

void adamw_update(float* param, bf16* param_bf16, float* m, float* v, float* grad, size_t N,
                  const scalar::AdamWStep& step) {
  scalar::adamw_update<float>(param, m, v, grad, N, step);
  if (param_bf16) to_bf16(param_bf16, param, N);
}

}  // namespace

const Bf16Kernels& scalar_bf16_kernels() {
  static const Bf16Kernels table = {
      .target = "scalar",
      .to_bf16 = to_bf16,
      .to_f32 = to_f32,
      .matmul_forward = matmul_forward,
      .matmul_forward_bf16 = nullptr,  // the caller rounds
      .matmul_backward = matmul_backward,
      .layernorm_forward = layernorm_forward,
      .gelu_forward = gelu_forward,
      .layernorm_apply = layernorm_apply,
      .gelu_forward_bf16 = gelu_forward_bf16,
      .gelu_backward = gelu_backward,
      .rmsnorm_forward = rmsnorm_forward,
      .rmsnorm_apply = rmsnorm_apply,
      .rope_forward = rope_forward,
      .swiglu_forward = swiglu_forward,
      .swiglu_backward = swiglu_backward,
      .head_rmsnorm_forward = head_rmsnorm_forward,
      .geglu_forward = geglu_forward,
      .geglu_backward = geglu_backward,
      .flash_attention_forward = flash_attention_forward,
      .flash_attention_backward = flash_attention_backward,
      .lora_rank_update = lora_rank_update,
      .adamw_update = adamw_update,
      .matmul_forward_scratch = no_scratch::matmul_forward,
      .matmul_backward_scratch = no_scratch::matmul_backward,
      .flash_attention_forward_scratch = no_scratch::attention,
      .flash_attention_backward_scratch = no_scratch::attention,
  };
  return table;
}

std::vector<bf16> to_bf16_vector(const float* in, size_t N) {
  std::vector<bf16> r(N);
  to_bf16(r.data(), in, N);
  return r;
}

}  // namespace llmcpu
