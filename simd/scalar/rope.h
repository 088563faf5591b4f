// Rotary position embedding in Hugging Face's rotate_half layout (apply_rotary_pos_emb), forward
// and backward, in place (scalar reference). A head of size D (even) is two halves, a = x[0, D/2)
// and b = x[D/2, D); at position p each pair (a_j, b_j) turns by the angle whose cosine and sine
// the caller tabulated, c = cos[p, j] and s = sin[p, j]:
//   a'_j = a_j c - b_j s,   b'_j = b_j c + a_j s
// The backward applies the transpose (the rotation by minus the angle) to the gradient:
//   da_j = da'_j c + db'_j s,   db_j = db'_j c - da'_j s
// The tables (positions, D/2) hold the model's inverse frequencies and rope scaling; this file
// knows nothing of them. Row r of the (N = B*T) rows is at position pos0 + r % T, and its heads
// start at x + r * row_stride + h * D, so the rotation runs on the q or the k part of a fused qkv
// row. Every element takes two products and one addition or subtraction, in this order.
#pragma once

#include <cstddef>

namespace llmcpu::scalar {

// Rotates every head of every row in place, by the tabulated angle or (transpose) by minus it.
template <typename F>
void rope_rotate(F* x, const F* cos, const F* sin, size_t N, int T, int pos0, int heads, int D,
                 size_t row_stride, bool transpose) {
  const int half = D / 2;
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < N; ++r) {
    const size_t p = size_t(pos0) + r % size_t(T);
    const F* c = cos + p * half;
    const F* s = sin + p * half;
    for (int h = 0; h < heads; ++h) {
      F* v = x + r * row_stride + size_t(h) * D;
      for (int j = 0; j < half; ++j) {
        const F a = v[j], b = v[j + half];
        if (transpose) {
          v[j] = a * c[j] + b * s[j];
          v[j + half] = b * c[j] - a * s[j];
        } else {
          v[j] = a * c[j] - b * s[j];
          v[j + half] = b * c[j] + a * s[j];
        }
      }
    }
  }
}

template <typename F>
void rope_forward(F* x,                        // rows of row_stride, heads * D used from each
                  const F* cos, const F* sin,  // (positions, D/2)
                  size_t N, int T, int pos0, int heads, int D, size_t row_stride) {
  rope_rotate(x, cos, sin, N, T, pos0, heads, D, row_stride, false);
}

template <typename F>
void rope_backward(F* dx, const F* cos, const F* sin, size_t N, int T, int pos0, int heads, int D,
                   size_t row_stride) {
  rope_rotate(dx, cos, sin, N, T, pos0, heads, D, row_stride, true);
}

}  // namespace llmcpu::scalar
