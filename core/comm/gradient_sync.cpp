#include "core/comm/gradient_sync.h"

#include <chrono>
#include <exception>

#include "core/comm/zero_shards.h"
#include "core/runtime/pinning.h"

namespace llmcpu {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
}  // namespace

GradientSync::GradientSync(Communicator& world, Gpt2& model, bool zero)
    : world_(world),
      zero_(zero),
      grads_(model.grads_flat()),
      spans_(model.layout().spans()),
      parts_(zero ? owned_parts(spans_, world.rank(), world.size()) : spans_),
      others_(others_parts(spans_, parts_)) {
  buckets_.resize(model.config().num_layers + 1);
  for (size_t i = 0; i < spans_.size(); ++i) buckets_[spans_[i].layer + 1].push_back(i);
  queue_.resize(buckets_.size() + spans_.size());  // the most one step hands over
  thread_ = std::thread([this] { serve(); });
}

GradientSync::~GradientSync() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void GradientSync::gradients_ready(int layer) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_[queued_++ % queue_.size()] = layer + 1;
  }
  wake_.notify_one();
}

void GradientSync::gather(float* params, bf16* copy, size_t i) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (params) params_ = params;
    if (copy) copy_ = copy;
    queue_[queued_++ % queue_.size()] = -1 - long(params ? i : spans_.size() + i);
  }
  wake_.notify_one();
}

void GradientSync::serve() {
  bind_helper_thread();  // on this rank's cores (its placement plan), never another rank's
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || done_ < queued_; });
    if (done_ == queued_) return;  // stop_, nothing left
    const long job = queue_[done_ % queue_.size()];
    lock.unlock();
    const auto start = Clock::now();
    try {
      if (!failure_) run(job);
    } catch (...) {
      failure_ = std::current_exception();
    }
    const double ms = ms_since(start);
    lock.lock();
    busy_ms_ += ms;
    ++done_;
    finished_.notify_all();
  }
}

void GradientSync::run(long job) {
  if (job < 0) {
    const size_t i = size_t(-1 - job);
    if (i < spans_.size()) {
      world_.all_gather(params_ + spans_[i].offset, spans_[i].count);
    } else {
      const ParameterSpan& s = spans_[i - spans_.size()];
      world_.all_gather(reinterpret_cast<uint16_t*>(copy_ + s.offset), s.count);
    }
    return;
  }
  for (size_t i : buckets_[job]) {
    const ParameterSpan& s = spans_[i];
    if (zero_) {
      world_.reduce_scatter_sum(grads_ + s.offset, s.count);
    } else {
      world_.all_reduce_sum(grads_ + s.offset, s.count);
    }
  }
}

std::pair<double, double> GradientSync::wait() {
  const auto start = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [this] { return done_ == queued_; });
  const double waited = ms_since(start), busy = busy_ms_;
  busy_ms_ = 0;
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  return {busy, waited};
}

}  // namespace llmcpu
