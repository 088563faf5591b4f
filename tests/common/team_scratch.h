// The kernels' per-thread scratch (simd/workspace.h) of the calling thread and its OpenMP team, for
// the tests that check what the kernels and a training step leave allocated against their sizing.
#pragma once

#include <cstddef>

#include "simd/workspace.h"

namespace llmcpu::testing {

// Frees the scratch of the calling thread and of its OpenMP team.
inline void release_team_scratch() {
  release_thread_scratch();
#pragma omp parallel
  release_thread_scratch();
}

// The bytes the scratch of the calling thread and of its team holds (a region of the same size
// runs on the same threads of OpenMP's pool).
inline size_t team_scratch_held() {
  size_t total = 0;
#pragma omp parallel reduction(+ : total)
  total += thread_scratch_held();
  return total;
}

}  // namespace llmcpu::testing
