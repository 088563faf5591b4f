// A run's optimizer: AdamW over the CPU's part of the flat parameter arena (this rank's parts under
// ZeRO-1), and over the part a device owns (--plugin), the device's own AdamW with the same
// constants; the global gradient norm and clipping that feed it, and the moments a resume brings.
// Under ZeRO-1 each updated part goes to the other ranks while the next one is updated.
// Deliberately not here: the schedule of the rate (core/train/lr_schedule.h), the gradients' sum
// (core/train/data_parallel.h), the AdamW arithmetic (core/optim/adamw.h).
#pragma once

#include <memory>

#include "core/lora/adapter.h"
#include "core/model/block_device.h"
#include "core/model/model.h"
#include "core/optim/adamw.h"
#include "core/train/checkpoint_store.h"
#include "core/train/data_parallel.h"

namespace llmcpu {

class TrainOptimizer {
 public:
  // The moments are made (and touched) here: after the model's own arrays went to shared memory
  // (DataParallel::share_weights), so that the two are never held at once. With `resume`, its
  // moments and step count.
  // With a LoRA adapter (`lora`) the adapter's arena is what it updates, clips and shards (the
  // base is frozen).
  TrainOptimizer(Model& model, DataParallel& parallel, double weight_decay,
                 const CheckpointFiles* resume, LoraAdapter* lora = nullptr);

  const AdamW& adamw() const { return *adamw_; }
  BlockDevice* device() const { return device_; }
  // With a device that owns part of the model (enable_offload): the CPU's AdamW leaves that part
  // to the device's and hands it the moments (a resume's); once per run, and again a no-op.
  // Refused (UsageError) with several ranks.
  void adopt_device();
  // The device's parameters and moments into the model and the CPU's AdamW (their copy), before
  // anything is written or sampled.
  void fetch_device_state();
  // The global gradient norm (over the ranks' parts under ZeRO-1).
  double gradient_norm();
  // Clips the gradients to `max_norm` (0: off) given their `norm`: the next update() scales them
  // by clip_factor's factor (in the AdamW pass, not in a pass of its own).
  void clip(double norm, double max_norm);
  // The AdamW update at rate `lr`; under ZeRO-1 each part goes to the other ranks as soon as it is
  // updated. In one process without a device the same pass zeroes the gradients for the next step
  // (Model::mark_gradients_zero).
  void update(double lr);

 private:
  void update_sharded(double lr, const Model::UpdateSpans& weights);
  void update_adapter(double lr);

  Model& model_;
  DataParallel& parallel_;
  std::unique_ptr<AdamW> adamw_;
  LoraAdapter* lora_ = nullptr;    // the arena trained instead of the model's
  BlockDevice* device_ = nullptr;  // adopted: owns part of the model and its AdamW
  float grad_scale_ = 1.0f;        // this step's clipping factor (clip), for both AdamWs
};

}  // namespace llmcpu
