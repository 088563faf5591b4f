// An executor (core/model/executors.h) that runs nothing: each op the transformer hands it becomes
// a row of `llmcpu bench`'s table, with its shape, the FLOPs and compulsory bytes of one call and
// the call that times it (core/bench/op_calls.h). A call with a row already (same op, pass and
// shape: the next layer's) counts one more call per step, so the rows come in the order of their
// first call. G is the executor's Act: float, or bf16 in mixed precision, where the types of the
// pointers it is handed say what is stored in bf16, as they tell the bf16 executor.
// A matmul is named by its weight tensor, found from the weight's address in the parameter array
// the recorder is made with.
//
// Cost model, per call (FLOPs: 2 per multiply-accumulate; bytes: every tensor read or written once,
// 4 per fp32 value, 2 per bf16 value, an accumulated (+=) output read and written):
//   matmul (N, C) x (OC, C)^T:  forward 2 N C OC, backward 4 N C OC (dinp and dweight)
//   causal attention:           forward 4 hs per (query, key) pair with key <= query (q.k and p v),
//                               backward 10 hs per pair (s recomputed, dv, dp, dq, dk)
//   elementwise and rows:       layernorm 8 (forward) / 14 (backward) per element, 4 to apply saved
//                               statistics, GELU 10 / 20, residual 1, softmax + cross-entropy 3
//                               per logit, AdamW 13 per parameter, the embedding 1 / 2 per element;
//                               Llama: RMSNorm 4 / 11 (2 to apply), rope 3 per rotated element,
//                               SwiGLU 12 / 20 per output
// The matmuls and attention (products of GEMM-input operands: bf16 ones in a bf16 step, on the
// bf16 table's dot products where it has them) against the GEMM peak; everything else against the
// fp32 peak, and the memory roof.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/bench/layer_ops.h"
#include "core/bench/op_calls.h"
#include "core/model/config.h"
#include "core/model/lora_views.h"
#include "core/model/parameters.h"
#include "simd/bf16.h"

namespace llmcpu::bench {

template <class G>
class StepRecorder {
 public:
  using Act = G;
  // `params`: the parameter array of `config` whose views the passes are handed.
  StepRecorder(const OpKernels& kernels, const ModelConfig& config, const float* params)
      : x_(kernels),
        layout_(config),
        V_(config.vocab_size),
        Vp_(config.padded_vocab_size),
        params_(params) {}

  // The rows recorded so far, in the order of their first call.
  std::vector<LayerOp> take() { return std::move(ops_); }

