#include "simd/workspace.h"

#include <cstdint>
#include <cstdlib>
#include <new>

namespace llmcpu {
namespace {

struct ScratchBuffer {
  float* data = nullptr;
  size_t floats = 0;
  size_t bytes = 0;
  void release() {
    std::free(data);
    data = nullptr, floats = 0, bytes = 0;
  }
  ~ScratchBuffer() { release(); }
};

thread_local ScratchBuffer t_buffers[kScratchSlots];

}  // namespace

float* thread_scratch(ScratchSlot slot, size_t floats) {
  ScratchBuffer& b = t_buffers[static_cast<size_t>(slot)];
  if (floats > b.floats) {
    constexpr size_t kAlign = 64;
    if (floats > (SIZE_MAX - kAlign) / sizeof(float)) throw std::bad_alloc();
    const size_t bytes = scratch_bytes(floats);  // whole lines, as aligned_alloc wants
    void* p = std::aligned_alloc(kAlign, bytes);
    if (!p) throw std::bad_alloc();
    b.release();
    b.data = static_cast<float*>(p);
    b.floats = floats;
    b.bytes = bytes;
  }
  return b.data;
}

size_t thread_scratch_held() {
  size_t total = 0;
  for (const ScratchBuffer& b : t_buffers) total += b.bytes;
  return total;
}

void release_thread_scratch() {
  for (ScratchBuffer& b : t_buffers) b.release();
}

}  // namespace llmcpu
