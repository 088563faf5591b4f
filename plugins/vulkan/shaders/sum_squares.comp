#version 450
// Partial sums of squares for the global gradient norm, one workgroup per block of 4096 elements
// (kSumSquaresBlock: 64 invocations x 64 elements, invocation l taking l, l + 64, ...):
//   partials[j] = sum_{i in block j} x_i^2      (fp32; the host adds the partials in double)
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = ROW_THREADS) in;
#include "grid.glsl"

layout(std430, binding = 0) readonly buffer XBuf { float x[]; };
layout(std430, binding = 1) writeonly buffer PartBuf { float partials[]; };

layout(push_constant) uniform Push {
  uint n, out_off, x_off;
} pc;

const uint kBlock = 64 * ROW_THREADS;

void main() {
  const uint j = flat_group();
  if (j * kBlock >= pc.n) return;  // the whole workgroup: barriers stay uniform
  const uint lid = gl_LocalInvocationID.x;
  const uint i0 = j * kBlock, i1 = min(pc.n, i0 + kBlock);
  float acc = 0.0;
  for (uint i = i0 + lid; i < i1; i += ROW_THREADS) {
    const float v = x[pc.x_off + i];
    acc += v * v;
  }
  const float s = workgroup_reduce(acc, 0);
  if (lid == 0) partials[pc.out_off + j] = s;
}
