// What the kernels' per-thread scratch (simd/workspace.h) will hold, worked out without running
// them: the scratch slots, the bytes one kernel call asks of each, and how those add up over the
// calls of a training step. Each kernel with scratch has a sizing entry next to it in its table
// (KernelTable::matmul_forward_scratch, ...) that says what a call of a given shape asks for; the
// memory plan (core/train/memory_plan.h) merges the calls of one step with them. Deliberately no
// allocation here, and no knowledge of which kernel asks for what (that is each kernel's own).
#pragma once

#include <array>
#include <cstddef>

namespace llmcpu {

// One independent buffer per use, so that nested needs (a GEMM inside attention) do not collide.
enum class ScratchSlot {
  kGemmPack,
  kGemmPanel,
  kAttention,
  kReduce,
  kBf16A,  // the bf16 path's converted or packed operands (simd/bf16*, simd/x86/, simd/arm/)
  kBf16B,
  kBf16C,
  kQuantWeight,  // a quantized weight's decoded panel (simd/quant/quant_matmul.h)
  kQuantOut,     // the panel's GEMM output before it is placed in the full output
  kCount
};
inline constexpr size_t kScratchSlots = static_cast<size_t>(ScratchSlot::kCount);

// The bytes thread_scratch allocates for a request of `floats` floats: whole 64-byte lines.
constexpr size_t scratch_bytes(size_t floats) { return (floats * sizeof(float) + 63) / 64 * 64; }

// What kernel calls ask of thread_scratch, in allocated bytes per slot: `caller` by the thread
// that calls the kernel, outside its team's parallel region (the buffer its team then shares),
// `each` by every thread of the team inside the region (the caller among them; where the team's
// asks differ, the largest). A buffer grows to its largest ask and never shrinks (what it held
// before is freed), so one call that asks a slot twice, and a sequence of calls, keep per thread
// and slot the largest ask: merge() takes those maxima, and bytes() is then what the buffers of
// the caller and its team hold.
struct ScratchUse {
  std::array<size_t, kScratchSlots> caller{};
  std::array<size_t, kScratchSlots> each{};
  // A library's own workspace beside the slots (oneDNN's scratchpad): one buffer per process,
  // held at its largest.
  size_t library = 0;

  // The calling thread asks `slot` for `floats` floats.
  ScratchUse& ask(ScratchSlot slot, size_t floats) {
    size_t& b = caller[static_cast<size_t>(slot)];
    if (scratch_bytes(floats) > b) b = scratch_bytes(floats);
    return *this;
  }
  // Every thread of the team asks `slot` for at most `floats` floats.
  ScratchUse& ask_each(ScratchSlot slot, size_t floats) {
    size_t& b = each[static_cast<size_t>(slot)];
    if (scratch_bytes(floats) > b) b = scratch_bytes(floats);
    return *this;
  }
  // Another call, or a kernel this one calls, by the same thread: per slot the larger ask.
  ScratchUse& merge(const ScratchUse& other) {
    for (size_t s = 0; s < kScratchSlots; ++s) {
      if (other.caller[s] > caller[s]) caller[s] = other.caller[s];
      if (other.each[s] > each[s]) each[s] = other.each[s];
    }
    if (other.library > library) library = other.library;
    return *this;
  }
  // What the buffers hold after these asks: the calling thread's largest ask per slot, as the
  // caller or as a member of its team, and the team's `threads` - 1 other threads' asks.
  size_t bytes(int threads) const {
    size_t total = library;
    for (size_t s = 0; s < kScratchSlots; ++s) {
      total += (caller[s] > each[s] ? caller[s] : each[s]);
      if (threads > 1) total += size_t(threads - 1) * each[s];
    }
    return total;
  }
};

// The sizing entries of kernels that take no thread scratch (the scalar reference tables).
namespace no_scratch {
inline ScratchUse matmul_forward(size_t, int, int, bool, int) { return {}; }
inline ScratchUse matmul_backward(size_t, int, int, bool, bool, int) { return {}; }
inline ScratchUse attention(int, int, int, int, int, int) { return {}; }
inline ScratchUse reduction(size_t, int) { return {}; }
}  // namespace no_scratch

}  // namespace llmcpu
