#version 450
// LayerNorm backward (simd/scalar/layernorm.h), with n_c = (x_c - mean) * rstd, g_c = w_c * dy_c:
//   pass 0, one workgroup per row:     dx_c += rstd * (g_c - mean(g) - n_c * mean(g * n))
//   pass 1, one invocation per column: dw_c += sum over rows of n_c * dy_c,  db_c += sum of dy_c
// Pass 1 adds the rows in order in fp32 (no atomics, the CPU's order); the two passes write
// different buffers and read only the inputs, so they need no barrier between them.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = ROW_THREADS) in;
#include "grid.glsl"

layout(std430, binding = 0) readonly buffer DoutBuf { float dout[]; };
layout(std430, binding = 1) readonly buffer InpBuf { float inp[]; };
layout(std430, binding = 2) readonly buffer WBuf { float weight[]; };
layout(std430, binding = 3) readonly buffer MeanBuf { float mean[]; };
layout(std430, binding = 4) readonly buffer RstdBuf { float rstd[]; };
layout(std430, binding = 5) buffer DinpBuf { float dinp[]; };
layout(std430, binding = 6) buffer DwBuf { float dweight[]; };
layout(std430, binding = 7) buffer DbBuf { float dbias[]; };

layout(push_constant) uniform Push {
  uint N, C;
  uint dinp_off, dw_off, db_off, dout_off, inp_off, w_off, mean_off, rstd_off;
  uint pass;
} pc;

void main() {
  const uint lid = gl_LocalInvocationID.x;
  if (pc.pass == 0) {
    const uint row = flat_group();
    if (row >= pc.N) return;  // the whole workgroup: barriers stay uniform
    const uint x = pc.inp_off + row * pc.C, dy = pc.dout_off + row * pc.C;
    const float m = mean[pc.mean_off + row], s = rstd[pc.rstd_off + row];
    float lg = 0.0, lgn = 0.0;
    for (uint c = lid; c < pc.C; c += ROW_THREADS) {
      const float n = (inp[x + c] - m) * s;
      const float g = weight[pc.w_off + c] * dout[dy + c];
      lg += g;
      lgn += g * n;
    }
    const float g_mean = workgroup_reduce(lg, 0) / float(pc.C);
    const float gn_mean = workgroup_reduce(lgn, 0) / float(pc.C);
    const uint dx = pc.dinp_off + row * pc.C;
    for (uint c = lid; c < pc.C; c += ROW_THREADS) {
      const float n = (inp[x + c] - m) * s;
      dinp[dx + c] += s * (weight[pc.w_off + c] * dout[dy + c] - g_mean - n * gn_mean);
    }
  } else {
    const uint c = flat_index();
    if (c >= pc.C) return;
    float dw = dweight[pc.dw_off + c], db = dbias[pc.db_off + c];
    for (uint r = 0; r < pc.N; ++r) {
      const float d = dout[pc.dout_off + r * pc.C + c];
      dw += (inp[pc.inp_off + r * pc.C + c] - mean[pc.mean_off + r]) * rstd[pc.rstd_off + r] * d;
      db += d;
    }
    dweight[pc.dw_off + c] = dw;
    dbias[pc.db_off + c] = db;
  }
}
