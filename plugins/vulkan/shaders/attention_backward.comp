#version 450
// Causal attention backward for nb batch elements, in two passes selected by pc.pass (the softmax
// identity ds_u = a_u (da_u - sum_w a_w da_w)):
//   pass 0, one workgroup per (t, h, b) row: da_u = dy_t . v_u, D = sum_u a_tu da_u,
//           ds_tu = scale a_tu (da_u - D) into the scratch ds (nb,NH,T,T); dq_t = sum_u ds_tu k_u
//   pass 1, one workgroup per (u, h, b) column: dk_u = sum_{t>=u} ds_tu q_t,
//           dv_u = sum_{t>=u} a_tu dy_t
// Each output element has one owner and a fixed summation order: no atomics. dqkv is overwritten.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = ROW_THREADS) in;

layout(std430, binding = 0) readonly buffer DoutBuf { float dout[]; };
layout(std430, binding = 1) readonly buffer QkvBuf { float qkv[]; };
layout(std430, binding = 2) readonly buffer AttBuf { float att[]; };
layout(std430, binding = 3) writeonly buffer DqkvBuf { float dqkv[]; };
layout(std430, binding = 4) coherent buffer DsBuf { float ds[]; };

layout(push_constant) uniform Push {
  uint T, C, NH, hs;
  float scale;
  uint pass;
} pc;

void main() {
  const uint x = gl_WorkGroupID.x, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  const uint lid = gl_LocalInvocationID.x;
  const uint C3 = 3 * pc.C;
  const uint hoff = h * pc.hs;
  const uint arow0 = (b * pc.NH + h) * pc.T;  // row index of (b, h, t=0) in att and ds
  if (pc.pass == 0) {
    const uint t = x;
    const uint row = (arow0 + t) * pc.T;
    const uint dy = (b * pc.T + t) * pc.C + hoff;
    float lD = 0.0;
    for (uint u = lid; u <= t; u += ROW_THREADS) {
      const uint v = (b * pc.T + u) * C3 + 2 * pc.C + hoff;
      float da = 0.0;
      for (uint i = 0; i < pc.hs; ++i) da += dout[dy + i] * qkv[v + i];
      ds[row + u] = da;
      lD += att[row + u] * da;
    }
    const float D = workgroup_reduce(lD, 0);
    for (uint u = lid; u <= t; u += ROW_THREADS) {
      ds[row + u] = pc.scale * att[row + u] * (ds[row + u] - D);
    }
    memoryBarrierBuffer();
    barrier();
    for (uint i = lid; i < pc.hs; i += ROW_THREADS) {
      float dq = 0.0;
      for (uint u = 0; u <= t; ++u) dq += ds[row + u] * qkv[(b * pc.T + u) * C3 + pc.C + hoff + i];
      dqkv[(b * pc.T + t) * C3 + hoff + i] = dq;
    }
  } else {
    const uint u = x;
    for (uint i = lid; i < pc.hs; i += ROW_THREADS) {
      float dk = 0.0, dv = 0.0;
      for (uint t = u; t < pc.T; ++t) {
        const uint row = (arow0 + t) * pc.T;
        dk += ds[row + u] * qkv[(b * pc.T + t) * C3 + hoff + i];
        dv += att[row + u] * dout[(b * pc.T + t) * pc.C + hoff + i];
      }
      dqkv[(b * pc.T + u) * C3 + pc.C + hoff + i] = dk;
      dqkv[(b * pc.T + u) * C3 + 2 * pc.C + hoff + i] = dv;
    }
  }
}
