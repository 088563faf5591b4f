#include "core/io/token_spans.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "simd/error.h"

namespace llmcpu {

namespace {

constexpr size_t kCountsOffset = 8;  // num_tokens, num_examples, num_spans: uint64 at 8, 16, 24
constexpr size_t kUsedHeaderBytes = 32;

std::string range_text(uint64_t begin, uint64_t end) {
  std::string text = "[";  // appended, not added: g++ 12 warns falsely on literal + string
  text.append(std::to_string(begin)).append(", ").append(std::to_string(end)).append(")");
  return text;
}

// Example starts: 0 first, strictly increasing, each < num_tokens.
void check_starts(const std::string& path, uint64_t num_tokens, std::span<const uint64_t> starts) {
  if (starts.empty()) throw FileError(path, "no examples, expected at least one");
  if (starts[0] != 0) {
    throw FileError(path, "example_start[0] is " + std::to_string(starts[0]) + ", expected 0");
  }
  for (size_t i = 1; i < starts.size(); ++i) {
    if (starts[i] <= starts[i - 1]) {
      throw FileError(path, "example_start[" + std::to_string(i) + "] = " +
                                std::to_string(starts[i]) + " is not after example_start[" +
                                std::to_string(i - 1) + "] = " + std::to_string(starts[i - 1]) +
                                ", expected strictly increasing starts");
    }
  }
  if (starts.back() >= num_tokens) {
    throw FileError(path, "example_start[" + std::to_string(starts.size() - 1) +
                              "] = " + std::to_string(starts.back()) + ", expected < num_tokens " +
                              std::to_string(num_tokens));
  }
}

// Spans: non-empty, sorted, non-overlapping, each inside one example and after its first token.
void check_spans(const std::string& path, uint64_t num_tokens, std::span<const uint64_t> starts,
                 std::span<const uint64_t> bounds) {
  size_t example = 0;
  uint64_t previous_end = 0;
  for (size_t k = 0; k < bounds.size() / 2; ++k) {
    const uint64_t b = bounds[2 * k], e = bounds[2 * k + 1];
    const std::string name = "span " + std::to_string(k) + " " + range_text(b, e);
    if (b >= e) throw FileError(path, name + " is empty, expected begin < end");
    if (b < previous_end) {
      throw FileError(path, name + " begins before the end " + std::to_string(previous_end) +
                                " of the span before it, expected sorted, non-overlapping spans");
    }
    if (e > num_tokens) {
      throw FileError(path, name + " runs past num_tokens " + std::to_string(num_tokens));
    }
    while (example + 1 < starts.size() && starts[example + 1] <= b) ++example;
    const uint64_t start = starts[example];
    const uint64_t end = example + 1 < starts.size() ? starts[example + 1] : num_tokens;
    if (b == start) {
      throw FileError(path, name + " begins at the first token of example " +
                                std::to_string(example) +
                                ", expected begin > the example's start " +
                                "(its first token is never a target)");
    }
    if (e > end) {
      throw FileError(path, name + " crosses the end of example " + std::to_string(example) + " " +
                                range_text(start, end) + ", expected each span inside one example");
    }
    previous_end = e;
  }
}

}  // namespace

std::string spans_path(const std::string& shard_path) {
  const std::string_view bin = ".bin";
  std::string path = shard_path;
  if (path.size() >= bin.size() && std::string_view(path).substr(path.size() - bin.size()) == bin) {
    path.resize(path.size() - bin.size());
  }
  path.append(".spans");  // appended, not added: g++ 12 warns falsely on string + literal
  return path;
}

TokenSpans::TokenSpans(const std::string& path, uint64_t shard_tokens) : file_(path) {
  const int32_t* h = file_.llmc_header("spans sidecar");
  if (h[0] != kSpansMagic) {
    throw FileError(path, "bad magic " + std::to_string(h[0]) + ", expected " +
                              std::to_string(kSpansMagic) + " (a token shard's spans sidecar)");
  }
  if (h[1] != kSpansVersion) {
    throw FileError(path, "unsupported spans sidecar version " + std::to_string(h[1]) +
                              ", expected " + std::to_string(kSpansVersion));
  }
  uint64_t counts[3];
  std::memcpy(counts, file_.data() + kCountsOffset, sizeof(counts));
  num_tokens_ = counts[0];
  const uint64_t num_examples = counts[1], num_spans = counts[2];
  if (num_tokens_ != shard_tokens) {
    throw FileError(path, "num_tokens is " + std::to_string(num_tokens_) + ", expected " +
                              std::to_string(shard_tokens) + ", the token count of its shard");
  }
  const uint8_t* rest = file_.data() + kUsedHeaderBytes;
  if (std::any_of(rest, file_.data() + kLlmcHeaderBytes, [](uint8_t b) { return b != 0; })) {
    throw FileError(path, "header bytes 32..1023 are not all zero, expected zero (version 1)");
  }
  // Examples start at distinct tokens and spans are disjoint and non-empty, so neither count can
  // exceed num_tokens: checked before any size is computed from them.
  if (num_examples == 0 || num_examples > num_tokens_ || num_spans > num_tokens_) {
    throw FileError(path, std::to_string(num_examples) + " examples and " +
                              std::to_string(num_spans) + " spans, expected 1.." +
                              std::to_string(num_tokens_) + " examples and at most " +
                              std::to_string(num_tokens_) + " spans for " +
                              std::to_string(num_tokens_) + " tokens");
  }
  // A crafted num_tokens near 2^64 lets 8 * num_examples + 16 * num_spans wrap around to a small
  // file's length: the size is computed with the wrap detected.
  const std::string counted = "its header says " + std::to_string(num_examples) +
                              " examples and " + std::to_string(num_spans) + " spans, which";
  uint64_t starts_bytes = 0, spans_bytes = 0, expected = 0;
  if (__builtin_mul_overflow(num_examples, uint64_t(8), &starts_bytes) ||
      __builtin_mul_overflow(num_spans, uint64_t(16), &spans_bytes) ||
      __builtin_add_overflow(starts_bytes, spans_bytes, &expected) ||
      __builtin_add_overflow(expected, uint64_t(kLlmcHeaderBytes), &expected)) {
    throw FileError(path, counted + " would be more than 2^64 bytes: the header is corrupt");
  }
  file_.expect_size(expected, counted);
  const auto* words = reinterpret_cast<const uint64_t*>(file_.data() + kLlmcHeaderBytes);
  starts_ = {words, static_cast<size_t>(num_examples)};
  bounds_ = {words + num_examples, static_cast<size_t>(2 * num_spans)};
  check_starts(path, num_tokens_, starts_);
  check_spans(path, num_tokens_, starts_, bounds_);
}

size_t TokenSpans::example_of(uint64_t t) const {
  return static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), t) -
                             starts_.begin()) -
         1;
}

