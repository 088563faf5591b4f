#include "simd/quant/block_quant.h"

#include <algorithm>
#include <cmath>

#include "simd/error.h"

namespace llmcpu {

const float kNf4Values[16] = {-1.0f,
                              -0.6961928009986877f,
                              -0.5250730514526367f,
                              -0.39491748809814453f,
                              -0.28444138169288635f,
                              -0.18477343022823334f,
                              -0.09105003625154495f,
                              0.0f,
                              0.07958029955625534f,
                              0.16093020141124725f,
                              0.24611230194568634f,
                              0.33791524171829224f,
                              0.44070982933044434f,
                              0.5626170039176941f,
                              0.7229568362236023f,
                              1.0f};

namespace {

constexpr uint8_t kNf4Zero = 7;

// The midpoints between neighbouring NF4 values: x above midpoint i is nearer value i + 1.
struct Nf4Midpoints {
  float m[15];
  Nf4Midpoints() {
    for (int i = 0; i < 15; ++i)
      m[i] = static_cast<float>((double(kNf4Values[i]) + double(kNf4Values[i + 1])) / 2);
  }
};
const Nf4Midpoints kMid;

// The nearest NF4 value's index to x in [-1, 1] (a tie goes to the lower value).
uint8_t nf4_code(float x) {
  uint8_t q = 0;
  while (q < 15 && x > kMid.m[q]) ++q;
  return q;
}

void quantize_row(QuantFormat f, const float* w, size_t row, size_t cols, uint8_t* codes,
                  float* scales) {
  for (size_t b = 0; b * kQuantBlock < cols; ++b) {
    const size_t begin = b * kQuantBlock, end = std::min(cols, begin + kQuantBlock);
    float absmax = 0;
    for (size_t j = begin; j < end; ++j) {
      if (!std::isfinite(w[j])) {
        throw Error("quantize: the weight at row " + std::to_string(row) + ", column " +
                    std::to_string(j) + " is " + std::to_string(w[j]) + ", not a finite number");
      }
      absmax = std::max(absmax, std::fabs(w[j]));
    }
    if (f == QuantFormat::kInt8) {
      const float scale = absmax / 127.0f;
      scales[b] = scale;
      for (size_t j = begin; j < end; ++j) {
        const float q = scale > 0 ? std::round(w[j] / scale) : 0.0f;
        codes[j] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f)));
      }
    } else {
      scales[b] = absmax;
      for (size_t j = begin; j < end; ++j) {
        const uint8_t q = absmax > 0 ? nf4_code(w[j] / absmax) : kNf4Zero;
        uint8_t& byte = codes[j / 2];
        byte = j % 2 == 0 ? static_cast<uint8_t>(q << 4 | kNf4Zero) : (byte & 0xF0) | q;
      }
    }
  }
}

}  // namespace

const char* quant_format_name(QuantFormat f) {
  switch (f) {
    case QuantFormat::kInt8:
      return "int8";
    case QuantFormat::kNf4:
      return "nf4";
    case QuantFormat::kNone:
      break;
  }
  return "none";
}

bool parse_quant_format(const std::string& name, QuantFormat& f) {
  for (QuantFormat g : {QuantFormat::kNone, QuantFormat::kInt8, QuantFormat::kNf4}) {
    if (name == quant_format_name(g)) {
      f = g;
      return true;
    }
  }
  return false;
}

size_t quant_code_bytes_per_row(QuantFormat f, size_t cols) {
  switch (f) {
    case QuantFormat::kInt8:
      return cols;
    case QuantFormat::kNf4:
      return (cols + 1) / 2;
    case QuantFormat::kNone:
      break;
  }
  return cols * sizeof(float);
}

size_t quantized_bytes(QuantFormat f, size_t rows, size_t cols) {
  if (f == QuantFormat::kNone) return rows * cols * sizeof(float);
  return rows * (quant_code_bytes_per_row(f, cols) + quant_blocks_per_row(cols) * sizeof(float));
}

void quantize_rows(QuantFormat f, const float* w, size_t rows, size_t cols, uint8_t* codes,
                   float* scales) {
  if (f == QuantFormat::kNone) throw Error("quantize_rows: no format to quantize to");
  const size_t code_bytes = quant_code_bytes_per_row(f, cols), blocks = quant_blocks_per_row(cols);
  // A row's failure is rethrown after the loop (an exception may not leave an OpenMP region).
  std::string failure;
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < rows; ++r) {
    try {
      quantize_row(f, w + r * cols, r, cols, codes + r * code_bytes, scales + r * blocks);
    } catch (const Error& e) {
#pragma omp critical(llmcpu_quantize_failure)
      if (failure.empty()) failure = e.what();
    }
  }
  if (!failure.empty()) throw Error(failure);
}

void dequantize_rows(QuantFormat f, const uint8_t* codes, const float* scales, size_t cols,
                     size_t row0, size_t nrows, size_t col0, size_t ncols, float* out, size_t ld) {
  if (f == QuantFormat::kNf4 && col0 % 2 != 0)
    throw Error("dequantize_rows: an nf4 panel must start at an even column");
  const size_t code_bytes = quant_code_bytes_per_row(f, cols), blocks = quant_blocks_per_row(cols);
  for (size_t i = 0; i < nrows; ++i) {
    const uint8_t* q = codes + (row0 + i) * code_bytes;
    const float* s = scales + (row0 + i) * blocks;
    float* y = out + i * ld;
    for (size_t j = 0; j < ncols; ++j) {
      const size_t c = col0 + j;
      const float scale = s[c / kQuantBlock];
      if (f == QuantFormat::kInt8) {
        y[j] = static_cast<float>(static_cast<int8_t>(q[c])) * scale;
      } else {
        const uint8_t byte = q[c / 2];
        y[j] = kNf4Values[c % 2 == 0 ? byte >> 4 : byte & 0x0F] * scale;
      }
    }
  }
}

double quantization_bound(QuantFormat f, double absmax) {
  const double rounding = std::ldexp(1.0, -22);
  if (f == QuantFormat::kInt8) return absmax * (1.0 / 254 + rounding);
  if (f == QuantFormat::kNf4) {
    double gap = 0;
    for (int i = 0; i < 15; ++i) gap = std::max(gap, double(kNf4Values[i + 1]) - kNf4Values[i]);
    return absmax * (gap / 2 + rounding);
  }
  return 0;
}

}  // namespace llmcpu
