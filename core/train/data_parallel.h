// A training run's data parallelism: over a world of N ranks (core/comm/communicator.h) each rank
// computes its share of a step's micro-batches, the gradients and losses are averaged across them
// (GradientSync, while the backward pass goes on), and with ZeRO-1 each rank keeps only its parts
// of the optimizer state; on one machine the ranks may share one copy of the weights. Here also the
// checks that the ranks agree: on their flags, model and data at the start, on an interrupt at
// every step, and (LLMCPU_CHECK_REPLICAS=1) on their weights after every step.
// With one rank all of this is a no-op. Deliberately not here: the AdamW update itself
// (core/train/train_optimizer.h) and the collectives (core/comm).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "core/comm/gradient_sync.h"
#include "core/lora/adapter.h"
#include "core/model/model.h"
#include "core/train/data_loader.h"
#include "core/train/train_options.h"

namespace llmcpu {

class DataParallel {
 public:
  // With more than one rank, a GradientSync over `model`, sharding the optimizer state unless
  // --zero 0. What a user should know (ZeRO in a single process) goes to `notes`. With a LoRA
  // adapter (`lora`, the base frozen) the adapter's gradients are what the ranks reduce, its
  // state what ZeRO-1 shards, and the ranks keep their own copies of the base.
  DataParallel(Communicator& world, Model& model, ZeroMode zero, std::vector<std::string>* notes,
               LoraAdapter* lora = nullptr);
  ~DataParallel();

  Communicator& world() const { return world_; }
  int rank() const { return world_.rank(); }
  int ranks() const { return world_.size(); }
  GradientSync* sync() const { return sync_.get(); }  // null with one rank
  bool zero() const { return sync_ && sync_->zero(); }
  bool shared_weights() const { return shared_weights_; }

  // Refuses (UsageError naming the flag) a rank whose flags, model or data differ from rank 0's.
  void check_ranks_agree(const TrainOptions& o, const Model& model, const DataLoader* train,
                         const DataLoader* val) const;
  // ZeRO-1 on one machine: one copy of the weights in memory that the ranks share (no gather);
  // where they cannot, a note says why, and in bf16 each rank gives up the fp32 master of the
  // others' parts of the matmul weights. Returns shared_weights().
  bool share_weights(Model& model, std::vector<std::string>* notes);

  // An interrupt on any rank (mpirun forwards Ctrl-C to all of them, not at the same moment).
  bool stop_requested();
  // After the step's backward pass: waits for the gradients' sum and returns the step's loss, the
  // sum of the ranks' shares of it (`loss`: this rank's). Starts this step's communication account.
  double finish_gradients(double loss);
  // The communication thread's time (busy) and the part of it the caller waited for.
  void add_comm(double busy_ms, double waited_ms) {
    comm_busy_ms_ += busy_ms, comm_waited_ms_ += waited_ms;
  }
  double comm_ms() const { return comm_busy_ms_; }
  // The share of this step's communication that ran while the rank computed (0 with one rank).
  double comm_hidden() const;
  // `mine` of every rank, index = rank.
  std::vector<double> per_rank(double mine) const;
  // Every rank's weights hash the same (LLMCPU_CHECK_REPLICAS=1; otherwise nothing): a
  // TrainingError naming a rank whose weights differ, after step `step` (0-based).
  void check_replicas(const Model& model, int step) const;

 private:
  Communicator& world_;
  std::unique_ptr<GradientSync> sync_;  // with more than one rank
  LoraAdapter* lora_ = nullptr;
  bool shared_weights_ = false;
  bool check_replicas_ = false;
  double comm_busy_ms_ = 0, comm_waited_ms_ = 0;  // this step's
};

}  // namespace llmcpu
