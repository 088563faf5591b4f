// Block-wise quantized weights, for a frozen base under LoRA adapters (QLoRA). A weight matrix of
// `rows` rows of `cols` values (a matmul weight, OC x C, row-major) is cut along each row into
// blocks of kQuantBlock values (the last block of a row may be shorter); each block keeps one fp32
// scale and one code per value:
//   int8  scale = absmax / 127, code q = round(w / scale) in [-127, 127] (ties away from zero),
//         value q scale; bytes: one int8 per value.
//   nf4   scale = absmax, code = the index of the NF4 value nearest to w / absmax (QLoRA's 4-bit
//         NormalFloat code book, kNf4Values, as bitsandbytes has it), value kNf4Values[q] absmax;
//         bytes: two codes per byte, the first value of each pair in the high nibble (as
//         bitsandbytes packs them), a row of odd length padded with code 7 (0.0).
// A block whose values are all zero has scale 0 and decodes to zeros. Rows are quantized
// independently, so any panel of rows and whole blocks can be decoded on its own (the GEMM's
// packing decodes the panel it packs; no full-precision copy of a weight is kept).
// Bounds (derived in docs/formats.md, tested): |w - decoded| <= absmax (1/254 + 2^-22) for int8,
// and <= absmax (g/2 + 2^-22) for nf4, g the widest gap between neighbouring NF4 values
// (0.3038..., between -1 and -0.696...): 0.1519... absmax.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace llmcpu {

enum class QuantFormat { kNone, kInt8, kNf4 };

inline constexpr size_t kQuantBlock = 64;

// QLoRA's NF4 code book (Dettmers et al. 2023, appendix E; bitsandbytes' dequantization table),
// ascending; index 7 is exactly 0.
extern const float kNf4Values[16];

// "none", "int8", "nf4"; parse_quant_format returns false for anything else.
const char* quant_format_name(QuantFormat f);
bool parse_quant_format(const std::string& name, QuantFormat& f);

// Blocks per row, code bytes per row, and the bytes of a rows x cols matrix (codes and scales).
inline size_t quant_blocks_per_row(size_t cols) { return (cols + kQuantBlock - 1) / kQuantBlock; }
size_t quant_code_bytes_per_row(QuantFormat f, size_t cols);
size_t quantized_bytes(QuantFormat f, size_t rows, size_t cols);

// Quantizes w (rows x cols, row-major) into codes (rows x quant_code_bytes_per_row) and scales
// (rows x quant_blocks_per_row). Throws Error naming the row and column of a value that is not
// finite. Threads split the rows.
void quantize_rows(QuantFormat f, const float* w, size_t rows, size_t cols, uint8_t* codes,
                   float* scales);

// Decodes rows [row0, row0 + nrows) and columns [col0, col0 + ncols) into out (nrows x ncols, row
// stride ld). col0 must be even for nf4 (a byte holds a pair); any range of columns otherwise.
void dequantize_rows(QuantFormat f, const uint8_t* codes, const float* scales, size_t cols,
                     size_t row0, size_t nrows, size_t col0, size_t ncols, float* out, size_t ld);

// The derived bound on |w - decoded| of an element of a block whose largest |w| is absmax.
double quantization_bound(QuantFormat f, double absmax);

}  // namespace llmcpu
