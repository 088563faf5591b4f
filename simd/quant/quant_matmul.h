// The GEMMs of a linear layer whose weight is block-quantized (simd/quant/block_quant.h): a frozen
// base under LoRA adapters (QLoRA). Only the products a frozen weight takes part in are here: the
// forward output and the input's gradient (no dweight, no dbias).
//
// The weight is decoded a panel at a time into the calling thread's scratch, in the precision of
// the table that multiplies it (fp32 for a KernelTable, bf16 for a Bf16Kernels), and the table's
// own GEMM takes the panel:
//   forward   out[:, o0:o0+P] = inp W[o0:o0+P, :]^T + bias[o0:o0+P]  (P = kQuantPanel rows of W)
//   backward  dinp[:, c0:c0+P] = d W[:, c0:c0+P]                      (P columns of W, all rows)
// so a panel of P x C (or OC x P) values is the most of the weight that ever exists decoded: no
// full-precision copy of a layer's weight is materialized. A decoded value is fl(q s) (int8) or
// fl(NF4[q] s) (nf4), as block_quant.h decodes it, and in bf16 that value rounded once to bf16
// (nearest even); the product is then the table's product with those weights, so its error is the
// table's GEMM bound on the decoded weights (tested against the scalar reference of them).
// Each panel's output lands in the calling thread's kQuantOut scratch and is copied into place.
// Not here: which weights are quantized and where their codes live (core/model/quantized_base.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "simd/bf16.h"
#include "simd/kernels.h"
#include "simd/quant/block_quant.h"
#include "simd/scratch.h"

namespace llmcpu {

// A quantized weight (OC = rows, C = cols), laid out as quantize_rows writes it.
struct QuantMatrix {
  QuantFormat format = QuantFormat::kNone;
  size_t rows = 0, cols = 0;
  const uint8_t* codes = nullptr;  // rows x quant_code_bytes_per_row(format, cols)
  const float* scales = nullptr;   // rows x quant_blocks_per_row(cols)
};

// Rows (forward) or columns (backward) of the weight per panel: a whole number of blocks.
inline constexpr size_t kQuantPanel = 4 * kQuantBlock;
static_assert(kQuantPanel % kQuantBlock == 0, "a panel holds whole blocks");

// Decodes rows [row0, row0 + nrows) and columns [col0, col0 + ncols) of w into out (nrows x
// ncols, contiguous); col0 a multiple of kQuantBlock. Threads split the rows.
void decode_quant_panel(const QuantMatrix& w, size_t row0, size_t nrows, size_t col0,
                        size_t ncols, float* out);
void decode_quant_panel(const QuantMatrix& w, size_t row0, size_t nrows, size_t col0,
                        size_t ncols, bf16* out);

// out (N, OC) = inp (N, C) W^T + bias (fp32, or null). The bf16 tables' output is fp32 or bf16
// (rounded once, in the table's epilogue where it has one).
void quant_matmul_forward(const KernelTable& k, float* out, const float* inp, const QuantMatrix& w,
                          const float* bias, size_t N);
void quant_matmul_forward(const Bf16Kernels& h, float* out, const bf16* inp, const QuantMatrix& w,
                          const float* bias, size_t N);
void quant_matmul_forward(const Bf16Kernels& h, bf16* out, const bf16* inp, const QuantMatrix& w,
                          const float* bias, size_t N);
// dinp (N, C) = dout (N, OC) W (overwritten); the bf16 table rounds dout to bf16 where it enters
// the product, as its matmul_backward does. `inp` is the layer's input (the tables' argument; a
// product without dweight does not read it).
void quant_matmul_backward(const KernelTable& k, float* dinp, const float* dout, const float* inp,
                           const QuantMatrix& w, size_t N);
void quant_matmul_backward(const Bf16Kernels& h, float* dinp, const float* dout, const bf16* inp,
                           const QuantMatrix& w, size_t N);

// What one call asks of the scratch (the panel and its output in the caller's slots, and the
// table's GEMM on the panel's shape), as the tables' sizing entries say it.
ScratchUse quant_matmul_forward_scratch(const KernelTable& k, size_t N, int C, int OC, bool bias,
                                        int threads);
ScratchUse quant_matmul_forward_scratch(const Bf16Kernels& h, size_t N, int C, int OC, bool bias,
                                        int threads);
ScratchUse quant_matmul_backward_scratch(const KernelTable& k, size_t N, int C, int OC,
                                         int threads);
ScratchUse quant_matmul_backward_scratch(const Bf16Kernels& h, size_t N, int C, int OC,
                                         int threads);

}  // namespace llmcpu
