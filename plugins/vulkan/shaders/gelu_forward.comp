#version 450
// GELU in GPT-2's tanh form, one invocation per element (simd/scalar/gelu.h):
//   gelu(x) = 0.5 x (1 + tanh(u)),   u = sqrt(2/pi) (x + 0.044715 x^3)
// The constants are the float roundings of the CPU's; tanh is Vulkan's (precision inherited from
// sinh / cosh, i.e. from exp).
// BF16: inp and out are bf16 buffers; x widened exactly, y rounded to bf16 once.
#extension GL_GOOGLE_include_directive : require
#ifdef BF16
#include "bf16.glsl"
#endif

layout(local_size_x = 256) in;
#include "grid.glsl"

#ifdef BF16
layout(std430, binding = 0) readonly buffer InpBuf { uint16_t inp[]; };
layout(std430, binding = 1) writeonly buffer OutBuf { uint16_t o[]; };
#define LOAD_INP(i) bf16_to_float(inp[i])
#define STORE_OUT(i, v) o[i] = float_to_bf16(v)
#else
layout(std430, binding = 0) readonly buffer InpBuf { float inp[]; };
layout(std430, binding = 1) writeonly buffer OutBuf { float o[]; };
#define LOAD_INP(i) inp[i]
#define STORE_OUT(i, v) o[i] = v
#endif

layout(push_constant) uniform Push {
  uint n, out_off, inp_off, dout_off;  // dout_off: backward only
} pc;

const float kScale = 0.7978845608028654;  // sqrt(2/pi)
const float kCube = 0.044715;

void main() {
  const uint i = flat_index();
  if (i >= pc.n) return;
  const float x = LOAD_INP(pc.inp_off + i);
  STORE_OUT(pc.out_off + i, 0.5 * x * (1.0 + tanh(kScale * (x + kCube * x * x * x))));
}
