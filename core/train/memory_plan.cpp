#include "core/train/memory_plan.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "core/model/kernel_scratch.h"
#include "core/model/parameters.h"
#include "core/model/quantized_base.h"
#include "simd/bf16.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// A number from a /proc or cgroup file ("max" and unreadable files give -1).
double read_number(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return -1;
  try {
    return std::stod(word);
  } catch (...) {
    return -1;
  }
}

// The "Key:   123 kB" line of /proc/meminfo or /proc/self/status, in bytes (-1: absent).
double proc_kib_field(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    double kib = -1;
    fields >> kib;
    return kib < 0 ? -1 : kib * 1024.0;
  }
  return -1;
}

// This process's cgroup (v2: one "0::/path" line; v1: the memory controller's line).
std::string cgroup_dir(bool* v2) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) {
      *v2 = true;
      return "/sys/fs/cgroup" + line.substr(3);
    }
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    if (controllers.find("memory") != std::string::npos) {
      *v2 = false;
      return "/sys/fs/cgroup/memory" + line.substr(b + 1);
    }
  }
  return {};
}

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", bytes / kMiB);
  return buf;
}

}  // namespace

MemoryPlan plan_memory(const MemoryRequest& r) {
  const size_t P = ParameterLayout(r.config).total();
  const bool mixed = r.precision == Precision::kBf16;
  const int ranks = std::max(r.ranks, 1), threads = std::max(r.threads, 1);
  MemoryPlan plan;
  const double weights = double(P) * (sizeof(float) + (mixed ? sizeof(bf16) : 0));
  plan.parameters = r.shared_weights ? weights / std::max(r.local_ranks, 1) : weights;
  if (r.zero && mixed && !r.shared_weights && ranks > 1) {
    // Each rank keeps the fp32 master of the layers' matmul weights for its own parts only (the
    // model computes with their bf16 copy: Model::release_master); rank 0's parts are the largest.
    const ParameterLayout layout(r.config);
    for (const ParameterSpan& span : layout.spans()) {
      if (span.tensor < 0 || !ParameterLayout::matmul_weight(span.tensor)) continue;
      plan.parameters -= double(span.count - shard_of(span.count, 0, ranks).count) * sizeof(float);
    }
  }
  plan.gradients = double(P) * sizeof(float);
  plan.optimizer = 2 * double(P) * sizeof(float) / (r.zero ? ranks : 1);
  if (r.lora_parameters > 0) {  // the adapter is what learns; its A rounded to bf16 in bf16
    const double A = double(r.lora_parameters);
    const ParameterLayout layout(r.config);
    size_t M = 0;  // the layers' matmul weights, held in their frozen form
    for (const ParameterSpan& s : QuantizedBase::spans(layout)) M += s.count;
    // In bf16 the embedding and the head are held in the copy alone, the other tensors (norms,
    // biases) in both.
    const size_t E = mixed ? layout.size(kWte) + layout.size(kLmHead) : 0;
    const double other = double(P - M - E) * (sizeof(float) + (mixed ? sizeof(bf16) : 0)) +
                         double(E) * sizeof(bf16);
    const double frozen = r.base_quant != QuantFormat::kNone
                              ? double(QuantizedBase::bytes(r.base_quant, layout))
                              : double(M) * (mixed ? sizeof(bf16) : sizeof(float));
    // A streamed base has at most one tensor (or a layer's slice of one) in fp32 beside the frozen
    // forms, and, read from a file, that tensor's pages of it (at most 4 bytes an element); a base
    // read whole is all in fp32 first.
    size_t chunk = 0;
    for (const ParameterSpan& s : layout.spans()) chunk = std::max(chunk, s.count);
    const double in_flight = double(chunk) * sizeof(float) * (r.base_mapped ? 2 : 1);
    plan.loading = r.base_streamed ? other + frozen + in_flight : double(P) * sizeof(float);
    plan.parameters = other + frozen + A * (sizeof(float) + (mixed ? sizeof(bf16) : 0));
    plan.gradients = A * sizeof(float);
    plan.optimizer = 2 * A * sizeof(float) / (r.zero ? ranks : 1);
  }
  ModelConfig host = r.config;
  if (r.host_layers > 0) host.num_layers = r.host_layers;
  const ActivationOptions layout{r.precision, r.recompute, false};
  const ActivationBytes a = ActivationArena::bytes(host, r.batch, r.seq_len, layout);
  plan.activations = double(a.forward) + double(r.lora_activation_floats) * sizeof(float);
  // The kernels' scratch: one step's calls, and the gradient norm's sum of squares (at most over
  // all the gradients), all from the trainer's thread.
  const KernelTable& k = r.kernels ? *r.kernels : active_kernels();
  const Bf16Kernels& h = r.bf16_kernels ? *r.bf16_kernels : active_bf16_kernels();
  ScratchUse kernels = step_scratch(host, r.batch, r.seq_len, layout, k, h, threads);
  kernels.merge(k.sum_squares_scratch(r.lora_parameters > 0 ? r.lora_parameters : P, threads));
  if (r.lora_parameters > 0 && r.base_quant != QuantFormat::kNone) {
    // The quantized matmuls' panels and the tables' GEMMs on them (simd/quant/quant_matmul.h).
    const ParameterLayout layout(r.config);
    const size_t N = size_t(r.batch) * r.seq_len;
    for (int role : {kQkvw, kAttprojw, kFcw, kFcprojw}) {
      const std::vector<size_t>& d = layout.dims(role);  // (L, OC, C)
      const int OC = int(d[1]), C = int(d[2]);
      if (OC == 0 || C == 0) continue;
      kernels.merge(mixed ? quant_matmul_forward_scratch(h, N, C, OC, true, threads)
                          : quant_matmul_forward_scratch(k, N, C, OC, true, threads));
      kernels.merge(mixed ? quant_matmul_backward_scratch(h, N, C, OC, threads)
                          : quant_matmul_backward_scratch(k, N, C, OC, threads));
    }
  }
  plan.kernel_scratch = double(kernels.bytes(threads));
  plan.scratch = double(a.backward + a.head) + plan.kernel_scratch;
  plan.program =
      r.program >= 0 ? r.program : std::max(0.0, proc_kib_field("/proc/self/status", "VmRSS"));
  return plan;
}

