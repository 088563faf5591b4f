#version 450
// AdamW, one invocation per element (simd/scalar/adamw.h), with the host's float constants:
//   g  = grad * grad_scale
//   p  = param * decay                                   decay = 1 - lr wd
//   m' = m + (g - m) (1 - beta1)                         (torch's lerp)
//   v' = v beta2 + ((1 - beta2) g) g
//   param' = p - (step_size m') / (sqrt(v') / bc2_sqrt + eps)
// Every variable is `precise`, so no multiply and add are contracted into an FMA: each +, -, * is
// one correctly rounded fp32 operation (Vulkan), in the CPU's order. sqrt and / are not correctly
// rounded in Vulkan (about 2.5 ulp); by default they are computed as correctly rounded float
// results (sqrt_rn, div_rn below, with doubles: needs shaderFloat64), so the update is bit for bit
// the CPU's float path. Compiled with -DADAMW_FLOAT32_ONLY the shader uses the float sqrt and
// division instead (devices without shaderFloat64; then a few ulp from the CPU's param).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;
#include "grid.glsl"

layout(std430, binding = 0) buffer ParamBuf { float param[]; };
layout(std430, binding = 1) buffer MBuf { float mom[]; };
layout(std430, binding = 2) buffer VBuf { float vel[]; };
layout(std430, binding = 3) readonly buffer GradBuf { float grad[]; };

layout(push_constant) uniform Push {
  uint n, param_off, m_off, v_off, grad_off;
  float decay, beta1, beta2, step_size, bc2_sqrt, eps, grad_scale;
} pc;

#ifdef ADAMW_FLOAT32_ONLY
float sqrt_rn(float v) { return sqrt(v); }
float div_rn(float a, float b) { return a / b; }
#else
// The neighbours of a positive finite float.
float next_up(float x) { return uintBitsToFloat(floatBitsToUint(x) + 1u); }
float next_down(float x) { return uintBitsToFloat(floatBitsToUint(x) - 1u); }

// Correctly rounded float sqrt(v). A candidate r from the double sqrt is moved to its neighbour
// while the exact square of the midpoint towards it says the root lies beyond: midpoints of
// adjacent floats have 25 significant bits, so their squares (50 bits) are exact in double, and
// Vulkan's double * and < are exact here. No float's root is a midpoint (an odd 25-bit
// significand squared has more than 24 bits), so no ties. The loop allows a candidate a few ulp
// off (Vulkan guarantees double sqrt only to single precision's ulp bounds).
float sqrt_rn(float v) {
  if (!(v > 0.0) || isinf(v)) return sqrt(v);  // 0, negative, NaN, inf: as the builtin
  precise float r = float(sqrt(double(v)));
  const double dv = double(v);
  for (int k = 0; k < 4; ++k) {
    precise const double hi = 0.5lf * (double(r) + double(next_up(r)));
    precise const double lo = 0.5lf * (double(next_down(r)) + double(r));
    if (hi * hi < dv) {
      r = next_up(r);
    } else if (lo * lo > dv) {
      r = next_down(r);
    } else {
      break;
    }
  }
  return r;
}

// Correctly rounded float a / b for b > 0, the same way: a midpoint (25 bits) times b (24 bits) is
// exact in double; a / b is never a midpoint (a 24-bit a cannot be an odd 25-bit significand times
// b), so no ties.
float div_rn(float a, float b) {
  const float A = abs(a);
  if (!(A > 0.0) || isinf(A) || !(b > 0.0) || isinf(b)) return a / b;
  precise float q = float(double(A) / double(b));
  const double da = double(A), db = double(b);
  for (int k = 0; k < 4; ++k) {
    precise const double hi = 0.5lf * (double(q) + double(next_up(q)));
    precise const double lo = 0.5lf * (double(next_down(q)) + double(q));
    if (hi * db < da) {
      q = next_up(q);
    } else if (q > 0.0 && lo * db > da) {
      q = next_down(q);
    } else {
      break;
    }
  }
  return a < 0.0 ? -q : q;
}
#endif

void main() {
  const uint i = flat_index();
  if (i >= pc.n) return;
  precise const float g = grad[pc.grad_off + i] * pc.grad_scale;
  precise const float p = param[pc.param_off + i] * pc.decay;
  const float m0 = mom[pc.m_off + i], v0 = vel[pc.v_off + i];
  precise const float m = m0 + (g - m0) * (1.0 - pc.beta1);
  precise const float v = v0 * pc.beta2 + (1.0 - pc.beta2) * g * g;
  mom[pc.m_off + i] = m;
  vel[pc.v_off + i] = v;
  precise const float denom = div_rn(sqrt_rn(v), pc.bc2_sqrt) + pc.eps;
  precise const float step = pc.step_size * m;
  precise const float update = div_rn(step, denom);
  param[pc.param_off + i] = p - update;
}