  void encoder_forward(float*, const int*, const float*, const float* wpe, int B, int T, int C) {
    const double BT = double(B) * T, p = wpe ? 1 : 0;
    add({"encoder", "forward", dims({{"B", B}, {"T", T}, {"C", C}}), 1, p * BT * C,
         4.0 * (BT + (1 + p) * BT * C + p * T * C), Roof::kFp32,
         encoder_forward_call(x_, B, T, C, V_, Vp_, wpe != nullptr)});
  }
  template <class O>
  void layernorm_forward(O*, float*, float*, const float*, const float*, const float*, size_t N,
                         int C) {
    add({"layernorm", "forward", dims({{"N", N}, {"C", C}}), 1, 8.0 * N * C,
         (4.0 + sizeof(O)) * N * C + 8.0 * N + 8.0 * C, Roof::kFp32,
         layernorm_forward_call(x_, N, C)});
  }
  template <class O>
  void matmul_forward(O*, const G*, const float* weight, const float* bias, size_t N, int C,
                      int OC) {
    const double n = N, ic = C, oc = OC;
    add({matmul_name(weight), "forward", dims({{"N", N}, {"C", C}, {"OC", OC}}), 1,
         2.0 * n * ic * oc, kAct * (n * ic + oc * ic) + sizeof(O) * n * oc + (bias ? 4.0 * oc : 0),
         kGemmRoof, matmul_forward_call(x_, N, C, OC, bias != nullptr, std::is_same_v<O, bf16>)});
  }
  template <class O>
  void layernorm_apply(O*, const float*, const float*, const float*, const float*, const float*,
                       size_t N, int C) {
    add({"layernorm apply", "forward", dims({{"N", N}, {"C", C}}), 1, 4.0 * N * C,
         (4.0 + sizeof(O)) * N * C + 8.0 * N + 8.0 * C, Roof::kFp32,
         layernorm_apply_call(x_, N, C)});
  }
  void attention_forward(int, G*, float*, const G*, int B, int T, int NH, int NKV, int D,
                         const AttentionOptions& opt) {
    const double BT = double(B) * T, q = double(NH) * D, kv = double(NKV) * D;
    add({"attention", "forward", attention_dims(B, T, NH, NKV, D, opt), 1,
         4.0 * pairs(B, T, NH, opt) * D, kAct * BT * (2 * q + 2 * kv) + 4.0 * B * NH * T,
         kGemmRoof, attention_forward_call(x_, B, T, NH, NKV, D, opt)});
  }
  template <class O>
  void rmsnorm_forward(O*, float*, const float*, const float*, size_t N, int C, float) {
    add({"rmsnorm", "forward", dims({{"N", N}, {"C", C}}), 1, 4.0 * N * C,
         (4.0 + sizeof(O)) * N * C + 4.0 * N + 4.0 * C, Roof::kFp32,
         rmsnorm_forward_call(x_, N, C)});
  }
  template <class O>
  void rmsnorm_apply(O*, const float*, const float*, const float*, size_t N, int C) {
    add({"rmsnorm apply", "forward", dims({{"N", N}, {"C", C}}), 1, 2.0 * N * C,
         (4.0 + sizeof(O)) * N * C + 4.0 * N + 4.0 * C, Roof::kFp32,
         rmsnorm_apply_call(x_, N, C)});
  }
  // Rotates `heads` heads of D in each of N rows: 6 FLOPs per pair, each element read and written.
  template <class O>
  void rope_forward(O*, const float*, const float*, size_t N, int T, int heads, int D,
                    size_t row_stride) {
    const double n = double(N) * heads * D;
    add({"rope", "forward", dims({{"N", N}, {"heads", heads}, {"D", D}}), 1, 3.0 * n,
         2.0 * sizeof(O) * n + 8.0 * T * (D / 2), Roof::kFp32,
         rope_forward_call(x_, N, T, heads, D, row_stride)});
  }
  void swiglu_forward(G*, const G*, size_t N, int H) {
    const double n = double(N) * H;
    add({"swiglu", "forward", dims({{"N", N}, {"H", H}}), 1, 12.0 * n, 3 * kAct * n, Roof::kFp32,
         gated_forward_call(x_, N, H, false)});
  }
  // GELU's FLOPs on the gate and one product.
  void geglu_forward(G*, const G*, size_t N, int H) {
    const double n = double(N) * H;
    add({"geglu", "forward", dims({{"N", N}, {"H", H}}), 1, 11.0 * n, 3 * kAct * n, Roof::kFp32,
         gated_forward_call(x_, N, H, true)});
  }
  // Each q and k head read, normalised in place and saved in fp32.
  template <class O>
  void head_rmsnorm_forward(O*, float*, float*, const float*, const float*, size_t N, int NH,
                            int NKV, int D, size_t row_stride, float, float) {
    const double n = double(N) * (NH + NKV) * D;
    add({"q/k norm", "forward", dims({{"N", N}, {"heads", NH + NKV}, {"D", D}}), 1, 4.0 * n,
         (2.0 * sizeof(O) + 4.0) * n, Roof::kFp32,
         head_rmsnorm_forward_call(x_, N, NH, NKV, D, row_stride)});
  }
  // Clearing a gradient buffer before a post-norm's backward: memory traffic the step's other rows
  // dwarf, not a kernel.
  void zero(float*, size_t) {}
  void copy_floats(float*, const float*, size_t) {}
  // A sublayer's output normalised before its residual add (Gemma 2, 3): RMSNorm in fp32.
  void post_norm_forward(float*, float*, const float*, const float*, size_t N, int C, float) {
    add({"post-norm", "forward", dims({{"N", N}, {"C", C}}), 1, 4.0 * N * C,
         8.0 * N * C + 4.0 * N + 4.0 * C, Roof::kFp32,
         rmsnorm_forward_call({x_.k, x_.h, false}, N, C)});
  }
  // The head's logits soft-capped (Gemma 2, 3), and their gradient through the cap.
  void softcap_forward(float*, size_t N, float) {
    add({"logit soft-cap", "forward", dims({{"N", N}}), 1, 3.0 * N, 8.0 * N, Roof::kFp32,
         softcap_call(x_, N, false)});
  }
  void softcap_backward(float*, const float*, size_t N, float) {
    add({"logit soft-cap", "backward", dims({{"N", N}}), 1, 3.0 * N, 12.0 * N, Roof::kFp32,
         softcap_call(x_, N, true)});
  }
  // The embedding's scale (Gemma) and its gradient's, one row for the two calls of a step: one
  // read and write of each value.
  void scale(float*, float, size_t N) {
    add({"embedding scale", "forward, backward", dims({{"N", N}}), 1, double(N), 8.0 * N,
         Roof::kFp32, scale_call(x_, N)});
  }
  void gelu_forward(G*, const G*, size_t N) {
    add({"gelu", "forward", dims({{"N", N}}), 1, 10.0 * N, 2 * kAct * N, Roof::kFp32,
         gelu_forward_call(x_, N)});
  }
  void residual_forward(float*, const float*, const float*, size_t N) {
    add({"residual", "forward", dims({{"N", N}}), 1, double(N), 12.0 * N, Roof::kFp32,
         residual_call(x_, N)});
  }

