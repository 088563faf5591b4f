// libxsmm (1.17) small-GEMM kernels for the blocks of the matmul driver in simd/hwy/matmul.cc.
// x86 only. A kernel is JIT-compiled by libxsmm at the first use of its block shape and cached (by
// libxsmm's registry and a small per-thread table in front of it), so the blocks of a training step
// after the first dispatch nothing new. Not here: blocking, packing, threads (the driver).
#pragma once

namespace llmcpu::xsmm {

// True when this build has libxsmm and it can JIT fp32 kernels on this CPU.
bool available();

// Column-major block product, as in simd/hwy/gemm-inl.h:
//   C(m, j) (+)= sum_k A[m + k*lda] * B(k, j),  B(k, j) = B[k + j*ldb], or B[k*ldb + j] when
//   b_rows (libxsmm's TRANS_B), C(m, j) at C[m + j*ldc]; accumulate selects beta = 1 over 0.
// Returns false, and leaves C alone, where libxsmm cannot make the kernel (it makes every shape the
// driver's blocks use, but not every shape: n = 2000 with TRANS_B is refused); the caller then
// runs the block on other code. A refused shape is remembered, not asked for again, per thread.
bool block(bool b_rows, int m, int n, int k, const float* A, int lda, const float* B, int ldb,
           float* C, int ldc, bool accumulate);

}  // namespace llmcpu::xsmm
