#version 450
// Flash attention backward (causal) for nb batch elements from the forward's out and lse
// (simd/scalar/attention.h's flash_attention_backward is the reference): nothing of size (T,T)
// is read or kept; each workgroup recomputes the probabilities of its blocks from lse. Per row t,
// with D_t = dy_t . y_t (= sum_u p_tu dp_tu) and for u <= t:
//   p_tu = exp(fl(scale fl(q_t . k_u)) - lse_t);  dp_tu = dy_t . v_u;
//   ds_tu = fl(p_tu (dp_tu - D_t)) scale
//   pass 0, one workgroup per (key block, h, b), owning dk and dv of BC keys and looping over the
//           query blocks that see them, in order: dk_u = sum_{t>=u} ds_tu q_t,
//           dv_u = sum_{t>=u} p_tu dy_t
//   pass 1, one workgroup per (query block, h, b), owning dq of BR rows and looping over the key
//           blocks at or below the diagonal, in order: dq_t = sum_{u<=t} ds_tu k_u
// D_t is computed in each workgroup for the rows it reads (16 partial sums of the channels, then
// added in order). Each output element has one owner and a fixed summation order: no atomics. The
// passes write different parts of dqkv (overwritten) and read only the inputs. Each operand starts
// at its element offset (dout_off, out_off, qkv_off, lse_off, dqkv_off) in its binding. hs <=
// HS_MAX. Per invocation about 20 loop iterations per block and head channel block (T = 1024,
// hs = 128: ~20000, within lavapipe's 65535).
// BF16: qkv and out are bf16 buffers (offsets in 16-bit elements), widened exactly (D from the
// bf16 out); dout, lse and dqkv fp32.
#extension GL_GOOGLE_include_directive : require
#ifdef BF16
#include "bf16.glsl"
#endif

#define THREADS 256
#define BR 16                       // query rows per block
// keys per block; BR == BC: query block j is the first to see key block j
#define BC 16
#define HS_MAX 128                  // largest head size
#define ROW_THREADS (THREADS / BR)  // invocations per owned row: 16
#define OUT_PER (HS_MAX / ROW_THREADS)

layout(local_size_x = THREADS) in;

layout(std430, binding = 0) readonly buffer DoutBuf { float dout[]; };
#ifdef BF16
layout(std430, binding = 1) readonly buffer OutBuf { uint16_t y[]; };
layout(std430, binding = 2) readonly buffer QkvBuf { uint16_t qkv[]; };
#define LOAD_OUT(i) bf16_to_float(y[i])
#define LOAD_QKV(i) bf16_to_float(qkv[i])
#else
layout(std430, binding = 1) readonly buffer OutBuf { float y[]; };
layout(std430, binding = 2) readonly buffer QkvBuf { float qkv[]; };
#define LOAD_OUT(i) y[i]
#define LOAD_QKV(i) qkv[i]
#endif
layout(std430, binding = 3) readonly buffer LseBuf { float lse[]; };
layout(std430, binding = 4) writeonly buffer DqkvBuf { float dqkv[]; };

layout(push_constant) uniform Push {
  uint T, C, NH, hs;
  float scale;
  uint pass;
  uint qkv_off, out_off, lse_off, dout_off, dqkv_off;
} pc;

shared float q_s[BR * HS_MAX], dy_s[BR * HS_MAX];  // a query block's q and dy (row r at r * hs)
shared float k_s[BC * HS_MAX], v_s[BC * HS_MAX];   // a key block's k and v
shared float p_s[BR * BC], ds_s[BR * BC];          // p and ds of (r, c) at r * BC + c
shared float lse_s[BR], d_s[BR];

// Stages query block t0's q, dy, lse and D (rows past T: zeros). Ends with a barrier; the caller
// puts one before it when the shared arrays are still being read.
void load_queries(uint t0, uint lid, uint b, uint h) {
  const uint hs = pc.hs, C3 = 3 * pc.C, T = pc.T;
  for (uint e = lid; e < BR * hs; e += THREADS) {
    const uint t = t0 + e / hs, i = e % hs;
    const bool ok = t < T;
    q_s[e] = ok ? LOAD_QKV(pc.qkv_off + (b * T + t) * C3 + h * hs + i) : 0.0;
    dy_s[e] = ok ? dout[pc.dout_off + (b * T + t) * pc.C + h * hs + i] : 0.0;
  }
  if (lid < BR) lse_s[lid] = t0 + lid < T ? lse[pc.lse_off + (b * pc.NH + h) * T + t0 + lid] : 0.0;
  barrier();
  // D_r: invocation (r, part) sums channels part + ROW_THREADS j, then row r's partials in order.
  const uint r = lid / ROW_THREADS, part = lid % ROW_THREADS, t = t0 + r;
  float d = 0.0;
  if (t < T) {
    const uint y0 = pc.out_off + (b * T + t) * pc.C + h * hs;
    for (uint i = part; i < hs; i += ROW_THREADS) d += dy_s[r * hs + i] * LOAD_OUT(y0 + i);
  }
  ds_s[lid] = d;  // scratch until the entries are computed
  barrier();
  if (lid < BR) {
    float D = 0.0;
    for (uint j = 0; j < ROW_THREADS; ++j) D += ds_s[lid * ROW_THREADS + j];
    d_s[lid] = D;
  }
  barrier();
}

