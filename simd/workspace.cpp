#include "simd/workspace.h"

#include <cstdint>
#include <cstdlib>
#include <new>

namespace llmcpu {
namespace {

struct ScratchBuffer {
  float* data = nullptr;
  size_t floats = 0;
  ~ScratchBuffer() { std::free(data); }
};

}  // namespace

float* thread_scratch(ScratchSlot slot, size_t floats) {
  thread_local ScratchBuffer buffers[static_cast<int>(ScratchSlot::kCount)];
  ScratchBuffer& b = buffers[static_cast<int>(slot)];
  if (floats > b.floats) {
    constexpr size_t kAlign = 64;
    if (floats > (SIZE_MAX - kAlign) / sizeof(float)) throw std::bad_alloc();
    const size_t bytes = (floats * sizeof(float) + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, bytes);
    if (!p) throw std::bad_alloc();
    std::free(b.data);
    b.data = static_cast<float*>(p);
    b.floats = floats;
  }
  return b.data;
}

}  // namespace llmcpu
