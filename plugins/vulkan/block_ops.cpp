// The block ops of block_ops.h as dispatches: push constants with the Refs' element offsets,
// bindings of whole buffers, workgroup counts (kernels.h has the push structs, shaders/ the math).
// Deliberately not here: barriers between ops, submission, buffer allocation, shape planning. The
// only barriers recorded are inside an op whose second dispatch reads the first's output
// (attention_backward's two passes; a GEMM split along k, see kMaxGemmK);
// flash_attention_backward's two passes need none.
#include "plugins/vulkan/block_ops.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "plugins/vulkan/stream.h"

namespace llmcpu::vk {
namespace {

// llvmpipe (lavapipe) ends all loops of one shader invocation, silently, after 65535 iterations in
// total; gemm.comp spends about 23 per 16-wide slice of k, so a GEMM's k range is dispatched in
// pieces of at most kMaxGemmK terms, each after the first adding into C (the bias only once),
// with a barrier between them. Only sums over more than 32768 terms (the
// lm_head's dinp over V) take more than one dispatch.
constexpr uint32_t kMaxGemmK = 32768;

// The whole buffer of a Ref as a binding; a missing optional operand binds `fallback` instead
// (the shader does not read it, but every binding must name a buffer).
Binding bind(const Ref& r) { return {r.buf, 0, r.bytes}; }
Binding bind_or(const Ref& r, const Ref& fallback) {
  return r.buf != VK_NULL_HANDLE ? bind(r) : bind(fallback);
}

uint32_t groups(uint64_t n, uint32_t per_group) {
  return uint32_t((n + per_group - 1) / per_group);
}

// Workgroup counts for a flat numbering of `count` workgroups (shaders/grid.glsl).
struct Grid {
  uint32_t x, y;
};
Grid flat_grid(uint32_t count) {
  const uint32_t x = std::min(count, kMaxGroupsX);
  return {x, x ? (count + x - 1) / x : 0};
}

void check(bool ok, const char* op, const std::string& what) {
  if (!ok) throw VulkanError(std::string("block_ops.cpp: ") + op + ": " + what);
}

// The bf16 ops need 16-bit loads and stores in storage buffers; without them the engine reports
// this message (and keeps the bf16 path on the CPU).
void require_bf16(const Kernels& k, const char* op) {
  check(k.device().bf16_storage(), op,
        std::string(k.device().name()) +
            " lacks the Vulkan 1.1 feature storageBuffer16BitAccess that bf16 storage needs");
}

// C(m,n) (+)= sum_k A(m,k) B(k,n) [+ bias(n)] with the gemm.comp variant `kernel` (how A and B are
// read); offsets and strides in the elements of each operand's buffer.
void record_gemm(Kernels& k, Kernel kernel, const char* op, VkCommandBuffer cb, Ref c, Ref a, Ref b,
                 Ref bias, uint32_t M, uint32_t N, uint32_t K, uint32_t a_sm, uint32_t a_sk,
                 uint32_t b_sk, uint32_t b_sn, uint32_t c_sm, uint32_t flags) {
  if (M == 0 || N == 0) return;
  check(bias.buf != VK_NULL_HANDLE || !(flags & kGemmBias), op, "kGemmBias without a bias");
  const GemmPush pc{M, N, K, a.off, a_sm, a_sk, b.off, b_sk, b_sn, c.off, c_sm, bias.off, flags};
  const Binding binds[4] = {bind(a), bind(b), bind(c), bind_or(bias, c)};
  // K = 0 still runs once: C = bias (or 0), or C unchanged when accumulating.
  for (uint32_t k0 = 0; k0 < K || k0 == 0; k0 += kMaxGemmK) {
    GemmPush piece = pc;
    piece.K = std::min(kMaxGemmK, K - k0);
    piece.a_off += k0 * a_sk;
    piece.b_off += k0 * b_sk;
    if (k0 > 0) {
      piece.flags = (flags & ~kGemmBias) | kGemmAccumulate;
      Stream::compute_barrier(cb);  // the previous piece's C is read
    }
    k.dispatch(cb, kernel, {binds[0], binds[1], binds[2], binds[3]}, &piece, sizeof piece,
               groups(N, kGemmTile), groups(M, kGemmTile), 1);
  }
}

// dbias (OC) += column sums of the fp32 dout (N,OC) (shaders/colsum.comp).
void record_bias_sum(Kernels& k, const char* op, VkCommandBuffer cb, Ref dbias, Ref dout,
                     uint32_t N, uint32_t OC) {
  if (OC == 0) return;
  check(dbias.buf != VK_NULL_HANDLE, op, "has_bias without a dbias buffer");
  const ColsumPush pc{N, OC, OC, dout.off, 1, dbias.off};
  k.dispatch(cb, Kernel::kColsum, {bind(dout), bind(dbias)}, &pc, sizeof pc, groups(OC, 64), 1, 1);
}

void record_attention_forward(Kernels& k, Kernel kernel, const char* op, VkCommandBuffer cb,
                              Ref out, Ref att, Ref qkv, uint32_t nb, uint32_t T, uint32_t C,
                              uint32_t NH) {
  check(NH > 0 && C % NH == 0, op,
        "C = " + std::to_string(C) + " is not a multiple of NH = " + std::to_string(NH));
  if (nb == 0 || T == 0) return;
  const uint32_t hs = C / NH;
  AttentionPush pc{T, C, NH, hs, 1.0f / std::sqrt(float(hs)), 0};
  pc.qkv_off = qkv.off, pc.out_off = out.off, pc.att_off = att.off;
  k.dispatch(cb, kernel, {bind(qkv), bind(out), bind(att)}, &pc, sizeof pc, T, NH, nb);
}

void record_attention_backward(Kernels& k, Kernel kernel, const char* op, VkCommandBuffer cb,
                               Ref dqkv, Ref ds, Ref dout, Ref qkv, Ref att, uint32_t nb,
                               uint32_t T, uint32_t C, uint32_t NH) {
  check(NH > 0 && C % NH == 0, op,
        "C = " + std::to_string(C) + " is not a multiple of NH = " + std::to_string(NH));
  if (nb == 0 || T == 0) return;
  const uint32_t hs = C / NH;
  AttentionPush pc{T, C, NH, hs, 1.0f / std::sqrt(float(hs)), 0};
  pc.qkv_off = qkv.off, pc.att_off = att.off, pc.dout_off = dout.off;
  pc.dqkv_off = dqkv.off, pc.ds_off = ds.off;
  for (uint32_t pass = 0; pass < 2; ++pass) {
    pc.pass = pass;
    if (pass == 1) Stream::compute_barrier(cb);  // pass 1 reads the ds of pass 0
    k.dispatch(cb, kernel, {bind(dout), bind(qkv), bind(att), bind(dqkv), bind(ds)}, &pc, sizeof pc,
               T, NH, nb);
  }
}

// Flash attention's shape: C a multiple of NH, a head size the shaders hold (HS_MAX).
uint32_t flash_head_size(const char* op, uint32_t C, uint32_t NH) {
  check(NH > 0 && C % NH == 0, op,
        "C = " + std::to_string(C) + " is not a multiple of NH = " + std::to_string(NH));
  const uint32_t hs = C / NH;
  check(hs <= kFlashMaxHeadSize, op,
        "head size C / NH = " + std::to_string(hs) + " is above the " +
            std::to_string(kFlashMaxHeadSize) + " the flash attention shaders hold");
  return hs;
}

// One workgroup per (block of kFlashBlock query rows, head, batch element).
void record_flash_attention_forward(Kernels& k, Kernel kernel, const char* op, VkCommandBuffer cb,
                                    Ref out, Ref lse, Ref qkv, uint32_t nb, uint32_t T, uint32_t C,
                                    uint32_t NH) {
  const uint32_t hs = flash_head_size(op, C, NH);
  if (nb == 0 || T == 0) return;
  FlashAttentionPush pc{T, C, NH, hs, 1.0f / std::sqrt(float(hs)), 0};
  pc.qkv_off = qkv.off, pc.out_off = out.off, pc.lse_off = lse.off;
  k.dispatch(cb, kernel, {bind(qkv), bind(out), bind(lse)}, &pc, sizeof pc, groups(T, kFlashBlock),
             NH, nb);
}

// Pass 0 (dk, dv per key block) and pass 1 (dq per query block) write different parts of dqkv and
// read only the inputs: no barrier between them.
void record_flash_attention_backward(Kernels& k, Kernel kernel, const char* op, VkCommandBuffer cb,
                                     Ref dqkv, Ref dout, Ref out, Ref qkv, Ref lse, uint32_t nb,
                                     uint32_t T, uint32_t C, uint32_t NH) {
  const uint32_t hs = flash_head_size(op, C, NH);
  if (nb == 0 || T == 0) return;
  FlashAttentionPush pc{T, C, NH, hs, 1.0f / std::sqrt(float(hs)), 0};
  pc.qkv_off = qkv.off, pc.out_off = out.off, pc.lse_off = lse.off;
  pc.dout_off = dout.off, pc.dqkv_off = dqkv.off;
  for (uint32_t pass = 0; pass < 2; ++pass) {
    pc.pass = pass;
    k.dispatch(cb, kernel, {bind(dout), bind(out), bind(qkv), bind(lse), bind(dqkv)}, &pc,
               sizeof pc, groups(T, kFlashBlock), NH, nb);
  }
}

void record_layernorm_forward(Kernels& k, Kernel kernel, const char* op, VkCommandBuffer cb,
                              Ref out, Ref mean, Ref rstd, Ref inp, Ref weight, Ref bias,
                              uint32_t N, uint32_t C) {
  check(C > 0, op, "C = 0");
  if (N == 0) return;
  const LayerNormForwardPush pc{N, C, out.off, mean.off, rstd.off, inp.off, weight.off, bias.off};
  const Grid g = flat_grid(N);  // one workgroup per row
  k.dispatch(cb, kernel, {bind(inp), bind(weight), bind(bias), bind(out), bind(mean), bind(rstd)},
             &pc, sizeof pc, g.x, g.y, 1);
}

void record_gelu_forward(Kernels& k, Kernel kernel, VkCommandBuffer cb, Ref out, Ref inp,
                         uint32_t n) {
  if (n == 0) return;
  const GeluPush pc{n, out.off, inp.off, 0};
  const Grid g = flat_grid(groups(n, 256));
  k.dispatch(cb, kernel, {bind(inp), bind(out)}, &pc, sizeof pc, g.x, g.y, 1);
}

void record_gelu_backward(Kernels& k, Kernel kernel, VkCommandBuffer cb, Ref dinp, Ref inp,
                          Ref dout, uint32_t n) {
  if (n == 0) return;
  const GeluPush pc{n, dinp.off, inp.off, dout.off};
  const Grid g = flat_grid(groups(n, 256));
  k.dispatch(cb, kernel, {bind(inp), bind(dout), bind(dinp)}, &pc, sizeof pc, g.x, g.y, 1);
}

}  // namespace

void BlockOps::gemm(VkCommandBuffer cb, Ref c, Ref a, Ref b, Ref bias, uint32_t M, uint32_t N,
                    uint32_t K, uint32_t a_sm, uint32_t a_sk, uint32_t b_sk, uint32_t b_sn,
                    uint32_t c_sm, uint32_t flags) {
  record_gemm(k_, Kernel::kGemm, "gemm", cb, c, a, b, bias, M, N, K, a_sm, a_sk, b_sk, b_sn, c_sm,
              flags);
}

// out (N,OC) = inp (N,C) W^T [+ b]:  A = inp (a_sm = C, a_sk = 1), B(k,n) = W[n,k] (b_sk = 1,
// b_sn = C).
void BlockOps::matmul_forward(VkCommandBuffer cb, Ref out, Ref inp, Ref weight, Ref bias,
                              bool has_bias, uint32_t N, uint32_t C, uint32_t OC) {
  gemm(cb, out, inp, weight, has_bias ? bias : Ref{}, N, OC, C, C, 1, 1, C, OC,
       has_bias ? kGemmBias : 0);
}

// dinp (N,C) (+)= dout (N,OC) W:  A = dout (a_sm = OC, a_sk = 1), B(k,n) = W[k,n] (b_sk = C,
// b_sn = 1).
void BlockOps::matmul_backward_input(VkCommandBuffer cb, Ref dinp, Ref dout, Ref weight, uint32_t N,
                                     uint32_t C, uint32_t OC, bool accumulate) {
  gemm(cb, dinp, dout, weight, Ref{}, N, C, OC, OC, 1, C, 1, C, accumulate ? kGemmAccumulate : 0);
}

// dW (OC,C) += dout^T inp:  A(m,k) = dout[k,m] (a_sm = 1, a_sk = OC), B = inp (b_sk = C, b_sn = 1);
// dbias (OC) += column sums of dout (shaders/colsum.comp). The two write different buffers.
void BlockOps::matmul_backward_weight(VkCommandBuffer cb, Ref dweight, Ref dbias, bool has_bias,
                                      Ref dout, Ref inp, uint32_t N, uint32_t C, uint32_t OC) {
  gemm(cb, dweight, dout, inp, Ref{}, OC, C, N, 1, OC, C, 1, C, kGemmAccumulate);
  if (has_bias) record_bias_sum(k_, "matmul_backward_weight", cb, dbias, dout, N, OC);
}

void BlockOps::attention_forward(VkCommandBuffer cb, Ref out, Ref att, Ref qkv, uint32_t nb,
                                 uint32_t T, uint32_t C, uint32_t NH) {
  record_attention_forward(k_, Kernel::kAttentionForward, "attention_forward", cb, out, att, qkv,
                           nb, T, C, NH);
}

void BlockOps::attention_backward(VkCommandBuffer cb, Ref dqkv, Ref ds, Ref dout, Ref qkv, Ref att,
                                  uint32_t nb, uint32_t T, uint32_t C, uint32_t NH) {
  record_attention_backward(k_, Kernel::kAttentionBackward, "attention_backward", cb, dqkv, ds,
                            dout, qkv, att, nb, T, C, NH);
}

void BlockOps::flash_attention_forward(VkCommandBuffer cb, Ref out, Ref lse, Ref qkv, uint32_t nb,
                                       uint32_t T, uint32_t C, uint32_t NH) {
  record_flash_attention_forward(k_, Kernel::kFlashAttentionForward, "flash_attention_forward", cb,
                                 out, lse, qkv, nb, T, C, NH);
}

void BlockOps::flash_attention_backward(VkCommandBuffer cb, Ref dqkv, Ref dout, Ref out, Ref qkv,
                                        Ref lse, uint32_t nb, uint32_t T, uint32_t C, uint32_t NH) {
  record_flash_attention_backward(k_, Kernel::kFlashAttentionBackward, "flash_attention_backward",
                                  cb, dqkv, dout, out, qkv, lse, nb, T, C, NH);
}

void BlockOps::encoder_forward(VkCommandBuffer cb, Ref out, Ref tokens, Ref wte, Ref wpe,
                               uint32_t N, uint32_t T, uint32_t C, uint32_t vocab_lo,
                               uint32_t vocab_hi) {
  check(T > 0, "encoder_forward", "T = 0");
  if (N == 0 || C == 0 || vocab_hi <= vocab_lo) return;
  const EncoderForwardPush pc{N, T, C, vocab_lo, vocab_hi, out.off, tokens.off, wte.off, wpe.off};
  const Grid g = flat_grid(groups(uint64_t(N) * C, 256));
  k_.dispatch(cb, Kernel::kEncoderForward, {bind(tokens), bind(wte), bind(wpe), bind(out)}, &pc,
              sizeof pc, g.x, g.y, 1);
}

void BlockOps::encoder_backward(VkCommandBuffer cb, Ref dwte, Ref dwpe, bool with_wpe, Ref dout,
                                Ref tokens, uint32_t N, uint32_t T, uint32_t C, uint32_t vocab_lo,
                                uint32_t vocab_hi) {
  check(T > 0, "encoder_backward", "T = 0");
  if (N == 0 || C == 0) return;
  // dwte: one invocation per channel (mode 0).
  if (vocab_hi > vocab_lo) {
    const EncoderBackwardPush pc{N, T, C, vocab_lo, vocab_hi, dwte.off, dout.off, tokens.off, 0};
    const Grid g = flat_grid(groups(C, 64));
    k_.dispatch(cb, Kernel::kEncoderBackward, {bind(tokens), bind(dout), bind(dwte)}, &pc,
                sizeof pc, g.x, g.y, 1);
  }
  // dwpe: one invocation per (position, channel) (mode 1); writes another buffer than mode 0.
  if (with_wpe) {
    const EncoderBackwardPush pc{N, T, C, vocab_lo, vocab_hi, dwpe.off, dout.off, tokens.off, 1};
    const Grid g = flat_grid(groups(uint64_t(std::min(T, N)) * C, 64));
    k_.dispatch(cb, Kernel::kEncoderBackward, {bind(tokens), bind(dout), bind(dwpe)}, &pc,
                sizeof pc, g.x, g.y, 1);
  }
}

void BlockOps::layernorm_forward(VkCommandBuffer cb, Ref out, Ref mean, Ref rstd, Ref inp,
                                 Ref weight, Ref bias, uint32_t N, uint32_t C) {
  record_layernorm_forward(k_, Kernel::kLayerNormForward, "layernorm_forward", cb, out, mean, rstd,
                           inp, weight, bias, N, C);
}

void BlockOps::layernorm_backward(VkCommandBuffer cb, Ref dinp, Ref dweight, Ref dbias, Ref dout,
                                  Ref inp, Ref weight, Ref mean, Ref rstd, uint32_t N, uint32_t C) {
  check(C > 0, "layernorm_backward", "C = 0");
  if (N == 0) return;
  LayerNormBackwardPush pc{N,       C,          dinp.off, dweight.off, dbias.off, dout.off,
                           inp.off, weight.off, mean.off, rstd.off,    0};
  // The two passes write different buffers and read only the inputs: no barrier between them.
  for (uint32_t pass = 0; pass < 2; ++pass) {
    pc.pass = pass;
    const Grid g = flat_grid(pass == 0 ? N : groups(C, 64));  // rows; columns
    k_.dispatch(cb, Kernel::kLayerNormBackward,
                {bind(dout), bind(inp), bind(weight), bind(mean), bind(rstd), bind(dinp),
                 bind(dweight), bind(dbias)},
                &pc, sizeof pc, g.x, g.y, 1);
  }
}

void BlockOps::gelu_forward(VkCommandBuffer cb, Ref out, Ref inp, uint32_t n) {
  record_gelu_forward(k_, Kernel::kGeluForward, cb, out, inp, n);
}

void BlockOps::gelu_backward(VkCommandBuffer cb, Ref dinp, Ref inp, Ref dout, uint32_t n) {
  record_gelu_backward(k_, Kernel::kGeluBackward, cb, dinp, inp, dout, n);
}

void BlockOps::residual_forward(VkCommandBuffer cb, Ref out, Ref a, Ref b, uint32_t n) {
  if (n == 0) return;
  const ResidualPush pc{n, out.off, a.off, b.off};
  const Grid g = flat_grid(groups(n, 256));
  k_.dispatch(cb, Kernel::kResidualForward, {bind(a), bind(b), bind(out)}, &pc, sizeof pc, g.x, g.y,
              1);
}

void BlockOps::softmax_xent_forward(VkCommandBuffer cb, Ref losses, Ref lse, Ref logits,
                                    Ref targets, uint32_t N, uint32_t V, uint32_t Vp) {
  check(V > 0 && V <= Vp, "softmax_xent_forward",
        "needs 0 < V <= Vp, got V = " + std::to_string(V) + ", Vp = " + std::to_string(Vp));
  if (N == 0) return;
  const SoftmaxXentPush pc{N, V, Vp, losses.off, lse.off, logits.off, targets.off, 0.0f};
  const Grid g = flat_grid(N);  // one workgroup per row
  k_.dispatch(cb, Kernel::kSoftmaxXentForward,
              {bind(logits), bind(targets), bind(losses), bind(lse)}, &pc, sizeof pc, g.x, g.y, 1);
}

void BlockOps::softmax_xent_backward(VkCommandBuffer cb, Ref logits, Ref lse, Ref targets,
                                     float dloss, uint32_t N, uint32_t V, uint32_t Vp) {
  check(V > 0 && V <= Vp, "softmax_xent_backward",
        "needs 0 < V <= Vp, got V = " + std::to_string(V) + ", Vp = " + std::to_string(Vp));
  if (N == 0) return;
  const SoftmaxXentPush pc{N, V, Vp, 0, lse.off, logits.off, targets.off, dloss};
  const Grid g = flat_grid(groups(uint64_t(N) * Vp, 256));
  k_.dispatch(cb, Kernel::kSoftmaxXentBackward, {bind(logits), bind(lse), bind(targets)}, &pc,
              sizeof pc, g.x, g.y, 1);
}

// --- bf16 storage: the same recordings with the bf16 variants of the shaders. A bf16 Ref's `off`
// counts 16-bit elements of its buffer, and so do the strides of a bf16 GEMM operand.

// out (N,OC) = inp (N,C) W^T [+ b], A = inp and B = W both bf16 (the layout of matmul_forward).
void BlockOps::matmul_forward_bf16(VkCommandBuffer cb, Ref out, Ref inp, Ref weight, Ref bias,
                                   bool has_bias, uint32_t N, uint32_t C, uint32_t OC) {
  require_bf16(k_, "matmul_forward_bf16");
  record_gemm(k_, Kernel::kGemmHH, "matmul_forward_bf16", cb, out, inp, weight,
              has_bias ? bias : Ref{}, N, OC, C, C, 1, 1, C, OC, has_bias ? kGemmBias : 0);
}

// dinp (N,C) (+)= bf16(dout) (N,OC) W: A = dout rounded on load, B = W bf16.
void BlockOps::matmul_backward_input_bf16(VkCommandBuffer cb, Ref dinp, Ref dout, Ref weight,
                                          uint32_t N, uint32_t C, uint32_t OC, bool accumulate) {
  require_bf16(k_, "matmul_backward_input_bf16");
  record_gemm(k_, Kernel::kGemmRH, "matmul_backward_input_bf16", cb, dinp, dout, weight, Ref{}, N,
              C, OC, OC, 1, C, 1, C, accumulate ? kGemmAccumulate : 0);
}

// dW (OC,C) += bf16(dout)^T inp: A(m,k) = dout[k,m] rounded on load, B = inp bf16; dbias from the
// fp32 dout.
void BlockOps::matmul_backward_weight_bf16(VkCommandBuffer cb, Ref dweight, Ref dbias,
                                           bool has_bias, Ref dout, Ref inp, uint32_t N, uint32_t C,
                                           uint32_t OC) {
  require_bf16(k_, "matmul_backward_weight_bf16");
  record_gemm(k_, Kernel::kGemmRH, "matmul_backward_weight_bf16", cb, dweight, dout, inp, Ref{}, OC,
              C, N, 1, OC, C, 1, C, kGemmAccumulate);
  if (has_bias) record_bias_sum(k_, "matmul_backward_weight_bf16", cb, dbias, dout, N, OC);
}

// The variant of gemm.comp for each (a_type, b_type): F fp32, R fp32 rounded on load, H bf16.
void BlockOps::gemm_bf16(VkCommandBuffer cb, Ref c, Ref a, Elem a_type, Ref b, Elem b_type,
                         uint32_t M, uint32_t N, uint32_t K, uint32_t a_sm, uint32_t a_sk,
                         uint32_t b_sk, uint32_t b_sn, uint32_t c_sm, uint32_t flags) {
  static constexpr Kernel kByType[3][3] = {
      {Kernel::kGemm, Kernel::kGemmFR, Kernel::kGemmFH},
      {Kernel::kGemmRF, Kernel::kGemmRR, Kernel::kGemmRH},
      {Kernel::kGemmHF, Kernel::kGemmHR, Kernel::kGemmHH},
  };
  require_bf16(k_, "gemm_bf16");
  check(!(flags & kGemmBias), "gemm_bf16", "kGemmBias: gemm_bf16 takes no bias operand");
  check(size_t(a_type) < 3 && size_t(b_type) < 3, "gemm_bf16", "unknown Elem");
  record_gemm(k_, kByType[size_t(a_type)][size_t(b_type)], "gemm_bf16", cb, c, a, b, Ref{}, M, N, K,
              a_sm, a_sk, b_sk, b_sn, c_sm, flags);
}

void BlockOps::layernorm_forward_bf16(VkCommandBuffer cb, Ref out, Ref mean, Ref rstd, Ref inp,
                                      Ref weight, Ref bias, uint32_t N, uint32_t C) {
  require_bf16(k_, "layernorm_forward_bf16");
  record_layernorm_forward(k_, Kernel::kLayerNormForwardBf16, "layernorm_forward_bf16", cb, out,
                           mean, rstd, inp, weight, bias, N, C);
}

void BlockOps::attention_forward_bf16(VkCommandBuffer cb, Ref out, Ref att, Ref qkv, uint32_t nb,
                                      uint32_t T, uint32_t C, uint32_t NH) {
  require_bf16(k_, "attention_forward_bf16");
  record_attention_forward(k_, Kernel::kAttentionForwardBf16, "attention_forward_bf16", cb, out,
                           att, qkv, nb, T, C, NH);
}

void BlockOps::attention_backward_bf16(VkCommandBuffer cb, Ref dqkv, Ref ds, Ref dout, Ref qkv,
                                       Ref att, uint32_t nb, uint32_t T, uint32_t C, uint32_t NH) {
  require_bf16(k_, "attention_backward_bf16");
  record_attention_backward(k_, Kernel::kAttentionBackwardBf16, "attention_backward_bf16", cb, dqkv,
                            ds, dout, qkv, att, nb, T, C, NH);
}

void BlockOps::flash_attention_forward_bf16(VkCommandBuffer cb, Ref out, Ref lse, Ref qkv,
                                            uint32_t nb, uint32_t T, uint32_t C, uint32_t NH) {
  require_bf16(k_, "flash_attention_forward_bf16");
  record_flash_attention_forward(k_, Kernel::kFlashAttentionForwardBf16,
                                 "flash_attention_forward_bf16", cb, out, lse, qkv, nb, T, C, NH);
}

void BlockOps::flash_attention_backward_bf16(VkCommandBuffer cb, Ref dqkv, Ref dout, Ref out,
                                             Ref qkv, Ref lse, uint32_t nb, uint32_t T, uint32_t C,
                                             uint32_t NH) {
  require_bf16(k_, "flash_attention_backward_bf16");
  record_flash_attention_backward(k_, Kernel::kFlashAttentionBackwardBf16,
                                  "flash_attention_backward_bf16", cb, dqkv, dout, out, qkv, lse,
                                  nb, T, C, NH);
}

void BlockOps::gelu_forward_bf16(VkCommandBuffer cb, Ref out, Ref inp, uint32_t n) {
  require_bf16(k_, "gelu_forward_bf16");
  record_gelu_forward(k_, Kernel::kGeluForwardBf16, cb, out, inp, n);
}

void BlockOps::gelu_backward_bf16(VkCommandBuffer cb, Ref dinp, Ref inp, Ref dout, uint32_t n) {
  require_bf16(k_, "gelu_backward_bf16");
  record_gelu_backward(k_, Kernel::kGeluBackwardBf16, cb, dinp, inp, dout, n);
}

void BlockOps::to_bf16(VkCommandBuffer cb, Ref out, Ref in, uint32_t n) {
  require_bf16(k_, "to_bf16");
  if (n == 0) return;
  const ToBf16Push pc{n, out.off, in.off};
  const Grid g = flat_grid(groups(n, 256));
  k_.dispatch(cb, Kernel::kToBf16, {bind(in), bind(out)}, &pc, sizeof pc, g.x, g.y, 1);
}

void BlockOps::adamw(VkCommandBuffer cb, Ref param, Ref m, Ref v, Ref grad, uint32_t n,
                     const AdamWConstants& s) {
  if (n == 0) return;
  const AdamWPush pc{n,       param.off, m.off,       v.off,      grad.off, s.decay,
                     s.beta1, s.beta2,   s.step_size, s.bc2_sqrt, s.eps,    s.grad_scale};
  const Grid g = flat_grid(groups(n, 256));
  k_.dispatch(cb, adamw_exact() ? Kernel::kAdamW : Kernel::kAdamWF32,
              {bind(param), bind(m), bind(v), bind(grad)}, &pc, sizeof pc, g.x, g.y, 1);
}

bool BlockOps::adamw_exact() const { return !adamw_float32_only_ && k_.available(Kernel::kAdamW); }

void BlockOps::sum_squares(VkCommandBuffer cb, Ref partials, Ref x, uint32_t n) {
  if (n == 0) return;
  const SumSquaresPush pc{n, partials.off, x.off};
  const Grid g = flat_grid(sum_squares_blocks(n));  // one workgroup per block
  k_.dispatch(cb, Kernel::kSumSquares, {bind(x), bind(partials)}, &pc, sizeof pc, g.x, g.y, 1);
}

uint32_t BlockOps::sum_squares_block() { return kSumSquaresBlock; }

}  // namespace llmcpu::vk
