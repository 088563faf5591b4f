#include "core/comm/gradient_sync.h"

#include <chrono>
#include <exception>

namespace llmcpu {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
}  // namespace

GradientAverager::GradientAverager(Communicator& world, Gpt2& model) : world_(world) {
  // Bucket 0: the tensors outside the layers (wte, wpe, lnfw, lnfb); bucket l + 1: layer l's slice
  // of each per-layer tensor, (L, ...) in the layout.
  const ParameterLayout& layout = model.layout();
  const int L = model.config().num_layers;
  float* grads = model.grads_flat();
  buckets_.resize(L + 1);
  for (int i = 0; i < kNumParameterTensors; ++i) {
    float* tensor = grads + layout.offset(i);
    if (!ParameterLayout::per_layer(i)) {
      buckets_[0].emplace_back(tensor, layout.size(i));
      continue;
    }
    const size_t per_layer = layout.size(i) / L;
    for (int l = 0; l < L; ++l) buckets_[l + 1].emplace_back(tensor + l * per_layer, per_layer);
  }
  queue_.resize(buckets_.size());
  thread_ = std::thread([this] { serve(); });
}

GradientAverager::~GradientAverager() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void GradientAverager::gradients_ready(int layer) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_[queued_++ % queue_.size()] = layer + 1;
  }
  wake_.notify_one();
}

void GradientAverager::serve() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || done_ < queued_; });
    if (done_ == queued_) return;  // stop_, nothing left
    const int bucket = queue_[done_ % queue_.size()];
    lock.unlock();
    const auto start = Clock::now();
    try {
      if (!failure_) average(bucket);
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

void GradientAverager::average(int bucket) {
  for (auto [data, n] : buckets_[bucket]) world_.all_reduce_sum(data, n);
}

std::pair<double, double> GradientAverager::finish() {
  const auto start = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [this] { return done_ == queued_; });
  const double waited = ms_since(start), busy = busy_ms_;
  busy_ms_ = 0;
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  return {busy, waited};
}

}  // namespace llmcpu
