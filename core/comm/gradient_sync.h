// Averaging a data-parallel step's gradients across ranks while the backward pass still runs. The
// model tells this hook as each layer's gradients become final (Gpt2::backward); a communication
// thread then sum-all-reduces that layer's slices of the 12 per-layer tensors in place while the
// compute threads go on with the layers below; the trainer scales each rank's loss by 1 / (the
// micro-batches of all ranks), so the sum is the average and needs no pass of its own. Open MPI
// makes no progress outside MPI calls, hence a thread of its own doing blocking collectives;
// buckets go out in the order the layers finish, which is the same on every rank, so the sums do
// not depend on timing. Nothing is allocated per step. Deliberately not here: the optimizer's
// sharding (ZeRO), the loss (the trainer).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/comm/communicator.h"
#include "core/model/gpt2.h"

namespace llmcpu {

class GradientAverager final : public GradientHook {
 public:
  GradientAverager(Communicator& world, Gpt2& model);
  ~GradientAverager() override;
  GradientAverager(const GradientAverager&) = delete;
  GradientAverager& operator=(const GradientAverager&) = delete;

  // Called by the backward pass: queues the bucket of `layer` (-1: wte, wpe, lnfw, lnfb).
  void gradients_ready(int layer) override;
  // Waits until every queued bucket is averaged. Returns the communication thread's busy time in
  // this step and how long the caller waited for it (the part not hidden behind the backward pass),
  // in milliseconds, and starts counting anew.
  std::pair<double, double> finish();

 private:
  void serve();  // the communication thread
  void average(int bucket);

  Communicator& world_;
  // Per bucket (index layer + 1), the spans (pointer, count) of the gradient array it covers.
  std::vector<std::vector<std::pair<float*, size_t>>> buckets_;
  std::vector<int> queue_;  // bucket indices, in the order they became ready
  size_t queued_ = 0, done_ = 0;
  double busy_ms_ = 0;
  bool stop_ = false;
  std::exception_ptr failure_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::thread thread_;
};

}  // namespace llmcpu
