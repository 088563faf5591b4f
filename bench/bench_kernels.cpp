// Every layer kernel, forward and backward, on GPT-2 124M shapes (B=4, T=64, C=768, NH=12, V=50257,
// Vp=50304), for every kernel table this CPU runs, including the five matmul shapes separately.
//   ./build/bench_kernels                                   all tables (scalar is slow: minutes)
//   ./build/bench_kernels --benchmark_filter='^avx512/'     one table
//   ./build/bench_kernels --benchmark_filter='/matmul_'     the GEMMs of every table
//   ./build/bench_kernels --benchmark_filter=lora           LoRA's passes, N=4096, r=16, cols=1536
//   ./build/bench_kernels --benchmark_filter=attention      materialized and flash, T = 64..2048,
//                                                           and flash with a window at T = 4096,
//                                                           8192, and over packed rows at 2048
//                                                           (and their examples, T = 512)
//   ./build/bench_kernels --profile_step=avx512             time per kernel in a training step
// Each row reports GFLOP/s, GB/s of compulsory traffic (every tensor read or written once), and
// roof%: the time the kernel would take on this machine's roofline, max(FLOPs / FMA peak, bytes /
// stream bandwidth), over the measured time. Both roofs are measured at start with the same
// threads: a register-resident FMA loop (simd/hwy/roofline.cc) and stream loops (a triad and an
// in-place update) counted as the bytes they actually move, while kernels are credited only their
// compulsory bytes. Inputs rotate over enough copies to exceed 128 MiB, so each call
// starts from DRAM as in a training step, where the other layers' tensors have evicted this one's.
// A markdown summary is printed at the end.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/roofs.h"
#include "core/util/aligned_buffer.h"
#include "simd/kernels.h"

