#version 450
// Token and position embedding, one invocation per element of out (N,C):
//   out[i,c] = wte[tokens[i] - vocab_lo, c] + wpe[i % T, c]   for tokens in [vocab_lo, vocab_hi)
// wte is the piece of rows vocab_lo.. of the table, wpe starts at the first position of the rows
// (its offset carries any starting position). Rows whose token lies outside the piece are left
// untouched (another piece writes them). One fp32 addition: as simd/scalar/encoder.h.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;
#include "grid.glsl"

layout(std430, binding = 0) readonly buffer TokBuf { int tokens[]; };
layout(std430, binding = 1) readonly buffer WteBuf { float wte[]; };
layout(std430, binding = 2) readonly buffer WpeBuf { float wpe[]; };
layout(std430, binding = 3) writeonly buffer OutBuf { float o[]; };

layout(push_constant) uniform Push {
  uint N, T, C, vocab_lo, vocab_hi;
  uint out_off, tok_off, wte_off, wpe_off;
} pc;

void main() {
  const uint idx = flat_index();
  if (idx >= pc.N * pc.C) return;
  const uint i = idx / pc.C, c = idx - i * pc.C;
  const int tok = tokens[pc.tok_off + i];
  if (tok < 0 || uint(tok) < pc.vocab_lo || uint(tok) >= pc.vocab_hi) return;
  o[pc.out_off + idx] =
      wte[pc.wte_off + (uint(tok) - pc.vocab_lo) * pc.C + c] + wpe[pc.wpe_off + (i % pc.T) * pc.C + c];
}
