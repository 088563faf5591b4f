// Timing of the ops and the step (run.h). Each timed call of an op starts with the caches flushed
// (a sweep over 64 MiB), so its inputs come from memory as in a step whose other layers evicted
// them; one untimed call before (first touch, JIT, scratch growth). The step is the trainer's:
// zero_grad, forward_backward, the gradient norm and AdamW, after one untimed step.
#include "core/bench/run.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/bench/layer_ops.h"
#include "core/io/model_file.h"
#include "core/lora/peft_files.h"
#include "core/model/model.h"
#include "core/optim/adamw.h"
#include "core/util/aligned_buffer.h"
#include "simd/bf16.h"
#include "simd/error.h"
#include "simd/kernels.h"

namespace llmcpu::bench {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Reads and writes every line of a buffer larger than the last-level caches of the machines this
// runs on.
void flush_caches() {
  static AlignedBuffer<float> sweep((size_t(64) << 20) / sizeof(float));
  float* p = sweep.data();
  const size_t n = sweep.size();
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i += 16) p[i] = p[i] * 0.5f + 1.0f;
}

Timing summarize(std::vector<double> s) {
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  const double median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  return {median, s.front(), s.back()};
}

// The matmuls' peak of a target's bf16 table: AMX for oneDNN where the CPU has it, the
// AVX512-BF16 dot products for the own table, else the fp32 FMAs the portable GEMM runs on.
double bf16_gemm_peak(std::string_view table, const roofs::Roofs& m, double fp32) {
  if (table == "onednn" && m.amx > 0) return m.amx;
  if ((table == "onednn" || table == "avx512bf16") && m.dpbf16 > 0) return m.dpbf16;
  return fp32;
}

// B x T token ids below V: (i a + b) mod V.
std::vector<int> bench_tokens(const BenchOptions& o, size_t a, size_t b) {
  std::vector<int> out(size_t(o.batch) * o.seq_len);
  for (size_t i = 0; i < out.size(); ++i) out[i] = int((i * a + b) % size_t(o.config.vocab_size));
  return out;
}

void rate(BenchRow& r, double flop_roof, double byte_roof) {
  const double t = r.time.median;
  r.gflops = r.flops / t / 1e9;
  r.gbs = r.bytes / t / 1e9;
  const double t_flops = r.flops / flop_roof, t_bytes = r.bytes / byte_roof;
  r.compute_bound = t_flops > t_bytes;
  r.roof_pct = 100.0 * std::max(t_flops, t_bytes) / t;
}

// The adapter of a LoRA step: --adapter's, or a new one.
std::unique_ptr<LoraAdapter> bench_adapter(const BenchOptions& o) {
  if (!o.adapter.empty()) return std::make_unique<LoraAdapter>(read_peft_adapter(o.adapter, o.config));
  return std::make_unique<LoraAdapter>(o.config, o.lora, 1);
}

// The trainer's LoRA step: zero the adapter's gradients, forward_backward on the frozen base, the
// adapter's gradient norm and AdamW over the adapter.
std::vector<double> time_lora_steps(const BenchOptions& o, Model& model, const KernelTable& k) {
  std::unique_ptr<LoraAdapter> adapter = bench_adapter(o);
  if (o.adapter.empty()) adapter->copy_base(std::as_const(model).params_flat(), o.config);
  model.attach_lora(adapter->params_for_model(true));
  const int B = o.batch, T = o.seq_len;
  model.plan_batch(B, T);
  AdamWConfig cfg;
  cfg.weight_decay = 0.1;
  AdamW opt(adapter->size(), cfg, k, model.bf16_kernels());
  const std::vector<int> inputs = bench_tokens(o, 7919, 13), targets = bench_tokens(o, 104729, 7);
  std::vector<double> s;
  for (int rep = 0; rep <= o.reps; ++rep) {
    const auto t0 = Clock::now();
    std::fill_n(adapter->grads(), adapter->size(), 0.0f);
    model.forward_backward(inputs.data(), targets.data(), B, T);
    const double norm = global_norm(adapter->grads(), adapter->size(), k);
    opt.step(adapter->params(), adapter->grads(), 1e-4, nullptr, {}, {clip_factor(norm, 1.0), true});
    if (rep > 0) s.push_back(seconds_since(t0));  // the first step warms up
  }
  return s;
}

// The trainer's step on random tokens; returns the seconds of each timed step.
std::vector<double> time_steps(const BenchOptions& o, const KernelTable& k, const Bf16Kernels& h) {
  Model model(o.config, k, o.precision, &h, /*base_gradients=*/!o.lora_step());
  if (o.lora_step()) {  // frozen as it is written
    model.begin_freeze(o.base_quant, trained_roles(select_trained_pieces(o.config, o.lora.train)));
  }
  if (o.source.is_file()) {
    load_model_file(o.source, model);
  } else {
    init_model(model, 1);
  }
  if (o.lora_step()) {
    model.finish_freeze();
    return time_lora_steps(o, model, k);
  }
  const int B = o.batch, T = o.seq_len;
  model.plan_batch(B, T);
  AdamWConfig cfg;
  cfg.weight_decay = 0.1;
  AdamW opt(model.num_parameters(), cfg, model.kernels(), model.bf16_kernels());
  const std::vector<int> inputs = bench_tokens(o, 7919, 13), targets = bench_tokens(o, 104729, 7);
  std::vector<double> s;
  for (int rep = 0; rep <= o.reps; ++rep) {
    const auto t0 = Clock::now();
    model.zero_grad();
    model.forward_backward(inputs.data(), targets.data(), B, T);
    const double norm = global_norm(model.grads_flat(), model.num_parameters(), k);
    const Model::UpdateSpans w = model.weights_for_update();
    // As the trainer's step in one process: clipped to 1 and cleared in the AdamW pass.
    opt.step(w.master, model.grads_flat(), 1e-4, w.copy, {}, {clip_factor(norm, 1.0), true});
    model.mark_gradients_zero();
    if (rep > 0) s.push_back(seconds_since(t0));  // the first step warms up
  }
  return s;
}

}  // namespace