namespace llmcpu::bench {

// bench/step_profile.cpp
int profile_step(std::string_view target, int steps, int T);

namespace {

constexpr int B = 4, T = 64, C = 768, NH = 12, V = 50257, Vp = 50304;
constexpr size_t BT = size_t(B) * T;
constexpr size_t kParams = 124475904;  // GPT-2 124M with the vocabulary padded to Vp
constexpr size_t kColdBytes = size_t(128) << 20;

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Roof {
  double flops = 0;  // FLOP/s, all threads
  double bytes = 0;  // B/s, stream triad
};
Roof g_roof;

// The tensors of one benchmark, `copies` times over; the last benchmark's tensors are freed when
// the next one starts.
struct Work {
  std::string key;
  size_t copies = 1;
  std::vector<size_t> sizes;
  std::vector<AlignedBuffer<float>> data;  // copy-major: data[copy * sizes.size() + t]
  std::vector<int> tokens;                 // (B, T) ids below V
  float* get(size_t copy, size_t t) { return data[copy * sizes.size() + t].data(); }
};

Work& work(const std::string& key, const std::vector<size_t>& sizes, bool* fresh) {
  static std::unique_ptr<Work> current;
  *fresh = !current || current->key != key;
  if (!*fresh) return *current;
  current.reset();
  auto w = std::make_unique<Work>();
  w->key = key;
  w->sizes = sizes;
  size_t bytes = 0;
  for (size_t n : sizes) bytes += n * sizeof(float);
  w->copies = std::max<size_t>(1, (kColdBytes + bytes - 1) / bytes);
  uint32_t state = 12345;
  for (size_t c = 0; c < w->copies; ++c) {
    for (size_t n : sizes) {
      AlignedBuffer<float> buf(n);
      for (size_t i = 0; i < n; ++i) {  // values in [-1, 1): no denormals, no overflow
        state = state * 1664525u + 1013904223u;
        buf[i] = float(int32_t(state >> 8) - (1 << 23)) / float(1 << 23);
      }
      w->data.push_back(std::move(buf));
    }
  }
  w->tokens.resize(BT);
  for (size_t i = 0; i < BT; ++i) w->tokens[i] = int((i * 2654435761u) % V);
  current = std::move(w);
  return *current;
}

std::string g_current;  // name of the benchmark running now

struct Cost {
  double flops, bytes;
};

// Times fn(copy) over rotating copies; one untimed call first (JIT, scratch growth).
void measure(benchmark::State& state, Work& w, Cost cost, const std::function<void(size_t)>& fn) {
  fn(0);
  size_t copy = 0;
  const auto t0 = Clock::now();
  for (auto _ : state) {
    copy = (copy + 1) % w.copies;
    fn(copy);
  }
  const double secs = seconds(t0, Clock::now()) / double(state.iterations());
  report_against_roofs(state, g_current, secs, cost.flops, cost.bytes, g_roof.flops, g_roof.bytes);
}

using Bench = std::function<void(benchmark::State&, const KernelTable&)>;
constexpr double F = sizeof(float);

struct MatmulShape {
  const char* name;
  int C, OC;
  bool bias;
};
constexpr MatmulShape kMatmuls[] = {{"qkv", C, 3 * C, true},
                                    {"attproj", C, C, true},
                                    {"fc", C, 4 * C, true},
                                    {"fcproj", 4 * C, C, true},
                                    {"lm_head", C, Vp, false}};

// Flash attention's rows key_fwd and key_bwd: b rows of t tokens, NH heads of hs, prod the FLOPs
// of one product over the pairs the call computes (2 forward, 5 backward), with `opt` and, for
// packed rows, `starts` (the rows keep their own copy, which opt.starts then points at). Bytes:
// qkv, out, lse, dout and dqkv.
void add_flash_rows(std::vector<std::pair<std::string, Bench>>& r, const std::string& key, int b,
                    int t, int hs, double prod, AttentionOptions opt,
                    std::vector<int> starts = {}) {
  const size_t nc = size_t(b) * t * C, n3c = 3 * nc, nl = size_t(b) * NH * t;
  const auto options = [opt, starts] {
    AttentionOptions o = opt;
    if (!starts.empty()) o.starts = starts.data();
    return o;
  };
  // out, lse, qkv, dqkv, dout
  r.emplace_back(key + "_fwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work(key, {nc, nl, n3c, n3c, nc}, &fresh);
    measure(s, w, {2 * prod, double(n3c + nc + nl) * F}, [&](size_t c) {
      k.flash_attention_forward(w.get(c, 0), w.get(c, 1), w.get(c, 2), b, t, NH, NH, hs, options());
    });
  });
  r.emplace_back(key + "_bwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work(key, {nc, nl, n3c, n3c, nc}, &fresh);
    if (fresh) {  // out and lse must be the forward's
      for (size_t c = 0; c < w.copies; ++c) {
        k.flash_attention_forward(w.get(c, 0), w.get(c, 1), w.get(c, 2), b, t, NH, NH, hs,
                                  options());
      }
    }
    measure(s, w, {5 * prod, double(2 * n3c + 2 * nc + nl) * F}, [&](size_t c) {
      k.flash_attention_backward(w.get(c, 3), w.get(c, 4), w.get(c, 0), w.get(c, 2), w.get(c, 1), b,
                                 t, NH, NH, hs, options());
    });
  });
}

