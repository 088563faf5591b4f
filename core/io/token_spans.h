// The spans sidecar of a token shard: where its examples start and which tokens are trained targets
// (docs/formats.md). A shard P.bin may have P.spans beside it; without one the shard is llm.c's
// plain stream, every target counting. Layout, little-endian:
//   header int32[256]: {20261207 (magic), 1 (version)}, bytes 8..15 uint64 num_tokens (the shard's
//   token count), 16..23 uint64 num_examples (>= 1), 24..31 uint64 num_spans, the rest zero;
//   uint64 example_start[num_examples]: 0 first, strictly increasing, each < num_tokens;
//   uint64 span[num_spans][2] = {begin, end}: tokens [begin, end) are targets (the loss term that
//   predicts token j from its example's tokens before it counts). Spans are sorted, non-empty,
//   non-overlapping, each inside one example with begin > that example's start.
// The reader memory-maps the file and checks every rule above; the writer checks them too and
// replaces the file atomically. Not here: the token ids (core/io/token_shard.h), packing examples
// into rows, how prepare finds the spans (core/data).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/util/file.h"

namespace llmcpu {

inline constexpr int kSpansMagic = 20261207;
inline constexpr int kSpansVersion = 1;

// The tokens [begin, end) of a shard.
struct TokenSpan {
  uint64_t begin;
  uint64_t end;
};

// P.spans for P.bin; a shard path not ending in ".bin" gets ".spans" appended.
std::string spans_path(const std::string& shard_path);

class TokenSpans {
 public:
  // Maps `path` and checks it against a shard of shard_tokens tokens; throws FileError naming the
  // file and what was expected (magic, version, token count, a header's unused bytes, the file's
  // length, the order of example starts, each span's bounds and example).
  TokenSpans(const std::string& path, uint64_t shard_tokens);

  const std::string& path() const { return file_.path(); }
  uint64_t num_tokens() const { return num_tokens_; }
  size_t num_examples() const { return starts_.size(); }
  size_t num_spans() const { return bounds_.size() / 2; }
  // Example i covers tokens [example_start(i), example_end(i)); i < num_examples() (not checked).
  uint64_t example_start(size_t i) const { return starts_[i]; }
  uint64_t example_end(size_t i) const {
    return i + 1 < starts_.size() ? starts_[i + 1] : num_tokens_;
  }
  std::span<const uint64_t> example_starts() const { return starts_; }
  // {begin, end} of every span in turn: 2 * num_spans() values.
  std::span<const uint64_t> span_bounds() const { return bounds_; }
  TokenSpan span(size_t k) const { return {bounds_[2 * k], bounds_[2 * k + 1]}; }
  // The example that holds token t (< num_tokens()).
  size_t example_of(uint64_t t) const;
  // mask[j] = 1 if token first + j is a target, else 0, for j < n; ShapeError if the range runs
  // past num_tokens().
  void fill_mask(uint64_t first, size_t n, uint8_t* mask) const;

 private:
  MappedFile file_;
  uint64_t num_tokens_ = 0;
  std::span<const uint64_t> starts_, bounds_;
};

// Writes the sidecar `path` for a shard of num_tokens tokens, atomically (a temporary file renamed
// over it). Checks the same rules as the reader first: FileError naming `path` and the broken rule.
void write_token_spans(const std::string& path, uint64_t num_tokens,
                       std::span<const uint64_t> example_starts, std::span<const TokenSpan> spans);

}  // namespace llmcpu