std::vector<std::string> resolve_targets(const std::string& list) {
  const std::vector<std::string_view> available = available_targets();
  std::string names;
  for (std::string_view a : available) names += (names.empty() ? "" : ", ") + std::string(a);
  std::vector<std::string> r;
  if (list.empty()) {
    for (std::string_view a : available) r.emplace_back(a);
    return r;
  }
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, comma - start);
    if (std::find(available.begin(), available.end(), name) == available.end()) {
      throw UsageError("--targets: '" + name +
                       "' is not a kernel target this CPU runs; available here: " + names);
    }
    if (std::find(r.begin(), r.end(), name) == r.end()) r.push_back(name);
    start = comma + 1;
  }
  return r;
}

BenchReport run_bench(const BenchOptions& o,
                      const std::function<void(const std::string&)>& progress) {
  auto tell = [&](const std::string& s) {
    if (progress) progress(s);
  };
  BenchReport report;
  report.options = o;
  report.threads = omp_get_max_threads();
  tell("measuring the roofs (FMA peaks, bf16 peaks, memory bandwidth)");
  report.machine = roofs::measure(/*with_stream=*/true);
  // Each target's own FMA peak first; the best of them also bounds the machine's (a loop measured
  // while something else ran on the cores must not leave the machine below one of its targets).
  auto own_isa = [](const std::string& t) {
    return t != "scalar" && t != "hwy_scalar" && t.find("+xsmm") == std::string::npos;
  };
  std::vector<double> own_peak;
  for (const std::string& target : o.targets) {
    own_peak.push_back(own_isa(target) ? roofs::fp32_peak_of(target) : 0);
    report.machine.fp32 = std::max(report.machine.fp32, own_peak.back());
  }
  const bool b16 = o.precision == Precision::kBf16;
  const size_t BT = size_t(o.batch) * o.seq_len;
  for (const std::string& target : o.targets) {
    const KernelTable& k = kernels_for_target(target, "--targets");
    const Bf16Kernels& h = bf16_kernels_for_target(target, "--targets");
    TargetRoofs roof{target, b16 ? std::string(h.target) : std::string(), 0, 0};
    // The reference table is plain C++ the compiler may vectorize, and libxsmm JITs for the
    // CPU's best ISA whatever the table's: both are rated against the machine's best FMA peak.
    const size_t i = size_t(&target - o.targets.data());
    roof.fp32 = own_isa(target) ? own_peak[i] : report.machine.fp32;
    roof.gemm = b16 ? bf16_gemm_peak(h.target, report.machine, roof.fp32) : roof.fp32;
    report.roofs.push_back(roof);
    const double bw = report.machine.bandwidth;

    double step_flops = 0, step_bytes = 0, step_roof_seconds = 0;
    const LoraOptions* lora = o.lora_step() ? &o.lora : nullptr;
    for (const LayerOp& op : layer_ops(o.config, o.batch, o.seq_len, o.precision, k, h, lora)) {
      tell(target + ": " + op.op + " " + op.pass);
      const std::function<void()> call = op.prepare();
      call();  // untimed: first touch, JIT, scratch
      std::vector<double> s;
      for (int rep = 0; rep < o.reps; ++rep) {
        flush_caches();
        const auto t0 = Clock::now();
        call();
        s.push_back(seconds_since(t0));
      }
      BenchRow r{o.model,     op.op,    op.pass,  target,      op.shape,
                 op.per_step, op.flops, op.bytes, summarize(s)};
      const double flop_roof = op.roof == Roof::kBf16 ? roof.gemm : roof.fp32;
      rate(r, flop_roof, bw);
      step_flops += op.flops * op.per_step;
      step_bytes += op.bytes * op.per_step;
      step_roof_seconds += std::max(op.flops / flop_roof, op.bytes / bw) * op.per_step;
      report.rows.push_back(r);
    }

    tell(target + ": training step");
    BenchRow step{o.model,
                  "training step",
                  "step",
                  target,
                  "B=" + std::to_string(o.batch) + " T=" + std::to_string(o.seq_len) +
                      (o.base_quant != QuantFormat::kNone
                           ? std::string(" base ") + quant_format_name(o.base_quant)
                           : std::string()),
                  1,
                  step_flops,
                  step_bytes,
                  summarize(time_steps(o, k, h))};
    rate(step, roof.gemm, bw);
    // The step's roofline time is the sum of its ops' (each against its own roof).
    step.roof_pct = 100.0 * step_roof_seconds / step.time.median;
    step.compute_bound = step_flops / roof.gemm > step_bytes / bw;
    step.tokens_per_s = double(BT) / step.time.median;
    report.rows.push_back(step);
  }
  return report;
}

}  // namespace llmcpu::bench
