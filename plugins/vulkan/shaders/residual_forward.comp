#version 450
// Residual connection, one invocation per element: out = a + b (out may be a or b: each invocation
// reads its elements before it writes).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;
#include "grid.glsl"

layout(std430, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, binding = 1) readonly buffer BBuf { float b[]; };
layout(std430, binding = 2) writeonly buffer OutBuf { float o[]; };

layout(push_constant) uniform Push {
  uint n, out_off, a_off, b_off;
} pc;

void main() {
  const uint i = flat_index();
  if (i >= pc.n) return;
  const float s = a[pc.a_off + i] + b[pc.b_off + i];
  o[pc.out_off + i] = s;
}