// Stages key block u0's k and v (keys past T: zeros).
void load_keys(uint u0, uint lid, uint b, uint h) {
  const uint hs = pc.hs, C3 = 3 * pc.C, T = pc.T;
  for (uint e = lid; e < BC * hs; e += THREADS) {
    const uint u = u0 + e / hs;
    const uint k = pc.qkv_off + (b * T + u) * C3 + pc.C + h * hs + e % hs;
    k_s[e] = u < T ? LOAD_QKV(k) : 0.0;
    v_s[e] = u < T ? LOAD_QKV(k + pc.C) : 0.0;
  }
}

// p and ds of entry lid = (r, c) of the staged blocks into p_s, ds_s (0 above the diagonal and
// past T).
void entry(uint t0, uint u0, uint lid) {
  const uint hs = pc.hs, r = lid / BC, c = lid % BC, t = t0 + r, u = u0 + c;
  float p = 0.0, ds = 0.0;
  if (t < pc.T && u <= t) {
    float qk = 0.0, dp = 0.0;
    for (uint i = 0; i < hs; ++i) {
      qk += q_s[r * hs + i] * k_s[c * hs + i];
      dp += dy_s[r * hs + i] * v_s[c * hs + i];
    }
    p = exp(qk * pc.scale - lse_s[r]);
    ds = p * (dp - d_s[r]) * pc.scale;
  }
  p_s[lid] = p;
  ds_s[lid] = ds;
}

void main() {
  const uint x = gl_WorkGroupID.x, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  const uint lid = gl_LocalInvocationID.x;
  const uint hs = pc.hs, C3 = 3 * pc.C, T = pc.T;
  // This invocation's outputs: row (key or query) own, channels col + ROW_THREADS j.
  const uint own = lid / ROW_THREADS, col = lid % ROW_THREADS;
  float g0[OUT_PER], g1[OUT_PER];  // pass 0: dk, dv; pass 1: dq
  for (uint j = 0; j < OUT_PER; ++j) g0[j] = 0.0, g1[j] = 0.0;
  const uint d0 = pc.dqkv_off + h * hs;  // + token * C3 (+ C: dk, + 2C: dv)
  if (pc.pass == 0) {
    const uint u0 = x * BC, nqb = (T + BR - 1) / BR;
    load_keys(u0, lid, b, h);
    for (uint qb = x; qb < nqb; ++qb) {
      barrier();  // the previous block's reads are done
      load_queries(qb * BR, lid, b, h);
      entry(qb * BR, u0, lid);
      barrier();
      for (uint r = 0; r < BR; ++r) {
        const float p = p_s[r * BC + own], ds = ds_s[r * BC + own];
        for (uint j = 0; j < OUT_PER; ++j) {
          const uint i = col + j * ROW_THREADS;
          if (i < hs) {
            g0[j] += ds * q_s[r * hs + i];
            g1[j] += p * dy_s[r * hs + i];
          }
        }
      }
    }
    const uint u = u0 + own;
    if (u < T) {
      for (uint j = 0; j < OUT_PER; ++j) {
        const uint i = col + j * ROW_THREADS;
        if (i < hs) {
          dqkv[d0 + (b * T + u) * C3 + pc.C + i] = g0[j];
          dqkv[d0 + (b * T + u) * C3 + 2 * pc.C + i] = g1[j];
        }
      }
    }
  } else {
    const uint t0 = x * BR;
    load_queries(t0, lid, b, h);
    for (uint kb = 0; kb <= x; ++kb) {
      barrier();  // the previous block's reads are done
      load_keys(kb * BC, lid, b, h);
      barrier();
      entry(t0, kb * BC, lid);
      barrier();
      for (uint c = 0; c < BC; ++c) {
        const float ds = ds_s[own * BC + c];
        for (uint j = 0; j < OUT_PER; ++j) {
          const uint i = col + j * ROW_THREADS;
          if (i < hs) g0[j] += ds * k_s[c * hs + i];
        }
      }
    }
    const uint t = t0 + own;
    if (t < T) {
      for (uint j = 0; j < OUT_PER; ++j) {
        const uint i = col + j * ROW_THREADS;
        if (i < hs) dqkv[d0 + (b * T + t) * C3 + i] = g0[j];
      }
    }
  }
}
