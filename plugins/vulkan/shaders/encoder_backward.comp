#version 450
// Embedding gradients, deterministic and without atomics (simd/scalar/encoder.h's order):
//   mode 0, one invocation per channel c: for i = 0 .. N-1 in order, when tokens[i] lies in
//           [vocab_lo, vocab_hi):  dwte[tokens[i] - vocab_lo, c] += dout[i, c]
//   mode 1, one invocation per (t, c), t < min(T, N): for i = t, t + T, ... in order:
//           dwpe[t, c] += dout[i, c]
// Each element of dst has one owner that adds the rows in order, one fp32 addition per row, as the
// CPU does. dst is dwte (mode 0) or dwpe (mode 1).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 64) in;
#include "grid.glsl"

layout(std430, binding = 0) readonly buffer TokBuf { int tokens[]; };
layout(std430, binding = 1) readonly buffer DoutBuf { float dout[]; };
layout(std430, binding = 2) buffer DstBuf { float dst[]; };

layout(push_constant) uniform Push {
  uint N, T, C, vocab_lo, vocab_hi;
  uint dst_off, dout_off, tok_off, mode;
} pc;

void main() {
  const uint idx = flat_index();
  if (pc.mode == 0) {
    const uint c = idx;
    if (c >= pc.C) return;
    for (uint i = 0; i < pc.N; ++i) {
      const int tok = tokens[pc.tok_off + i];
      if (tok < 0 || uint(tok) < pc.vocab_lo || uint(tok) >= pc.vocab_hi) continue;
      const uint d = pc.dst_off + (uint(tok) - pc.vocab_lo) * pc.C + c;
      dst[d] = dst[d] + dout[pc.dout_off + i * pc.C + c];
    }
  } else {
    if (idx >= min(pc.T, pc.N) * pc.C) return;
    const uint t = idx / pc.C, c = idx - t * pc.C;
    float acc = dst[pc.dst_off + idx];
    for (uint i = t; i < pc.N; i += pc.T) acc += dout[pc.dout_off + i * pc.C + c];
    dst[pc.dst_off + idx] = acc;
  }
}
