// Where the time of a GPT-2 124M training step goes (B=4, T=64 or --profile_seq_len, forward +
// backward + gradient norm + AdamW, as bench_step runs it): the model runs on a copy of one kernel
// table whose entries time each call, and the time per kernel family per step is printed as a
// markdown table.
//   ./build/bench_kernels --profile_step=avx512 [--profile_seq_len=1024]
// Not a Google Benchmark: one warm-up step, then the mean of the measured steps.
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/model/preset.h"
#include "core/optim/adamw.h"
#include "core/util/rng.h"
#include "simd/kernels.h"

namespace llmcpu::bench {
namespace {

using Clock = std::chrono::steady_clock;
const KernelTable* g_base = nullptr;
std::map<std::string, double>* g_seconds = nullptr;

struct Timed {
  const char* name;
  Clock::time_point t0 = Clock::now();
  ~Timed() { (*g_seconds)[name] += std::chrono::duration<double>(Clock::now() - t0).count(); }
};

// A table whose every entry times the call and forwards it to *g_base. The lm_head's matmuls
// (OC = Vp, the only one above 4096 outputs in GPT-2) are counted apart from the others.
KernelTable timed_table() {
  KernelTable t = *g_base;
  using F = float;
  using CF = const float;
  t.encoder_forward = [](F* a, const int* b, CF* c, CF* d, int e, int f, int g) {
    Timed x{"encoder"};
    g_base->encoder_forward(a, b, c, d, e, f, g);
  };
  t.encoder_backward = [](F* a, F* b, CF* c, const int* d, int e, int f, int g) {
    Timed x{"encoder"};
    g_base->encoder_backward(a, b, c, d, e, f, g);
  };
  t.layernorm_forward = [](F* a, F* b, F* c, CF* d, CF* e, CF* f, size_t g, int h) {
    Timed x{"layernorm"};
    g_base->layernorm_forward(a, b, c, d, e, f, g, h);
  };
  t.layernorm_backward = [](F* a, F* b, F* c, CF* d, CF* e, CF* f, CF* g, CF* h, size_t i, int j) {
    Timed x{"layernorm"};
    g_base->layernorm_backward(a, b, c, d, e, f, g, h, i, j);
  };
  t.matmul_forward = [](F* a, CF* b, CF* c, CF* d, size_t e, int f, int g) {
    Timed x{g > 4096 ? "matmul lm_head forward" : "matmul forward (4 per layer)"};
    g_base->matmul_forward(a, b, c, d, e, f, g);
  };
  t.matmul_backward = [](F* a, F* b, F* c, CF* d, CF* e, CF* f, size_t g, int h, int i) {
    Timed x{i > 4096 ? "matmul lm_head backward" : "matmul backward (4 per layer)"};
    g_base->matmul_backward(a, b, c, d, e, f, g, h, i);
  };
  t.flash_attention_forward = [](F* a, F* b, CF* c, int d, int e, int f, int g, int h,
                                 const AttentionOptions& o) {
    Timed x{"attention forward"};
    g_base->flash_attention_forward(a, b, c, d, e, f, g, h, o);
  };
  t.flash_attention_backward = [](F* a, CF* b, CF* c, CF* d, CF* e, int f, int g, int h, int i,
                                  int j, const AttentionOptions& o) {
    Timed x{"attention backward"};
    g_base->flash_attention_backward(a, b, c, d, e, f, g, h, i, j, o);
  };
  t.gelu_forward = [](F* a, CF* b, size_t c) {
    Timed x{"gelu"};
    g_base->gelu_forward(a, b, c);
  };
  t.gelu_backward = [](F* a, CF* b, CF* c, size_t d) {
    Timed x{"gelu"};
    g_base->gelu_backward(a, b, c, d);
  };
  t.residual_forward = [](F* a, CF* b, CF* c, size_t d) {
    Timed x{"residual"};
    g_base->residual_forward(a, b, c, d);
  };
  t.softmax_xent_forward = [](F* a, F* b, CF* c, const int* d, size_t e, int f, int g) {
    Timed x{"softmax + cross-entropy"};
    g_base->softmax_xent_forward(a, b, c, d, e, f, g);
  };
  t.softmax_xent_backward = [](F* a, CF* b, const int* c, float d, size_t e, int f, int g) {
    Timed x{"softmax + cross-entropy"};
    g_base->softmax_xent_backward(a, b, c, d, e, f, g);
  };
  t.adamw_update = [](F* a, F* b, F* c, F* d, size_t e, const AdamWStep& f) {
    Timed x{"adamw"};
    g_base->adamw_update(a, b, c, d, e, f);
  };
  t.sum_squares = [](CF* a, size_t b) {
    Timed x{"gradient norm (sum_squares)"};
    return g_base->sum_squares(a, b);
  };
  t.scale = [](F* a, float b, size_t c) {
    Timed x{"scale"};
    g_base->scale(a, b, c);
  };
  return t;
}

}  // namespace

int profile_step(std::string_view target, int steps, int T) {
  const KernelTable& base = kernels_for_target(target, "--profile_step");
  std::map<std::string, double> seconds;
  g_base = &base;
  g_seconds = &seconds;
  const KernelTable table = timed_table();
  const int B = 4;
  Model model(load_model_preset(find_conf_file("models", "gpt2-124m")), table);
  init_model(model, 1);
  model.plan_batch(B, T);
  AdamWConfig cfg;
  cfg.weight_decay = 0.1;
  AdamW opt(model.num_parameters(), cfg, table);
  std::vector<int> inputs(size_t(B) * T), targets(size_t(B) * T);
  Rng rng(7);
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs[i] = int(rng.below(model.config().vocab_size));
    targets[i] = int(rng.below(model.config().vocab_size));
  }
  double total = 0, zero_grad = 0;
  for (int s = 0; s <= steps; ++s) {
    if (s == 1) seconds.clear(), total = 0, zero_grad = 0;  // step 0 warms up (JIT, scratch)
    const auto t0 = Clock::now();
    const auto tz = Clock::now();
    model.zero_grad();
    zero_grad += std::chrono::duration<double>(Clock::now() - tz).count();
    model.forward_backward(inputs.data(), targets.data(), B, T);
    global_norm(model.grads_flat(), model.num_parameters(), table);
    opt.step(model.params_flat(), model.grads_flat(), 1e-4, nullptr, {}, {1.0f, true});
    model.mark_gradients_zero();  // as the trainer: cleared in the AdamW pass
    total += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  std::printf("GPT-2 124M step, B=%d T=%d, %s kernels, mean of %d steps\n\n", B, T,
              std::string(target).c_str(), steps);
  std::printf("| part of the step | ms | share |\n|---|---|---|\n");
  double kernels = 0;
  for (const auto& [name, sec] : seconds) {
    std::printf("| %s | %.1f | %.1f%% |\n", name.c_str(), 1e3 * sec / steps, 100 * sec / total);
    kernels += sec;
  }
  std::printf("| zero_grad (model, memset) | %.1f | %.1f%% |\n", 1e3 * zero_grad / steps,
              100 * zero_grad / total);
  const double rest = total - kernels - zero_grad;
  std::printf("| rest (model code between kernels) | %.1f | %.1f%% |\n", 1e3 * rest / steps,
              100 * rest / total);
  std::printf("| **step** | **%.1f** | 100%% |\n", 1e3 * total / steps);
  return 0;
}

}  // namespace llmcpu::bench
