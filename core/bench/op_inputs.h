// The inputs of one op's prepared call (op_calls.h): buffers filled in parallel from a hash of the
// index, owned by the call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/util/aligned_buffer.h"
#include "simd/bf16.h"

namespace llmcpu::bench {

// Input buffers of one op, filled in parallel from a hash of the index: values in [lo, hi).
class Inputs {
 public:
  float* f32(size_t n, float lo = -1.0f, float hi = 1.0f) {
    f_.emplace_back(std::max<size_t>(n, 1));
    float* p = f_.back().data();
    const uint64_t salt = ++salt_;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) p[i] = lo + (hi - lo) * unit(i, salt);
    return p;
  }
  bf16* b16(size_t n) {
    h_.emplace_back(std::max<size_t>(n, 1));
    bf16* p = h_.back().data();
    const uint64_t salt = ++salt_;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) p[i] = float_to_bf16(2.0f * unit(i, salt) - 1.0f);
    return p;
  }
  int* tokens(size_t n, int V) {
    i_.emplace_back(std::max<size_t>(n, 1));
    int* p = i_.back().data();
    const uint64_t salt = ++salt_;
    for (size_t i = 0; i < n; ++i) p[i] = std::min(V - 1, int(unit(i, salt) * float(V)));
    return p;
  }

 private:
  // splitmix64 of (i, salt), top 24 bits as a float in [0, 1).
  static float unit(uint64_t i, uint64_t salt) {
    uint64_t z = i + salt * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return float(z >> 40) * 0x1.0p-24f;
  }
  std::vector<AlignedBuffer<float>> f_;
  std::vector<AlignedBuffer<bf16>> h_;
  std::vector<AlignedBuffer<int>> i_;
  uint64_t salt_ = 0;
};

// A prepared call: the inputs it owns and the call on them.
inline std::function<void()> owning(std::shared_ptr<Inputs> in, std::function<void()> call) {
  return [in = std::move(in), call = std::move(call)] { call(); };
}


}  // namespace llmcpu::bench
