// Helpers shared by the scalar reference kernels: a fixed-order dot product and sum.
// They fix the summation order (8 interleaved partial sums, then a fixed tree), so a result does not
// depend on the thread count or on compiler flags, and the compiler can still vectorize them without
// -ffast-math. No intrinsics here: this is the reference the vectorized targets are tested against.
#pragma once

#include <cstddef>

namespace llmcpu::scalar {

inline constexpr int kLanes = 8;

template <typename F>
inline F combine_lanes(const F (&acc)[kLanes]) {
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// sum_i a[i] * b[i]
template <typename F>
inline F dot(const F* a, const F* b, size_t n) {
  F acc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) acc[k] += a[i + k] * b[i + k];
  }
  for (int k = 0; i < n; ++i, ++k) acc[k] += a[i] * b[i];
  return combine_lanes(acc);
}

// sum_i a[i]
template <typename F>
inline F sum(const F* a, size_t n) {
  F acc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) acc[k] += a[i + k];
  }
  for (int k = 0; i < n; ++i, ++k) acc[k] += a[i];
  return combine_lanes(acc);
}

}  // namespace llmcpu::scalar