void TokenSpans::fill_mask(uint64_t first, size_t n, uint8_t* mask) const {
  if (first > num_tokens_ || n > num_tokens_ - first) {
    throw ShapeError("tokens " + range_text(first, first + n) + " run past the end of " + path() +
                     " (" + std::to_string(num_tokens_) + " tokens)");
  }
  std::memset(mask, 0, n);
  // The first span that ends after `first`: span ends are increasing like their begins.
  size_t lo = 0, hi = num_spans();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (bounds_[2 * mid + 1] <= first)
      lo = mid + 1;
    else
      hi = mid;
  }
  const uint64_t last = first + n;
  for (size_t k = lo; k < num_spans() && bounds_[2 * k] < last; ++k) {
    const uint64_t b = std::max(bounds_[2 * k], first), e = std::min(bounds_[2 * k + 1], last);
    std::memset(mask + (b - first), 1, e - b);
  }
}

void write_token_spans(const std::string& path, uint64_t num_tokens,
                       std::span<const uint64_t> example_starts, std::span<const TokenSpan> spans) {
  std::vector<uint64_t> bounds(2 * spans.size());
  for (size_t k = 0; k < spans.size(); ++k) {
    bounds[2 * k] = spans[k].begin;
    bounds[2 * k + 1] = spans[k].end;
  }
  check_starts(path, num_tokens, example_starts);
  check_spans(path, num_tokens, example_starts, bounds);
  int32_t header[kLlmcHeaderInts] = {};
  header[0] = kSpansMagic;
  header[1] = kSpansVersion;
  const uint64_t counts[3] = {num_tokens, example_starts.size(), spans.size()};
  std::memcpy(reinterpret_cast<uint8_t*>(header) + kCountsOffset, counts, sizeof(counts));
  AtomicFileWriter out(path);
  out.write(header, sizeof(header));
  out.write(example_starts.data(), example_starts.size_bytes());
  out.write(bounds.data(), bounds.size() * sizeof(uint64_t));
  out.commit();
}

}  // namespace llmcpu
