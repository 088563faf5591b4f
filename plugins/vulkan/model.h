// The device's part of a GPT-2 model (plugin ABI version 2): the blocks [first, L) it owns, with
// "all" also the embedding and the head. Holds on the device, allocated once per configure():
//   parameters, gradients and AdamW moments of the owned part, in groups (one per owned block:
//     its 12 tensors packed in llm.c's per-layer order; wte in row pieces that each fit a binding;
//     wpe | lnfw | lnfb);
//   the activations each owned block keeps from forward to backward, for the whole micro-batch;
//   the backward's scratch for one chunk of batch elements, and the head's logits for a few rows.
// A pass runs over chunks of batch elements through the copy-compute pipeline (stream.h): the
// upload of chunk i+1 (tokens, or the residual at the boundary) and the download of chunk i-1
// (losses or the residual, forward; the residual's gradient, backward) run beside the compute of
// chunk i. Every weight gradient accumulates chunk by chunk in a fixed order: the same bits on
// every run. Not here: the C ABI (plugin.cpp), the ops' shaders (block_ops.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/plugin_abi.h"
#include "plugins/vulkan/block_ops.h"
#include "plugins/vulkan/device.h"
#include "plugins/vulkan/stream.h"

namespace llmcpu::vk {

// Offsets (floats) of one block's tensors in its packed group, llm.c's per-layer order.
struct BlockLayout {
  size_t ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, total;
  explicit BlockLayout(size_t C);
};

// What a desc needs, in bytes (the ABI's llmcpu_memory_plan, computed without a device): what
// DeviceModel allocates for it, buffer by buffer. Not counted: the stream's slots grown for a
// forward pass that returns every position's logits (verify's), which run only then.
struct Footprint {
  uint64_t weights = 0, activations = 0, other = 0;
  uint64_t total() const { return weights + activations + other; }
};
Footprint footprint(const llmcpu_model_desc& d, size_t max_binding_bytes);
// Why `d` cannot run at all on a device with this binding limit (one buffer it needs would be
// larger), or "" when it can.
std::string buffer_over_binding(const llmcpu_model_desc& d, size_t max_binding_bytes);
// The plan of `d` against `available` bytes, with the most blocks that fit.
llmcpu_memory_plan memory_plan(const llmcpu_model_desc& d, size_t max_binding_bytes,
                               uint64_t available);
// Whether attention runs as flash attention (keeping lse) for this head size.
bool flash_head(const llmcpu_model_desc& d);
// Batch elements per chunk of a pass: B split in up to four chunks.
int chunk_batch(int B);
// Rows of wte (C floats each) in one piece: as many as one binding holds.
size_t wte_rows_per_piece(size_t C, size_t max_binding_bytes);
// Rows of the head's logits (Vp floats each) per sub-chunk: at most 64 MiB and one binding, at most
// a chunk's rows.
size_t head_rows(size_t Vp, size_t chunk_rows, size_t max_binding_bytes);

class DeviceModel {
 public:
  DeviceModel(Device& dev, Kernels& kernels, Stream& stream, const llmcpu_model_desc& desc);
  ~DeviceModel();
  DeviceModel(const DeviceModel&) = delete;
  DeviceModel& operator=(const DeviceModel&) = delete;

  // Flat host arrays <-> the owned groups (any pointer may be null: skipped).
  void upload_state(const float* params, const float* m, const float* v);
  void download_state(float* params, float* grads, float* m, float* v);
  void zero_grad();
  // bf16: rounds every group's parameters into its working copy.
  void refresh_copies();
  double grad_sum_squares();
  void adamw(const llmcpu_adamw_args& a);

  void forward(const llmcpu_forward_args& a);
  void backward(const float* dresidual_top, float* dresidual_bottom);

  // The last forward's and backward's submission order with their waits.
  const std::string& schedule() const { return schedule_; }
  uint32_t passes() const { return passes_; }
  void count_pass_reset() { passes_ = 0; }

