#include "core/model/packing.h"

#include <algorithm>
#include <string>

#include "simd/error.h"

namespace llmcpu {

void check_starts(const int* starts, int B, int T) {
  for (int b = 0; b < B; ++b) {
    const int* row = starts + size_t(b) * size_t(T);
    for (int t = 0; t < T; ++t) {
      const int prev = t == 0 ? 0 : row[t - 1];
      if (row[t] == prev || row[t] == t) continue;
      const std::string at =
          "starts[row " + std::to_string(b) + ", token " + std::to_string(t) + "]";
      throw ShapeError(at + " = " + std::to_string(row[t]) + ": expected " +
                       (t == 0 ? std::string("0 (a row begins an example)")
                               : std::to_string(prev) + " (the example of token " +
                                     std::to_string(t - 1) + ") or " + std::to_string(t) +
                                     " (a new example)"));
    }
  }
}

void example_positions(int* positions, const int* starts, int B, int T) {
  const size_t N = size_t(B) * size_t(T);
  for (size_t i = 0; i < N; ++i) positions[i] = int(i % size_t(T)) - starts[i];
}

void gather_table_rows(float* rows, const float* table, const int* positions, size_t N,
                       size_t width) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < N; ++i) {
    std::copy_n(table + size_t(positions[i]) * width, width, rows + i * width);
  }
}

void add_position_rows(float* out, const float* wpe, const int* positions, size_t N, size_t C) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < N; ++i) {
    const float* p = wpe + size_t(positions[i]) * C;
    float* o = out + i * C;
    for (size_t c = 0; c < C; ++c) o[c] += p[c];
  }
}

void position_rows_backward(float* dwpe, const float* dout, const int* positions, size_t N,
                            size_t C) {
  constexpr size_t kSlice = 64;
  const long slices = long((C + kSlice - 1) / kSlice);
#pragma omp parallel for schedule(static)
  for (long s = 0; s < slices; ++s) {
    const size_t c0 = size_t(s) * kSlice, c1 = std::min(C, c0 + kSlice);
    for (size_t i = 0; i < N; ++i) {
      float* dp = dwpe + size_t(positions[i]) * C;
      const float* d = dout + i * C;
      for (size_t c = c0; c < c1; ++c) dp[c] += d[c];
    }
  }
}

}  // namespace llmcpu
