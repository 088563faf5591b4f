// Timing, operands and the FMA roof of llmcpu_vulkan_probe. See probe_bench.h.
#include "plugins/vulkan/probe_bench.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "simd/bf16.h"

namespace llmcpu::vk {
namespace {

// Seeded values in [-1, 1): the upper 24 bits of a 32-bit LCG, exact in fp32 (fast enough for the
// lm_head's 150 MB operands).
struct Random {
  uint32_t s;
  float next() {
    s = s * 1664525u + 1013904223u;
    return float(s >> 8) * 0x1p-23f - 1.0f;
  }
};

// Every earlier command's writes before every later command and the host: ends each recording,
// so the next submission (and the host, after the fence) sees them.
void full_barrier(VkCommandBuffer cb) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
  mb.dstAccessMask =
      VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                       VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb,
                       0, nullptr, 0, nullptr);
}

}  // namespace

Timer::Timer(Device& dev, Kernels& kernels) : dev_(dev), kernels_(kernels) {
  VkDevice d = dev_.device();
  try {
    VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = dev_.compute_family();
    LLMCPU_VK(vkCreateCommandPool(d, &pci, nullptr, &pool_));
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    LLMCPU_VK(vkAllocateCommandBuffers(d, &ai, &cb_));
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    LLMCPU_VK(vkCreateFence(d, &fci, nullptr, &fence_));
    // Timestamps where the compute queue family has valid bits (reset inside the command buffer,
    // so host query reset is not needed).
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(dev_.physical(), &n, nullptr);
    std::vector<VkQueueFamilyProperties> fams(n);
    vkGetPhysicalDeviceQueueFamilyProperties(dev_.physical(), &n, fams.data());
    const uint32_t bits = fams[dev_.compute_family()].timestampValidBits;
    gpu_ = bits > 0 && dev_.timestamp_period_ns() > 0;
    if (gpu_) {
      mask_ = bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
      VkQueryPoolCreateInfo qci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
      qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qci.queryCount = 2;
      LLMCPU_VK(vkCreateQueryPool(d, &qci, nullptr, &queries_));
    }
  } catch (...) {
    this->~Timer();
    throw;
  }
}

Timer::~Timer() {
  VkDevice d = dev_.device();
  if (queries_) vkDestroyQueryPool(d, queries_, nullptr);
  if (fence_) vkDestroyFence(d, fence_, nullptr);
  if (pool_) vkDestroyCommandPool(d, pool_, nullptr);
  queries_ = VK_NULL_HANDLE, fence_ = VK_NULL_HANDLE, pool_ = VK_NULL_HANDLE;
}

void Timer::record(const std::function<void(VkCommandBuffer)>& body, bool timed) {
  kernels_.reset_sets();
  LLMCPU_VK(vkResetCommandBuffer(cb_, 0));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  LLMCPU_VK(vkBeginCommandBuffer(cb_, &bi));  // no one-time flag: submitted once per run
  timed_ = timed && gpu_;
  if (timed_) {
    vkCmdResetQueryPool(cb_, queries_, 0, 2);
    vkCmdWriteTimestamp(cb_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, 0);
  }
  body(cb_);
  if (timed_) vkCmdWriteTimestamp(cb_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, 1);
  full_barrier(cb_);
  LLMCPU_VK(vkEndCommandBuffer(cb_));
}