  // LoRA's ops (a module of rank r on N rows, `in` inputs, `rows` outputs): A's product forward
  // 2 N in r; the rank update of the output 2 N r rows (its block read and written); backward
  // gB and dB 4 N rows r (the output's gradient read twice), dA 2 N in r and dinp's rank update
  // 2 N r in (dinp read and written).
  void lora_down(float*, const G*, const LoraModuleView& m, size_t N, int r) {
    const double n = N, in = m.p.in;
    add({"lora A", "forward", dims({{"N", N}, {"in", m.p.in}, {"r", r}}), 1, 2.0 * n * in * r,
         kAct * (n * in + in * r) + 4.0 * n * r, kGemmRoof,
         matmul_forward_call(x_, N, int(m.p.in), r, false, false)});
  }
  template <class O>
  void lora_up(O*, size_t, const LoraModuleView& m, size_t N, int r, float) {
    const double n = N, rows = m.p.rows;
    add({"lora B", "forward", dims({{"N", N}, {"r", r}, {"rows", m.p.rows}}), 1,
         2.0 * n * r * rows, 2.0 * sizeof(O) * n * rows + 4.0 * (n * r + r * rows), Roof::kFp32,
         lora_rank_update_call(x_, N, r, int(m.p.rows), std::is_same_v<O, bf16>)});
  }
  void lora_up_backward(float*, const float*, size_t, const LoraModuleView& m, size_t N, int r,
                        float) {
    const double n = N, rows = m.p.rows;
    add({"lora B", "backward", dims({{"N", N}, {"r", r}, {"rows", m.p.rows}}), 1,
         4.0 * n * rows * r, 8.0 * n * rows + 4.0 * (2 * n * r + 3 * rows * r), Roof::kFp32,
         lora_up_backward_call(x_, N, int(m.p.rows), r)});
  }
  void lora_down_backward(float*, float*, const float*, const G*, const LoraModuleView& m,
                          size_t N, int r, float, uint64_t) {
    const double n = N, in = m.p.in;
    add({"lora A", "backward (dA)", dims({{"N", N}, {"in", m.p.in}, {"r", r}}), 1,
         2.0 * n * in * r, 4.0 * n * r + kAct * n * in + 8.0 * in * r, kGemmRoof,
         matmul_backward_call(x_, N, int(m.p.in), r, false, false, true)});
    add({"lora A", "backward (dinp)", dims({{"N", N}, {"in", m.p.in}, {"r", r}}), 1,
         2.0 * n * r * in, 8.0 * n * in + 4.0 * (n * r + r * in), Roof::kFp32,
         lora_rank_update_call(x_, N, r, int(m.p.in), false)});
  }
  template <class... A>
  void lora_dropout(A&&...) {}  // a bench step has no dropout

