#include "core/data/shard_writer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/io/token_shard.h"
#include "simd/error.h"

namespace llmcpu {

ShardWriter::ShardWriter(std::string dir, std::string name, int64_t shard_tokens,
                         int64_t val_tokens, int token_bytes)
    : dir_(std::move(dir)),
      name_(std::move(name)),
      token_bytes_(token_bytes),
      val_left_(val_tokens) {
  if (token_bytes != 2 && token_bytes != 4) {
    throw UsageError("token width " + std::to_string(token_bytes) +
                     " bytes: an llm.c token shard holds uint16 (2) or uint32 (4) ids");
  }
  if (shard_tokens < 1 || shard_tokens > INT32_MAX) {
    throw UsageError(
        "shard size " + std::to_string(shard_tokens) +
        " tokens is outside 1..2147483647 (an llm.c shard counts its tokens in an int32)");
  }
  if (val_tokens < kAutoVal) {
    throw UsageError("val token count " + std::to_string(val_tokens) + " is negative");
  }
  shard_tokens_ = static_cast<size_t>(shard_tokens);
}

std::string ShardWriter::shard_path(const std::string& dir, const std::string& name,
                                    const char* split, size_t index) {
  char num[32];
  std::snprintf(num, sizeof num, "%06zu", index);
  return dir + "/" + name + "_" + split + "_" + num + ".bin";
}

void ShardWriter::add(const int* ids, size_t n) {
  if (mode_ == Mode::kExamples) throw UsageError("ShardWriter: add() after add_example()");
  mode_ = Mode::kStream;
  append(ids, n);
}

void ShardWriter::add_example(const int* ids, size_t n, const std::vector<TokenSpan>& spans) {
  if (mode_ == Mode::kStream) throw UsageError("ShardWriter: add_example() after add()");
  if (n == 0 || n > static_cast<size_t>(INT32_MAX)) {
    throw ShapeError("an example of " + std::to_string(n) +
                     " tokens: expected 1..2147483647 (an llm.c shard counts its tokens in an "
                     "int32)");
  }
  mode_ = Mode::kExamples;
  const uint64_t start = total_;
  for (size_t k = 0; k < spans.size(); ++k) {
    const TokenSpan& s = spans[k];
    if (s.begin < 1 || s.end <= s.begin || s.end > n || (k > 0 && s.begin < spans[k - 1].end)) {
      throw ShapeError("example span " + std::to_string(k) + " [" + std::to_string(s.begin) + ", " +
                       std::to_string(s.end) + ") of an example of " + std::to_string(n) +
                       " tokens: expected sorted, disjoint, non-empty spans from token 1 on");
    }
  }
  append(ids, n);  // checks the ids before anything of the example is kept
  starts_.push_back(start);
  for (const TokenSpan& s : spans) spans_.push_back({start + s.begin, start + s.end});
  drain(false);
}

void ShardWriter::append(const int* ids, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || (token_bytes_ == 2 && ids[i] > UINT16_MAX)) {
      throw ShapeError("token id " + std::to_string(ids[i]) +
                       " does not fit an llm.c token shard " +
                       (token_bytes_ == 2 ? "of uint16 ids (0..65535)" : "of uint32 ids"));
    }
  }
  const size_t at = pending_.size();
  pending_.resize(at + n * token_bytes_);
  uint8_t* out = pending_.data() + at;
  if (token_bytes_ == 2) {
    for (size_t i = 0; i < n; ++i) {
      const uint16_t id = static_cast<uint16_t>(ids[i]);
      std::memcpy(out + 2 * i, &id, 2);
    }
  } else {
    std::memcpy(out, ids, 4 * n);  // ids are 0..INT32_MAX: an int's bytes are the uint32's
  }
  total_ += n;
  // Once there are 10 shards' worth of tokens, 10% of the total is at least one shard: val is
  // decided.
  if (val_left_ == kAutoVal && total_ >= 10 * static_cast<uint64_t>(shard_tokens_)) {
    val_left_ = static_cast<int64_t>(shard_tokens_);
  }
  if (mode_ == Mode::kStream) drain(false);
}

size_t ShardWriter::fit(size_t want) const {
  if (mode_ != Mode::kExamples) return want;
  // Pending examples are complete: their starts after the first, and the end of the stream, are
  // the places a shard may end.
  const uint64_t at = written(), limit = at + want;
  if (total_ <= limit) return static_cast<size_t>(total_ - at);
  const auto first = starts_.begin() + static_cast<ptrdiff_t>(starts_head_);
  auto last_fit = std::upper_bound(first, starts_.end(), limit) - 1;  // *first == at <= limit
  if (last_fit == first) {  // the first example alone is longer than `want`: it all the same
    return static_cast<size_t>((first + 1 == starts_.end() ? total_ : *(first + 1)) - at);
  }
  return static_cast<size_t>(*last_fit - at);
}

