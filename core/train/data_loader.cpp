#include "core/train/data_loader.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "simd/error.h"

namespace llmcpu {

std::vector<std::string> expand_glob(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> files;
  if (rc == 0) files.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  ::globfree(&g);
  if (files.empty()) throw FileError(pattern, "no such file (or no file matches this pattern)");
  std::sort(files.begin(), files.end());
  return files;
}

namespace {

// Fisher-Yates with our RNG: the same permutation on every platform.
void shuffle(std::vector<uint32_t>& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

// Why a shard of `tokens` tokens cannot give a batch of `need` (B*T+1).
std::string too_short(size_t tokens, size_t need) {
  return "holds " + std::to_string(tokens) + " tokens, fewer than one batch needs (B*T+1 = " +
         std::to_string(need) + ")";
}

// Why a shard whose examples fill `rows` rows cannot give a batch of B rows.
std::string few_rows(size_t rows, int B) {
  return "its examples fill " + std::to_string(rows) + " rows, fewer than one batch needs (B = " +
         std::to_string(B) + ")";
}

}  // namespace

DataLoader::DataLoader(const std::string& pattern, int B, int T, int vocab_size, bool shuffle,
                       uint64_t seed, const RowOptions& rows)
    : pattern_(pattern), row_options_(rows), B_(B), T_(T), shuffle_(shuffle), seed_(seed),
      rng_(seed) {
  const size_t need = (size_t)B * T + 1;
  size_t largest = 0;
  const std::vector<std::string> files = expand_glob(pattern);
  const std::string first_spans = spans_path(files[0]);
  const bool sidecars = std::filesystem::exists(first_spans);
  for (const std::string& file : files) {
    TokenShard shard(file);
    shard.check_vocab(vocab_size);
    largest = std::max(largest, shard.size());
    const std::string own_spans = spans_path(file);
    if (std::filesystem::exists(own_spans) != sidecars) {
      throw FileError(file, "only some shards of " + pattern + " have a .spans sidecar (" +
                                first_spans + (sidecars ? " does, " : " does not, ") + own_spans +
                                (sidecars ? " not" : " does") + "): every shard needs one, or none");
    }
    if (sidecars) {
      TokenSpans spans(own_spans, shard.size());
      ExampleRows laid(spans, T, rows, file);
      if (laid.rows() < size_t(B)) {
        skipped_.push_back({file, shard.size(), few_rows(laid.rows(), B)});
        continue;
      }
      row_stats_ += laid.stats();
      spans_.push_back(std::move(spans));
      rows_.push_back(std::move(laid));
    } else if (shard.size() < need) {
      skipped_.push_back({file, shard.size(), too_short(shard.size(), need)});
      continue;
    }
    shards_.push_back(std::move(shard));
  }
  if (shards_.empty()) {
    throw FileError(pattern, skipped_.size() == 1
                                 ? skipped_[0].why
                                 : "none of its " + std::to_string(skipped_.size()) +
                                       " shards holds the tokens one batch needs (B*T+1 = " +
                                       std::to_string(need) + "); the largest holds " +
                                       std::to_string(largest));
  }
  // The largest shard's sample order up front: moving to another shard allocates nothing.
  uint64_t most = 0;
  for (uint32_t i = 0; i < shards_.size(); ++i) most = std::max(most, samples_in(i));
  if (shuffle_) pos_.sample_order.reserve(most);
  reset();
}

uint64_t DataLoader::samples_in(uint32_t shard) const {
  if (masked()) return rows_[shard].rows() / uint64_t(B_);
  return (shards_[shard].size() - 1) / ((uint64_t)B_ * T_);
}

uint64_t DataLoader::total_samples() const {
  uint64_t n = 0;
  for (uint32_t i = 0; i < shards_.size(); ++i) n += samples_in(i);
  return n;
}

void DataLoader::reset() {
  rng_ = Rng(seed_);
  pos_.epoch = 0;
  start_epoch();
}

void DataLoader::start_epoch() {
  pos_.shard_order.resize(shards_.size());
  std::iota(pos_.shard_order.begin(), pos_.shard_order.end(), 0u);
  if (shuffle_) shuffle(pos_.shard_order, rng_);
  pos_.shard = 0;
  begin_shard();
}

void DataLoader::begin_shard() {
  pos_.sample = 0;
  pos_.sample_order.clear();
  if (shuffle_) {
    pos_.sample_order.resize(samples_in(pos_.shard_order[pos_.shard]));
    std::iota(pos_.sample_order.begin(), pos_.sample_order.end(), 0u);
    shuffle(pos_.sample_order, rng_);
  }
}

DataLoader::Sample DataLoader::next_sample() {
  if (pos_.sample >= samples_in(pos_.shard_order[pos_.shard])) {
    if (++pos_.shard == shards_.size()) {
      ++pos_.epoch;
      start_epoch();
    } else {
      begin_shard();
    }
  }
  const uint64_t k = shuffle_ ? pos_.sample_order[pos_.sample] : pos_.sample;
  ++pos_.sample;
  return {pos_.shard_order[pos_.shard], k * (size_t)B_ * (masked() ? 1 : T_)};
}

void DataLoader::next_batch_of(int rank, int ranks, int* inputs, int* targets, int* starts) {
  Sample mine{};
  for (int r = 0; r < ranks; ++r) {
    const Sample sample = next_sample();
    if (r == rank) mine = sample;
  }
  const size_t BT = (size_t)B_ * T_;
  const TokenShard& shard = shards_[mine.shard];
  if (!masked()) {
    shard.copy(mine.first, BT, inputs);
    shard.copy(mine.first + 1, BT, targets);
    return;
  }
  if (packed() && !starts) throw Error("packed rows need their starts (next_batch_of's starts)");
  std::vector<int>& own = scratch_starts_;  // unpacked rows: starts are not the caller's business
  if (!packed()) own.resize(BT);
  int* s = packed() ? starts : own.data();
  for (int b = 0; b < B_; ++b) {
    const size_t at = size_t(b) * T_;
    rows_[mine.shard].fill(shard, spans_[mine.shard], mine.first + b, inputs + at, targets + at,
                           s + at);
  }
}

DataPosition DataLoader::position() const {
  DataPosition p = pos_;
  p.rng_state = rng_.state();
  return p;
}

void DataLoader::restore(const DataPosition& p) {
  auto refuse = [&](const std::string& why) {
    throw Error("data position does not fit the shards of " + pattern_ + ": " + why);
  };
  const uint32_t n = static_cast<uint32_t>(shards_.size());
  if (p.shard_order.size() != n) {
    refuse("saved with " + std::to_string(p.shard_order.size()) + " shards, found " +
           std::to_string(n));
  }
  std::vector<uint32_t> sorted = p.shard_order;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < n; ++i) {
    if (sorted[i] != i) refuse("the shard order is not a permutation");
  }
  if (p.shard >= n) refuse("shard index out of range");
  const uint64_t samples = samples_in(p.shard_order[p.shard]);
  if (p.sample > samples) refuse("sample index beyond the shard");
  if (shuffle_ != !p.sample_order.empty() && samples > 0) {
    refuse(shuffle_ ? "saved without shuffling" : "saved with shuffling");
  }
  if (shuffle_) {
    if (p.sample_order.size() != samples) refuse("the sample order does not match the shard");
    for (uint32_t k : p.sample_order) {
      if (k >= samples) refuse("sample order entry out of range");
    }
  }
  pos_ = p;
  rng_.set_state(p.rng_state);
}

}  // namespace llmcpu
