// The measuring tools of llmcpu_vulkan_probe's `gemm`: a command buffer that is recorded once and
// submitted as often as asked, timed by two GPU timestamps around it (or, where the compute queue
// has no timestamps, by the wall clock around submission and fence wait); device operands filled
// with seeded random values through a staging buffer; and the device's fp32 FMA roof
// (shaders/fma_peak.comp). Not here: which GEMMs are timed (probe_gemm.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "plugins/vulkan/block_ops.h"
#include "plugins/vulkan/device.h"
#include "plugins/vulkan/kernels.h"

namespace llmcpu::vk {

class Timer {
 public:
  Timer(Device& dev, Kernels& kernels);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // GPU timestamps (else the wall clock).
  bool gpu() const { return gpu_; }
  // Records `body`, between timestamps where timed, in place of what was recorded before; frees
  // the descriptor sets of the previous recording (nothing is in flight between runs).
  void record(const std::function<void(VkCommandBuffer)>& body, bool timed = true);
  // Submits the recording once and waits for it: the milliseconds it took.
  double run();
  // record(body, false) and run(): uploads, downloads, the check.
  void once(const std::function<void(VkCommandBuffer)>& body);

 private:
  Device& dev_;
  Kernels& kernels_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cb_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  bool gpu_ = false;
  bool timed_ = false;
  uint64_t mask_ = 0;  // the timestamps' valid bits
};

// A device-local operand of n elements (fp32, or bf16 where bf16) holding seeded random values in
// [-1, 1); `values` the same values as the shader reads them from storage (bf16 ones widened),
// filled only where asked (the check).
struct Operand {
  Buffer buf;
  bool is_bf16 = false;
  std::vector<float> values;
  Ref ref() const { return {buf.buffer, buf.size, 0}; }
};
Operand make_operand(Device& dev, Timer& timer, size_t n, bool is_bf16, uint32_t seed,
                     bool keep_values);
// The first n floats of a device buffer.
std::vector<float> download(Device& dev, Timer& timer, const Buffer& buf, size_t n);

// The median of a list of times.
double median(std::vector<double> v);

// The fp32 FMA roof: fma_peak.comp on `workgroups` workgroups of 256 invocations, its steps per
// invocation grown until one run takes at least target_ms, then the median of `reps` runs.
struct Roof {
  double gflops = 0, ms = 0;
  uint32_t workgroups = 0, iters = 0;
  double gflop = 0;  // of one run
};
Roof measure_roof(Device& dev, Kernels& kernels, Timer& timer, uint32_t workgroups,
                  double target_ms, int reps);

}  // namespace llmcpu::vk
