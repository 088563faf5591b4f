// The compute pipelines (one per shader in shaders/, SPIR-V compiled at build time) and the
// recording of one dispatch: descriptor set from a pool that is reset at the start of every op,
// push constants, workgroup counts. Every binding is checked against maxStorageBufferRange and the
// offset alignment. Not here: which buffers an op binds (block_ops.cpp), command buffer submission
// (stream.h).
#pragma once

#include <initializer_list>
#include <vector>

#include "plugins/vulkan/device.h"

namespace llmcpu::vk {

enum class Kernel {
  kGemm,
  kColsum,
  kAttentionForward,
  kAttentionBackward,
  kEncoderForward,
  kEncoderBackward,
  kLayerNormForward,
  kLayerNormBackward,
  kGeluForward,
  kGeluBackward,
  kResidualForward,
  kSoftmaxXentForward,
  kSoftmaxXentBackward,
  kSumSquares,
  kAdamW,     // sqrt and division in double, correctly rounded (needs shaderFloat64)
  kAdamWF32,  // float only: sqrt and division to Vulkan's precision
  // bf16 storage variants (need storageBuffer16BitAccess). GEMMs by how A and B are read: F fp32,
  // R fp32 rounded to bf16 on load, H bf16 (kGemm is FF).
  kGemmFR,
  kGemmFH,
  kGemmRF,
  kGemmRR,
  kGemmRH,
  kGemmHF,
  kGemmHR,
  kGemmHH,
  kLayerNormForwardBf16,   // bf16 out
  kAttentionForwardBf16,   // bf16 qkv and out
  kAttentionBackwardBf16,  // bf16 qkv
  kGeluForwardBf16,        // bf16 inp and out
  kGeluBackwardBf16,       // bf16 inp
  kToBf16,
  // Flash attention (keeps lse (nb,NH,T) instead of the (nb,NH,T,T) matrix): fp32, then bf16 qkv
  // and out.
  kFlashAttentionForward,
  kFlashAttentionBackward,
  kFlashAttentionForwardBf16,
  kFlashAttentionBackwardBf16,
  kFmaPeak,  // the fp32 FMA roof of llmcpu_vulkan_probe; no pass runs it
  kCount
};

// Push constants of shaders/gemm.comp (see there): C(m,n) (+)= sum_k A(m,k) B(k,n) [+ bias(n)].
struct GemmPush {
  uint32_t M, N, K;
  uint32_t a_off, a_sm, a_sk;
  uint32_t b_off, b_sk, b_sn;
  uint32_t c_off, c_sm;
  uint32_t bias_off;
  uint32_t flags;
};
inline constexpr uint32_t kGemmBias = 1, kGemmAccumulate = 2;
inline constexpr uint32_t kGemmTile = 64;  // outputs per workgroup in m and n

// shaders/colsum.comp: s(s_off + n) (+)= sum_m d(d_off + m ld + n).
struct ColsumPush {
  uint32_t M, N, ld, d_off, accumulate, s_off;
};

// shaders/attention_forward.comp and attention_backward.comp. Every operand is an element offset
// into its binding; the forward reads qkv_off, out_off, att_off, the backward all but out_off.
struct AttentionPush {
  uint32_t T, C, NH, hs;
  float scale;
  uint32_t pass;  // backward only
  uint32_t qkv_off, out_off, att_off, dout_off, dqkv_off, ds_off;
};

// shaders/flash_attention_forward.comp and flash_attention_backward.comp. Every operand is an
// element offset into its binding; the forward reads qkv_off, out_off, lse_off.
struct FlashAttentionPush {
  uint32_t T, C, NH, hs;
  float scale;
  uint32_t pass;  // backward only: 0 dk and dv, 1 dq
  uint32_t qkv_off, out_off, lse_off, dout_off, dqkv_off;
};
inline constexpr uint32_t kFlashMaxHeadSize = 128;  // HS_MAX of both shaders
inline constexpr uint32_t kFlashBlock = 16;         // query rows per workgroup (BR)

// shaders/encoder_forward.comp.
struct EncoderForwardPush {
  uint32_t N, T, C, vocab_lo, vocab_hi;
  uint32_t out_off, tok_off, wte_off, wpe_off;
};
// shaders/encoder_backward.comp: mode 0 accumulates dwte (dst), mode 1 dwpe (dst).
struct EncoderBackwardPush {
  uint32_t N, T, C, vocab_lo, vocab_hi;
  uint32_t dst_off, dout_off, tok_off, mode;
};

// shaders/layernorm_forward.comp.
struct LayerNormForwardPush {
  uint32_t N, C;
  uint32_t out_off, mean_off, rstd_off, inp_off, w_off, b_off;
};
// shaders/layernorm_backward.comp: pass 0 dinp (rows), pass 1 dweight and dbias (columns).
struct LayerNormBackwardPush {
  uint32_t N, C;
  uint32_t dinp_off, dw_off, db_off, dout_off, inp_off, w_off, mean_off, rstd_off;
  uint32_t pass;
};

// shaders/gelu_forward.comp (reads inp, writes out) and gelu_backward.comp (out is dinp).
struct GeluPush {
  uint32_t n, out_off, inp_off, dout_off;
};

// shaders/residual_forward.comp.
struct ResidualPush {
  uint32_t n, out_off, a_off, b_off;
};

// shaders/softmax_xent_forward.comp and softmax_xent_backward.comp (in place on the logits).
struct SoftmaxXentPush {
  uint32_t N, V, Vp;
  uint32_t losses_off, lse_off, logits_off, targets_off;
  float dloss;  // backward only
};

// shaders/adamw.comp (both variants).
struct AdamWPush {
  uint32_t n, param_off, m_off, v_off, grad_off;
  float decay, beta1, beta2, step_size, bc2_sqrt, eps, grad_scale;
};

// shaders/to_bf16.comp: out (bf16, out_off in 16-bit elements) = bf16(in), n elements.
struct ToBf16Push {
  uint32_t n, out_off, in_off;
};

// shaders/sum_squares.comp: partials(out_off + j) = sum of x^2 over block j.
struct SumSquaresPush {
  uint32_t n, out_off, x_off;
};
inline constexpr uint32_t kSumSquaresBlock = 4096;  // elements per partial: 64 invocations x 64

// shaders/fma_peak.comp: n invocations, each 8 vec4 chains x = fma(x, m, c) of `iters` steps.
struct FmaPeakPush {
  uint32_t n, iters;
  float m, c;
};
inline constexpr uint32_t kFmaPeakFlopsPerStep = 64;  // 8 chains x 4 lanes x 2 flops

// Element-wise and row-wise kernels index workgroups in two dimensions (x below this many, then y),
// so that more than 65535 workgroups (Vulkan's guaranteed maxComputeWorkGroupCount) fit.
inline constexpr uint32_t kMaxGroupsX = 65535;

struct Binding {
  VkBuffer buffer;
  size_t offset;  // bytes, a multiple of minStorageBufferOffsetAlignment
  size_t range;   // bytes, at most maxStorageBufferRange
};

class Kernels {
 public:
  explicit Kernels(Device& dev);
  ~Kernels();
  Kernels(const Kernels&) = delete;
  Kernels& operator=(const Kernels&) = delete;

