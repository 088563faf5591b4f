#version 450
// LayerNorm over the C channels of each row, one workgroup per row (simd/scalar/layernorm.h):
//   mean = (1/C) sum_c x_c,  var = (1/C) sum_c (x_c - mean)^2,  rstd = 1 / sqrt(var + eps)
//   y_c  = (x_c - mean) * rstd * w_c + b_c,   eps = 1e-5
// Sums in fp32: each invocation adds its strided channels, then workgroup_reduce. rstd is
// inversesqrt (Vulkan: 2 ulp). mean and rstd (N) are kept for the backward pass.
// OUT_BF16: out is a bf16 buffer, y_c rounded to bf16 once (statistics stay fp32).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#ifdef OUT_BF16
#include "bf16.glsl"
#endif

layout(local_size_x = ROW_THREADS) in;
#include "grid.glsl"

layout(std430, binding = 0) readonly buffer InpBuf { float inp[]; };
layout(std430, binding = 1) readonly buffer WBuf { float weight[]; };
layout(std430, binding = 2) readonly buffer BBuf { float bias[]; };
#ifdef OUT_BF16
layout(std430, binding = 3) writeonly buffer OutBuf { uint16_t o[]; };
#define STORE_OUT(i, v) o[i] = float_to_bf16(v)
#else
layout(std430, binding = 3) writeonly buffer OutBuf { float o[]; };
#define STORE_OUT(i, v) o[i] = v
#endif
layout(std430, binding = 4) writeonly buffer MeanBuf { float mean[]; };
layout(std430, binding = 5) writeonly buffer RstdBuf { float rstd[]; };

layout(push_constant) uniform Push {
  uint N, C;
  uint out_off, mean_off, rstd_off, inp_off, w_off, b_off;
} pc;

void main() {
  const uint row = flat_group();
  if (row >= pc.N) return;  // the whole workgroup: barriers stay uniform
  const uint lid = gl_LocalInvocationID.x;
  const uint x = pc.inp_off + row * pc.C, y = pc.out_off + row * pc.C;
  float ls = 0.0;
  for (uint c = lid; c < pc.C; c += ROW_THREADS) ls += inp[x + c];
  const float m = workgroup_reduce(ls, 0) / float(pc.C);
  float lv = 0.0;
  for (uint c = lid; c < pc.C; c += ROW_THREADS) {
    const float d = inp[x + c] - m;
    lv += d * d;
  }
  const float v = workgroup_reduce(lv, 0) / float(pc.C);
  const float s = inversesqrt(v + 1e-5);
  for (uint c = lid; c < pc.C; c += ROW_THREADS) {
    STORE_OUT(y + c, (inp[x + c] - m) * s * weight[pc.w_off + c] + bias[pc.b_off + c]);
  }
  if (lid == 0) {
    mean[pc.mean_off + row] = m;
    rstd[pc.rstd_off + row] = s;
  }
}
