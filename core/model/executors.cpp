#include "core/model/executors.h"

namespace llmcpu {

Bf16Executor::Bf16Executor(const KernelTable& k, const Bf16Kernels& h, const float* master,
                           size_t count, bool fill)
    : Fp32Executor{k},
      h_(h),
      master_(master),
      copy_(fill ? AlignedBuffer<bf16>(count) : AlignedBuffer<bf16>::zeros_on_demand(count)),
      copy_data_(copy_.data()),
      count_(count) {
  if (fill) refresh();  // first touch by the converting threads
}

}  // namespace llmcpu
