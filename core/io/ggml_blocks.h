// llama.cpp's Q8_0 and Q4_0 blocks (ggml-common.h: block_q8_0 {f16 d; int8 qs[32]}, block_q4_0
// {f16 d; uint8 qs[16]}), made as ggml-quants.c's reference quantizers make them, bit for bit, and
// read back. Per block of 32 values x:
//   Q8_0: d = max|x| / 127, q = roundf(x / d) (x times 1/d, in fp32; 0 where d = 0), x' = q d.
//   Q4_0: m = the x of largest magnitude (the first, if tied), d = m / -8,
//         q = min(15, trunc(x / d + 8.5)) (x times 1/d), x' = (q - 8) d; qs[j] holds q[j] in its
//         low nibble and q[j + 16] in its high one.
// d is stored as fp16 (nearest even); the values are rebuilt from that stored d.
// Deliberately not here: the k-quants (Q4_K, Q6_K), whose reference quantizers search scales.
#pragma once

#include <cstddef>
#include <cstdint>

namespace llmcpu {

inline constexpr size_t kGgmlQ8_0Bytes = 34, kGgmlQ4_0Bytes = 18, kGgmlQ0Block = 32;

// n values (a multiple of 32) into n / 32 blocks at out.
void quantize_q8_0(const float* x, size_t n, uint8_t* out);
void quantize_q4_0(const float* x, size_t n, uint8_t* out);
// n / 32 blocks back into n values.
void dequantize_q8_0(const uint8_t* blocks, size_t n, float* x);
void dequantize_q4_0(const uint8_t* blocks, size_t n, float* x);

}  // namespace llmcpu