  void encoder_backward(float*, float* dwpe, const float*, const int*, int B, int T, int C) {
    const double BT = double(B) * T, p = dwpe ? 1 : 0;
    add({"encoder", "backward", dims({{"B", B}, {"T", T}, {"C", C}}), 1, (1 + p) * BT * C,
         4.0 * (BT + (2 + p) * BT * C + p * 2.0 * T * C), Roof::kFp32,
         encoder_backward_call(x_, B, T, C, V_, Vp_, dwpe != nullptr)});
  }
  void layernorm_backward(float*, float*, float*, const float*, const float*, const float*,
                          const float*, const float*, size_t N, int C) {
    add({"layernorm", "backward", dims({{"N", N}, {"C", C}}), 1, 14.0 * N * C,
         16.0 * N * C + 8.0 * N + 20.0 * C, Roof::kFp32, layernorm_backward_call(x_, N, C)});
  }
  // A frozen weight's (dweight null: LoRA's base) is dinp's product alone.
  void matmul_backward(float*, float* dweight, float* dbias, const float*, const G*,
                       const float* weight, size_t N, int C, int OC) {
    const double n = N, ic = C, oc = OC, w = dweight ? 1 : 0;
    add({matmul_name(weight), dweight ? "backward" : "backward (dinp)",
         dims({{"N", N}, {"C", C}, {"OC", OC}}), 1, (2.0 + 2.0 * w) * n * ic * oc,
         4.0 * n * oc + kAct * (w * n * ic + oc * ic) + 4.0 * n * ic + w * 8.0 * oc * ic +
             (dbias ? 8.0 * oc : 0),
         kGemmRoof, matmul_backward_call(x_, N, C, OC, dbias != nullptr, true, dweight != nullptr)});
  }
  void attention_backward(int, float*, const float*, const G*, const G*, const float*, int B, int T,
                          int NH, int NKV, int D, const AttentionOptions& opt) {
    const double BT = double(B) * T, q = double(NH) * D, kv = double(NKV) * D;
    add({"attention", "backward", attention_dims(B, T, NH, NKV, D, opt), 1,
         10.0 * pairs(B, T, NH, opt) * D,
         4.0 * BT * q + kAct * BT * (2 * q + 2 * kv) + 4.0 * B * NH * T + 4.0 * BT * (q + 2 * kv),
         kGemmRoof, attention_backward_call(x_, B, T, NH, NKV, D, opt)});
  }
  void rmsnorm_backward(float*, float*, const float*, const float*, const float*, const float*,
                        size_t N, int C) {
    add({"rmsnorm", "backward", dims({{"N", N}, {"C", C}}), 1, 11.0 * N * C,
         16.0 * N * C + 4.0 * N + 12.0 * C, Roof::kFp32, rmsnorm_backward_call(x_, N, C)});
  }
  void rope_backward(float*, const float*, const float*, size_t N, int T, int heads, int D,
                     size_t row_stride) {
    const double n = double(N) * heads * D;
    add({"rope", "backward", dims({{"N", N}, {"heads", heads}, {"D", D}}), 1, 3.0 * n,
         8.0 * n + 8.0 * T * (D / 2), Roof::kFp32,
         rope_backward_call(x_, N, T, heads, D, row_stride)});
  }
  void swiglu_backward(float*, const float*, const G*, size_t N, int H) {
    const double n = double(N) * H;
    add({"swiglu", "backward", dims({{"N", N}, {"H", H}}), 1, 20.0 * n, (2 * kAct + 12.0) * n,
         Roof::kFp32, gated_backward_call(x_, N, H, false)});
  }
  void geglu_backward(float*, const float*, const G*, size_t N, int H) {
    const double n = double(N) * H;
    add({"geglu", "backward", dims({{"N", N}, {"H", H}}), 1, 22.0 * n, (2 * kAct + 12.0) * n,
         Roof::kFp32, gated_backward_call(x_, N, H, true)});
  }
  void head_rmsnorm_backward(float*, float*, float*, const float*, const float*, const float*,
                             const float*, size_t N, int NH, int NKV, int D, size_t row_stride,
                             float) {
    const double n = double(N) * (NH + NKV) * D;
    add({"q/k norm", "backward", dims({{"N", N}, {"heads", NH + NKV}, {"D", D}}), 1, 8.0 * n,
         12.0 * n, Roof::kFp32, head_rmsnorm_backward_call(x_, N, NH, NKV, D, row_stride)});
  }
  void gelu_backward(float*, const G*, const float*, size_t N) {
    add({"gelu", "backward", dims({{"N", N}}), 1, 20.0 * N, (kAct + 8.0) * N, Roof::kFp32,
         gelu_backward_call(x_, N)});
  }

