// Per-thread scratch for the vectorized kernels, and the split of a range over an OpenMP team.
// Scratch is grow-only and 64-byte aligned: a kernel asks for what its shape needs, so after the
// first call at a shape a training step allocates nothing. What a call will ask for is said by
// the kernels' sizing entries (simd/scratch.h), before any of it is allocated. A buffer belongs to
// the thread that asked for it; a kernel may share its own buffer read-only with its team inside
// one parallel region. Not here: the activation arenas (core/model), thread placement
// (core/runtime).
#pragma once

#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>

#include "simd/scratch.h"

namespace llmcpu {

// At least `floats` floats, valid until the same thread asks the same slot for more. Throws
// std::bad_alloc when they cannot be had (or their size in bytes does not fit a size_t).
float* thread_scratch(ScratchSlot slot, size_t floats);

// The bytes the calling thread's scratch buffers hold now (scratch_bytes of each one's largest
// ask), so that a test can hold a kernel's sizing entry against what the kernel allocated.
size_t thread_scratch_held();
// Frees every scratch buffer of the calling thread (a test that measures from nothing; inside an
// OpenMP region, each thread its own). Pointers it returned before are invalid afterwards.
void release_thread_scratch();

// An exception must not leave an OpenMP region: the runtime would call std::terminate. A region
// whose threads can throw (per-thread scratch that cannot be allocated, a GEMM kernel that libxsmm
// cannot generate) runs that work through run(), which keeps the first exception, and the caller
// calls rethrow() after the region. Barriers stay outside run(), so every thread still meets them;
// a thread whose work failed skips the rest of it, and the region's results are void.
class TeamErrors {
 public:
  // Runs f(); returns false if it threw (the first exception of the team is kept).
  template <class F>
  bool run(F&& f) noexcept {
    try {
      f();
      return true;
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!first_) first_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
      return false;
    }
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  // After the region: throws the kept exception, if any.
  void rethrow() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::mutex mutex_;
  std::exception_ptr first_;
  std::atomic<bool> failed_{false};
};

// Part `part` of `parts` of [0, n) in contiguous, balanced pieces: [begin, end).
struct Range {
  size_t begin, end;
};
inline Range split_range(size_t n, int part, int parts) {
  return {n * size_t(part) / size_t(parts), n * size_t(part + 1) / size_t(parts)};
}

// Splits `threads` into a grid rows x cols with rows <= max_rows, rows dividing threads, as many
// rows as possible (the rows usually index the dimension that needs no reduction).
inline int grid_rows(int threads, size_t max_rows) {
  for (int r = threads; r > 1; --r) {
    if (threads % r == 0 && size_t(r) <= max_rows) return r;
  }
  return 1;
}

// Threads split the pairs (b, i) of B x n (attention's sequences by heads): pair(b, i, ws) runs
// for each with the calling thread's scratch ws of `floats` floats (ScratchSlot::kAttention).
// Each pair owns disjoint outputs. A thread whose scratch cannot be had keeps the error, thrown
// after the region.
template <class Pair>
void for_each_pair(int B, int n, size_t floats, const Pair& pair) {
  TeamErrors errors;
#pragma omp parallel
  {
    float* ws = nullptr;
    errors.run([&] { ws = thread_scratch(ScratchSlot::kAttention, floats); });
#pragma omp for schedule(static)
    for (int bi = 0; bi < B * n; ++bi) {
      if (ws) pair(size_t(bi / n), size_t(bi % n), ws);
    }
  }
  errors.rethrow();
}

}  // namespace llmcpu
