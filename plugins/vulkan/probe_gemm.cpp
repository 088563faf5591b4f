// `llmcpu_vulkan_probe gemm`: the plugin's GEMM shader (shaders/gemm.comp) timed on the products of
// a GPT-2 124M training step, recorded by block_ops.h exactly as passes.cpp records them (the same
// functions, variants, strides and flags), after a check of every recorded variant against a CPU
// GEMM on a small ragged shape. The rows of one dispatch are those of one chunk of the step
// (model.h's chunk_batch: a B=4 micro-batch runs as four chunks of 1024 rows), the lm_head's those
// of one sub-chunk of the head against one wte piece (model.h's head_rows, wte_rows_per_piece).
// Not here: attention, layernorm and the other ops, the copy-compute pipeline. See probe.h.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "plugins/vulkan/model.h"
#include "plugins/vulkan/probe.h"
#include "plugins/vulkan/probe_bench.h"
#include "simd/bf16.h"

namespace llmcpu::vk {
namespace {

constexpr uint32_t kC = 768, kVp = 50304;  // GPT-2 124M: channels, padded vocabulary
struct StepShape {
  int B, T;
};
constexpr StepShape kFullStep{4, 1024}, kQuickStep{1, 64};
// --quick: lavapipe runs gemm.comp at about 2 GFLOP/s on two cores, and a round of a quick run's
// GEMMs (B=1, T=64, both precisions) is 5.4 GFLOP without the lm_head, which would add 26 GFLOP
// at a whole wte piece (43690 rows) but 0.6 GFLOP at 1024: two timed rounds stay near 7 s.
constexpr uint32_t kQuickHeadCols = 1024;
// Timed runs per GEMM: at most --reps (default kDefaultReps, --quick kQuickReps), fewer once they
// would pass kBudgetMs, never fewer than kMinReps (or --reps if smaller). The default step's 30
// GEMMs are 240 GFLOP a round: on an H100, at 1 to 20 TFLOP/s, the longest single run (the lm_head,
// 26 GFLOP) takes 26 to 1.3 ms, so the timing stays within 30 x 0.5 s whatever the shader reaches.
constexpr int kDefaultReps = 20, kQuickReps = 2, kMinReps = 3;
constexpr double kBudgetMs = 500;
// The FMA roof's workgroups of 256: 32768 fill a large GPU many times over (an H100 holds about a
// thousand at once, so the last partial wave costs a few percent at most); --quick's 1024 keep
// lavapipe's run short (and still fill a CPU's cores).
constexpr uint32_t kRoofGroups = 32768, kQuickRoofGroups = 1024;

enum class Product { kForward, kInputGrad, kWeightGrad };
constexpr Product kProducts[] = {Product::kForward, Product::kInputGrad, Product::kWeightGrad};
const char* product_name(Product p) {
  return p == Product::kForward     ? "forward"
         : p == Product::kInputGrad ? "input gradient"
                                    : "weight gradient";
}

// One product of a linear layer: inp (rows, C), weight (OC, C), the output or its gradient (rows,
// OC) at row stride ld. A block's layers run through BlockOps' matmul_* (ld = OC, the forward with
// a bias), the lm_head (weight: one wte piece of OC rows, ld = Vp) through gemm / gemm_bf16 with
// the strides of passes.cpp's record_head. bf16: the variants a bf16 step uses.
struct Case {
  std::string name;
  bool head, bf16;
  Product product;
  uint32_t rows, C, OC, ld;
};

// A case as gemm.comp computes it, C(m,n) (+)= sum_k A(m,k) B(k,n) [+ bias(n)], with the element
// counts and types of its operands: what the CPU reference and the buffers need.
struct Layout {
  uint32_t M, N, K, a_sm, a_sk, b_sk, b_sn, c_sm;
  size_t a_n, b_n, c_n;
  bool a_bf16, b_bf16, a_round;  // bf16 storage; fp32 rounded to bf16 on load
  bool bias, accumulate;
  const char* variant;  // gemm.comp's: A and B each f (fp32), r (rounded) or h (bf16)
};

Layout layout_of(const Case& c) {
  const uint32_t rows = c.rows, C = c.C, OC = c.OC, ld = c.ld;
  Layout L{};
  switch (c.product) {
    case Product::kForward:  // out (rows, ld) = inp . weight^T [+ bias]
      L.M = rows, L.N = OC, L.K = C;
      L.a_sm = C, L.a_sk = 1, L.b_sk = 1, L.b_sn = C, L.c_sm = ld;
      L.a_n = size_t(rows) * C, L.b_n = size_t(OC) * C, L.c_n = size_t(rows) * ld;
      L.a_bf16 = L.b_bf16 = c.bf16, L.bias = !c.head;
      break;
    case Product::kInputGrad:  // dinp (rows, C) = dout (rows, ld) . weight
      L.M = rows, L.N = C, L.K = OC;
      L.a_sm = ld, L.a_sk = 1, L.b_sk = C, L.b_sn = 1, L.c_sm = C;
      L.a_n = size_t(rows) * ld, L.b_n = size_t(OC) * C, L.c_n = size_t(rows) * C;
      L.a_round = L.b_bf16 = c.bf16;
      break;
    case Product::kWeightGrad:  // dweight (OC, C) += dout^T . inp
      L.M = OC, L.N = C, L.K = rows;
      L.a_sm = 1, L.a_sk = ld, L.b_sk = C, L.b_sn = 1, L.c_sm = C;
      L.a_n = size_t(rows) * ld, L.b_n = size_t(rows) * C, L.c_n = size_t(OC) * C;
      L.a_round = L.b_bf16 = c.bf16, L.accumulate = true;
      break;
  }
  L.variant = !c.bf16 ? "ff" : L.a_round ? "rh" : "hh";
  return L;
}

// Records the case as a training step does: a = inp or dout, b = weight or inp, c the output.
void record_case(BlockOps& ops, VkCommandBuffer cb, const Case& k, Ref a, Ref b, Ref c, Ref bias) {
  const uint32_t n = k.rows, C = k.C, OC = k.OC, ld = k.ld;
  if (!k.head) {
    switch (k.product) {
      case Product::kForward:
        return k.bf16 ? ops.matmul_forward_bf16(cb, c, a, b, bias, true, n, C, OC)
                      : ops.matmul_forward(cb, c, a, b, bias, true, n, C, OC);
      case Product::kInputGrad:
        return k.bf16 ? ops.matmul_backward_input_bf16(cb, c, a, b, n, C, OC, false)
                      : ops.matmul_backward_input(cb, c, a, b, n, C, OC, false);
      case Product::kWeightGrad:  // the bias sum is colsum.comp's, not timed here
        return k.bf16 ? ops.matmul_backward_weight_bf16(cb, c, Ref{}, false, a, b, n, C, OC)
                      : ops.matmul_backward_weight(cb, c, Ref{}, false, a, b, n, C, OC);
    }
  }
  using E = BlockOps::Elem;
  switch (k.product) {
    case Product::kForward:  // logits[:, piece] = lnf . piece^T
      return k.bf16 ? ops.gemm_bf16(cb, c, a, E::kBf16, b, E::kBf16, n, OC, C, C, 1, 1, C, ld, 0)
                    : ops.gemm(cb, c, a, b, Ref{}, n, OC, C, C, 1, 1, C, ld, 0);
    case Product::kInputGrad:  // dlnf = dlogits[:, piece] . piece (the first piece: no +=)
      return k.bf16
                 ? ops.gemm_bf16(cb, c, a, E::kF32AsBf16, b, E::kBf16, n, C, OC, ld, 1, C, 1, C, 0)
                 : ops.gemm(cb, c, a, b, Ref{}, n, C, OC, ld, 1, C, 1, C, 0);
    case Product::kWeightGrad:  // dpiece += dlogits[:, piece]^T . lnf
      return k.bf16 ? ops.gemm_bf16(cb, c, a, E::kF32AsBf16, b, E::kBf16, OC, C, n, 1, ld, C, 1, C,
                                    kGemmAccumulate)
                    : ops.gemm(cb, c, a, b, Ref{}, OC, C, n, 1, ld, C, 1, C, kGemmAccumulate);
  }
}

// The operands of a case on the device, random, with their values on the host where kept.
struct Operands {
  Operand a, b, c, bias;
  void destroy(Device& dev) {
    for (Operand* o : {&a, &b, &c, &bias}) dev.destroy(o->buf);
  }
};

Operands make_operands(Device& dev, Timer& timer, const Case& k, const Layout& L, uint32_t seed,
                       bool keep) {
  Operands o;
  try {
    o.a = make_operand(dev, timer, L.a_n, L.a_bf16, seed, keep);
    o.b = make_operand(dev, timer, L.b_n, L.b_bf16, seed + 1, keep);
    o.c = make_operand(dev, timer, L.c_n, false, seed + 2, keep);  // accumulated into, or guards
    if (L.bias) o.bias = make_operand(dev, timer, k.OC, false, seed + 3, keep);
  } catch (...) {
    o.destroy(dev);
    throw;
  }
  return o;
}

// gamma(n) = n u / (1 - n u), u = 2^-24: the relative bound of an fp32 sum of n rounded terms.
double gamma(double n) { return n * 0x1p-24 / (1 - n * 0x1p-24); }

struct CheckResult {
  double max_rel_error = 0, bound = 0;
  bool ok = false;
};

// One case on the device against a double-precision GEMM of the values the shader reads (bf16
// widened exactly, rounded operands rounded as simd/bf16.h does). The error of each output is taken
// relative to sum_k |A(m,k) B(k,n)| (+ |bias| + |C before|), which an fp32 sum of K+2 terms keeps
// within gamma(K+2) (products of bf16 values are exact; of fp32 ones rounded once, which the same
// bound covers); every element of C outside the M x N outputs must be unchanged.
CheckResult check_case(Device& dev, Timer& timer, BlockOps& ops, const Case& k, uint32_t seed) {
  const Layout L = layout_of(k);
  Operands o = make_operands(dev, timer, k, L, seed, true);
  std::vector<float> got;
  try {
    timer.once([&](VkCommandBuffer cb) {
      record_case(ops, cb, k, o.a.ref(), o.b.ref(), o.c.ref(), o.bias.ref());
    });
    got = download(dev, timer, o.c.buf, L.c_n);
  } catch (...) {
    o.destroy(dev);
    throw;
  }
  o.destroy(dev);
  std::vector<float> a = o.a.values;
  if (L.a_round) {
    for (float& x : a) x = bf16_to_float(float_to_bf16(x));
  }
  CheckResult r;
  r.bound = gamma(double(L.K) + 2);
  r.ok = true;
  std::vector<bool> inside(L.c_n, false);
  for (uint32_t m = 0; m < L.M; ++m) {
    for (uint32_t n = 0; n < L.N; ++n) {
      double sum = 0, mag = 0;
      for (uint32_t q = 0; q < L.K; ++q) {
        const double p = double(a[size_t(m) * L.a_sm + size_t(q) * L.a_sk]) *
                         o.b.values[size_t(q) * L.b_sk + size_t(n) * L.b_sn];
        sum += p, mag += std::fabs(p);
      }
      const size_t at = size_t(m) * L.c_sm + n;
      if (L.bias) sum += o.bias.values[n], mag += std::fabs(o.bias.values[n]);
      if (L.accumulate) sum += o.c.values[at], mag += std::fabs(o.c.values[at]);
      const double err = std::fabs(double(got[at]) - sum);
      const double rel = mag > 0 ? err / mag : (err == 0 ? 0 : INFINITY);
      r.max_rel_error = std::max(r.max_rel_error, rel);
      if (!(rel <= r.bound)) r.ok = false;
      inside[at] = true;
    }
  }
  for (size_t i = 0; i < L.c_n; ++i) {
    if (!inside[i] && got[i] != o.c.values[i]) r.ok = false;
  }
  return r;
}

// The layers of a block: name, C in, C out.
struct Linear {
  const char* name;
  uint32_t in, out;
};
constexpr Linear kLayers[] = {{"qkv", kC, 3 * kC},
                              {"attention projection", kC, kC},
                              {"fc", kC, 4 * kC},
                              {"fc projection", 4 * kC, kC}};

// The step's GEMMs in one precision: each layer's forward, then input gradients, then weight
// gradients, the lm_head last in each.
std::vector<Case> step_cases(bool bf16, uint32_t rows, uint32_t head_rows, uint32_t head_cols) {
  std::vector<Case> cases;
  for (Product p : kProducts) {
    for (const Linear& l : kLayers) {
      cases.push_back(
          {std::string(l.name) + " " + product_name(p), false, bf16, p, rows, l.in, l.out, l.out});
    }
    cases.push_back(
        {std::string("lm_head ") + product_name(p), true, bf16, p, head_rows, kC, head_cols, kVp});
  }
  return cases;
}

std::string driver_of(VkPhysicalDevice d) {
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &driver;
  vkGetPhysicalDeviceProperties2(d, &p2);  // a usable device has Vulkan 1.2
  return std::string(driver.driverName) + " " + driver.driverInfo;
}

// The position in `devices`' list of the device --device names (or the plugin's choice), and the
// index Device's constructor takes for it (-1: the plugin's choice).
struct Chosen {
  size_t position;
  int device_index;
};
Chosen choose(int wanted) {
  const ProbeInstance inst;
  const std::vector<VkPhysicalDevice>& devices = inst.devices();
  if (wanted < 0) return {choose_device(devices, -1), -1};
  if (size_t(wanted) >= devices.size()) {
    throw NoDeviceError("--device " + std::to_string(wanted) + ": the loader lists " +
                        std::to_string(devices.size()) + " device(s)");
  }
  if (!device_usable(devices[size_t(wanted)])) {
    throw NoDeviceError("--device " + std::to_string(wanted) +
                        ": the plugin cannot use it (needs Vulkan 1.2 with timeline semaphores)");
  }
  int usable_before = 0;
  for (int i = 0; i < wanted; ++i) usable_before += device_usable(devices[size_t(i)]) ? 1 : 0;
  return {size_t(wanted), usable_before};
}

// What one run measures: the step's shape, the rows of one dispatch, the lm_head's rows and
// columns (one wte piece, or --quick's cap of it) and the timed runs per GEMM.
struct Plan {
  StepShape step;
  uint32_t rows, head_n, piece, head_cols;
  int max_reps, warmups;
};

Plan plan_of(const GemmOptions& opt, const Device& dev) {
  Plan p{};
  p.step = opt.quick ? kQuickStep : kFullStep;
  p.rows = opt.rows ? uint32_t(opt.rows) : uint32_t(chunk_batch(p.step.B) * p.step.T);
  const size_t max_binding = dev.max_binding_bytes();
  p.head_n = uint32_t(head_rows(kVp, p.rows, max_binding));
  p.piece = uint32_t(std::min<size_t>(wte_rows_per_piece(kC, max_binding), kVp));
  p.head_cols = opt.quick ? std::min(p.piece, kQuickHeadCols) : p.piece;
  p.max_reps = opt.reps ? opt.reps : opt.quick ? kQuickReps : kDefaultReps;
  p.warmups = opt.quick ? 0 : 1;  // quick: the check has run every pipeline already
  if (size_t(p.rows) * 4 * kC * sizeof(float) > max_binding) {
    throw UsageError("--rows " + std::to_string(p.rows) + ": a (rows, 4C) operand exceeds " +
                     dev.name() + "'s maxStorageBufferRange of " + std::to_string(max_binding) +
                     " bytes");
  }
  return p;
}

// The report's opening: the device, the timer, the step's shape and what --quick capped.
void write_setup(JsonWriter& out, const Device& dev, const Timer& timer, const Chosen& chosen,
                 const Plan& p, bool quick) {
  out.begin_object().field("device", dev.name()).field("device_index", chosen.position);
  out.field("driver", driver_of(dev.physical()));
  out.field("apiVersion", version_string(dev.properties().apiVersion));
  out.field("timer", timer.gpu() ? "gpu" : "wall").field("quick", quick);
  out.key("step").begin_object().field("B", p.step.B).field("T", p.step.T).field("C", kC);
  out.field("Vp", kVp).field("rows_per_dispatch", p.rows);
  out.field("dispatches_per_layer", (uint32_t(p.step.B * p.step.T) + p.rows - 1) / p.rows);
  out.field("head_rows", p.head_n).field("wte_piece_rows", p.piece).end_object();
  out.key("capped");
  if (p.head_cols < p.piece) {
    out.begin_object().key("lm_head_N").begin_object().field("from", p.piece);
    out.field("to", p.head_cols).end_object().end_object();
  } else {
    out.value(nullptr);
  }
}

// The check: every case kind on a small ragged shape (the lm_head's with a row stride past N),
// each written to the report; `seed` advances past the seeds used.
void check_all(Device& dev, Timer& timer, BlockOps& ops, JsonWriter& out, bool bf16,
               uint32_t& seed) {
  std::fprintf(stderr, "gemm: checking gemm.comp on %s against a CPU GEMM\n", dev.name());
  constexpr uint32_t kRows = 67, kIn = 45, kOut = 83, kLd = 90;
  CheckResult all{0, 0, true};
  out.key("check").begin_object().field("rows", kRows).field("C", kIn).field("OC", kOut);
  out.key("cases").begin_array();
  for (bool h : {false, true}) {
    if (h && !bf16) continue;
    for (bool head : {false, true}) {
      for (Product p : kProducts) {
        const Case k{"", head, h, p, kRows, kIn, kOut, head ? kLd : kOut};
        const CheckResult r = check_case(dev, timer, ops, k, seed += 4);
        all.ok = all.ok && r.ok;
        all.max_rel_error = std::max(all.max_rel_error, r.max_rel_error);
        out.begin_object().field("product", product_name(p)).field("head", head);
        out.field("precision", h ? "bf16" : "fp32").field("variant", layout_of(k).variant);
        out.field("max_rel_error", r.max_rel_error).field("bound", r.bound).field("ok", r.ok);
        out.end_object();
      }
    }
  }
  out.end_array().field("checked", all.ok).field("max_rel_error", all.max_rel_error).end_object();
  if (!all.ok) std::fprintf(stderr, "gemm: CHECK FAILED: gemm.comp disagrees with the CPU\n");
}

Roof measure_and_write_roof(Device& dev, Kernels& kernels, Timer& timer, JsonWriter& out,
                            bool quick) {
  std::fprintf(stderr, "gemm: measuring the fp32 FMA roof\n");
  const Roof roof = quick ? measure_roof(dev, kernels, timer, kQuickRoofGroups, 20, 3)
                          : measure_roof(dev, kernels, timer, kRoofGroups, 50, 5);
  out.field("roof_fp32_gflops", roof.gflops);
  out.key("roof").begin_object().field("workgroups", roof.workgroups).field("iters", roof.iters);
  out.field("gflop", roof.gflop).field("ms", roof.ms).end_object();
  std::fprintf(stderr, "gemm: fp32 FMA roof %.1f GFLOP/s\n", roof.gflops);
  return roof;
}

// The timed runs (ms) of one case, after the plan's warm-ups: at most max_reps, fewer once they
// would pass kBudgetMs, never fewer than kMinReps.
std::vector<double> time_case(Device& dev, Timer& timer, BlockOps& ops, const Case& k,
                              const Layout& L, uint32_t seed, const Plan& p) {
  Operands o = make_operands(dev, timer, k, L, seed, false);
  std::vector<double> t;
  try {
    timer.record([&](VkCommandBuffer cb) {
      record_case(ops, cb, k, o.a.ref(), o.b.ref(), o.c.ref(), o.bias.ref());
    });
    for (int w = 0; w < p.warmups; ++w) timer.run();
    t.push_back(timer.run());
    const int reps =
        std::min(p.max_reps, std::max(kMinReps, int(kBudgetMs / std::max(t[0], 1e-3))));
    while (int(t.size()) < reps) t.push_back(timer.run());
  } catch (...) {
    o.destroy(dev);
    throw;
  }
  o.destroy(dev);
  return t;
}

// Every GEMM of the step in each precision the device runs, timed, printed and written.
void time_step(Device& dev, Timer& timer, BlockOps& ops, JsonWriter& out, const Plan& p,
               const Roof& roof, bool bf16, uint32_t& seed) {
  out.field("warmups", p.warmups).key("gemms").begin_array();
  for (bool h : {false, true}) {
    if (h && !bf16) continue;
    for (const Case& k : step_cases(h, p.rows, p.head_n, p.head_cols)) {
      const Layout L = layout_of(k);
      const std::vector<double> t = time_case(dev, timer, ops, k, L, seed += 4, p);
      const double ms = median(t);
      const double gflops = 2.0 * L.M * L.N * L.K / (ms * 1e6);
      std::fprintf(stderr, "gemm: %-32s %s M=%-5u N=%-5u K=%-5u %9.3f ms %9.1f GFLOP/s\n",
                   k.name.c_str(), h ? "bf16" : "fp32", L.M, L.N, L.K, ms, gflops);
      out.begin_object().field("name", k.name).field("precision", h ? "bf16" : "fp32");
      out.field("variant", L.variant).field("M", L.M).field("N", L.N).field("K", L.K);
      out.field("ms", ms).field("gflops", gflops).field("roof_share", gflops / roof.gflops);
      out.field("reps", t.size()).end_object();
    }
  }
  out.end_array();
}

}  // namespace

int probe_gemm(const GemmOptions& opt, JsonWriter& out) {
  const auto start = std::chrono::steady_clock::now();
  const Chosen chosen = choose(opt.device);
  Device dev(chosen.device_index, false);
  Kernels kernels(dev);
  BlockOps ops(kernels);
  Timer timer(dev, kernels);
  const bool bf16 = dev.bf16_storage();
  const Plan plan = plan_of(opt, dev);

  write_setup(out, dev, timer, chosen, plan, opt.quick);
  if (!bf16) {
    out.field("bf16_skipped", std::string(dev.name()) + " lacks storageBuffer16BitAccess");
  }
  uint32_t seed = 1;
  check_all(dev, timer, ops, out, bf16, seed);
  const Roof roof = measure_and_write_roof(dev, kernels, timer, out, opt.quick);
  time_step(dev, timer, ops, out, plan, roof, bf16, seed);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  out.field("seconds", took.count()).end_object();
  return kExitOk;
}

}  // namespace llmcpu::vk
