#include "core/train/train_optimizer.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "simd/error.h"

namespace llmcpu {

TrainOptimizer::TrainOptimizer(Model& model, DataParallel& parallel, double weight_decay,
                               const CheckpointFiles* resume, LoraAdapter* lora)
    : model_(model), parallel_(parallel), lora_(lora) {
  AdamWConfig config;
  config.weight_decay = weight_decay;
  const size_t P = lora_ ? lora_->size() : model_.num_parameters();
  std::vector<ParameterSpan> parts{{0, P, -1, -1}};
  if (parallel_.zero()) parts = parallel_.sync()->parts();
  adamw_ =
      std::make_unique<AdamW>(std::move(parts), config, model_.kernels(), model_.bf16_kernels());
  if (resume) {
    // Each rank takes its parts of the moments from whichever saved parts hold them.
    const bool zero = parallel_.zero();
    load_moments(*resume, lora_ ? lora_->spans() : model_.layout().spans(),
                 zero ? parallel_.rank() : 0,
                 zero ? parallel_.ranks() : 1, *adamw_);
  }
}

void TrainOptimizer::adopt_device() {
  BlockDevice* device = model_.offload_device();
  if (device == device_) return;
  if (device && parallel_.ranks() > 1) {
    throw UsageError("--offload-layers with " + std::to_string(parallel_.ranks()) +
                     " ranks: a device's part of the model is not reduced over ranks yet; run "
                     "one process per device without mpirun, or leave --plugin out");
  }
  device_ = device;
  adamw_->skip(model_.device_spans());
  // The moments are the whole arena's here (one process): a resume's reach the device.
  if (device_) device_->set_moments(adamw_->m(), adamw_->v());
}

void TrainOptimizer::fetch_device_state() {
  if (!device_) return;
  model_.fetch_device_state(true, false);
  device_->read_state(nullptr, nullptr, adamw_->m(), adamw_->v());
}

double TrainOptimizer::gradient_norm() {
  Model& m = model_;
  const float* grads = lora_ ? lora_->grads() : m.grads_flat();
  const size_t P = lora_ ? lora_->size() : m.num_parameters();
  if (device_) {  // the device's gradients are zero here: its part of the sum comes from it
    return std::sqrt(m.kernels().sum_squares(m.grads_flat(), m.num_parameters()) +
                     device_->grad_sum_squares());
  }
  if (!parallel_.zero()) return global_norm(grads, P, m.kernels());
  // Each rank's parts hold the summed gradients; together they are every gradient once.
  double sum = 0;
  for (const ParameterSpan& p : parallel_.sync()->parts()) {
    if (p.count > 0) sum += m.kernels().sum_squares(grads + p.offset, p.count);
  }
  parallel_.world().all_reduce_sum(&sum, 1);
  return std::sqrt(sum);
}

void TrainOptimizer::clip(double norm, double max_norm) {
  grad_scale_ = clip_factor(norm, max_norm);  // applied in the AdamW pass, the device's too
}

void TrainOptimizer::update(double lr) {
  if (lora_) return update_adapter(lr);
  Model& m = model_;
  const Model::UpdateSpans weights = m.weights_for_update();  // bf16: the copy too, same pass
  if (parallel_.zero() && !parallel_.shared_weights()) return update_sharded(lr, weights);
  // Shared weights: each rank updates its parts (and their bf16 copy) in place; once every rank
  // is past the fence, every rank computes with all of them.
  // One process without a device updates every gradient: the same pass clears them for the next
  // step (where ranks share their gradients' memory, those stay until the next zero_grad).
  const bool clear_all = parallel_.ranks() == 1 && !parallel_.zero() && !device_;
  adamw_->step(weights.master, m.grads_flat(), lr, weights.copy, {}, {grad_scale_, clear_all});
  if (clear_all) m.mark_gradients_zero();
  if (device_) {  // the same update of the device's part, where its weights live
    device_->adamw_step(adamw_step_of(adamw_->config(), lr, adamw_->steps_taken()), grad_scale_);
    m.device_parameters_changed();
  }
  if (parallel_.shared_weights()) {
    const double ms = parallel_.sync()->fence();
    parallel_.add_comm(ms, ms);
  }
}

// The adapter's arena (fp32 in both precisions: a bf16 model rounds A at each pass); under ZeRO-1
// each part goes to the other ranks as soon as it is updated.
void TrainOptimizer::update_adapter(double lr) {
  if (!parallel_.zero()) {
    const bool clear = parallel_.ranks() == 1;  // the same pass zeroes them for the next step
    adamw_->step(lora_->params(), lora_->grads(), lr, nullptr, {}, {grad_scale_, clear});
    return;
  }
  GradientSync& sync = *parallel_.sync();
  float* params = lora_->params();
  const auto send = [&sync, params](size_t i) { sync.gather(params, nullptr, i); };
  adamw_->step(params, lora_->grads(), lr, nullptr, send, {grad_scale_, false});
  const auto [busy, waited] = sync.wait();
  parallel_.add_comm(busy, waited);
}

// ZeRO-1: each part goes out while the optimizer works on the next; in bf16 the layers' matmul
// weights go out as their bf16 copy (this rank keeps no fp32 master of the others' parts).
void TrainOptimizer::update_sharded(double lr, const Model::UpdateSpans& weights) {
  Model& m = model_;
  GradientSync& sync = *parallel_.sync();
  // Two pointers: the std::function holds them without allocating.
  const auto send = [&sync, &weights](size_t i) {
    if (weights.copy && ParameterLayout::matmul_weight(sync.spans()[i].tensor)) {
      sync.gather(nullptr, weights.copy, i);
    } else {
      sync.gather(weights.master, nullptr, i);
    }
  };
  adamw_->step(weights.master, m.grads_flat(), lr, weights.copy, send, {grad_scale_, false});
  const auto [busy, waited] = sync.wait();
  parallel_.add_comm(busy, waited);
  if (!weights.copy) return;
  // The other ranks' parts of the other tensors arrived in fp32; their bf16 copy is rounded here.
  const auto to_bf16 = m.bf16_kernels()->to_bf16;
  for (const ParameterSpan& r : sync.others()) {
    if (r.count > 0 && !ParameterLayout::matmul_weight(r.tensor)) {
      to_bf16(weights.copy + r.offset, weights.master + r.offset, r.count);
    }
  }
}

}  // namespace llmcpu
