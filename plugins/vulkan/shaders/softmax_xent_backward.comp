#version 450
// Fused softmax + cross-entropy backward, in place on the logits, one invocation per element
// (simd/scalar/softmax_xent.h), target y, dloss = d(total)/d(loss_n):
//   dz_v = exp(z_v - lse) * dloss - [v == y] dloss   for v < V;   dz_v = 0 for V <= v < Vp
// The subtraction comes after the product, as the CPU's `z[y] -= dloss`. A negative target masks
// the row (all zero, as on the CPU); a target of V or more makes its real columns NaN.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;
#include "grid.glsl"

layout(std430, binding = 0) buffer LogitsBuf { float logits[]; };
layout(std430, binding = 1) readonly buffer LseBuf { float lse[]; };
layout(std430, binding = 2) readonly buffer TargetsBuf { int targets[]; };

layout(push_constant) uniform Push {
  uint N, V, Vp;
  uint losses_off, lse_off, logits_off, targets_off;  // losses_off: forward only
  float dloss;
} pc;

void main() {
  const uint idx = flat_index();
  if (idx >= pc.N * pc.Vp) return;
  const uint row = idx / pc.Vp, v = idx - row * pc.Vp;
  const uint z = pc.logits_off + idx;
  if (v >= pc.V) {
    logits[z] = 0.0;
    return;
  }
  const int y = targets[pc.targets_off + row];
  if (y < 0) {  // a masked row: no gradient
    logits[z] = 0.0;
    return;
  }
  float d = exp(logits[z] - lse[pc.lse_off + row]) * pc.dloss;
  if (uint(y) >= pc.V) d = 0.0 / 0.0;
  if (uint(y) == v) d = d - pc.dloss;
  logits[z] = d;
}
