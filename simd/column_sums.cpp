#include "simd/column_sums.h"

#include <omp.h>

#include <algorithm>

#include "simd/workspace.h"

namespace llmcpu {

void add_column_sums(float* dbias, const float* dout, size_t N, size_t OC) {
  TeamErrors errors;  // the scratch may not be had: thrown after the region
#pragma omp parallel
  errors.run([&] {
    const Range r = split_range(OC, omp_get_thread_num(), omp_get_num_threads());
    const size_t n_cols = r.end - r.begin;
    float* acc = thread_scratch(ScratchSlot::kReduce, n_cols + 1);  // as column_sums_scratch
    std::fill(acc, acc + n_cols, 0.0f);
    for (size_t n = 0; n < N; ++n) {
      const float* d = dout + n * OC + r.begin;
      for (size_t o = 0; o < n_cols; ++o) acc[o] += d[o];
    }
    for (size_t o = 0; o < n_cols; ++o) dbias[r.begin + o] += acc[o];
  });
  errors.rethrow();
}

ScratchUse column_sums_scratch(size_t OC, int threads) {
  const size_t parts = size_t(threads > 1 ? threads : 1);
  return ScratchUse().ask_each(ScratchSlot::kReduce, (OC + parts - 1) / parts + 1);  // widest part
}

}  // namespace llmcpu
