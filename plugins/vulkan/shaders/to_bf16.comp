#version 450
// out (bf16) = in (fp32) rounded to nearest, ties to even (shaders/bf16.glsl, simd/bf16.h's
// float_to_bf16), one invocation per element; out is a bf16 buffer (out_off in 16-bit elements).
// The input is read as bits (uint), so no float operation can flush a subnormal or change a NaN.
#extension GL_GOOGLE_include_directive : require
#include "bf16.glsl"

layout(local_size_x = 256) in;
#include "grid.glsl"

layout(std430, binding = 0) readonly buffer InBuf { uint x[]; };
layout(std430, binding = 1) writeonly buffer OutBuf { uint16_t o[]; };

layout(push_constant) uniform Push {
  uint n, out_off, in_off;
} pc;

void main() {
  const uint i = flat_index();
  if (i >= pc.n) return;
  o[pc.out_off + i] = uint16_t(bf16_bits_of(x[pc.in_off + i]));
}
