// The Trainer's passes over the data: a step's gradients (its batches read first, each weighed
// by its counted targets), validation, and the samples of --sample-every.
#include <algorithm>
#include <utility>

#include "core/train/trainer.h"

namespace llmcpu {

float Trainer::validate() {
  // The same batches as one process reads, each computed by one rank (batch i by rank i % N).
  const int rank = world_->rank(), ranks = world_->size();
  val_->reset();
  const uint64_t batches = std::min<uint64_t>(opt_.val_batches, val_->total_samples());
  // The mean over every counted target of the batches (their losses' sum / their count).
  double sums[2] = {0, 0};
  int* starts = val_->packed() ? starts_.data() : nullptr;
  for (uint64_t i = 0; i < batches; i += ranks) {
    val_->next_batch_of(rank, ranks, inputs_.data(), targets_.data(), starts);
    if (i + rank < batches) {
      const double mean = model_->forward(inputs_.data(), targets_.data(), opt_.batch,
                                          opt_.seq_len, starts);
      const double counted = double(model_->counted_targets());
      sums[0] += mean * counted, sums[1] += counted;
    }
  }
  world_->all_reduce_sum(sums, 2);
  return static_cast<float>(sums[1] > 0 ? sums[0] / sums[1] : 0.0);
}

const std::vector<int>& Trainer::sample(int step) {
  // Its own RNG, seeded from the run's seed and the step: sampling never disturbs training.
  Rng rng(opt_.seed ^ (0xA5A5A5A5ull + uint64_t(step) * 0x9E3779B97F4A7C15ull));
  model_->fetch_device_state(true, false);  // the generator reads the master weights
  model_->refresh_lora_copies();            // and the adapters as they are now
  const ModelConfig& c = model_->config();
  const int eot = opt_.sample_start >= 0 && opt_.sample_start < c.vocab_size ? opt_.sample_start
                  : c.vocab_size > 50256                                     ? 50256
                                                                             : c.vocab_size - 1;
  Generator& gen = *generator_;
  gen.reset();
  sample_.clear();
  int token = eot;
  while (gen.position() < gen.capacity()) {
    gen.step(token);
    token = gen.sample(1.0f, 0, rng, opt_.sample_candidates);
    sample_.push_back(token);
  }
  return sample_;
}

void Trainer::validate_and_sample(int step, bool resumed_here, const TrainObserver& obs) {
  const bool last = step == opt_.steps;
  if (val_ && opt_.val_every > 0 && !resumed_here && (step % opt_.val_every == 0 || last)) {
    const float val_loss = validate();
    if (obs.on_val) obs.on_val(step, val_loss);
    reports_->validation(step, val_loss, obs.on_warning);
  }
  if (opt_.sample_every > 0 && obs.on_sample && step > 0 && !resumed_here &&
      (step % opt_.sample_every == 0 || last)) {
    obs.on_sample(step, sample(step));
  }
}

double Trainer::compute_gradients() {
  Model& m = *model_;
  const int ranks = world_->size();
  m.zero_grad();
  if (lora_) std::fill_n(lora_->grads(), lora_->size(), 0.0f);
  // The step's batches first: each micro-batch's share of the step's loss is its counted targets
  // over the step's on all ranks (StepBatches). The ranks' gradients are reduced to their sum,
  // which the shares make the step's mean.
  StepBatches& b = *batches_;
  b.read(*train_, world_->rank(), ranks, *world_);
  double loss = 0;
  for (int micro = 0; micro < grad_accum_; ++micro) {
    // The adapters' dropout masks: from the run's seed and the place in it (a resumed run, and
    // every rank, draws the same ones).
    m.set_lora_seed(opt_.seed * 0x9E3779B97F4A7C15ull + uint64_t(step_) * 1024 + uint64_t(micro));
    // The last micro-batch completes the gradients: their sum goes out layer by layer.
    const double share = b.share(micro);
    loss += share * m.forward_backward(b.inputs(micro), b.targets(micro), opt_.batch,
                                       opt_.seq_len, float(share),
                                       micro == grad_accum_ - 1 ? parallel_->sync() : nullptr,
                                       b.starts(micro));
  }
  return parallel_->finish_gradients(loss);
}

}  // namespace llmcpu
