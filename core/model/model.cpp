#include "core/model/model.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/model/transformer.h"
#include "core/runtime/numa_memory.h"
#include "core/util/rng.h"
#include "core/util/tokens.h"
#include "simd/error.h"

namespace llmcpu {
namespace {

// The norms whose weights compute_params() shifts (the q/k norms' kernel adds the offset itself),
// and their views.
constexpr int kNormRoles[] = {kLn1w, kAttnPostNorm, kLn2w, kMlpPostNorm, kLnfw};
float*& norm_view(ParameterViews<float>& v, int role) {
  switch (role) {
    case kLn1w:
      return v.ln1w;
    case kAttnPostNorm:
      return v.attn_post_norm;
    case kLn2w:
      return v.ln2w;
    case kMlpPostNorm:
      return v.mlp_post_norm;
    default:
      return v.lnfw;
  }
}

// A frozen base's gradient views: the norms' weights (and LayerNorm biases) to one layer's worth
// of scratch (stride 0: every layer writes the same), everything else null.
constexpr int kFrozenSinkRoles[] = {kLn1w, kLn1b, kQNorm, kKNorm, kAttnPostNorm,
                                    kLn2w, kLn2b, kMlpPostNorm, kLnfw, kLnfb};
ParameterViews<float> frozen_views(const ParameterLayout& layout, float* sink) {
  ParameterViews<float> v{};
  float** slots[] = {&v.ln1w, &v.ln1b, &v.q_norm, &v.k_norm, &v.attn_post_norm,
                     &v.ln2w, &v.ln2b, &v.mlp_post_norm, &v.lnfw, &v.lnfb};
  for (size_t i = 0; i < std::size(kFrozenSinkRoles); ++i) {
    const int role = kFrozenSinkRoles[i];
    if (layout.size(role) == 0) continue;
    *slots[i] = sink;
    sink += layout.layer_size(role);
  }
  v.stride.fill(0);
  return v;
}

// The mean of the counted targets' losses, summed in double over the BT per-token losses (a masked
// one holds 0); 0 when none counts.
float mean_loss(const float* losses, size_t BT, size_t counted) {
  double total = 0;
  for (size_t i = 0; i < BT; ++i) total += losses[i];
  return counted == 0 ? 0.0f : static_cast<float>(total / double(counted));
}

}  // namespace

Model::Model(const ModelConfig& config, const KernelTable& kernels, Precision precision,
             const Bf16Kernels* bf16_kernels, bool base_gradients)
    : config_(config),
      layout_(config),
      kernels_(kernels),
      precision_(precision),
      base_gradients_(base_gradients),
      copies_(precision == Precision::kBf16) {
  validate(config_, "model");
  // A frozen base's master: pages only where written and not given back (Model::freeze_base).
  params_ = base_gradients_ ? AlignedBuffer<float>(layout_.total())
                            : AlignedBuffer<float>::zeros_on_demand(layout_.total());
  if (base_gradients_) {
    grads_ = AlignedBuffer<float>(layout_.total());
  } else {
    size_t n = 0;
    for (int role : kFrozenSinkRoles) n += layout_.layer_size(role);
    frozen_sink_ = AlignedBuffer<float>(n);
  }
  params_data_ = params_.data(), grads_data_ = grads_.data();
  // NUMA: pages land where the threads use them (a frozen base's are zeros already).
  if (base_gradients_) first_touch_zero(params_.data(), params_.size());
  first_touch_zero(grads_.data(), grads_.size());
  if (config_.family().norm_offset != 0) {
    size_t n = 0;
    for (int role : kNormRoles) n += layout_.size(role);
    norm_weights_ = AlignedBuffer<float>(n);
  }
  carve_views();
  if (precision_ == Precision::kBf16) {
    // A frozen base's copy is filled where it is computed with, once frozen or at the first pass.
    bf16_ = std::make_unique<Bf16Executor>(kernels_,
                                           bf16_kernels ? *bf16_kernels : active_bf16_kernels(),
                                           params_.data(), params_.size(), base_gradients_);
    if (!base_gradients_) copies_.master_written();
  }
}

Model::~Model() = default;

const Bf16Kernels* Model::bf16_kernels() const { return bf16_ ? &bf16_->bf16_kernels() : nullptr; }

std::string Model::kernels_summary() const {
  std::string s = precision_name(precision_);
  if (bf16_) s += " (" + std::string(bf16_->bf16_kernels().target) + " GEMMs)";
  s += ", " + std::string(kernels_.target);
  s += " kernels";
  if (offload_active()) s += ", " + device_->name() + " " + layers_.describe(config_.num_layers);
  return s;
}

float* Model::params_flat() {
  if (copies_.master_behind()) fetch_device_state(true, false);  // a caller may read first
  copies_.master_written();
  return params_data_;
}

const bf16* Model::params_bf16_flat() const { return bf16_ ? bf16_->copy() : nullptr; }

void Model::refresh_bf16_weights() {
  if (!bf16_) return;
  if (copies_.master_released()) {
    throw Error(base_frozen_
                    ? "the bf16 weight copy cannot be rebuilt: the frozen base's matmul weights "
                      "are no longer held in fp32 (Model::freeze_base)"
                    : "the bf16 weight copy cannot be rebuilt: this rank keeps the fp32 master "
                      "of the matmul weights for its own parts only (ZeRO-1)");
  }
  if (copies_.memory_shared_by_ranks()) {
    throw Error(
        "the bf16 weight copy cannot be rebuilt by one rank: the ranks of this machine "
        "share it and each keeps its own parts current (ZeRO-1)");
  }
  bf16_->refresh();
  copies_.bf16_refreshed();
}

void Model::release_master(const std::vector<ParameterSpan>& runs) {
  if (!bf16_) {
    throw Error("Model::release_master: only a bf16 model computes without the fp32 master");
  }
  if (copies_.bf16_stale()) refresh_bf16_weights();
  for (const ParameterSpan& r : runs) {
    if (r.tensor < 0 || !ParameterLayout::matmul_weight(r.tensor) ||
        r.offset < layout_.offset(r.tensor) ||
        r.offset + r.count > layout_.offset(r.tensor) + layout_.size(r.tensor)) {
      throw Error("Model::release_master: a run outside the layers' matmul weights");
    }
    // The run reads as zeros from now on (its whole pages given back).
    released_bytes_ += release_pages(params_data_ + r.offset, r.count * sizeof(float));
  }
  copies_.master_memory_released();
}

size_t Model::master_bytes() const { return num_parameters() * sizeof(float) - released_bytes_; }

void Model::use_shared_memory(float* params, float* grads, bf16* copy) {
  if (copies_.master_released() || device_ || (bf16_ != nullptr) != (copy != nullptr)) {
    throw Error(
        "Model::use_shared_memory: only for a model with its whole master, no plugin, and "
        "a copy exactly in bf16");
  }
  params_data_ = params, grads_data_ = grads;
  grads_zero_ = false;
  carve_views();
  if (bf16_) bf16_->use_shared_memory(params, copy);
  params_ = AlignedBuffer<float>(), grads_ = AlignedBuffer<float>();
  copies_.memory_shared();
}

Model::UpdateSpans Model::weights_for_update() {
  if (copies_.bf16_stale()) refresh_bf16_weights();  // current where the update skips
  copies_.update_written();
  return {params_data_, bf16_ ? bf16_->copy() : nullptr};
}

void Model::carve_views() {
  p_ = ParameterViews<float>::carve(params_data_, layout_);
  g_ = base_gradients_ ? ParameterViews<float>::carve(grads_data_, layout_)
                      : frozen_views(layout_, frozen_sink_.data());
  view_trained_copies();
}

void Model::view_trained_copies() {
  for (const TrainedTensorParams& t : lora_.tensors) {  // by role: wte before lm_head
    float* w = const_cast<float*>(t.w);
    if (!layout_.untied_head() && (t.role == kWte || t.role == kLmHead)) {
      // A tied head: the embedding's copy leaves the head on the base's wte; the head's copy is
      // the head's alone.
      if (t.role == kWte && !p_.lm_head) p_.lm_head = p_.wte;
      float*& slot_w = t.role == kWte ? p_.wte : p_.lm_head;
      float*& slot_g = t.role == kWte ? g_.wte : g_.lm_head;
      slot_w = w, slot_g = t.g;
      continue;
    }
    p_.tensor(t.role) = w;
    g_.tensor(t.role) = t.g;
    if (ParameterLayout::per_layer(t.role)) {
      g_.stride[t.role - kFirstLayerRole] = layout_.layer_size(t.role);
    }
  }
  pc_ = p_;
  if (norm_weights_.size() == 0) return;
  float* w = norm_weights_.data();
  for (int role : kNormRoles) {
    if (layout_.size(role) == 0) continue;
    norm_view(pc_, role) = w;
    w += layout_.size(role);
  }
}

const ParameterViews<float>& Model::compute_params() const {
  if (norm_weights_.size() == 0) return pc_;
  const float offset = config_.family().norm_offset;
  for (int role : kNormRoles) {
    ParameterViews<float> base = p_;  // the master's, or a LoRA run's trained copy
    const float* w = norm_view(base, role);
    if (!w) continue;
    ParameterViews<float> views = pc_;
    float* shifted = norm_view(views, role);
    for (size_t j = 0; j < layout_.size(role); ++j) shifted[j] = w[j] + offset;
  }
  return pc_;
}

void Model::refresh_weight_copies() {
  if (copies_.bf16_stale()) refresh_bf16_weights();
  if (offload_active() && !copies_.device_present()) configure_device();
  if (copies_.device_stale()) device_->set_parameters(params_data_);
  copies_.device_refreshed();
  refresh_lora_copies();  // the adapters change every step
}

void Model::check_device(BlockDevice& device, const OffloadLayers& layers) const {
  const int B = std::max(arena_.batch(), 1), T = std::max(arena_.seq_len(), 1);
  if (layers.any()) {
    device.plan(make_model_desc(config_, layout_, B, T, precision_, layers, 0));
  }
}

void Model::attach_device(std::unique_ptr<BlockDevice> device, const OffloadLayers& layers,
                          size_t memory_limit) {
  if (lora_attached() && layers.any()) {
    throw UsageError("a device's blocks with LoRA adapters: the device runs no adapters yet; "
                     "leave --plugin out");
  }
  disable_offload();
  device_ = std::move(device);
  layers_ = layers;
  device_memory_limit_ = memory_limit;
  if (arena_.batch() > 0 && offload_active()) {
    try {
      replan();  // the CPU's arena without the device's blocks; configures the device
    } catch (...) {
      disable_offload();
      throw;
    }
  }
}

void Model::disable_offload() {
  if (copies_.master_behind()) fetch_device_state(true, false);
  device_.reset();
  layers_ = OffloadLayers{};
  copies_.device_detached();
  if (arena_.batch() > 0 && arena_.acts.L != config_.num_layers) replan();  // every block again
}

void Model::replan() {
  const ActivationOptions o = arena_.options();
  const int B = arena_.batch(), T = arena_.seq_len();
  arena_ = ActivationArena();
  plan_batch(B, T, {.recompute = o.recompute, .keep_logits = o.keep_logits});
}

bool Model::device_owns(int tensor, int layer) const {
  return offload_active() && llmcpu::device_owns(layers_, config_.num_layers, tensor, layer);
}

std::vector<ParameterSpan> Model::device_spans() const {
  std::vector<ParameterSpan> out;
  for (const ParameterSpan& r : layout_.spans()) {
    if (device_owns(r.tensor, r.layer)) out.push_back(r);
  }
  return out;
}

void Model::configure_device() {
  if (copies_.device_holds_moments()) {
    // configure() starts the device's moments at zero: an optimizer's state would be lost.
    throw Error(
        "Model: the device's part already holds AdamW moments of this run; a new batch "
        "shape would drop them (plan the batch before the first optimizer step)");
  }
  if (copies_.master_behind()) fetch_device_state(true, false);  // a new shape: from the master
  copies_.device_detached();  // no copy there until configure() succeeds
  device_->configure(make_model_desc(config_, layout_, arena_.batch(), arena_.seq_len(), precision_,
                                     layers_, device_memory_limit_),
                     params_data_);
  copies_.device_configured();
}

void Model::fetch_device_state(bool params, bool grads) {
  if (!offload_active() || !copies_.device_present()) return;
  if (params && copies_.master_behind()) {
    device_->read_state(params_data_, nullptr, nullptr, nullptr);
    copies_.device_fetched();
  }
  if (grads) {
    device_->read_state(nullptr, grads_data_, nullptr, nullptr);
    grads_zero_ = false;
  }
}

bool Model::offload_report(llmcpu_offload_report* out) {
  if (!device_) return false;
  *out = device_->report();
  return true;
}

void Model::plan_batch(int B, int T, const BatchOptions& options) {
  if (B <= 0 || T <= 0) {
    throw ShapeError("batch " + std::to_string(B) + " x " + std::to_string(T) +
                     ": batch size and sequence length must be positive");
  }
  if (T > config_.max_seq_len) {
    throw ShapeError("sequence length T=" + std::to_string(T) +
                     " exceeds the model's maxT=" + std::to_string(config_.max_seq_len));
  }
  const ActivationOptions o{precision_, options.recompute, options.keep_logits};
  const ActivationOptions& now = arena_.options();
  if (B == arena_.batch() && T == arena_.seq_len() && o.recompute == now.recompute &&
      o.keep_logits == now.keep_logits && arena_.acts.L == host_layers()) {
    return;
  }
  arena_ = ActivationArena();  // the old arena goes first: the peak is one arena, not two
  arena_ = ActivationArena(host_arena_config(), B, T, o);
  if (bf16_) bf16_->plan(arena_.grads.dfch);
  if (offload_active()) configure_device();
  inputs_ = AlignedBuffer<int>((size_t)B * T);
  targets_ = AlignedBuffer<int>((size_t)B * T);
  head_targets_ = AlignedBuffer<int>((size_t)B * T);
  head_rows_ = AlignedBuffer<uint32_t>((size_t)B * T);
  plan_packing(B, T);
  if (lora_attached()) plan_lora();
}

int Model::host_layers() const {
  if (!offload_active()) return config_.num_layers;
  return host_activation_layers(layers_, config_.num_layers);
}

ModelConfig Model::host_arena_config() const {
  ModelConfig c = config_;
  c.num_layers = host_layers();
  return c;
}

ActivationBytes Model::activation_bytes(int B, int T, const BatchOptions& options) const {
  return ActivationArena::bytes(host_arena_config(), B, T,
                                {precision_, options.recompute, options.keep_logits});
}

template <class A>
A Model::batch_views(const A& a) const {
  if (!packed_) return a;
  A v = a;
  v.starts = starts_.data(), v.positions = positions_.data();
  if (!a.rope_cos) return v;
  const size_t n = size_t(arena_.batch()) * size_t(arena_.seq_len()) * (config_.head_size() / 2);
  float* t = const_cast<float*>(token_rope_.data());
  v.rope_cos = t, v.rope_sin = t + n;
  if (a.rope_cos_local) v.rope_cos_local = t + 2 * n, v.rope_sin_local = t + 3 * n;
  return v;
}

template <class F>
void Model::run(F&& f) {
  if (bf16_) return f(*bf16_, batch_views(arena_.acts_bf16));
  Fp32Executor x{kernels_, quant_.get()};
  f(x, batch_views(arena_.acts));
}

void Model::take_batch(const int* inputs, const int* targets, int B, int T, const int* starts) {
  if (B != arena_.batch() || T != arena_.seq_len()) {
    const std::string shape = std::to_string(B) + " x " + std::to_string(T);
    throw ShapeError(arena_.batch() == 0
                         ? "forward over " + shape + " tokens, but no batch shape is planned " +
                               "(plan_batch(" + std::to_string(B) + ", " + std::to_string(T) +
                               ") first)"
                         : "forward over " + shape + " tokens, but the model is planned for " +
                               std::to_string(arena_.batch()) + " x " +
                               std::to_string(arena_.seq_len()) + " (plan_batch again first)");
  }
  const int V = config_.vocab_size;
  const size_t BT = (size_t)B * T;
  check_tokens_in_vocab(inputs, BT, V,
                        [](const std::string& problem) { throw ShapeError("input " + problem); });
  counted_ = !targets ? 0 : check_targets_in_vocab(targets, BT, V, [](const std::string& problem) {
    throw ShapeError("target " + problem);
  });
  take_starts(starts, B, T);
  std::memcpy(inputs_.data(), inputs, BT * sizeof(int));
  if (targets) std::memcpy(targets_.data(), targets, BT * sizeof(int));
  refresh_weight_copies();
}

// The head over the batch's targets (transformer.h's model_head); the mean loss, or NaN without
// targets. dloss NaN: no backward.
// The training pass runs only the rows whose target counts through the head: chat data masks much
// of a batch (system and user turns, padding), and the head is the largest matmul of a model with
// a large vocabulary. Those rows of lnf move to the front in place (nothing reads lnf after the
// head), the head runs over them, and their gradients move back to their rows of d.dln, the
// others' zero (a masked row's logits have no gradient). Per-token losses end up in that order
// too; only their sum is used.
template <class X, class A>
float Model::head(X& x, const A& a, bool targets, float dloss) {
  const bool compact = targets && !std::isnan(dloss) && !a.keep_logits && counted_ < a.BT;
  if (!compact) {
    model_head(x, config_, pc_, g_, a, arena_.grads, targets ? targets_.data() : nullptr, dloss);
    if (!targets) return std::numeric_limits<float>::quiet_NaN();
    return mean_loss(a.losses, a.BT, counted_);
  }
  const size_t C = size_t(config_.channels), row_bytes = C * sizeof(*a.lnf);
  size_t n = 0;
  for (size_t i = 0; i < a.BT; ++i) {
    if (targets_[i] < 0) continue;
    if (i != n) std::memcpy(a.lnf + n * C, a.lnf + i * C, row_bytes);
    head_rows_[n] = uint32_t(i), head_targets_[n] = targets_[i];
    ++n;
  }
  A counted = a;
  counted.BT = n;
  if (n > 0) model_head(x, config_, pc_, g_, counted, arena_.grads, head_targets_.data(), dloss);
  std::fill(a.losses + n, a.losses + a.BT, 0.0f);
  float* dln = arena_.grads.dln;
  size_t next = a.BT;  // rows [i + 1, next) of d.dln hold no counted row: zero
  for (size_t k = n; k-- > 0;) {  // from the last: row k moves to head_rows_[k] >= k
    const size_t i = head_rows_[k];
    std::fill(dln + (i + 1) * C, dln + next * C, 0.0f);
    if (i != k) std::memcpy(dln + i * C, dln + k * C, C * sizeof(float));
    next = i;
  }
  std::fill(dln, dln + next * C, 0.0f);
  return mean_loss(a.losses, a.BT, counted_);
}

float Model::forward(const int* inputs, const int* targets, int B, int T, const int* starts) {
  take_batch(inputs, targets, B, T, starts);
  if (offload_active()) {
    return offloaded_pass(targets != nullptr, std::numeric_limits<float>::quiet_NaN(), nullptr);
  }
  float loss = 0;
  run([&](auto& x, const auto& a) {
    model_forward(x, config_, compute_params(), a, inputs_.data(), B, T, lora_views());
    loss = head(x, a, targets != nullptr, std::numeric_limits<float>::quiet_NaN());
  });
  return loss;
}

void Model::zero_grad() {
  if (offload_active() && copies_.device_present()) device_->zero_grad();
  if (!grads_zero_ && grads_data_) zero_gradients(grads_data_, num_parameters());
  grads_zero_ = true;
}

float Model::forward_backward(const int* inputs, const int* targets, int B, int T, float loss_scale,
                              GradientHook* hook, const int* starts) {
  if (!targets) throw Error("forward_backward() needs targets: the loss is what it differentiates");
  take_batch(inputs, targets, B, T, starts);
  grads_zero_ = false;  // the backward pass adds into them
  // loss = (1/n) sum of the n counted tokens' losses, so each has gradient loss_scale / n.
  const float dloss = loss_scale / float(std::max<size_t>(counted_, 1));
  if (offload_active()) return offloaded_pass(true, dloss, hook);
  float loss = 0;
  // Dropout, where the adapters have it, in this pass only (also when it throws).
  struct TrainingPass {
    bool& on;
    explicit TrainingPass(bool& flag) : on(flag) { on = true; }
    ~TrainingPass() { on = false; }
  } training(lora_views_.training);
  run([&](auto& x, const auto& a) {
    model_forward(x, config_, compute_params(), a, inputs_.data(), B, T, lora_views());
    loss = head(x, a, true, dloss);
    model_backward(
        x, config_, pc_, g_, a, arena_.grads, inputs_.data(), B, T,
        [hook](int l) {
          if (hook) hook->gradients_ready(l);
        },
        lora_views());
  });
  return loss;
}

// The device runs blocks [first, L) (all: the embedding and the head too); the CPU the rest:
//   CPU: embedding, blocks [0, first)  ->  residual up  ->  device: blocks [first, L)  ->
//   residual down  ->  CPU: lnf, head and loss, their backward  ->  d(residual) up  ->
//   device: backward of its blocks (its gradients stay there)  ->  d(residual) down  ->
//   CPU: backward of blocks [0, first) and the embedding.
float Model::offloaded_pass(bool targets, float dloss, GradientHook* hook) {
  const int B = arena_.batch(), T = arena_.seq_len(), L = config_.num_layers;
  const size_t BT = (size_t)B * T;
  const bool grad = !std::isnan(dloss);
  const int first = layers_.all ? 0 : L - layers_.blocks;
  float loss = std::numeric_limits<float>::quiet_NaN();
  run([&](auto& x, const auto& a) {
    llmcpu_forward_args f{};
    f.struct_size = sizeof f;
    f.logits_position = LLMCPU_LOGITS_NONE;
    f.dloss = dloss;
    if (layers_.all) {
      f.inputs = inputs_.data();
      f.targets = targets ? targets_.data() : nullptr;
      f.losses = a.losses;
      if (a.keep_logits) f.logits_position = LLMCPU_LOGITS_ALL, f.logits = a.logits;
      device_->forward(f);
      if (grad) {
        device_->backward(nullptr, nullptr);
        for (int l = L - 1; l >= -1; --l) {
          if (hook) hook->gradients_ready(l);
        }
      }
      if (targets) loss = mean_loss(a.losses, BT, counted_);
      return;
    }
    embed_and_blocks_forward(x, config_, pc_, a, inputs_.data(), B, T, first);
    f.residual_in = a.layer(first).residual;
    f.residual_out = a.residual3 + size_t(a.L - 1) * BT * config_.channels;  // a.output()
    device_->forward(f);
    final_layernorm_forward(x, config_, pc_, a, B, T);
    loss = head(x, a, targets, grad ? dloss : std::numeric_limits<float>::quiet_NaN());
    if (!grad) return;
    const ActivationGradViews& d = arena_.grads;
    final_layernorm_backward(x, config_, pc_, g_, a, d, B, T);
    device_->backward(d.dresidual, d.dresidual);
    for (int l = L - 1; l >= first; --l) {
      if (hook) hook->gradients_ready(l);
    }
    blocks_and_embed_backward(x, config_, pc_, g_, a, d, inputs_.data(), B, T, first, [hook](int l) {
      if (hook) hook->gradients_ready(l);
    });
  });
  return loss;
}

void init_model(Model& model, unsigned long long seed) {
  const ModelConfig& c = model.config();
  const ParameterLayout& layout = model.layout();
  float* base = model.params_flat();
  Rng rng(seed);
  // GPT-2 scales the residual projections; the others take N(0, 0.02) for every matrix, as
  // transformers' _init_weights.
  const double residual_std =
      c.family().scaled_residual_init ? 0.02 / std::sqrt(2.0 * c.num_layers) : 0.02;
  for (int i = 0; i < kNumTensorRoles; ++i) {
    const std::string name = layout.name(i);
    const size_t offset = layout.offset(i), n = layout.size(i);
    float* t = base + offset;
    if (i == kLn1w || i == kLn2w || i == kLnfw || i == kQNorm || i == kKNorm ||
        i == kAttnPostNorm || i == kMlpPostNorm) {
      // A norm scales by w + norm_offset: 1 either way (Gemma's (1 + w) starts at w = 0).
      std::fill_n(t, n, 1.0f - c.family().norm_offset);
    } else if (layout.dims(i).size() == 1 || name.back() == 'b') {
      std::fill_n(t, n, 0.0f);  // biases and layernorm biases
    } else {
      const double std_dev = (name == "attprojw" || name == "fcprojw") ? residual_std : 0.02;
      // A layer's slice at a time, each final once drawn (a model freezing its base as it is
      // written takes it then: Model::base_written).
      const size_t chunk = ParameterLayout::per_layer(i) ? layout.layer_size(i) : n;
      for (size_t j0 = 0; j0 < n; j0 += chunk) {
        for (size_t j = j0; j < j0 + chunk; ++j) t[j] = static_cast<float>(std_dev * rng.normal());
        if (chunk < n) model.base_written(offset + j0, chunk);
      }
      if (chunk < n) continue;
    }
    // The padding rows of wte (and of an untied head) are never looked up and get no gradient:
    // keep them zero like llm.c.
    if ((i == kWte || i == kLmHead) && n > 0) {
      std::fill(t + (size_t)c.vocab_size * c.channels, t + (size_t)c.padded_vocab_size * c.channels,
                0.0f);
    }
    model.base_written(offset, n);
  }
}

}  // namespace llmcpu
