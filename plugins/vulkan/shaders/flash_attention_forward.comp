#version 450
// Flash attention forward (causal) for nb batch elements: the softmax of each query row computed
// online over blocks of keys, so that only the row's log-sum-exp is kept, never the (T,T) matrix
// (simd/scalar/attention.h's flash_attention_forward is the reference). With s_u = scale q_t . k_u
// (u <= t), per row t and key block j, m the running max, l the running sum, o the running output:
//   m' = max(m, max_{u in j} s_u);  alpha = exp(m - m')   (0 on the first block)
//   p_u = exp(s_u - m');  l' = alpha l + sum_u p_u;  o' = alpha o + sum_u p_u v_u
// and at the end y_t = o (1 / l), lse_t = m + log l. One workgroup per (query block, h, b): BR
// query rows against key blocks of BC keys (those with a key <= the block's last row), staged in
// shared memory; each output element has one owner and a fixed summation order (no atomics).
// qkv (nb,T,3C) = [q | k | v] per token, out (nb,T,C), lse (nb,NH,T); head h uses channels
// [h*hs, (h+1)*hs), hs <= HS_MAX. Each operand starts at its element offset (qkv_off, out_off,
// lse_off) in its binding. Per invocation about 20 loop iterations per key and head channel block
// (T = 1024, hs = 128: ~20000, within lavapipe's 65535).
// BF16: qkv and out are bf16 buffers (offsets in 16-bit elements); q, k, v widened exactly, the
// math fp32 as above (lse fp32), y_t rounded to bf16 once.
#extension GL_GOOGLE_include_directive : require
#ifdef BF16
#include "bf16.glsl"
#endif

#define THREADS 256
#define BR 16                       // query rows per workgroup
#define BC 32                       // keys per block
#define HS_MAX 128                  // largest head size
#define ROW_THREADS (THREADS / BR)  // invocations per output row: 16
#define OUT_PER (HS_MAX / ROW_THREADS)

layout(local_size_x = THREADS) in;

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
layout(std430, binding = 2) writeonly buffer LseBuf { float lse[]; };

layout(push_constant) uniform Push {
  uint T, C, NH, hs;
  float scale;
  uint pass;  // unused here (FlashAttentionPush is shared with the backward)
  uint qkv_off, out_off, lse_off, dout_off, dqkv_off;
} pc;

shared float q_s[BR * HS_MAX];   // the block's queries (row r at r * hs)
shared float kv_s[BC * HS_MAX];  // a key block's k, then its v
shared float p_s[BR * BC];       // scores, then exp(s - m')
shared float m_s[BR], a_s[BR], l_s[BR];

const float kNegInf = -1.0 / 0.0;

void main() {
  const uint qb = gl_WorkGroupID.x, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  const uint lid = gl_LocalInvocationID.x;
  const uint hs = pc.hs, C3 = 3 * pc.C, T = pc.T;
  const uint t0 = qb * BR, t_end = min(T, t0 + BR);
  const uint q0 = pc.qkv_off + b * T * C3 + h * hs;  // + token * C3 (+ C: k, + 2C: v)
  for (uint e = lid; e < BR * hs; e += THREADS) {
    const uint r = e / hs;
    q_s[e] = t0 + r < T ? LOAD_QKV(q0 + (t0 + r) * C3 + e % hs) : 0.0;
  }
  // This invocation's outputs: row orow, channels ocol + ROW_THREADS j.
  const uint orow = lid / ROW_THREADS, ocol = lid % ROW_THREADS;
  float acc[OUT_PER];
  for (uint j = 0; j < OUT_PER; ++j) acc[j] = 0.0;
  float m = kNegInf, l = 0.0;  // row lid's running max and sum (lid < BR)
  const uint nkb = (t_end - 1) / BC + 1;
  for (uint kb = 0; kb < nkb; ++kb) {
    const uint u0 = kb * BC;
    barrier();  // the previous block's reads of kv_s and p_s are done
    for (uint e = lid; e < BC * hs; e += THREADS) {
      const uint c = e / hs;
      kv_s[e] = u0 + c < T ? LOAD_QKV(q0 + (u0 + c) * C3 + pc.C + e % hs) : 0.0;
    }
    barrier();
    // s = fl(scale fl(q . k)), -inf above the diagonal; a row past T gets 0 (never stored).
    for (uint e = lid; e < BR * BC; e += THREADS) {
      const uint r = e / BC, c = e % BC, t = t0 + r, u = u0 + c;
      float s = 0.0;
      if (t < T) {
        if (u <= t) {
          float d = 0.0;
          for (uint i = 0; i < hs; ++i) d += q_s[r * hs + i] * kv_s[c * hs + i];
          s = d * pc.scale;
        } else {
          s = kNegInf;
        }
      }
      p_s[e] = s;
    }
    barrier();
    for (uint e = lid; e < BC * hs; e += THREADS) {
      const uint c = e / hs;
      kv_s[e] = u0 + c < T ? LOAD_QKV(q0 + (u0 + c) * C3 + 2 * pc.C + e % hs) : 0.0;
    }
    if (lid < BR) {
      float mx = m;
      for (uint c = 0; c < BC; ++c) mx = max(mx, p_s[lid * BC + c]);
      a_s[lid] = m == kNegInf ? 0.0 : exp(m - mx);
      m_s[lid] = mx;
      m = mx;
    }
    barrier();
    for (uint e = lid; e < BR * BC; e += THREADS) {
      const float s = p_s[e];
      p_s[e] = s == kNegInf ? 0.0 : exp(s - m_s[e / BC]);
    }
    barrier();
    if (lid < BR) {
      l *= a_s[lid];
      for (uint c = 0; c < BC; ++c) l += p_s[lid * BC + c];
    }
    const float alpha = a_s[orow];
    for (uint j = 0; j < OUT_PER; ++j) {
      const uint i = ocol + j * ROW_THREADS;
      if (i < hs) {
        float y = acc[j] * alpha;
        for (uint c = 0; c < BC; ++c) y += p_s[orow * BC + c] * kv_s[c * hs + i];
        acc[j] = y;
      }
    }
  }
  if (lid < BR) l_s[lid] = l;
  barrier();
  const uint t = t0 + orow;
  if (t < T) {
    const float inv = 1.0 / l_s[orow];
    const uint y0 = pc.out_off + (b * T + t) * pc.C + h * hs;
    for (uint j = 0; j < OUT_PER; ++j) {
      const uint i = ocol + j * ROW_THREADS;
      if (i < hs) STORE_OUT(y0 + i, acc[j] * inv);
    }
  }
  if (lid < BR && t0 + lid < T) lse[pc.lse_off + (b * pc.NH + h) * T + t0 + lid] = m + log(l);
}