  void softmax_xent_forward(float*, float*, const float*, const int*, size_t N, int V, int Vp) {
    add({"softmax + cross-entropy", "forward", dims({{"N", N}, {"V", V}, {"Vp", Vp}}), 1,
         3.0 * N * V, 4.0 * N * Vp + 12.0 * N, Roof::kFp32,
         softmax_xent_forward_call(x_, N, V, Vp)});
  }
  void softmax_xent_backward(float*, const float*, const int*, float, size_t N, int V, int Vp) {
    add({"softmax + cross-entropy", "backward", dims({{"N", N}, {"V", V}, {"Vp", Vp}}), 1,
         3.0 * N * V, 8.0 * N * Vp + 12.0 * N, Roof::kFp32,
         softmax_xent_backward_call(x_, N, V, Vp)});
  }

  // Not an executor's: the optimizer's passes over the gradients (run_bench's step, as the
  // trainer's: the norm for clipping after the backward pass, then AdamW, which scales each
  // gradient by the clipping factor and zeroes it for the next step; the step zeroes nothing else).
  // The norm reads each fp32 gradient and makes a multiply-add; AdamW reads parameter, moments and
  // gradient, writes all four back (and the bf16 copy), and makes 14 operations.
  void gradient_norm(size_t P) {
    add({"gradient norm", "update", dims({{"params", P}}), 1, 2.0 * P, 4.0 * P, Roof::kFp32,
         gradient_norm_call(x_, P)});
  }
  void adamw_update(size_t P) {
    add({"adamw", "update", dims({{"params", P}}), 1, 14.0 * P, (32.0 + (kBf16 ? 2 : 0)) * P,
         Roof::kFp32, adamw_call(x_, P)});
  }

 private:
  static constexpr bool kBf16 = std::is_same_v<G, bf16>;
  static constexpr double kAct = sizeof(G);  // bytes of a GEMM-input activation or weight
  static constexpr Roof kGemmRoof = kBf16 ? Roof::kBf16 : Roof::kFp32;

  // One more call of a row's op, or a new row.
  void add(LayerOp op) {
    for (LayerOp& r : ops_) {
      if (r.op == op.op && r.pass == op.pass && r.shape == op.shape && r.flops == op.flops &&
          r.bytes == op.bytes) {
        ++r.per_step;
        return;
      }
    }
    ops_.push_back(std::move(op));
  }

  // The weight's tensor by its offset in the parameter array; the head's GEMMs read wte.
  std::string matmul_name(const float* weight) const {
    const size_t at = size_t(weight - params_);
    int t = 0;  // the last role starting at or before `at` (roles of size 0 start where the next does)
    while (t + 1 < kNumTensorRoles && at >= layout_.offset(t + 1)) ++t;
    switch (t) {
      case kWte:
      case kLmHead:
        return "matmul lm head";
      case kQkvw:
        return "matmul qkv";
      case kAttprojw:
        return "matmul attention proj";
      case kFcw:
        return "matmul fc";
      case kFcprojw:
        return "matmul fc proj";
      default:
        return std::string("matmul ") + layout_.name(t);
    }
  }

  static std::string dims(std::initializer_list<std::pair<const char*, size_t>> d) {
    std::string s;
    for (const auto& [name, value] : d) {
      if (!s.empty()) s += ' ';
      s.append(name).append("=").append(std::to_string(value));
    }
    return s;
  }
  static std::string attention_dims(int B, int T, int NH, int NKV, int D,
                                    const AttentionOptions& opt) {
    std::string s = NKV == NH ? dims({{"B", B}, {"T", T}, {"NH", NH}, {"hs", D}})
                              : dims({{"B", B}, {"T", T}, {"NH", NH}, {"NKV", NKV}, {"hs", D}});
    if (opt.window > 0) s += " " + dims({{"W", size_t(opt.window)}});
    return s;
  }
  // (query, key) pairs of causal attention with key <= query, over every sequence and head.
  // The (query, key) pairs attention scores: T (T + 1) / 2 per head causally, fewer in a window.
  static double pairs(int B, int T, int NH, const AttentionOptions& opt) {
    const double t = T, w = opt.window > 0 && opt.window < T ? opt.window : t;
    return double(B) * NH * (w * (w + 1) / 2 + (t - w) * w);
  }
  OpKernels x_;
  ParameterLayout layout_;
  int V_, Vp_;  // the token ids' range and wte's rows
  const float* params_;
  std::vector<LayerOp> ops_;
};

}  // namespace llmcpu::bench