std::vector<std::pair<std::string, Bench>> kernels() {
  std::vector<std::pair<std::string, Bench>> r;
  const size_t NC = BT * C, N4C = BT * 4 * C, N3C = BT * 3 * C;
  const int hs = C / NH;
  const double causal =
      double(hs) * T * (T + 1) * B * NH;  // FLOPs of one causal T x T x hs product

  r.emplace_back("encoder_fwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("encoder", {NC, size_t(Vp) * C, size_t(T) * C}, &fresh);
    measure(s, w, {double(NC), (2.0 * NC + T * C) * F}, [&](size_t c) {
      k.encoder_forward(w.get(c, 0), w.tokens.data(), w.get(c, 1), w.get(c, 2), B, T, C);
    });
  });
  r.emplace_back("encoder_bwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("encoder", {NC, size_t(Vp) * C, size_t(T) * C}, &fresh);
    measure(s, w, {2.0 * NC, (3.0 * NC + 2.0 * T * C) * F}, [&](size_t c) {
      k.encoder_backward(w.get(c, 1), w.get(c, 2), w.get(c, 0), w.tokens.data(), B, T, C);
    });
  });
  r.emplace_back("layernorm_fwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("layernorm",
                   {NC, BT, BT, NC, size_t(C), size_t(C), NC, NC, size_t(C), size_t(C)}, &fresh);
    measure(s, w, {7.0 * NC, 2.0 * NC * F}, [&](size_t c) {
      k.layernorm_forward(w.get(c, 0), w.get(c, 1), w.get(c, 2), w.get(c, 3), w.get(c, 4),
                          w.get(c, 5), BT, C);
    });
  });
  r.emplace_back("layernorm_bwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("layernorm",
                   {NC, BT, BT, NC, size_t(C), size_t(C), NC, NC, size_t(C), size_t(C)}, &fresh);
    if (fresh) {  // valid statistics
      for (size_t c = 0; c < w.copies; ++c) {
        k.layernorm_forward(w.get(c, 0), w.get(c, 1), w.get(c, 2), w.get(c, 3), w.get(c, 4),
                            w.get(c, 5), BT, C);
      }
    }
    measure(s, w, {12.0 * NC, 4.0 * NC * F}, [&](size_t c) {
      k.layernorm_backward(w.get(c, 6), w.get(c, 8), w.get(c, 9), w.get(c, 7), w.get(c, 3),
                           w.get(c, 4), w.get(c, 1), w.get(c, 2), BT, C);
    });
  });
  for (const MatmulShape& m : kMatmuls) {
    const size_t in = BT * m.C, out = BT * m.OC, wn = size_t(m.OC) * m.C;
    const double flops = 2.0 * BT * m.C * m.OC;
    const std::string key = std::string("matmul_") + m.name;
    r.emplace_back(key + "_fwd", [=](benchmark::State& s, const KernelTable& k) {
      bool fresh;
      Work& w = work(key, {out, in, wn, size_t(m.OC), in, wn, size_t(m.OC), out}, &fresh);
      measure(s, w, {flops, double(in + out + wn) * F}, [&](size_t c) {
        k.matmul_forward(w.get(c, 0), w.get(c, 1), w.get(c, 2), m.bias ? w.get(c, 3) : nullptr, BT,
                         m.C, m.OC);
      });
    });
    r.emplace_back(key + "_bwd", [=](benchmark::State& s, const KernelTable& k) {
      bool fresh;
      Work& w = work(key, {out, in, wn, size_t(m.OC), in, wn, size_t(m.OC), out}, &fresh);
      measure(s, w, {2 * flops, double(2 * in + out + 3 * wn) * F}, [&](size_t c) {
        k.matmul_backward(w.get(c, 4), w.get(c, 5), m.bias ? w.get(c, 6) : nullptr, w.get(c, 7),
                          w.get(c, 1), w.get(c, 2), BT, m.C, m.OC);
      });
    });
  }
  const size_t att = size_t(B) * NH * T * T;
  r.emplace_back("attention_fwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("attention", {NC, att, N3C, N3C, size_t(B) * NH * T, NC}, &fresh);
    measure(s, w, {2 * causal, double(N3C + att + NC) * F}, [&](size_t c) {
      k.attention_forward(w.get(c, 0), w.get(c, 1), w.get(c, 2), B, T, C, NH);
    });
  });
  r.emplace_back("attention_bwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("attention", {NC, att, N3C, N3C, size_t(B) * NH * T, NC}, &fresh);
    if (fresh) {  // att must be softmax rows
      for (size_t c = 0; c < w.copies; ++c) {
        k.attention_forward(w.get(c, 0), w.get(c, 1), w.get(c, 2), B, T, C, NH);
      }
    }
    measure(s, w, {4 * causal, double(2 * N3C + att + NC) * F}, [&](size_t c) {
      k.attention_backward(w.get(c, 3), w.get(c, 4), w.get(c, 5), w.get(c, 2), w.get(c, 1), B, T, C,
                           NH);
    });
  });
  // Flash attention (no T x T matrix) beside the materialized kernels above, at the bench's T and
  // at longer contexts with B*T = 4096 tokens (B = 16, 4, 2 at T = 256, 1024, 2048; T = 64 keeps
  // the bench's B = 4). FLOPs: causal products of hs*T(T+1) per head (2 per pair and channel, pairs
  // u <= t): forward 2 (QK^T, PV), backward 4 for the materialized kernel (dA, dQ, dK, dV) and 5
  // for flash (QK^T recomputed). Bytes: the materialized kernels write and read att (B,NH,T,T);
  // flash moves only qkv, out, lse, dout and dqkv.
  for (const int t : {T, 256, 1024, 2048}) {
    const int b = t == T ? B : 4096 / t;
    const size_t nc = size_t(b) * t * C, n3c = 3 * nc, nl = size_t(b) * NH * t;
    const size_t tt = size_t(b) * NH * t * t;
    const double prod = double(hs) * t * (t + 1) * b * NH;  // one causal product
    const std::string at = t == T ? "" : "_T" + std::to_string(t);
    if (t != T) {  // the materialized kernels at T = 64 are the entries above
      const std::string key = "attention" + at;
      r.emplace_back("attention" + at + "_fwd", [=](benchmark::State& s, const KernelTable& k) {
        bool fresh;
        Work& w = work(key, {nc, tt, n3c, n3c, nl, nc}, &fresh);
        measure(s, w, {2 * prod, double(n3c + tt + nc) * F}, [&](size_t c) {
          k.attention_forward(w.get(c, 0), w.get(c, 1), w.get(c, 2), b, t, C, NH);
        });
      });
      r.emplace_back("attention" + at + "_bwd", [=](benchmark::State& s, const KernelTable& k) {
        bool fresh;
        Work& w = work(key, {nc, tt, n3c, n3c, nl, nc}, &fresh);
        if (fresh) {  // att must be softmax rows
          for (size_t c = 0; c < w.copies; ++c) {
            k.attention_forward(w.get(c, 0), w.get(c, 1), w.get(c, 2), b, t, C, NH);
          }
        }
        measure(s, w, {4 * prod, double(2 * n3c + tt + nc) * F}, [&](size_t c) {
          k.attention_backward(w.get(c, 3), w.get(c, 4), w.get(c, 5), w.get(c, 2), w.get(c, 1), b,
                               t, C, NH);
        });
      });
    }
    add_flash_rows(r, "flash_attention" + at, b, t, hs, prod, AttentionOptions{});
  }
  // Flash attention with a sliding window of W = 512 keys (Mistral's, Gemma's local layers) at
  // T = 4096 and 8192 (B = 1): blocks outside the window are skipped, so the time grows as T W,
  // linearly in T (without the window it would grow as T^2). FLOPs as above over the pairs a
  // window keeps, sum_t min(t + 1, W) per head.
  for (const int t : {4096, 8192}) {
    constexpr int kWindow = 512;
    const double pairs = kWindow * (kWindow + 1) / 2.0 + double(t - kWindow) * kWindow;
    const double prod = 2 * pairs * hs * NH;  // one windowed product
    add_flash_rows(r, "flash_attention_W512_T" + std::to_string(t), 1, t, hs, prod,
                   AttentionOptions{.window = kWindow});
  }
  // Flash attention over packed rows (AttentionOptions::starts): B = 2 rows of T = 2048, each of
  // 4 examples of 512 tokens, against flash_attention_T2048 above (the same rows unpacked) and
  // against its examples as rows of their own (B = 8, T = 512, the same 4096 tokens): the blocks of
  // other examples are skipped, so a row costs its examples' 4 (512 x 513 / 2) pairs, about a
  // quarter of the row's 2048 x 2049 / 2. FLOPs over those pairs, as above.
  for (const bool packed : {true, false}) {
    constexpr int kExamples = 4, n = 2048 / kExamples;
    const int t = packed ? 2048 : n, b = 4096 / t;
    const double prod = double(hs) * n * (n + 1) * (4096 / n) * NH;
    std::vector<int> starts(size_t(b) * t);
    for (size_t i = 0; i < starts.size(); ++i) starts[i] = int(i % size_t(t)) / n * n;
    add_flash_rows(r, packed ? "flash_attention_packed4_T2048" : "flash_attention_T512", b, t, hs,
                   prod, AttentionOptions{}, packed ? starts : std::vector<int>{});
  }
  r.emplace_back("attention_decode", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w =
        work("decode", {size_t(C), size_t(T), size_t(C), size_t(T) * C, size_t(T) * C}, &fresh);
    measure(s, w, {4.0 * T * C, (2.0 * T * C + 2 * C) * F}, [&](size_t c) {
      k.attention_decode(w.get(c, 0), w.get(c, 1), w.get(c, 2), w.get(c, 3), w.get(c, 4), T - 1, NH,
                         NH, hs, AttentionOptions{});
    });
  });
  r.emplace_back("gelu_fwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("gelu", {N4C, N4C, N4C}, &fresh);
    measure(s, w, {20.0 * N4C, 2.0 * N4C * F},
            [&](size_t c) { k.gelu_forward(w.get(c, 0), w.get(c, 1), N4C); });
  });
  r.emplace_back("gelu_bwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("gelu", {N4C, N4C, N4C}, &fresh);
    measure(s, w, {30.0 * N4C, 3.0 * N4C * F},
            [&](size_t c) { k.gelu_backward(w.get(c, 0), w.get(c, 1), w.get(c, 2), N4C); });
  });
  // GeGLU (the Gemma MLP) on the fc output read as [gate | up] of H = 2C each: GELU's work per
  // gate and one product; bytes: the fc output read, out (fwd) or dout read and dinp written (bwd).
  const size_t NxH = BT * 2 * C;  // N * H
  r.emplace_back("geglu_fwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("geglu", {2 * NxH, NxH, NxH, 2 * NxH}, &fresh);
    measure(s, w, {21.0 * NxH, 3.0 * NxH * F},
            [&](size_t c) { k.geglu_forward(w.get(c, 1), w.get(c, 0), BT, 2 * C); });
  });
  r.emplace_back("geglu_bwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("geglu", {2 * NxH, NxH, NxH, 2 * NxH}, &fresh);
    measure(s, w, {33.0 * NxH, 5.0 * NxH * F},
            [&](size_t c) { k.geglu_backward(w.get(c, 3), w.get(c, 2), w.get(c, 0), BT, 2 * C); });
  });
  // Per-head RMSNorm of the q and k heads (Qwen3, Gemma 3) in the qkv rows (BT, 3C), NH = NKV = 12
  // heads of 64 each. The weights are 0 with offset 1 and saved is +-1 (rstd 1 / sqrt(1 + eps)), so
  // that repeated calls in place neither grow nor shrink their data (the backward is then a
  // projection). Bytes: the heads read and written and saved written (fwd); dy read, dx written,
  // saved read (bwd).
  {
    const size_t heads = BT * 2 * NH, NQK = BT * 2 * C;
    const std::vector<size_t> sizes{N3C, NQK, heads, size_t(hs), size_t(hs)};
    auto settle = [=](Work& w) {
      const float rstd = 1.0f / std::sqrt(1.0f + 1e-6f);
      for (size_t c = 0; c < w.copies; ++c) {
        for (size_t i = 0; i < NQK; ++i) w.get(c, 1)[i] = (i % 3) ? 1.0f : -1.0f;
        std::fill(w.get(c, 2), w.get(c, 2) + heads, rstd);
        std::fill(w.get(c, 3), w.get(c, 3) + hs, 0.0f);  // wq
        std::fill(w.get(c, 4), w.get(c, 4) + hs, 0.0f);  // wk
      }
    };
    r.emplace_back("head_rmsnorm_fwd", [=](benchmark::State& s, const KernelTable& k) {
      bool fresh;
      Work& w = work("head_rmsnorm", sizes, &fresh);
      if (fresh) settle(w);
      measure(s, w, {4.0 * NQK, 3.0 * NQK * F}, [&](size_t c) {
        k.head_rmsnorm_forward(w.get(c, 0), w.get(c, 1), w.get(c, 2), w.get(c, 3), w.get(c, 4), BT,
                               NH, NH, hs, 3 * C, 1e-6f, 1.0f);
      });
    });
    r.emplace_back("head_rmsnorm_bwd", [=](benchmark::State& s, const KernelTable& k) {
      bool fresh;
      Work& w = work("head_rmsnorm", sizes, &fresh);
      if (fresh) settle(w);
      std::vector<float> dwq(hs), dwk(hs);
      measure(s, w, {8.0 * NQK, 3.0 * NQK * F}, [&](size_t c) {
        k.head_rmsnorm_backward(w.get(c, 0), dwq.data(), dwk.data(), w.get(c, 1), w.get(c, 2),
                                w.get(c, 3), w.get(c, 4), BT, NH, NH, hs, 3 * C, 1.0f);
      });
    });
  }
  r.emplace_back("residual_fwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("residual", {NC, NC}, &fresh);
    measure(s, w, {double(NC), 3.0 * NC * F},  // in place, as the model calls it
            [&](size_t c) { k.residual_forward(w.get(c, 0), w.get(c, 0), w.get(c, 1), NC); });
  });
  // LoRA's low-rank passes (kernels.h's lora_*) at a fine-tuning shape: N = 4096 tokens, rank 16,
  // a block of 1536 columns (rows as wide as the block). FLOPs 2 N cols r each; bytes: the N x cols
  // block read (and written back by the rank update), the (N, r) operand, the (r, cols) one once
  // (the outer accumulation's read and written).
  {
    constexpr size_t LN = 4096;
    constexpr int LR = 16, LC = 1536;
    const size_t big = LN * LC, low = LN * LR, small = size_t(LR) * LC;
    const double flops = 2.0 * double(big) * LR;
    const std::vector<size_t> sizes{big, low, small};
    r.emplace_back("lora_rank_update", [=](benchmark::State& s, const KernelTable& k) {
      bool fresh;
      Work& w = work("lora", sizes, &fresh);
      measure(s, w, {flops, double(2 * big + low + small) * F}, [&](size_t c) {
        k.lora_rank_update(w.get(c, 0), LC, w.get(c, 1), LR, w.get(c, 2), LN, LR, LC, 0.5f);
      });
    });
    r.emplace_back("lora_project", [=](benchmark::State& s, const KernelTable& k) {
      bool fresh;
      Work& w = work("lora", sizes, &fresh);
      measure(s, w, {flops, double(big + low + small) * F}, [&](size_t c) {
        k.lora_project(w.get(c, 1), LR, w.get(c, 0), LC, w.get(c, 2), LN, LC, LR, 0.5f);
      });
    });
    r.emplace_back("lora_outer_accumulate", [=](benchmark::State& s, const KernelTable& k) {
      bool fresh;
      Work& w = work("lora", sizes, &fresh);
      measure(s, w, {flops, double(big + low + 2 * small) * F}, [&](size_t c) {
        k.lora_outer_accumulate(w.get(c, 2), w.get(c, 0), LC, w.get(c, 1), LR, LN, LC, LR, 0.5f);
      });
    });
  }
  const size_t logits = BT * Vp;
  // Soft-capping of the logits (Gemma 2 and 3), cap 30, in place: tanh's work per logit (fwd).
  r.emplace_back("softcap_fwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("softcap", {logits, logits}, &fresh);
    measure(s, w, {20.0 * logits, 2.0 * logits * F},
            [&](size_t c) { k.softcap_forward(w.get(c, 0), logits, 30.0f); });
  });
  r.emplace_back("softcap_bwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("softcap", {logits, logits}, &fresh);
    measure(s, w, {4.0 * logits, 3.0 * logits * F},
            [&](size_t c) { k.softcap_backward(w.get(c, 1), w.get(c, 0), logits, 30.0f); });
  });
  r.emplace_back("softmax_xent_fwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("softmax", {logits, BT, BT}, &fresh);
    measure(s, w, {20.0 * BT * V, double(logits) * F}, [&](size_t c) {
      k.softmax_xent_forward(w.get(c, 1), w.get(c, 2), w.get(c, 0), w.tokens.data(), BT, V, Vp);
    });
  });
  r.emplace_back("softmax_xent_bwd", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("softmax", {logits, BT, BT}, &fresh);
    if (fresh) {
      for (size_t c = 0; c < w.copies; ++c) {
        k.softmax_xent_forward(w.get(c, 1), w.get(c, 2), w.get(c, 0), w.tokens.data(), BT, V, Vp);
      }
    }
    measure(s, w, {20.0 * BT * V, 2.0 * logits * F}, [&](size_t c) {
      k.softmax_xent_backward(w.get(c, 0), w.get(c, 2), w.tokens.data(), 1.0f / BT, BT, V, Vp);
    });
  });
  r.emplace_back("adamw", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("params4", {kParams, kParams, kParams, kParams}, &fresh);
    if (fresh) {
      float* v = w.get(0, 2);
      for (size_t i = 0; i < kParams; ++i) v[i] = std::fabs(v[i]) * 1e-4f;  // second moments >= 0
    }
    const AdamWStep step{1e-4, 0.9, 0.999, 1e-8, 0.1, 10};
    measure(s, w, {15.0 * kParams, 7.0 * kParams * F}, [&](size_t c) {
      k.adamw_update(w.get(c, 0), w.get(c, 1), w.get(c, 2), w.get(c, 3), kParams, step);
    });
  });
  r.emplace_back("sum_squares", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("params1", {kParams}, &fresh);
    measure(s, w, {2.0 * kParams, double(kParams) * F},
            [&](size_t c) { benchmark::DoNotOptimize(k.sum_squares(w.get(c, 0), kParams)); });
  });
  r.emplace_back("scale", [=](benchmark::State& s, const KernelTable& k) {
    bool fresh;
    Work& w = work("params1", {kParams}, &fresh);
    measure(s, w, {double(kParams), 2.0 * kParams * F},
            [&](size_t c) { k.scale(w.get(c, 0), 1.0f, kParams); });
  });
  return r;
}

}  // namespace
}  // namespace llmcpu::bench

