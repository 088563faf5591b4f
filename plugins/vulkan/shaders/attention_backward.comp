#version 450
// Causal attention backward for nb batch elements, in two passes selected by pc.pass (the softmax
// identity ds_u = a_u (da_u - sum_w a_w da_w)):
//   pass 0, one workgroup per (t, h, b) row: da_u = dy_t . v_u, D = sum_u a_tu da_u,
//           ds_tu = scale a_tu (da_u - D) into the scratch ds (nb,NH,T,T); dq_t = sum_u ds_tu k_u
//   pass 1, one workgroup per (u, h, b) column: dk_u = sum_{t>=u} ds_tu q_t,
//           dv_u = sum_{t>=u} a_tu dy_t
// Each output element has one owner and a fixed summation order: no atomics. dqkv is overwritten.
// Each operand starts at its element offset (dout_off, qkv_off, att_off, dqkv_off, ds_off) in its
// binding. Pass 1 reads the ds of pass 0: the caller puts a barrier between the two dispatches.
// QKV_BF16: qkv is a bf16 buffer (qkv_off in 16-bit elements), widened exactly; the rest fp32.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#ifdef QKV_BF16
#include "bf16.glsl"
#endif

layout(local_size_x = ROW_THREADS) in;

layout(std430, binding = 0) readonly buffer DoutBuf { float dout[]; };
#ifdef QKV_BF16
layout(std430, binding = 1) readonly buffer QkvBuf { uint16_t qkv[]; };
#define LOAD_QKV(i) bf16_to_float(qkv[i])
#else
layout(std430, binding = 1) readonly buffer QkvBuf { float qkv[]; };
#define LOAD_QKV(i) qkv[i]
#endif
layout(std430, binding = 2) readonly buffer AttBuf { float att[]; };
layout(std430, binding = 3) writeonly buffer DqkvBuf { float dqkv[]; };
layout(std430, binding = 4) coherent buffer DsBuf { float ds[]; };

layout(push_constant) uniform Push {
  uint T, C, NH, hs;
  float scale;
  uint pass;
  uint qkv_off, out_off, att_off, dout_off, dqkv_off, ds_off;  // out_off: forward only
} pc;

void main() {
  const uint x = gl_WorkGroupID.x, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  const uint lid = gl_LocalInvocationID.x;
  const uint C3 = 3 * pc.C;
  const uint hoff = h * pc.hs;
  const uint arow0 = (b * pc.NH + h) * pc.T;  // row index of (b, h, t=0) in att and ds
  const uint q0 = pc.qkv_off + hoff, k0 = q0 + pc.C, v0 = q0 + 2 * pc.C;  // + token * C3
  const uint dy0 = pc.dout_off + hoff;                                      // + token * C
  const uint dq0 = pc.dqkv_off + hoff;                                      // + token * C3
  if (pc.pass == 0) {
    const uint t = x;
    const uint arow = pc.att_off + (arow0 + t) * pc.T, srow = pc.ds_off + (arow0 + t) * pc.T;
    const uint dy = dy0 + (b * pc.T + t) * pc.C;
    float lD = 0.0;
    for (uint u = lid; u <= t; u += ROW_THREADS) {
      const uint v = v0 + (b * pc.T + u) * C3;
      float da = 0.0;
      for (uint i = 0; i < pc.hs; ++i) da += dout[dy + i] * LOAD_QKV(v + i);
      ds[srow + u] = da;
      lD += att[arow + u] * da;
    }
    const float D = workgroup_reduce(lD, 0);
    for (uint u = lid; u <= t; u += ROW_THREADS) {
      ds[srow + u] = pc.scale * att[arow + u] * (ds[srow + u] - D);
    }
    memoryBarrierBuffer();
    barrier();
    for (uint i = lid; i < pc.hs; i += ROW_THREADS) {
      float dq = 0.0;
      for (uint u = 0; u <= t; ++u) dq += ds[srow + u] * LOAD_QKV(k0 + (b * pc.T + u) * C3 + i);
      dqkv[dq0 + (b * pc.T + t) * C3 + i] = dq;
    }
  } else {
    const uint u = x;
    for (uint i = lid; i < pc.hs; i += ROW_THREADS) {
      float dk = 0.0, dv = 0.0;
      for (uint t = u; t < pc.T; ++t) {
        const uint row = (arow0 + t) * pc.T;
        dk += ds[pc.ds_off + row + u] * LOAD_QKV(q0 + (b * pc.T + t) * C3 + i);
        dv += att[pc.att_off + row + u] * dout[dy0 + (b * pc.T + t) * pc.C + i];
      }
      dqkv[dq0 + (b * pc.T + u) * C3 + pc.C + i] = dk;
      dqkv[dq0 + (b * pc.T + u) * C3 + 2 * pc.C + i] = dv;
    }
  }
}
