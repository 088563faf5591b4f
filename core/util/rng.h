// A small deterministic random number generator (xorshift64*), with uniform and normal draws.
// Same seed, same numbers, on every platform and compiler: model initialisation and data shuffling
// must be reproducible, and the state is a single integer that a training-state file can carry.
#pragma once

#include <cmath>
#include <cstdint>

namespace llmcpu {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed ^ 0x9E3779B97F4A7C15ull) {
    if (state_ == 0) state_ = 0x2545F4914F6CDD1Dull;
    for (int i = 0; i < 4; ++i) next_u64();
  }

  uint64_t next_u64() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545F4914F6CDD1Dull;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return double(next_u64() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n), n > 0 (rejection sampling: no modulo bias).
  uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next_u64();
    while (x >= limit);
    return x % n;
  }

  // Standard normal (Box-Muller; one draw per call keeps the state a single integer).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }

  uint64_t state() const { return state_; }
  void set_state(uint64_t s) { state_ = s; }

 private:
  uint64_t state_;
};

}  // namespace llmcpu