double Timer::run() {
  VkDevice d = dev_.device();
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb_;
  LLMCPU_VK(vkResetFences(d, 1, &fence_));
  const auto t0 = std::chrono::steady_clock::now();
  LLMCPU_VK(vkQueueSubmit(dev_.compute_queue(), 1, &si, fence_));
  LLMCPU_VK(vkWaitForFences(d, 1, &fence_, VK_TRUE, UINT64_MAX));
  const std::chrono::duration<double, std::milli> wall = std::chrono::steady_clock::now() - t0;
  if (!timed_) return wall.count();
  uint64_t ts[2];
  LLMCPU_VK(vkGetQueryPoolResults(d, queries_, 0, 2, sizeof ts, ts, sizeof(uint64_t),
                                  VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
  return double((ts[1] - ts[0]) & mask_) * dev_.timestamp_period_ns() * 1e-6;
}

void Timer::once(const std::function<void(VkCommandBuffer)>& body) {
  record(body, false);
  run();
}

Operand make_operand(Device& dev, Timer& timer, size_t n, bool is_bf16, uint32_t seed,
                     bool keep_values) {
  Operand o;
  o.is_bf16 = is_bf16;
  const size_t bytes = n * (is_bf16 ? sizeof(llmcpu::bf16) : sizeof(float));
  Buffer staging = dev.create_buffer(bytes, MemoryKind::kUpload);
  try {
    Random r{seed};
    if (keep_values) o.values.resize(n);
    if (is_bf16) {
      auto* h = static_cast<llmcpu::bf16*>(staging.mapped);
      for (size_t i = 0; i < n; ++i) h[i] = float_to_bf16(r.next());
      for (size_t i = 0; keep_values && i < n; ++i) o.values[i] = bf16_to_float(h[i]);
    } else {
      auto* h = static_cast<float*>(staging.mapped);
      for (size_t i = 0; i < n; ++i) h[i] = r.next();
      if (keep_values) std::memcpy(o.values.data(), h, bytes);
    }
    o.buf = dev.create_buffer(bytes, MemoryKind::kDevice);
    timer.once([&](VkCommandBuffer cb) {
      const VkBufferCopy region{0, 0, bytes};
      vkCmdCopyBuffer(cb, staging.buffer, o.buf.buffer, 1, &region);
    });
  } catch (...) {
    dev.destroy(staging);
    dev.destroy(o.buf);
    throw;
  }
  dev.destroy(staging);
  return o;
}

std::vector<float> download(Device& dev, Timer& timer, const Buffer& buf, size_t n) {
  Buffer staging = dev.create_buffer(n * sizeof(float), MemoryKind::kDownload);
  std::vector<float> out(n);
  try {
    timer.once([&](VkCommandBuffer cb) {
      const VkBufferCopy region{0, 0, n * sizeof(float)};
      vkCmdCopyBuffer(cb, buf.buffer, staging.buffer, 1, &region);
    });
    std::memcpy(out.data(), staging.mapped, n * sizeof(float));
  } catch (...) {
    dev.destroy(staging);
    throw;
  }
  dev.destroy(staging);
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

Roof measure_roof(Device& dev, Kernels& kernels, Timer& timer, uint32_t workgroups,
                  double target_ms, int reps) {
  // Up to 8192 steps: below llvmpipe's loop limit of 65535 iterations.
  constexpr uint32_t kGroupSize = 256, kFirstIters = 16, kMaxIters = 8192;
  Buffer out =
      dev.create_buffer(size_t(workgroups) * kGroupSize * sizeof(float), MemoryKind::kDevice);
  Roof roof{};
  try {
    roof.workgroups = workgroups, roof.iters = kFirstIters;
    for (;;) {
      timer.record([&](VkCommandBuffer cb) {
        const FmaPeakPush pc{roof.workgroups * kGroupSize, roof.iters, 0.999f, 0.001f};
        kernels.dispatch(cb, Kernel::kFmaPeak, {Binding{out.buffer, 0, out.size}}, &pc, sizeof pc,
                         roof.workgroups, 1, 1);
      });
      const double ms = timer.run();
      if (ms >= target_ms || roof.iters >= kMaxIters) break;
      const double grow = std::clamp(target_ms / std::max(ms, 1e-3), 2.0, 16.0);
      roof.iters = uint32_t(std::min<double>(kMaxIters, roof.iters * grow));
    }
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) t.push_back(timer.run());
    roof.ms = median(t);
    roof.gflop = double(roof.workgroups) * kGroupSize * roof.iters * kFmaPeakFlopsPerStep * 1e-9;
    roof.gflops = roof.gflop / (roof.ms * 1e-3);
  } catch (...) {
    dev.destroy(out);
    throw;
  }
  dev.destroy(out);
  return roof;
}

}  // namespace llmcpu::vk
