// The batches of one optimizer step, read before any is computed, and the weight of each in the
// step's loss. With masked targets (chat data: only the answers count) micro-batches hold different
// numbers of counted targets, so the step's loss is the sum of every counted target's loss over all
// micro-batches and ranks divided by their total count, as transformers' Trainer does with
// num_items_in_batch, not the mean of the micro-batches' means. Reading the step's batches first
// gives that count before the first backward pass; one all-reduce of a double sums it over the
// ranks. Data without masks skips the all-reduce: every target counts, B*T per micro-batch.
// Not here: which rows a batch holds (DataLoader), the loss itself (Model).
#pragma once

#include <cstddef>
#include <vector>

namespace llmcpu {

class Communicator;
class DataLoader;

class StepBatches {
 public:
  StepBatches(int B, int T, int micro_batches);

  // Reads `micro_batches` batches for `rank` of `ranks` from `loader` (each moving it past all the
  // ranks' batches) and counts their targets over every rank.
  void read(DataLoader& loader, int rank, int ranks, Communicator& world);

  const int* inputs(int micro) const { return inputs_.data() + offset(micro); }
  const int* targets(int micro) const { return targets_.data() + offset(micro); }
  // Packed rows: the starts of each token's example (Model::forward's `starts`); else null.
  const int* starts(int micro) const { return packed_ ? starts_.data() + offset(micro) : nullptr; }
  // The share of the step's loss that micro-batch `micro`'s mean loss carries: its counted targets
  // over the step's on all ranks (0 when none counts anywhere). Summed over the micro-batches and
  // ranks these shares make 1.
  double share(int micro) const;
  // The counted targets of the step on all ranks.
  double counted() const { return counted_all_; }

 private:
  size_t offset(int micro) const { return size_t(micro) * rows_; }

  size_t rows_;  // B*T
  int micro_batches_;
  bool packed_ = false;
  std::vector<int> inputs_, targets_, starts_;  // (micro_batches, B, T)
  std::vector<double> counted_;                 // (micro_batches) this rank's
  double counted_all_ = 0;
};

}  // namespace llmcpu