MemoryLimit memory_limit(int local_ranks) {
  MemoryLimit limit;
  const double held = std::max(0.0, proc_kib_field("/proc/self/status", "VmRSS"));
  const double available = proc_kib_field("/proc/meminfo", "MemAvailable");
  if (available >= 0) limit = {available + held, "MemAvailable"};
  bool v2 = true;
  const std::string dir = cgroup_dir(&v2);
  if (!dir.empty()) {
    const double max = read_number(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
    const double used = read_number(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
    // cgroup v1 reports "no limit" as a huge number.
    if (max > 0 && max < 1e18 && used >= 0) {
      const double room = max - used + held;
      if (limit.source.empty() || room < limit.bytes) {
        limit = {room, "the cgroup's memory limit " + mib(max)};
      }
    }
  }
  if (local_ranks > 1 && !limit.source.empty()) {
    limit.bytes /= local_ranks;
    limit.source += ", shared by " + std::to_string(local_ranks) + " ranks";
  }
  return limit;
}

std::string describe(const MemoryPlan& p) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "parameters %.1f | gradients %.1f | optimizer %.1f | activations %.1f | scratch "
                "%.1f | program %.1f | total %.1f MiB",
                p.parameters / kMiB, p.gradients / kMiB, p.optimizer / kMiB, p.activations / kMiB,
                p.scratch / kMiB, p.program / kMiB, p.total() / kMiB);
  return buf;
}

void check_fits(const MemoryRequest& request, const MemoryPlan& plan, const MemoryLimit& limit) {
  if (limit.source.empty() || plan.total() <= limit.bytes) return;
  const auto fits = [&](const MemoryRequest& r) { return plan_memory(r).total() <= limit.bytes; };
  std::vector<std::string> ways;
  // The same tokens per step in smaller micro-batches (--total-batch keeps the math).
  for (int b = request.batch / 2; b >= 1; b /= 2) {
    MemoryRequest r = request;
    r.batch = b;
    if (fits(r)) {
      ways.push_back(
          "--batch " + std::to_string(b) + " --total-batch " + std::to_string(request.total_batch) +
          " (the same tokens per step, by accumulation; " + mib(plan_memory(r).total()) + ")");
      break;
    }
  }
  for (Recompute rc : {Recompute::kGelu, Recompute::kAllPointwise, Recompute::kLayers}) {
    if (rc <= request.recompute) continue;
    MemoryRequest r = request;
    r.recompute = rc;
    if (fits(r)) {
      ways.push_back(std::string("--recompute ") + recompute_name(rc) + " (" +
                     mib(plan_memory(r).total()) + ")");
      break;
    }
  }
  if (request.precision == Precision::kFp32) {
    MemoryRequest r = request;
    r.precision = Precision::kBf16;
    if (fits(r)) {
      ways.push_back("--precision bf16 (" + mib(plan_memory(r).total()) + ")");
    }
  }
  std::string message = "the run needs about " + mib(plan.total()) + " (" + describe(plan) +
                        ") but this process may use " + mib(limit.bytes) + " (" + limit.source +
                        ")";
  if (ways.empty()) {
    message += "; no smaller batch or recomputation fits: a smaller model or --seq-len";
  } else {
    message += "; it would fit with ";
    for (size_t i = 0; i < ways.size(); ++i) message += (i ? ", or " : "") + ways[i];
  }
  throw UsageError(message);
}

double parse_memory_size(const std::string& text, const std::string& flag) {
  size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    used = 0;
  }
  std::string unit = text.substr(used);
  for (char& ch : unit) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  if (unit.size() == 2 && unit[1] == 'B') unit.pop_back();
  const double scale = unit.empty()  ? 1.0
                       : unit == "K" ? 1024.0
                       : unit == "M" ? kMiB
                       : unit == "G" ? kMiB * 1024.0
                       : unit == "T" ? kMiB * kMiB
                                     : -1.0;
  if (used == 0 || value <= 0 || scale < 0 || !std::isfinite(value)) {
    throw UsageError(flag + " '" + text +
                     "' is not a memory size; expected a positive number with an optional unit "
                     "K, M, G or T (e.g. 12G)");
  }
  return value * scale;
}

}  // namespace llmcpu
