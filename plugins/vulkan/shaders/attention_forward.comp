#version 450
// Causal attention forward for nb batch elements, one workgroup per (t, h, b) query row:
//   s_u = scale q_t . k_u (u <= t);  a_u = exp(s_u - max s) / sum exp(...);  y_t = sum_u a_u v_u
// The row of att doubles as the scores' scratch; entries above the diagonal are written as 0.
// qkv (nb,T,3C) = [q | k | v] per token, out (nb,T,C), att (nb,NH,T,T); head h uses channels
// [h*hs, (h+1)*hs). fp32 throughout; the threads of a row split u, then the head channels. Each
// operand starts at its element offset (qkv_off, out_off, att_off) in its binding.
// BF16: qkv and out are bf16 buffers (offsets in 16-bit elements); q, k, v widened exactly, the
// math fp32 as above (att fp32), y_t rounded to bf16 once.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#ifdef BF16
#include "bf16.glsl"
#endif

layout(local_size_x = ROW_THREADS) in;

#ifdef BF16
layout(std430, binding = 0) readonly buffer QkvBuf { uint16_t qkv[]; };
layout(std430, binding = 1) writeonly buffer OutBuf { uint16_t o[]; };
#define LOAD_QKV(i) bf16_to_float(qkv[i])
#define STORE_OUT(i, v) o[i] = float_to_bf16(v)
#else
layout(std430, binding = 0) readonly buffer QkvBuf { float qkv[]; };
layout(std430, binding = 1) writeonly buffer OutBuf { float o[]; };
#define LOAD_QKV(i) qkv[i]
#define STORE_OUT(i, v) o[i] = v
#endif
layout(std430, binding = 2) coherent buffer AttBuf { float att[]; };

layout(push_constant) uniform Push {
  uint T, C, NH, hs;
  float scale;
  uint pass;  // unused here (AttentionPush is shared with the backward)
  uint qkv_off, out_off, att_off, dout_off, dqkv_off, ds_off;
} pc;

void main() {
  const uint t = gl_WorkGroupID.x, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  const uint lid = gl_LocalInvocationID.x;
  const uint C3 = 3 * pc.C;
  const uint q = pc.qkv_off + (b * pc.T + t) * C3 + h * pc.hs;
  const uint row = pc.att_off + ((b * pc.NH + h) * pc.T + t) * pc.T;

  float lmax = -1.0 / 0.0;
  for (uint u = lid; u <= t; u += ROW_THREADS) {
    const uint k = pc.qkv_off + (b * pc.T + u) * C3 + pc.C + h * pc.hs;
    float s = 0.0;
    for (uint i = 0; i < pc.hs; ++i) s += LOAD_QKV(q + i) * LOAD_QKV(k + i);
    s *= pc.scale;
    att[row + u] = s;
    lmax = max(lmax, s);
  }
  const float m = workgroup_reduce(lmax, 1);
  float lsum = 0.0;
  for (uint u = lid; u <= t; u += ROW_THREADS) {
    const float e = exp(att[row + u] - m);
    att[row + u] = e;
    lsum += e;
  }
  const float inv = 1.0 / workgroup_reduce(lsum, 0);
  for (uint u = lid; u < pc.T; u += ROW_THREADS) att[row + u] = u <= t ? att[row + u] * inv : 0.0;
  memoryBarrierBuffer();
  barrier();
  const uint v = pc.qkv_off + 2 * pc.C + h * pc.hs;
  for (uint i = lid; i < pc.hs; i += ROW_THREADS) {
    float y = 0.0;
    for (uint u = 0; u <= t; ++u) y += att[row + u] * LOAD_QKV(v + (b * pc.T + u) * C3 + i);
    STORE_OUT(pc.out_off + (b * pc.T + t) * pc.C + h * pc.hs + i, y);
  }
}
