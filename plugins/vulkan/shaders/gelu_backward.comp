#version 450
// GELU backward, one invocation per element (simd/scalar/gelu.h), with u = sqrt(2/pi)(x + k x^3):
//   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 k x^2),  k = 0.044715
//   dinp = gelu'(inp) * dout
// In place is allowed (dinp and dout the same elements): an invocation reads its dout before it
// writes its dinp, and the bindings are not `restrict`.
// INP_BF16: inp is a bf16 buffer (the saved bf16 GELU input), widened exactly; dout, dinp fp32.
#extension GL_GOOGLE_include_directive : require
#ifdef INP_BF16
#include "bf16.glsl"
#endif

layout(local_size_x = 256) in;
#include "grid.glsl"

#ifdef INP_BF16
layout(std430, binding = 0) readonly buffer InpBuf { uint16_t inp[]; };
#define LOAD_INP(i) bf16_to_float(inp[i])
#else
layout(std430, binding = 0) readonly buffer InpBuf { float inp[]; };
#define LOAD_INP(i) inp[i]
#endif
layout(std430, binding = 1) readonly buffer DoutBuf { float dout[]; };
layout(std430, binding = 2) writeonly buffer DinpBuf { float dinp[]; };

layout(push_constant) uniform Push {
  uint n, out_off, inp_off, dout_off;  // out_off: dinp
} pc;

const float kScale = 0.7978845608028654;  // sqrt(2/pi)
const float kCube = 0.044715;

void main() {
  const uint i = flat_index();
  if (i >= pc.n) return;
  const float x = LOAD_INP(pc.inp_off + i);
  const float th = tanh(kScale * (x + kCube * x * x * x));
  const float local =
      0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * kScale * (1.0 + 3.0 * kCube * x * x);
  const float d = dout[pc.dout_off + i];
  dinp[pc.out_off + i] = local * d;
}