  Device& device() const { return dev_; }
  // Whether the kernel's pipeline exists (kAdamW needs shaderFloat64, the bf16 variants
  // storageBuffer16BitAccess).
  bool available(Kernel k) const { return pipes_[size_t(k)].pipeline != VK_NULL_HANDLE; }

  // Frees every descriptor set handed out so far: call when no recorded work is pending.
  void reset_sets();
  void dispatch(VkCommandBuffer cb, Kernel k, std::initializer_list<Binding> bindings,
                const void* push, uint32_t push_size, uint32_t gx, uint32_t gy, uint32_t gz);

 private:
  struct Pipeline {
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkPipeline pipeline = VK_NULL_HANDLE;
    uint32_t bindings = 0;
    uint32_t push_size = 0;
    const char* needs = nullptr;  // the device feature it needs, if any
  };
  // The set layout, pipeline layout and pipeline of p (its bindings and push size set) from SPIR-V.
  void create_pipeline(Pipeline& p, const uint32_t* code, size_t bytes);
  VkDescriptorSet allocate_set(VkDescriptorSetLayout layout);

  Device& dev_;
  Pipeline pipes_[size_t(Kernel::kCount)];
  std::vector<VkDescriptorPool> pools_;
  size_t pool_in_use_ = 0;
};

}  // namespace llmcpu::vk
