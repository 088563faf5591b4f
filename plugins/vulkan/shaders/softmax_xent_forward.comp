#version 450
// Fused softmax + cross-entropy forward, one workgroup per row of Vp logits, the first V real
// (simd/scalar/softmax_xent.h), target y:
//   m = max_{v<V} z_v,  lse = m + log sum_{v<V} exp(z_v - m),  loss = lse - z_y
// fp32 sums (each invocation its strided columns, then workgroup_reduce). A negative target masks
// the row: loss and lse 0, as the CPU's kernels. A target of V or more gives a NaN loss (the CPU
// trusts its targets; here a bad one shows instead of reading elsewhere).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = ROW_THREADS) in;
#include "grid.glsl"

layout(std430, binding = 0) readonly buffer LogitsBuf { float logits[]; };
layout(std430, binding = 1) readonly buffer TargetsBuf { int targets[]; };
layout(std430, binding = 2) writeonly buffer LossBuf { float losses[]; };
layout(std430, binding = 3) writeonly buffer LseBuf { float lse[]; };

layout(push_constant) uniform Push {
  uint N, V, Vp;
  uint losses_off, lse_off, logits_off, targets_off;
  float dloss;  // backward only
} pc;

void main() {
  const uint row = flat_group();
  if (row >= pc.N) return;  // the whole workgroup: barriers stay uniform
  const uint lid = gl_LocalInvocationID.x;
  const uint z = pc.logits_off + row * pc.Vp;
  float lmax = -1.0 / 0.0;
  for (uint v = lid; v < pc.V; v += ROW_THREADS) lmax = max(lmax, logits[z + v]);
  const float m = workgroup_reduce(lmax, 1);
  float ls = 0.0;
  for (uint v = lid; v < pc.V; v += ROW_THREADS) ls += exp(logits[z + v] - m);
  const float l = m + log(workgroup_reduce(ls, 0));
  if (lid == 0) {
    const int y = targets[pc.targets_off + row];
    lse[pc.lse_off + row] = y < 0 ? 0.0 : l;
    losses[pc.losses_off + row] = y < 0 ? 0.0 : uint(y) < pc.V ? l - logits[z + uint(y)] : 0.0 / 0.0;
  }
}
