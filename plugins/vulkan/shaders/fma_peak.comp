#version 450
// The device's fp32 FMA roof, for llmcpu_vulkan_probe (no pass runs it): every invocation runs
// 8 independent vec4 chains, x = fma(x, m, c), for `iters` steps (64 flops a step), then writes the
// sum of its chains so that no compiler can drop them. m and c come from the push constants, so
// nothing folds at compile time; with 0 < m < 1 the chains converge to c / (1 - m), far from
// overflow and subnormals. The chains are written out, not looped over: llvmpipe (lavapipe) stops
// an invocation's loops after 65535 iterations in all, and `iters` alone stays well below that.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;
#include "grid.glsl"

layout(std430, binding = 0) writeonly buffer OutBuf { float o[]; };

layout(push_constant) uniform Push {
  uint n;  // invocations that write (the grid may round up)
  uint iters;
  float m, c;
} pc;

void main() {
  const uint i = flat_index();
  if (i >= pc.n) return;
  const float seed = float(i & 255u) * 1e-3;
  vec4 x0 = vec4(seed), x1 = x0 + 0.1, x2 = x0 + 0.2, x3 = x0 + 0.3;
  vec4 x4 = x0 + 0.4, x5 = x0 + 0.5, x6 = x0 + 0.6, x7 = x0 + 0.7;
  const vec4 m = vec4(pc.m), c = vec4(pc.c);
  for (uint s = 0; s < pc.iters; ++s) {
    x0 = fma(x0, m, c);
    x1 = fma(x1, m, c);
    x2 = fma(x2, m, c);
    x3 = fma(x3, m, c);
    x4 = fma(x4, m, c);
    x5 = fma(x5, m, c);
    x6 = fma(x6, m, c);
    x7 = fma(x7, m, c);
  }
  const vec4 s = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
  o[i] = s.x + s.y + s.z + s.w;
}
