// Packed rows: several examples in one row of T tokens (Model::forward's starts, (B, T): where the
// example holding each token begins), each attending to itself alone (simd/attention_options.h)
// at positions that restart at 0, as transformers' DataCollatorWithFlattening packs them
// (position_ids t - start, flash-attention's varlen calls). Here: the check of a batch's starts,
// each token's position in its example, the rotary tables gathered token by token for those
// positions, and GPT-2's learned position table added (and differentiated) at them.
// Not here: the attention itself (the kernels), where the starts come from (the data loader), the
// loss of the tokens at example boundaries (the targets are the caller's).
#pragma once

#include <cstddef>

namespace llmcpu {

// Throws ShapeError naming the row and token where starts (B, T) is not a packing of the rows:
// starts[b*T] must be 0, and starts[b*T + t] either starts[b*T + t - 1] (the same example) or t
// (a new one).
void check_starts(const int* starts, int B, int T);

// positions[i] = t - starts[i] for token i = b*T + t: its position in its example.
void example_positions(int* positions, const int* starts, int B, int T);

// rows[i, :] = table[positions[i], :] for N rows of `width` floats (a rotary table of (T, D/2)
// gathered to (N, D/2): the rope kernels' row i then sits at position positions[i]).
void gather_table_rows(float* rows, const float* table, const int* positions, size_t N,
                       size_t width);

// GPT-2's learned positions at the tokens' positions: out[i, :] += wpe[positions[i], :] over N
// rows of C, and its backward dwpe[positions[i], :] += dout[i, :] (each thread owns a slice of
// channels and walks the rows in order: the same sums whatever the thread count).
void add_position_rows(float* out, const float* wpe, const int* positions, size_t N, size_t C);
void position_rows_backward(float* dwpe, const float* dout, const int* positions, size_t N,
                            size_t C);

}  // namespace llmcpu
