#include "simd/quant/quant_matmul.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "simd/error.h"
#include "simd/workspace.h"

namespace llmcpu {

namespace {

// Floats of scratch that hold n values of T.
template <class T>
constexpr size_t floats_for(size_t n) {
  return (n * sizeof(T) + sizeof(float) - 1) / sizeof(float);
}

inline void put(float& y, float v) { y = v; }
inline void put(bf16& y, float v) { y = float_to_bf16(v); }

// Row r's columns [col0, col0 + n) into y; col0 a multiple of kQuantBlock (so of 2).
template <class T>
void decode_row(const QuantMatrix& w, size_t r, size_t col0, size_t n, T* y) {
  const uint8_t* q = w.codes + r * quant_code_bytes_per_row(w.format, w.cols);
  const float* s = w.scales + r * quant_blocks_per_row(w.cols);
  for (size_t j0 = 0; j0 < n; j0 += kQuantBlock) {
    const size_t c = col0 + j0, m = std::min(kQuantBlock, n - j0);
    const float scale = s[c / kQuantBlock];
    T* out = y + j0;
    if (w.format == QuantFormat::kInt8) {
      for (size_t j = 0; j < m; ++j) put(out[j], float(int8_t(q[c + j])) * scale);
      continue;
    }
    const uint8_t* pairs = q + c / 2;  // the first value of a pair in the high nibble
    for (size_t j = 0; j < m; ++j) {
      const uint8_t byte = pairs[j / 2];
      put(out[j], kNf4Values[j % 2 == 0 ? byte >> 4 : byte & 0x0F] * scale);
    }
  }
}

template <class T>
void decode_panel(const QuantMatrix& w, size_t row0, size_t nrows, size_t col0, size_t ncols,
                  T* out) {
  if (w.format == QuantFormat::kNone || col0 % kQuantBlock != 0 || row0 + nrows > w.rows ||
      col0 + ncols > w.cols) {
    throw Error("decode_quant_panel: rows " + std::to_string(row0) + "+" + std::to_string(nrows) +
                ", columns " + std::to_string(col0) + "+" + std::to_string(ncols) +
                " is not a panel of a quantized " + std::to_string(w.rows) + " x " +
                std::to_string(w.cols) + " weight starting at a block");
  }
#pragma omp parallel for schedule(static) if (nrows * ncols >= (1u << 16))
  for (size_t i = 0; i < nrows; ++i) decode_row(w, row0 + i, col0, ncols, out + i * ncols);
}

// Copies a panel's output (N x P) into columns [c0, c0 + P) of out (ld columns), rounding an fp32
// panel into a bf16 output.
template <class Out, class Part>
void place(Out* out, size_t ld, size_t c0, const Part* part, size_t N, size_t P) {
#pragma omp parallel for schedule(static) if (N * P >= (1u << 15))
  for (size_t n = 0; n < N; ++n) {
    Out* y = out + n * ld + c0;
    const Part* x = part + n * P;
    if constexpr (std::is_same_v<Out, Part>) {
      std::memcpy(y, x, P * sizeof(Out));
    } else {
      for (size_t j = 0; j < P; ++j) put(y[j], x[j]);
    }
  }
}

// forward: panels of kQuantPanel rows of W (Wt: the table's weight type); gemm(part, panel, bias,
// P) writes the panel's (N, P) output of type Part into part.
template <class Wt, class Part, class Out, class Gemm>
void forward_by_panels(Out* out, const QuantMatrix& w, const float* bias, size_t N, Gemm&& gemm) {
  const size_t OC = w.rows, C = w.cols, P0 = std::min(kQuantPanel, OC);
  Wt* panel = reinterpret_cast<Wt*>(
      thread_scratch(ScratchSlot::kQuantWeight, floats_for<Wt>(P0 * C)));
  Part* part = reinterpret_cast<Part*>(thread_scratch(ScratchSlot::kQuantOut, N * P0));
  for (size_t o0 = 0; o0 < OC; o0 += kQuantPanel) {
    const size_t P = std::min(kQuantPanel, OC - o0);
    decode_panel(w, o0, P, 0, C, panel);
    gemm(part, panel, bias ? bias + o0 : nullptr, P);
    place(out, OC, o0, part, N, P);
  }
}

// backward: panels of kQuantPanel columns of W, all its rows; gemm(part, panel, P) writes the
// panel's (N, P) slice of dinp into part.
template <class Wt, class Gemm>
void backward_by_panels(float* dinp, const QuantMatrix& w, size_t N, Gemm&& gemm) {
  const size_t OC = w.rows, C = w.cols, P0 = std::min(kQuantPanel, C);
  Wt* panel = reinterpret_cast<Wt*>(
      thread_scratch(ScratchSlot::kQuantWeight, floats_for<Wt>(OC * P0)));
  float* part = thread_scratch(ScratchSlot::kQuantOut, N * P0);
  for (size_t c0 = 0; c0 < C; c0 += kQuantPanel) {
    const size_t P = std::min(kQuantPanel, C - c0);
    decode_panel(w, 0, OC, c0, P, panel);
    gemm(part, panel, P);
    place(dinp, C, c0, part, N, P);
  }
}

// The panels' own asks, and the table's GEMM on each panel shape (a whole one and the last).
template <class Wt, class Sizing>
ScratchUse panel_scratch(size_t weight_values, size_t N, size_t whole, size_t last,
                         Sizing&& gemm) {
  ScratchUse use;
  use.ask(ScratchSlot::kQuantWeight, floats_for<Wt>(weight_values))
      .ask(ScratchSlot::kQuantOut, N * whole);
  use.merge(gemm(int(whole)));
  if (last != 0) use.merge(gemm(int(last)));
  return use;
}

}  // namespace

void decode_quant_panel(const QuantMatrix& w, size_t row0, size_t nrows, size_t col0,
                        size_t ncols, float* out) {
  decode_panel(w, row0, nrows, col0, ncols, out);
}

void decode_quant_panel(const QuantMatrix& w, size_t row0, size_t nrows, size_t col0,
                        size_t ncols, bf16* out) {
  decode_panel(w, row0, nrows, col0, ncols, out);
}

void quant_matmul_forward(const KernelTable& k, float* out, const float* inp, const QuantMatrix& w,
                          const float* bias, size_t N) {
  forward_by_panels<float, float>(out, w, bias, N,
                                  [&](float* part, const float* panel, const float* b, size_t P) {
                                    k.matmul_forward(part, inp, panel, b, N, int(w.cols), int(P));
                                  });
}

void quant_matmul_forward(const Bf16Kernels& h, float* out, const bf16* inp, const QuantMatrix& w,
                          const float* bias, size_t N) {
  forward_by_panels<bf16, float>(out, w, bias, N,
                                 [&](float* part, const bf16* panel, const float* b, size_t P) {
                                   h.matmul_forward(part, inp, panel, b, N, int(w.cols), int(P));
                                 });
}

void quant_matmul_forward(const Bf16Kernels& h, bf16* out, const bf16* inp, const QuantMatrix& w,
                          const float* bias, size_t N) {
  if (!h.matmul_forward_bf16) {  // fp32 panels, rounded where they are placed
    forward_by_panels<bf16, float>(out, w, bias, N,
                                   [&](float* part, const bf16* panel, const float* b, size_t P) {
                                     h.matmul_forward(part, inp, panel, b, N, int(w.cols), int(P));
                                   });
    return;
  }
  forward_by_panels<bf16, bf16>(out, w, bias, N,
                                [&](bf16* part, const bf16* panel, const float* b, size_t P) {
                                  h.matmul_forward_bf16(part, inp, panel, b, N, int(w.cols),
                                                        int(P));
                                });
}

void quant_matmul_backward(const KernelTable& k, float* dinp, const float* dout, const float* inp,
                           const QuantMatrix& w, size_t N) {
  backward_by_panels<float>(dinp, w, N, [&](float* part, const float* panel, size_t P) {
    k.matmul_backward(part, nullptr, nullptr, dout, inp, panel, N, int(P), int(w.rows));
  });
}

void quant_matmul_backward(const Bf16Kernels& h, float* dinp, const float* dout, const bf16* inp,
                           const QuantMatrix& w, size_t N) {
  backward_by_panels<bf16>(dinp, w, N, [&](float* part, const bf16* panel, size_t P) {
    h.matmul_backward(part, nullptr, nullptr, dout, inp, panel, N, int(P), int(w.rows));
  });
}

ScratchUse quant_matmul_forward_scratch(const KernelTable& k, size_t N, int C, int OC, bool bias,
                                        int threads) {
  const size_t whole = std::min(kQuantPanel, size_t(OC)), last = size_t(OC) % kQuantPanel;
  return panel_scratch<float>(whole * size_t(C), N, whole, last, [&](int P) {
    return k.matmul_forward_scratch(N, C, P, bias, threads);
  });
}

ScratchUse quant_matmul_forward_scratch(const Bf16Kernels& h, size_t N, int C, int OC, bool bias,
                                        int threads) {
  const size_t whole = std::min(kQuantPanel, size_t(OC)), last = size_t(OC) % kQuantPanel;
  return panel_scratch<bf16>(whole * size_t(C), N, whole, last, [&](int P) {
    return h.matmul_forward_scratch(N, C, P, bias, threads);
  });
}

ScratchUse quant_matmul_backward_scratch(const KernelTable& k, size_t N, int C, int OC,
                                         int threads) {
  const size_t whole = std::min(kQuantPanel, size_t(C)), last = size_t(C) % kQuantPanel;
  return panel_scratch<float>(size_t(OC) * whole, N, whole, last, [&](int P) {
    return k.matmul_backward_scratch(N, P, OC, true, false, threads);
  });
}

ScratchUse quant_matmul_backward_scratch(const Bf16Kernels& h, size_t N, int C, int OC,
                                         int threads) {
  const size_t whole = std::min(kQuantPanel, size_t(C)), last = size_t(C) % kQuantPanel;
  return panel_scratch<bf16>(size_t(OC) * whole, N, whole, last, [&](int P) {
    return h.matmul_backward_scratch(N, P, OC, true, false, threads);
  });
}

}  // namespace llmcpu
