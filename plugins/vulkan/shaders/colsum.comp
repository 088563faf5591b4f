#version 450
// Column sums for the bias gradient: dbias(n) (+)= sum_m dout(m, n), dout (M, ld) from element
// d_off, dbias from element s_off; one invocation per column, rows summed in order in fp32.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer DBuf { float d[]; };
layout(std430, binding = 1) buffer SBuf { float s[]; };

layout(push_constant) uniform Push {
  uint M, N, ld, d_off, accumulate, s_off;
} pc;

void main() {
  const uint n = gl_GlobalInvocationID.x;
  if (n >= pc.N) return;
  float acc = 0.0;
  for (uint m = 0; m < pc.M; ++m) acc += d[pc.d_off + m * pc.ld + n];
  const uint o = pc.s_off + n;
  s[o] = pc.accumulate != 0u ? s[o] + acc : acc;
}
