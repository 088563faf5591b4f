// Pipelines from the build-time SPIR-V and the recording of dispatches. See kernels.h.
#include "plugins/vulkan/kernels.h"

#include <cstdint>
#include <iterator>
#include <string>

namespace llmcpu::vk {
namespace {

// SPIR-V words written by glslc -mfmt=num into the build folder.
const uint32_t kGemmSpv[] = {
#include "gemm.spv.h"
};
const uint32_t kColsumSpv[] = {
#include "colsum.spv.h"
};
const uint32_t kAttentionForwardSpv[] = {
#include "attention_forward.spv.h"
};
const uint32_t kAttentionBackwardSpv[] = {
#include "attention_backward.spv.h"
};
const uint32_t kEncoderForwardSpv[] = {
#include "encoder_forward.spv.h"
};
const uint32_t kEncoderBackwardSpv[] = {
#include "encoder_backward.spv.h"
};
const uint32_t kLayernormForwardSpv[] = {
#include "layernorm_forward.spv.h"
};
const uint32_t kLayernormBackwardSpv[] = {
#include "layernorm_backward.spv.h"
};
const uint32_t kGeluForwardSpv[] = {
#include "gelu_forward.spv.h"
};
const uint32_t kGeluBackwardSpv[] = {
#include "gelu_backward.spv.h"
};
const uint32_t kResidualForwardSpv[] = {
#include "residual_forward.spv.h"
};
const uint32_t kSoftmaxXentForwardSpv[] = {
#include "softmax_xent_forward.spv.h"
};
const uint32_t kSoftmaxXentBackwardSpv[] = {
#include "softmax_xent_backward.spv.h"
};
const uint32_t kSumSquaresSpv[] = {
#include "sum_squares.spv.h"
};
const uint32_t kAdamwSpv[] = {
#include "adamw.spv.h"
};
const uint32_t kAdamwF32Spv[] = {
#include "adamw_f32.spv.h"
};
const uint32_t kGemmFRSpv[] = {
#include "gemm_fr.spv.h"
};
const uint32_t kGemmFHSpv[] = {
#include "gemm_fh.spv.h"
};
const uint32_t kGemmRFSpv[] = {
#include "gemm_rf.spv.h"
};
const uint32_t kGemmRRSpv[] = {
#include "gemm_rr.spv.h"
};
const uint32_t kGemmRHSpv[] = {
#include "gemm_rh.spv.h"
};
const uint32_t kGemmHFSpv[] = {
#include "gemm_hf.spv.h"
};
const uint32_t kGemmHRSpv[] = {
#include "gemm_hr.spv.h"
};
const uint32_t kGemmHHSpv[] = {
#include "gemm_hh.spv.h"
};
const uint32_t kLayernormForwardBf16Spv[] = {
#include "layernorm_forward_bf16.spv.h"
};
const uint32_t kAttentionForwardBf16Spv[] = {
#include "attention_forward_bf16.spv.h"
};
const uint32_t kAttentionBackwardBf16Spv[] = {
#include "attention_backward_bf16.spv.h"
};
const uint32_t kGeluForwardBf16Spv[] = {
#include "gelu_forward_bf16.spv.h"
};
const uint32_t kGeluBackwardBf16Spv[] = {
#include "gelu_backward_bf16.spv.h"
};
const uint32_t kToBf16Spv[] = {
#include "to_bf16.spv.h"
};
const uint32_t kFlashAttentionForwardSpv[] = {
#include "flash_attention_forward.spv.h"
};
const uint32_t kFlashAttentionBackwardSpv[] = {
#include "flash_attention_backward.spv.h"
};
const uint32_t kFlashAttentionForwardBf16Spv[] = {
#include "flash_attention_forward_bf16.spv.h"
};
const uint32_t kFlashAttentionBackwardBf16Spv[] = {
#include "flash_attention_backward_bf16.spv.h"
};
const uint32_t kFmaPeakSpv[] = {
#include "fma_peak.spv.h"
};

// The device feature a pipeline needs beyond the baseline; it is created only where the device has
// it (dispatching it elsewhere throws, naming the feature).
enum class Needs { kNothing, kFloat64, kBf16Storage };

struct ShaderInfo {
  const uint32_t* code;
  size_t bytes;
  uint32_t bindings;
  uint32_t push_size;
  Needs needs;
};

constexpr uint32_t kSetsPerPool = 1024;
constexpr uint32_t kMaxBindings = 8;

// The shaders, in the order of enum Kernel.
const ShaderInfo kShaders[] = {
    {kGemmSpv, sizeof kGemmSpv, 4, sizeof(GemmPush), Needs::kNothing},
    {kColsumSpv, sizeof kColsumSpv, 2, sizeof(ColsumPush), Needs::kNothing},
    {kAttentionForwardSpv, sizeof kAttentionForwardSpv, 3, sizeof(AttentionPush), Needs::kNothing},
    {kAttentionBackwardSpv, sizeof kAttentionBackwardSpv, 5, sizeof(AttentionPush),
     Needs::kNothing},
    {kEncoderForwardSpv, sizeof kEncoderForwardSpv, 4, sizeof(EncoderForwardPush), Needs::kNothing},
    {kEncoderBackwardSpv, sizeof kEncoderBackwardSpv, 3, sizeof(EncoderBackwardPush),
     Needs::kNothing},
    {kLayernormForwardSpv, sizeof kLayernormForwardSpv, 6, sizeof(LayerNormForwardPush),
     Needs::kNothing},
    {kLayernormBackwardSpv, sizeof kLayernormBackwardSpv, 8, sizeof(LayerNormBackwardPush),
     Needs::kNothing},
    {kGeluForwardSpv, sizeof kGeluForwardSpv, 2, sizeof(GeluPush), Needs::kNothing},
    {kGeluBackwardSpv, sizeof kGeluBackwardSpv, 3, sizeof(GeluPush), Needs::kNothing},
    {kResidualForwardSpv, sizeof kResidualForwardSpv, 3, sizeof(ResidualPush), Needs::kNothing},
    {kSoftmaxXentForwardSpv, sizeof kSoftmaxXentForwardSpv, 4, sizeof(SoftmaxXentPush),
     Needs::kNothing},
    {kSoftmaxXentBackwardSpv, sizeof kSoftmaxXentBackwardSpv, 3, sizeof(SoftmaxXentPush),
     Needs::kNothing},
    {kSumSquaresSpv, sizeof kSumSquaresSpv, 2, sizeof(SumSquaresPush), Needs::kNothing},
    {kAdamwSpv, sizeof kAdamwSpv, 4, sizeof(AdamWPush), Needs::kFloat64},
    {kAdamwF32Spv, sizeof kAdamwF32Spv, 4, sizeof(AdamWPush), Needs::kNothing},
    {kGemmFRSpv, sizeof kGemmFRSpv, 4, sizeof(GemmPush), Needs::kBf16Storage},
    {kGemmFHSpv, sizeof kGemmFHSpv, 4, sizeof(GemmPush), Needs::kBf16Storage},
    {kGemmRFSpv, sizeof kGemmRFSpv, 4, sizeof(GemmPush), Needs::kBf16Storage},
    {kGemmRRSpv, sizeof kGemmRRSpv, 4, sizeof(GemmPush), Needs::kBf16Storage},
    {kGemmRHSpv, sizeof kGemmRHSpv, 4, sizeof(GemmPush), Needs::kBf16Storage},
    {kGemmHFSpv, sizeof kGemmHFSpv, 4, sizeof(GemmPush), Needs::kBf16Storage},
    {kGemmHRSpv, sizeof kGemmHRSpv, 4, sizeof(GemmPush), Needs::kBf16Storage},
    {kGemmHHSpv, sizeof kGemmHHSpv, 4, sizeof(GemmPush), Needs::kBf16Storage},
    {kLayernormForwardBf16Spv, sizeof kLayernormForwardBf16Spv, 6, sizeof(LayerNormForwardPush),
     Needs::kBf16Storage},
    {kAttentionForwardBf16Spv, sizeof kAttentionForwardBf16Spv, 3, sizeof(AttentionPush),
     Needs::kBf16Storage},
    {kAttentionBackwardBf16Spv, sizeof kAttentionBackwardBf16Spv, 5, sizeof(AttentionPush),
     Needs::kBf16Storage},
    {kGeluForwardBf16Spv, sizeof kGeluForwardBf16Spv, 2, sizeof(GeluPush), Needs::kBf16Storage},
    {kGeluBackwardBf16Spv, sizeof kGeluBackwardBf16Spv, 3, sizeof(GeluPush), Needs::kBf16Storage},
    {kToBf16Spv, sizeof kToBf16Spv, 2, sizeof(ToBf16Push), Needs::kBf16Storage},
    {kFlashAttentionForwardSpv, sizeof kFlashAttentionForwardSpv, 3, sizeof(FlashAttentionPush),
     Needs::kNothing},
    {kFlashAttentionBackwardSpv, sizeof kFlashAttentionBackwardSpv, 5, sizeof(FlashAttentionPush),
     Needs::kNothing},
    {kFlashAttentionForwardBf16Spv, sizeof kFlashAttentionForwardBf16Spv, 3,
     sizeof(FlashAttentionPush), Needs::kBf16Storage},
    {kFlashAttentionBackwardBf16Spv, sizeof kFlashAttentionBackwardBf16Spv, 5,
     sizeof(FlashAttentionPush), Needs::kBf16Storage},
    {kFmaPeakSpv, sizeof kFmaPeakSpv, 1, sizeof(FmaPeakPush), Needs::kNothing},
};
static_assert(std::size(kShaders) == size_t(Kernel::kCount), "one ShaderInfo per Kernel");

}  // namespace

Kernels::Kernels(Device& dev) : dev_(dev) {
  try {
    for (size_t i = 0; i < size_t(Kernel::kCount); ++i) {
      Pipeline& p = pipes_[i];
      if (kShaders[i].needs == Needs::kFloat64) p.needs = "shaderFloat64";
      if (kShaders[i].needs == Needs::kBf16Storage) p.needs = "storageBuffer16BitAccess";
      if (kShaders[i].needs == Needs::kFloat64 && !dev_.float64()) continue;
      if (kShaders[i].needs == Needs::kBf16Storage && !dev_.bf16_storage()) continue;
      p.bindings = kShaders[i].bindings;
      p.push_size = kShaders[i].push_size;
      create_pipeline(p, kShaders[i].code, kShaders[i].bytes);
    }
  } catch (...) {
    this->~Kernels();
    throw;
  }
}

void Kernels::create_pipeline(Pipeline& p, const uint32_t* code, size_t bytes) {
  VkDevice d = dev_.device();
  VkDescriptorSetLayoutBinding b[kMaxBindings]{};
  for (uint32_t j = 0; j < p.bindings; ++j) {
    b[j].binding = j;
    b[j].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[j].descriptorCount = 1;
    b[j].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dl.bindingCount = p.bindings;
  dl.pBindings = b;
  LLMCPU_VK(vkCreateDescriptorSetLayout(d, &dl, nullptr, &p.set_layout));
  VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_size};
  VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &p.set_layout;
  pl.pushConstantRangeCount = 1;
  pl.pPushConstantRanges = &pr;
  LLMCPU_VK(vkCreatePipelineLayout(d, &pl, nullptr, &p.layout));
  VkShaderModuleCreateInfo sm{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  sm.codeSize = bytes;
  sm.pCode = code;
  VkShaderModule module;
  LLMCPU_VK(vkCreateShaderModule(d, &sm, nullptr, &module));
  VkComputePipelineCreateInfo cp{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  cp.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  cp.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cp.stage.module = module;
  cp.stage.pName = "main";
  cp.layout = p.layout;
  const VkResult r = vkCreateComputePipelines(d, VK_NULL_HANDLE, 1, &cp, nullptr, &p.pipeline);
  vkDestroyShaderModule(d, module, nullptr);
  LLMCPU_VK(r);
}

Kernels::~Kernels() {
  VkDevice d = dev_.device();
  for (VkDescriptorPool pool : pools_) vkDestroyDescriptorPool(d, pool, nullptr);
  pools_.clear();
  for (Pipeline& p : pipes_) {
    if (p.pipeline) vkDestroyPipeline(d, p.pipeline, nullptr);
    if (p.layout) vkDestroyPipelineLayout(d, p.layout, nullptr);
    if (p.set_layout) vkDestroyDescriptorSetLayout(d, p.set_layout, nullptr);
    p = Pipeline{};
  }
}

void Kernels::reset_sets() {
  for (VkDescriptorPool pool : pools_) LLMCPU_VK(vkResetDescriptorPool(dev_.device(), pool, 0));
  pool_in_use_ = 0;
}

VkDescriptorSet Kernels::allocate_set(VkDescriptorSetLayout layout) {
  for (;;) {
    if (pool_in_use_ == pools_.size()) {
      VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kMaxBindings};
      VkDescriptorPoolCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      ci.maxSets = kSetsPerPool;
      ci.poolSizeCount = 1;
      ci.pPoolSizes = &size;
      VkDescriptorPool pool;
      LLMCPU_VK(vkCreateDescriptorPool(dev_.device(), &ci, nullptr, &pool));
      pools_.push_back(pool);
    }
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = pools_[pool_in_use_];
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    VkDescriptorSet set;
    const VkResult r = vkAllocateDescriptorSets(dev_.device(), &ai, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) LLMCPU_VK(r);
    ++pool_in_use_;  // this pool is full: the next one
  }
}

void Kernels::dispatch(VkCommandBuffer cb, Kernel k, std::initializer_list<Binding> bindings,
                       const void* push, uint32_t push_size, uint32_t gx, uint32_t gy,
                       uint32_t gz) {
  const Pipeline& p = pipes_[size_t(k)];
  if (!p.pipeline) {
    throw VulkanError("internal: kernel " + std::to_string(int(k)) + " is not available on " +
                      dev_.name() + " (it needs " + (p.needs ? p.needs : "?") + ")");
  }
  if (bindings.size() != p.bindings || push_size != p.push_size) {
    throw VulkanError("internal: kernel " + std::to_string(int(k)) + " called with " +
                      std::to_string(bindings.size()) + " bindings, " + std::to_string(push_size) +
                      " bytes of push constants");
  }
  VkDescriptorSet set = allocate_set(p.set_layout);
  VkDescriptorBufferInfo info[kMaxBindings];
  VkWriteDescriptorSet writes[kMaxBindings];
  uint32_t j = 0;
  for (const Binding& b : bindings) {
    if (b.range > dev_.max_binding_bytes() || b.offset % dev_.binding_alignment() != 0) {
      throw VulkanError("internal: binding " + std::to_string(j) + " of kernel " +
                        std::to_string(int(k)) + " (offset " + std::to_string(b.offset) +
                        ", range " + std::to_string(b.range) +
                        ") breaks maxStorageBufferRange or the offset alignment");
    }
    info[j] = {b.buffer, b.offset, b.range ? b.range : VK_WHOLE_SIZE};
    writes[j] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[j].dstSet = set;
    writes[j].dstBinding = j;
    writes[j].descriptorCount = 1;
    writes[j].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[j].pBufferInfo = &info[j];
    ++j;
  }
  vkUpdateDescriptorSets(dev_.device(), j, writes, 0, nullptr);
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size, push);
  vkCmdDispatch(cb, gx, gy, gz);
}

}  // namespace llmcpu::vk
