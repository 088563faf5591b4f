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

GradientAverager::GradientAverager(Communicator& world, Gpt2& model)
    : world_(world), model_(model) {
  const ModelConfig& c = model.config();
  const ParameterViews<float>& g = model.grads();
  const size_t C = c.channels;
  buckets_.resize(c.num_layers + 1);
  buckets_[0] = {{g.wte, (size_t)c.padded_vocab_size * C},
                 {g.wpe, (size_t)c.max_seq_len * C},
                 {g.lnfw, C},
                 {g.lnfb, C}};
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerParams<float> d = g.layer(l);
    buckets_[l + 1] = {{d.ln1w, C},
                       {d.ln1b, C},
                       {d.qkvw, 3 * C * C},
                       {d.qkvb, 3 * C},
                       {d.attprojw, C * C},
                       {d.attprojb, C},
                       {d.ln2w, C},
                       {d.ln2b, C},
                       {d.fcw, 4 * C * C},
                       {d.fcb, 4 * C},
                       {d.fcprojw, 4 * C * C},
                       {d.fcprojb, C}};
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