int main(int argc, char** argv) {
  using namespace llmcpu;
  using namespace llmcpu::bench;
  // --profile_step=TARGET: the time per kernel family of a whole training step instead.
  constexpr std::string_view kProfile = "--profile_step=", kSeqLen = "--profile_seq_len=";
  int profile_T = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.substr(0, kSeqLen.size()) == kSeqLen) profile_T = std::atoi(argv[i] + kSeqLen.size());
  }
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.substr(0, kProfile.size()) != kProfile) continue;
    try {
      return profile_step(arg.substr(kProfile.size()), 3, profile_T);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_kernels: error: %s\n", e.what());
      return 2;
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const Roofs roofs = measure_roofs(true);  // prints them
  g_roof.flops = roofs.fp32;
  g_roof.bytes = roofs.bandwidth;
  const double stream = roofs.stream_triad, moved = roofs.bandwidth;
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(g_roof.flops / 1e9));
  benchmark::AddCustomContext("triad_stream_gbs", std::to_string(stream / 1e9));
  benchmark::AddCustomContext("bandwidth_roof_gbs", std::to_string(moved / 1e9));
  for (std::string_view target : available_targets()) {
    const KernelTable& table = kernels_for_target(target);
    for (auto& [name, fn] : kernels()) {
      const std::string full = std::string(target) + "/" + name;
      benchmark::RegisterBenchmark(full.c_str(),
                                   [fn = fn, &table, full](benchmark::State& s) {
                                     g_current = full;
                                     fn(s, table);
                                   })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.5);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_roof_summary();
  return 0;
}