void ShardWriter::write_next(bool val, size_t n) {
  std::vector<std::string>& files = val ? val_files_ : train_files_;
  const std::string path = shard_path(dir_, name_, val ? "val" : "train", files.size());
  // A sidecar of an earlier run goes first: a shard never meets one that is not its own.
  std::error_code ec;
  std::filesystem::remove(spans_path(path), ec);
  if (ec) throw FileError(spans_path(path), "cannot remove it (a stale sidecar): " + ec.message());
  write_token_shard(path, pending_.data() + head_ * token_bytes_, n, token_bytes_);
  if (mode_ == Mode::kExamples) write_spans(path, n);
  files.push_back(path);
  (val ? val_written_ : train_written_) += n;
  head_ += n;
  const size_t done = head_ * token_bytes_;
  if (done * 2 > pending_.size()) {  // drop the written tokens now and then, not at every shard
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(done));
    head_ = 0;
  }
}

// Writes val shards while val is owed; false while val waits for more tokens.
bool ShardWriter::drain_val(bool final) {
  if (mode_ == Mode::kExamples && !val_snapped_) {
    // The first whole examples up to val_left_ tokens (at least one): known once the stream
    // reaches that far.
    if (total_ < static_cast<uint64_t>(val_left_) && !final) return false;
    if (val_left_ > 0) val_left_ = static_cast<int64_t>(fit(static_cast<size_t>(val_left_)));
    val_snapped_ = true;
  }
  while (val_left_ > 0) {
    const size_t avail = pending_.size() / token_bytes_ - head_;
    const size_t want = std::min(static_cast<size_t>(val_left_), shard_tokens_);
    const size_t n = avail >= want ? fit(want) : final ? avail : 0;
    if (n == 0) return false;
    write_next(true, n);
    val_left_ -= static_cast<int64_t>(n);
  }
  return true;
}

// The sidecar of the shard just written at `path`: the pending examples and spans of its n tokens.
void ShardWriter::write_spans(const std::string& path, size_t n) {
  const uint64_t at = written(), end = at + n;
  std::vector<uint64_t> starts;
  std::vector<TokenSpan> spans;
  for (; starts_head_ < starts_.size() && starts_[starts_head_] < end; ++starts_head_) {
    starts.push_back(starts_[starts_head_] - at);
  }
  for (; spans_head_ < spans_.size() && spans_[spans_head_].begin < end; ++spans_head_) {
    spans.push_back({spans_[spans_head_].begin - at, spans_[spans_head_].end - at});
  }
  write_token_spans(spans_path(path), n, starts, spans);
  if (starts_head_ * 2 > starts_.size()) {  // drop the written ones now and then
    starts_.erase(starts_.begin(), starts_.begin() + static_cast<ptrdiff_t>(starts_head_));
    starts_head_ = 0;
  }
  if (spans_head_ * 2 > spans_.size()) {
    spans_.erase(spans_.begin(), spans_.begin() + static_cast<ptrdiff_t>(spans_head_));
    spans_head_ = 0;
  }
}

void ShardWriter::drain(bool final) {
  if (val_left_ == kAutoVal || !drain_val(final)) return;
  for (;;) {
    const size_t avail = pending_.size() / token_bytes_ - head_;
    // A full shard is written once at least min_tail() tokens would be left after it, so the last
    // shard is never shorter than that unless it is the only one: a shorter tail is written with
    // the shard before it (or, where that would overflow an llm.c shard's int32 count, the two are
    // split evenly).
    size_t n = 0;
    if (avail >= shard_tokens_ + min_tail() && avail - fit(shard_tokens_) >= min_tail()) {
      n = fit(shard_tokens_);
    } else if (final && avail > shard_tokens_) {
      n = avail <= static_cast<size_t>(INT32_MAX) ? avail : fit(avail / 2);
    } else if (final) {
      n = avail;
    }
    if (n == 0) return;
    write_next(false, n);
  }
}

void ShardWriter::finish() {
  if (val_left_ == kAutoVal) {
    val_left_ = static_cast<int64_t>(std::min<uint64_t>(total_ / 10, shard_tokens_));
  }
  const int64_t val_asked = static_cast<int64_t>(val_written_) + val_left_;
  drain(true);
  if (train_files_.empty()) {
    throw Error("the inputs make " + std::to_string(total_) +
                " tokens and the validation split takes " + std::to_string(val_asked) +
                " of them: none is left for training (lower --val-tokens)");
  }
}

}  // namespace llmcpu
