// One opened device and the offloaded ops, in C++ (plugin.cpp wraps them in the C ABI). Each op
// follows its CPU reference in simd/scalar/ (shapes, "=" and "+=" outputs, fp32 accumulation) and
// runs as one pass of the copy-compute pipeline (stream.h) over chunks of rows or batch elements.
// Not here: the C ABI, argument checks the ABI layer does (null pointers).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "plugins/vulkan/device.h"
#include "plugins/vulkan/kernels.h"
#include "plugins/vulkan/stream.h"
#include "plugins/vulkan/weights.h"

namespace llmcpu::vk {

class Engine {
 public:
  Engine(int device_index, bool verbose);
  ~Engine();

  Device& device() { return dev_; }
  Stream& stream() { return stream_; }
  WeightStore& resident() { return resident_; }

  // out (N,OC) = inp (N,C) weight^T + bias
  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                      size_t N, int C, int OC);
  // dinp (N,C) = dout weight (null: skipped); dweight (OC,C) += dout^T inp; dbias (OC) += sums
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, size_t N, int C, int OC);
  // out (B,T,C), att (B,NH,T,T) from qkv (B,T,3C)
  void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH);
  // dqkv (B,T,3C) (overwritten) from dout (B,T,C), qkv, att
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B,
                          int T, int C, int NH);

 private:
  const WeightStore& weights_for(const float* p, size_t count, WeightStore& scratch);
  // Units (rows or batch elements) per chunk, for units of in_bytes input and out_bytes output
  // each; reserves the slots to hold them.
  size_t plan_units(size_t units, size_t in_bytes, size_t out_bytes, size_t min_units);
  void ensure_accumulators(size_t C, size_t OC);

  Device dev_;
  Kernels kernels_;
  Stream stream_;
  WeightStore resident_, scratch_weight_, scratch_bias_;
  size_t target_chunks_ = 4;  // LLMCPU_VK_CHUNKS
  bool chunks_forced_ = false;
  std::vector<Buffer> acc_;  // dweight accumulator, acc_rows_ rows of C floats per buffer
  size_t acc_rows_ = 0, acc_floats_ = 0;
  Buffer acc_bias_;
};

}  // namespace llmcpu::vk
