// A data-parallel step's communication, on a thread of its own while the compute threads go on.
// Backward: the model tells this hook as each layer's gradients become final (Model::backward) and
// the communication thread sums that layer's spans (ParameterLayout::spans) over the ranks while
// the layers below compute: all of each span (all-reduce), or under ZeRO-1 only each rank's own
// part (reduce-scatter, core/comm/zero_shards.h). The trainer scales each rank's loss by 1 / (the
// micro-batches of all ranks), so the sums are the averages and need no pass of their own. Update
// (ZeRO-1): as the optimizer finishes a part, the thread sends it to the other ranks (all-gather)
// while the optimizer goes on with the next. With every rank on one machine (share_memory), the
// ranks keep one copy of the weights in memory they share and their gradients where the others
// can read them: each rank sums its parts from the ranks' blocks (after a barrier per layer) and
// updates them in place, and there is nothing to gather. Open MPI makes no progress outside MPI
// calls, hence a thread doing blocking collectives, bound to this rank's cores
// (bind_helper_thread); they go out in the order the work is handed over, which is the same on
// every rank, so no result depends on timing. Nothing is allocated per step.
// Deliberately not here: the optimizer's arithmetic, the loss (the trainer).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/comm/communicator.h"
#include "core/model/model.h"

namespace llmcpu {

class GradientSync final : public GradientHook {
 public:
  // zero: ZeRO-1 (reduce-scatter, then gather the updated parts); otherwise every rank gets the
  // whole average (all-reduce) and updates every weight itself.
  GradientSync(Communicator& world, Model& model, bool zero);
  // Over another arena's gradients (a LoRA adapter's): its spans, each of a layer in
  // [-1, num_layers), in flat order. share_memory is not for these.
  GradientSync(Communicator& world, float* grads, std::vector<ParameterSpan> spans, int num_layers,
               bool zero);
  ~GradientSync() override;
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  bool zero() const { return zero_; }
  // The layout's spans, this rank's part of each (the whole span without ZeRO-1) and the other
  // ranks' parts (others_parts: two runs per span, empty without ZeRO-1).
  const std::vector<ParameterSpan>& spans() const { return spans_; }
  const std::vector<ParameterSpan>& parts() const { return parts_; }
  const std::vector<ParameterSpan>& others() const { return others_; }

  // ZeRO-1 with every rank on this machine (Communicator::share_memory): moves the model's weights
  // (in bf16 with their copy) into one array that all the ranks share, each writing only its own
  // parts, and its gradients into a block per rank that the other ranks read. Summing a part then
  // reads the ranks' gradients where they are, and the updated weights need no gather: fence()
  // after the update makes them every rank's. Collective; false, changing nothing, where the world
  // cannot share memory (`why_not` says why where it is not plain: Communicator::share_memory) or
  // without ZeRO-1.
  bool share_memory(Model& model, std::string* why_not);
  bool shared() const { return shared_ != nullptr; }
  // Shared memory: waits for every rank, after which each sees what the others wrote (their parts
  // of the weights). The caller's thread, while nothing is queued. Returns the milliseconds waited.
  double fence();

  // Called by the backward pass: queues the sum of `layer`'s spans (-1: wte, wpe, lnfw, lnfb).
  void gradients_ready(int layer) override;
  // ZeRO-1: queues sending this rank's part of span `i` of `params` (whole arena) to every rank,
  // or of the bf16 copy `copy` (whole arena) when params is null.
  void gather(float* params, bf16* copy, size_t i);

  // Waits until everything queued is done. Returns the communication thread's busy time since the
  // last call and how long the caller waited now (the part not hidden behind computation), in
  // milliseconds. Rethrows a collective's failure.
  std::pair<double, double> wait();

 private:
  void serve();  // the communication thread
  void run(long job);
  void sum_shared(const ParameterSpan& part);  // the ranks' gradients at `part`, into this rank's

  static constexpr size_t kSumChunk = 4096;  // floats: a chunk of a shared sum stays in cache

  Communicator& world_;
  const bool zero_;
  float* grads_;
  float* params_ = nullptr;  // of the gathers
  bf16* copy_ = nullptr;
  std::vector<ParameterSpan> spans_, parts_, others_;
  std::unique_ptr<SharedMemory> shared_;      // share_memory(): the weights, every rank's gradients
  std::vector<const float*> rank_grads_;      // shared: each rank's gradient block
  std::vector<float> scratch_;                // shared: a sum under way
  std::vector<std::vector<size_t>> buckets_;  // per layer + 1, the indices of its spans
  // Jobs, in the order they were handed over: b >= 0 sums bucket b, -1 - i gathers span i in
  // fp32, -1 - (spans + i) in bf16.
  std::vector<long> queue_;
  size_t queued_ = 0, done_ = 0;
  double busy_ms_ = 0;
  bool stop_ = false;
  std::exception_ptr failure_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::thread thread_;
};

}  // namespace llmcpu
