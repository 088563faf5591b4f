#include "core/comm/gradient_sync.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "core/comm/zero_shards.h"
#include "core/runtime/pinning.h"

namespace llmcpu {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
}  // namespace

GradientSync::GradientSync(Communicator& world, Model& model, bool zero)
    : GradientSync(world, model.grads_flat(), model.layout().spans(), model.config().num_layers,
                   zero) {}

GradientSync::GradientSync(Communicator& world, float* grads, std::vector<ParameterSpan> spans,
                           int num_layers, bool zero)
    : world_(world),
      zero_(zero),
      grads_(grads),
      spans_(std::move(spans)),
      parts_(zero ? owned_parts(spans_, world.rank(), world.size()) : spans_),
      others_(others_parts(spans_, parts_)) {
  buckets_.resize(num_layers + 1);
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

bool GradientSync::share_memory(Model& model, std::string* why_not) {
  if (!zero_ || model.master_released() || model.offload_active()) return false;
  const size_t P = model.num_parameters();
  const auto round_up = [](size_t bytes) { return (bytes + 63) / 64 * 64; };
  const size_t grads = round_up(P * sizeof(float)), params = round_up(P * sizeof(float));
  const bool with_copy = model.precision() == Precision::kBf16;
  // Rank 0's block holds the weights after its gradients (the pages go to whichever rank touches
  // them first: each rank its own parts, below).
  const size_t weights = params + (with_copy ? round_up(P * sizeof(bf16)) : 0);
  shared_ = world_.share_memory(grads + (world_.rank() == 0 ? weights : 0), why_not);
  if (!shared_) return false;
  char* const base = static_cast<char*>(shared_->block(0)) + grads;
  float* const shared_params = reinterpret_cast<float*>(base);
  bf16* const shared_copy = with_copy ? reinterpret_cast<bf16*>(base + params) : nullptr;
  for (int r = 0; r < world_.size(); ++r) {
    rank_grads_.push_back(static_cast<const float*>(shared_->block(r)));
  }
  float* const own_grads = static_cast<float*>(shared_->block(world_.rank()));
  if (with_copy && !model.bf16_copy_current()) model.refresh_bf16_weights();
  const Model& m = model;
  for (const ParameterSpan& p : parts_) {  // the ranks' weights are the same: each copies its parts
    std::copy_n(m.params_flat() + p.offset, p.count, shared_params + p.offset);
    if (with_copy) std::copy_n(m.params_bf16_flat() + p.offset, p.count, shared_copy + p.offset);
  }
  shared_->fence();
  model.use_shared_memory(shared_params, own_grads, shared_copy);  // frees the model's own arrays
  std::fill(own_grads, own_grads + P, 0.0f);  // touched after that: the peak stays lower
  grads_ = own_grads;
  scratch_.resize(kSumChunk);
  return true;
}

double GradientSync::fence() {
  const auto start = Clock::now();
  shared_->fence();
  return ms_since(start);
}

void GradientSync::sum_shared(const ParameterSpan& part) {
  // In rank order, the same whichever rank sums: ((g0 + g1) + g2) + ...; through a scratch chunk,
  // as this rank's own gradients are both read and written.
  const size_t N = rank_grads_.size();
  float* acc = scratch_.data();
  for (size_t at = 0; at < part.count; at += kSumChunk) {
    const size_t n = std::min(kSumChunk, part.count - at), o = part.offset + at;
    const float* a = rank_grads_[0] + o;
    const float* b = rank_grads_[1] + o;
    for (size_t i = 0; i < n; ++i) acc[i] = a[i] + b[i];
    for (size_t r = 2; r < N; ++r) {
      const float* g = rank_grads_[r] + o;
      for (size_t i = 0; i < n; ++i) acc[i] += g[i];
    }
    std::copy_n(acc, n, grads_ + o);
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
  if (shared_) {
    shared_->fence();  // every rank's backward is past this layer
    for (size_t i : buckets_[job]) sum_shared(parts_[i]);
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
