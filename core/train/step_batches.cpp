#include "core/train/step_batches.h"

#include "core/comm/communicator.h"
#include "core/train/data_loader.h"
#include "core/util/tokens.h"

namespace llmcpu {

StepBatches::StepBatches(int B, int T, int micro_batches)
    : rows_(size_t(B) * T),
      micro_batches_(micro_batches),
      inputs_(rows_ * micro_batches),
      targets_(rows_ * micro_batches),
      counted_(micro_batches) {}

void StepBatches::read(DataLoader& loader, int rank, int ranks, Communicator& world) {
  packed_ = loader.packed();
  if (packed_) starts_.resize(inputs_.size());
  double local = 0;
  for (int micro = 0; micro < micro_batches_; ++micro) {
    const size_t at = offset(micro);
    loader.next_batch_of(rank, ranks, inputs_.data() + at, targets_.data() + at,
                         packed_ ? starts_.data() + at : nullptr);
    counted_[micro] = double(count_targets(targets_.data() + at, rows_));
    local += counted_[micro];
  }
  counted_all_ = local;
  if (loader.masked()) {
    world.all_reduce_sum(&counted_all_, 1);
  } else {
    counted_all_ = double(rows_) * micro_batches_ * ranks;  // every target counts, on every rank
  }
}

double StepBatches::share(int micro) const {
  return counted_all_ > 0 ? counted_[micro] / counted_all_ : 0.0;
}

}  // namespace llmcpu
