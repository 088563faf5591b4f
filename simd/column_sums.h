// dbias[o] += sum_n dout[n, o] in fp32 for the GEMM back ends outside Highway (simd/x86/,
// simd/onednn/): each column summed over the tokens in order, then added, as the scalar reference
// does; threads own contiguous column ranges and walk the rows, so memory is read row by row.
// The Highway tables use their own vectorized kernel (simd/hwy/matmul.cc, BackwardBias).
#pragma once

#include <cstddef>

#include "simd/scratch.h"

namespace llmcpu {

// dout (N, OC), dbias (OC).
void add_column_sums(float* dbias, const float* dout, size_t N, size_t OC);
// What add_column_sums asks of the scratch (simd/scratch.h) on a team of `threads`: each thread a
// row of its columns.
ScratchUse column_sums_scratch(size_t OC, int threads);

}  // namespace llmcpu
