#include "core/plugin/offload.h"

#include <cstdio>
#include <utility>

#include "simd/error.h"

namespace llmcpu {

OffloadLayers OffloadLayers::parse(const std::string& text, int num_layers,
                                   const std::string& flag) {
  if (text == "all") return {num_layers, true};
  size_t used = 0;
  int n = -1;
  try {
    n = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || n < 0 || n > num_layers) {
    throw UsageError(flag + ": expected all or a number of blocks from 0 to " +
                     std::to_string(num_layers) + " (the model's layers), got '" + text + "'");
  }
  return {n, false};
}

int host_activation_layers(const OffloadLayers& layers, int num_layers) {
  if (layers.all) return 1;
  return layers.blocks == 0 ? num_layers : num_layers - layers.blocks + 1;
}

std::string count_blocks(int n) { return std::to_string(n) + (n == 1 ? " block" : " blocks"); }

std::string OffloadLayers::describe(int num_layers) const {
  if (all) return "all: embedding, " + count_blocks(num_layers) + ", head and loss";
  if (blocks == 0) return "no blocks";
  if (blocks == 1)
    return "block " + std::to_string(num_layers - 1) + " of " + std::to_string(num_layers);
  return "blocks " + std::to_string(num_layers - blocks) + ".." + std::to_string(num_layers - 1) +
         " of " + std::to_string(num_layers);
}

llmcpu_model_desc make_model_desc(const ModelConfig& c, const ParameterLayout& layout, int B, int T,
                                  Precision precision, const OffloadLayers& layers,
                                  size_t memory_limit) {
  llmcpu_model_desc d{};
  d.struct_size = sizeof d;
  d.precision = precision == Precision::kBf16 ? LLMCPU_PRECISION_BF16 : LLMCPU_PRECISION_FP32;
  d.max_seq_len = c.max_seq_len;
  d.vocab_size = c.vocab_size;
  d.padded_vocab_size = c.padded_vocab_size;
  d.num_layers = c.num_layers;
  d.num_heads = c.num_heads;
  d.channels = c.channels;
  d.batch = B;
  d.seq_len = T;
  d.first_layer = layers.all ? 0 : c.num_layers - layers.blocks;
  d.flags = layers.all ? LLMCPU_OFFLOAD_EMBEDDING | LLMCPU_OFFLOAD_HEAD : 0u;
  d.memory_limit = memory_limit;
  for (int i = 0; i < kNumParameterTensors; ++i) d.tensor_offset[i] = layout.offset(i);
  return d;
}

bool device_owns(const OffloadLayers& layers, int num_layers, int tensor, int layer) {
  if (layers.all) return true;
  return ParameterLayout::per_layer(tensor) && layer >= num_layers - layers.blocks;
}

std::unique_ptr<OffloadDevice> OffloadDevice::open(const std::string& path, OffloadOutcome* outcome,
                                                   const PluginOpenOptions& options) {
  std::unique_ptr<PluginLibrary> lib;
  try {
    lib = PluginLibrary::load(path, options);
  } catch (const Error& e) {
    *outcome = {false, std::string("offload: ") + e.what() + "; running on the CPU"};
    return nullptr;
  }
  *outcome = {true, "offload: " + lib->name() + " (" + lib->device_name() + ")"};
  return std::unique_ptr<OffloadDevice>(new OffloadDevice(std::move(lib)));
}

llmcpu_memory_plan OffloadDevice::plan(const llmcpu_model_desc& desc) {
  llmcpu_memory_plan p{};
  p.struct_size = sizeof p;
  lib_->check(lib_->api().plan(lib_->device(), &desc, &p), "plan");
  return p;
}

std::string describe_memory_plan(const llmcpu_memory_plan& p) {
  auto mib = [](uint64_t b) { return std::to_string((b + (1u << 20) - 1) >> 20) + " MiB"; };
  return "the plan needs " + mib(p.total_bytes) + " on the device (weights, gradients and AdamW " +
         mib(p.weight_bytes) + ", activations " + mib(p.activation_bytes) + ", other " +
         mib(p.other_bytes) + ") and it has " + mib(p.available_bytes);
}

void OffloadDevice::configure(const llmcpu_model_desc& desc, const float* params) {
  const llmcpu_memory_plan p = plan(desc);
  if (!p.fits) {
    const bool all = desc.flags & LLMCPU_OFFLOAD_HEAD;
    const std::string what = all ? "all layers" : count_blocks(desc.num_layers - desc.first_layer);
    const std::string hint = p.all_fits ? "--offload-layers all fits"
                             : p.max_layers > 0
                                 ? "at most " + count_blocks(p.max_layers) +
                                       (p.max_layers == 1 ? " fits" : " fit") +
                                       " (--offload-layers " + std::to_string(p.max_layers) + ")"
                                 : "not even one block fits";
    throw UsageError("--offload-layers: " + what + " of batch " + std::to_string(desc.batch) +
                     " x " + std::to_string(desc.seq_len) + " on " + lib_->device_name() + ": " +
                     describe_memory_plan(p) + "; " + hint +
                     " (or a smaller --batch with the same --total-batch)");
  }
  lib_->check(lib_->api().configure(lib_->device(), &desc, params), "configure");
}

void OffloadDevice::set_parameters(const float* params) {
  lib_->check(lib_->api().set_parameters(lib_->device(), params), "set_parameters");
}

void OffloadDevice::set_moments(const float* m, const float* v) {
  lib_->check(lib_->api().set_moments(lib_->device(), m, v), "set_moments");
}

void OffloadDevice::read_state(float* params, float* grads, float* m, float* v) {
  lib_->check(lib_->api().read_state(lib_->device(), params, grads, m, v), "read_state");
}

void OffloadDevice::forward(const llmcpu_forward_args& args) {
  lib_->check(lib_->api().forward(lib_->device(), &args), "forward");
}

void OffloadDevice::backward(const float* dresidual_top, float* dresidual_bottom) {
  lib_->check(lib_->api().backward(lib_->device(), dresidual_top, dresidual_bottom), "backward");
}

void OffloadDevice::zero_grad() { lib_->check(lib_->api().zero_grad(lib_->device()), "zero_grad"); }

double OffloadDevice::grad_sum_squares() {
  double s = 0;
  lib_->check(lib_->api().grad_sum_squares(lib_->device(), &s), "grad_sum_squares");
  return s;
}

void OffloadDevice::adamw_step(const AdamWConfig& config, double lr, long long t,
                               float grad_scale) {
  llmcpu_adamw_args args{};
  args.struct_size = sizeof args;
  args.grad_scale = grad_scale;
  args.lr = lr, args.beta1 = config.beta1, args.beta2 = config.beta2, args.eps = config.eps;
  args.weight_decay = config.weight_decay;
  args.t = t;
  lib_->check(lib_->api().adamw_step(lib_->device(), &args), "adamw_step");
}

llmcpu_offload_report OffloadDevice::report() {
  llmcpu_offload_report out{};
  out.struct_size = sizeof(llmcpu_offload_report);
  lib_->check(lib_->api().report(lib_->device(), &out), "report");
  return out;
}

std::string OffloadDevice::schedule() {
  const char* s = lib_->api().schedule(lib_->device());
  return s ? s : "";
}

namespace {

// "2.05 kB", "25.17 MB": decimal units, as time -v and the benchmarks print.
std::string bytes_text(uint64_t b) {
  char buf[32];
  if (b < 1000000) {
    std::snprintf(buf, sizeof buf, "%.2f kB", double(b) / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f MB", double(b) / 1e6);
  }
  return buf;
}

}  // namespace

std::string format_offload_report(const llmcpu_offload_report& r) {
  char buf[192];
  std::snprintf(buf, sizeof buf,
                "offload: copy %.3f ms, compute %.3f ms, hidden %.1f%% of copying, up %s, down %s "
                "(%u calls)",
                r.copy_ms, r.compute_ms, 100.0 * r.hidden_fraction, bytes_text(r.bytes_up).c_str(),
                bytes_text(r.bytes_down).c_str(), r.calls);
  return buf;
}

}  // namespace llmcpu
