#version 450
// C(m,n) (+)= sum_k A(m,k) B(k,n) [+ bias(n)], fp32 accumulate, every operand given by an element
// offset and two strides, so one shader serves the three products of a linear layer:
//   forward  out  (N,OC)  = inp (N,C)  . W^T    A = inp,       B(k,n) = W[n,k]
//   dinp     dinp (N,C)   = dout (N,OC) . W     A = dout,      B(k,n) = W[k,n]
//   dweight  dW   (OC,C) += dout^T . inp        A(m,k) = dout[k,m], B = inp
// Tiles of 64x64 outputs per workgroup (16x16 invocations, 4x4 outputs each) over 16-wide slices of
// k staged in shared memory. Ragged edges are handled by bounds checks on loads and stores.
// bf16 variants (compile-time defines, C and bias stay fp32, the products and sums fp32):
//   A_BF16 / B_BF16:   the operand is a bf16 buffer (offsets and strides in 16-bit elements),
//                      widened exactly on load;
//   A_ROUND / B_ROUND: the operand is fp32, rounded to bf16 on load (a gradient entering a bf16
//                      product, simd/bf16.h).
// A product of two bf16 values is exact in fp32 (8 x 8 significand bits), so only the sum rounds.
#extension GL_GOOGLE_include_directive : require
#if defined(A_BF16) || defined(A_ROUND) || defined(B_BF16) || defined(B_ROUND)
#include "bf16.glsl"
#endif

layout(local_size_x = 16, local_size_y = 16) in;

#ifdef A_BF16
layout(std430, binding = 0) readonly buffer ABuf { uint16_t a[]; };
#define LOAD_A(i) bf16_to_float(a[i])
#else
layout(std430, binding = 0) readonly buffer ABuf { float a[]; };
#ifdef A_ROUND
#define LOAD_A(i) round_bf16(a[i])
#else
#define LOAD_A(i) a[i]
#endif
#endif
#ifdef B_BF16
layout(std430, binding = 1) readonly buffer BBuf { uint16_t b[]; };
#define LOAD_B(i) bf16_to_float(b[i])
#else
layout(std430, binding = 1) readonly buffer BBuf { float b[]; };
#ifdef B_ROUND
#define LOAD_B(i) round_bf16(b[i])
#else
#define LOAD_B(i) b[i]
#endif
#endif
layout(std430, binding = 2) buffer CBuf { float c[]; };
layout(std430, binding = 3) readonly buffer BiasBuf { float bias[]; };

layout(push_constant) uniform Push {
  uint M, N, K;
  uint a_off, a_sm, a_sk;
  uint b_off, b_sk, b_sn;
  uint c_off, c_sm;
  uint bias_off;
  uint flags;  // 1: add bias(n); 2: accumulate into C
} pc;

const uint BM = 64, BN = 64, BK = 16;
shared float As[BK][BM + 1];
shared float Bs[BK][BN + 1];

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint tid = ty * 16 + tx;
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0; k0 < pc.K; k0 += BK) {
    // 1024 elements of each tile, 4 per invocation.
    for (uint e = tid; e < BM * BK; e += 256) {
      const uint kk = e % BK, mm = e / BK;  // A: consecutive invocations walk k
      const uint gm = m0 + mm, gk = k0 + kk;
      As[kk][mm] =
          (gm < pc.M && gk < pc.K) ? LOAD_A(pc.a_off + gm * pc.a_sm + gk * pc.a_sk) : 0.0;
      const uint nn = e % BN, kb = e / BN;  // B: consecutive invocations walk n
      const uint gn = n0 + nn, gk2 = k0 + kb;
      Bs[kb][nn] =
          (gn < pc.N && gk2 < pc.K) ? LOAD_B(pc.b_off + gk2 * pc.b_sk + gn * pc.b_sn) : 0.0;
    }
    barrier();
    // Rows past M (a short chunk) skip the arithmetic; the loads above and barriers stay uniform.
    for (uint kk = 0; kk < BK && m0 + ty < pc.M; ++kk) {
      float av[4], bv[4];
      for (int i = 0; i < 4; ++i) av[i] = As[kk][ty + 16 * i];
      for (int j = 0; j < 4; ++j) bv[j] = Bs[kk][tx + 16 * j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
    }
    barrier();
  }
  for (int i = 0; i < 4; ++i) {
    const uint gm = m0 + ty + 16 * i;
    if (gm >= pc.M) continue;
    for (int j = 0; j < 4; ++j) {
      const uint gn = n0 + tx + 16 * j;
      if (gn >= pc.N) continue;
      const uint idx = pc.c_off + gm * pc.c_sm + gn;
      float v = acc[i][j];
      if ((pc.flags & 1u) != 0u) v = bias[pc.bias_off + gn] + v;
      if ((pc.flags & 2u) != 0u) v = c[idx] + v;
      c[idx] = v;
    }
  }
}
