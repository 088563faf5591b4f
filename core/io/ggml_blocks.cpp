#include "core/io/ggml_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/io/safetensors.h"  // float_to_f16, f16_to_float

namespace llmcpu {

namespace {

void put_f16(uint8_t* p, float v) {
  const uint16_t h = float_to_f16(v);
  std::memcpy(p, &h, 2);
}

float get_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_float(h);
}

}  // namespace

void quantize_q8_0(const float* x, size_t n, uint8_t* out) {
  for (size_t b = 0; b < n / kGgmlQ0Block; ++b, x += kGgmlQ0Block, out += kGgmlQ8_0Bytes) {
    float amax = 0.0f;
    for (size_t j = 0; j < kGgmlQ0Block; ++j) {
      const float a = std::fabs(x[j]);
      amax = amax > a ? amax : a;  // ggml's MAX(amax, a), NaN and all
    }
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(out, d);
    for (size_t j = 0; j < kGgmlQ0Block; ++j) {
      out[2 + j] = uint8_t(int8_t(std::roundf(x[j] * id)));
    }
  }
}

void quantize_q4_0(const float* x, size_t n, uint8_t* out) {
  for (size_t b = 0; b < n / kGgmlQ0Block; ++b, x += kGgmlQ0Block, out += kGgmlQ4_0Bytes) {
    float amax = 0.0f, max = 0.0f;
    for (size_t j = 0; j < kGgmlQ0Block; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(out, d);
    const size_t half = kGgmlQ0Block / 2;
    for (size_t j = 0; j < half; ++j) {
      const float x0 = x[j] * id, x1 = x[half + j] * id;
      const int q0 = std::min(15, int(int8_t(x0 + 8.5f)));
      const int q1 = std::min(15, int(int8_t(x1 + 8.5f)));
      out[2 + j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

void dequantize_q8_0(const uint8_t* blocks, size_t n, float* x) {
  for (size_t b = 0; b < n / kGgmlQ0Block; ++b, blocks += kGgmlQ8_0Bytes, x += kGgmlQ0Block) {
    const float d = get_f16(blocks);
    for (size_t j = 0; j < kGgmlQ0Block; ++j) x[j] = float(int8_t(blocks[2 + j])) * d;
  }
}

void dequantize_q4_0(const uint8_t* blocks, size_t n, float* x) {
  const size_t half = kGgmlQ0Block / 2;
  for (size_t b = 0; b < n / kGgmlQ0Block; ++b, blocks += kGgmlQ4_0Bytes, x += kGgmlQ0Block) {
    const float d = get_f16(blocks);
    for (size_t j = 0; j < half; ++j) {
      x[j] = float(int(blocks[2 + j] & 0x0f) - 8) * d;
      x[half + j] = float(int(blocks[2 + j] >> 4) - 8) * d;
    }
  }
}

}  // namespace llmcpu