 private:
  // One group of owned parameters on the device: p, g, m, v buffers of `floats` each, filled from
  // the host's flat arrays by `segments`.
  struct Segment {
    size_t host, count, dev;  // floats
  };
  struct Group {
    size_t floats = 0;
    std::vector<Segment> segments;
    Buffer p, g, m, v;
    Buffer c;  // bf16: the working copy of p, rounded after every change of p
  };
  // One owned block's kept activations for one chunk of the batch (its nb*T rows, offsets from 0),
  // so that no buffer outgrows a binding as the batch grows. In bf16 the ones a GEMM reads or
  // attention's q, k, v (ln1, qkv, atty, ln2, fch, fch_gelu) hold 16-bit elements, as the CPU's
  // mixed precision stores them.
  // Attention keeps the rows' log-sum-exp `lse` (nb, NH, T) for the flash backward, or, for a
  // head size above the flash kernels' 128, the probabilities `att` (nb, NH, T, T).
  struct ChunkActs {
    Buffer ln1, ln1_mean, ln1_rstd, qkv, atty, lse, att, residual2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu, residual3;
  };

  Buffer make(size_t bytes, const char* what, MemoryKind kind = MemoryKind::kDevice);
  void release();
  Ref ref(const Buffer& b, size_t off = 0) const { return {b.buffer, b.size, uint32_t(off)}; }
  Group& add_group(size_t floats);
  // The constructor's steps, in the order it allocates: the parameter groups of the owned blocks
  // and of the embedding, the kept activations, the backward's scratch, the command objects.
  void make_block_groups();
  void make_embedding_groups(size_t rows_per_piece, size_t other_params);
  void make_kept_activations(size_t A);
  void make_scratch(size_t att_chunk);
  void make_commands();
  // Synchronous copies through the staging buffer (set-up and checkpoint paths, not the step).
  void copy_to_device(const Buffer& dst, size_t dst_off, const float* host, size_t bytes);
  void copy_to_host(float* host, const Buffer& src, size_t src_off, size_t bytes);
  template <typename Fn>
  void one_shot(Fn&& record);

  void record_block_forward(VkCommandBuffer cb, int l, int nb, int chunk);
  void record_block_backward(VkCommandBuffer cb, int l, int nb, int chunk);
  void record_head(VkCommandBuffer cb, size_t r0, size_t rows, const llmcpu_forward_args& a,
                   VkBuffer out, int chunk);
  const Buffer& block_input(int l, int chunk) const;

  Device& dev_;
  Kernels& kernels_;
  BlockOps ops_;
  Stream& stream_;
  llmcpu_model_desc d_;
  int L_, C_, NH_, V_, Vp_, B_, T_, first_;
  bool embedding_, head_;
  bool bf16_;   // precision bf16: bf16 weights' copy and GEMM inputs, fp32 accumulation
  bool flash_;  // flash attention (head size <= 128): lse kept, not the probabilities
  int nb_;      // batch elements per chunk
  int chunks_;  // ceil(B / nb)
  BlockLayout bl_;

  std::vector<Group> groups_;        // every owned parameter, for AdamW, zeroing, norms, state
  std::vector<size_t> block_group_;  // per owned block (index l - first)
  size_t wte_first_group_ = 0, wte_rows_per_piece_ = 0, other_group_ = 0;  // with the embedding
  size_t wpe_off_ = 0, lnfw_off_ = 0, lnfb_off_ = 0;                       // in the other group

  std::vector<std::vector<ChunkActs>> acts_;  // [owned block][chunk]
  std::vector<Buffer> x_in_;                  // per chunk (nb,T,C): the first owned block's input
  Buffer tokens_, targets_;      // (B,T) int32, with the embedding / the head
  Buffer lnf_, lnf_mean_, lnf_rstd_, dlnf_, losses_, lse_;  // with the head (lnf bf16 in bf16)
  Buffer logits_;  // (head_rows_, Vp) one sub-chunk of the head
  size_t head_rows_ = 0;
  bool have_targets_ = false, have_grad_ = false;
  // Backward scratch for one chunk of nb*T rows.
  Buffer dres_, dln_, dfch_, datty_, dqkv_, ds_;
  Buffer partials_;  // sum_squares partials
  Buffer staging_;   // host-visible, for the synchronous copies
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cb_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::string schedule_;
  uint32_t passes_ = 0;
};

}  // namespace llmcpu::vk
