// The compute pipelines (one per shader in shaders/, SPIR-V compiled at build time) and the
// recording of one dispatch: descriptor set from a pool that is reset at the start of every op,
// push constants, workgroup counts. Every binding is checked against maxStorageBufferRange and the
// offset alignment. Not here: which buffers an op binds (ops.cpp), command buffer submission
// (stream.h).
#pragma once

#include <initializer_list>
#include <vector>

#include "plugins/vulkan/device.h"

namespace llmcpu::vk {

enum class Kernel { kGemm, kColsum, kAttentionForward, kAttentionBackward, kCount };

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

struct ColsumPush {
  uint32_t M, N, ld, d_off, accumulate;
};

struct AttentionPush {
  uint32_t T, C, NH, hs;
  float scale;
  uint32_t pass;  // backward only
};

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
  };
  VkDescriptorSet allocate_set(VkDescriptorSetLayout layout);

  Device& dev_;
  Pipeline pipes_[size_t(Kernel::kCount)];
  std::vector<VkDescriptorPool> pools_;
  size_t pool_in_use_ = 0;
};

}  // namespace llmcpu::vk
