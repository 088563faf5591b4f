// Reductions over flat buffers (scalar reference).
// sum_squares splits the buffer into fixed chunks, sums each in double, then adds the chunk sums in
// order: the result is the same for any thread count.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace llmcpu::scalar {

inline constexpr size_t kReduceChunk = 1 << 14;

template <typename F>
double sum_squares(const F* x, size_t N) {
  const size_t chunks = (N + kReduceChunk - 1) / kReduceChunk;
  std::vector<double> partial(chunks);
#pragma omp parallel for schedule(static)
  for (size_t c = 0; c < chunks; ++c) {
    const size_t i0 = c * kReduceChunk, i1 = std::min(N, i0 + kReduceChunk);
    double acc = 0;
    for (size_t i = i0; i < i1; ++i) acc += double(x[i]) * double(x[i]);
    partial[c] = acc;
  }
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

template <typename F>
void scale(F* x, F factor, size_t N) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < N; ++i) x[i] *= factor;
}

}  // namespace llmcpu::scalar
