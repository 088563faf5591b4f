// Shared by the compute shaders: the workgroup width of the row-wise kernels and a workgroup
// reduction over it. Sums and dot products accumulate in fp32, as the CPU kernels do.
#define ROW_THREADS 64

shared float red_buf[ROW_THREADS];

// Sum (op 0) or maximum (op 1) of v over the workgroup; every invocation gets the result.
float workgroup_reduce(float v, int op) {
  const uint lid = gl_LocalInvocationID.x;
  red_buf[lid] = v;
  barrier();
  for (uint s = ROW_THREADS / 2; s > 0; s >>= 1) {
    if (lid < s) {
      red_buf[lid] = op == 0 ? red_buf[lid] + red_buf[lid + s] : max(red_buf[lid], red_buf[lid + s]);
    }
    barrier();
  }
  const float r = red_buf[0];
  barrier();
  return r;
}
