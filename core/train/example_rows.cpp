#include "core/train/example_rows.h"

#include <algorithm>
#include <cstdio>

#include "simd/error.h"

namespace llmcpu {

std::string describe_rows(const RowStats& s, int T, bool packed) {
  const double positions = double(s.rows) * T;
  char share[32];
  std::snprintf(share, sizeof share, "%.1f%%", positions > 0 ? 100.0 * s.padding / positions : 0.0);
  std::string text = std::to_string(s.examples) +
                     (packed ? " examples packed into " : " examples in ") + std::to_string(s.rows) + " rows of " + std::to_string(T) + " tokens" +
                     (packed ? "" : ", one example per row") + " (" + share + " padding), " +
                     std::to_string(s.targets) + " targets counted";
  if (s.truncated > 0) {
    text += "; " + std::to_string(s.truncated) + " examples longer than " + std::to_string(T) +
            " tokens cut to " + std::to_string(T);
  }
  return text;
}

void parse_row_flags(const std::string& pack, const std::string& max_len_policy,
                     RowOptions* options) {
  if (pack != "on" && pack != "off") {
    throw UsageError("--pack: '" + pack + "' is not a choice; expected on or off");
  }
  if (max_len_policy != "truncate" && max_len_policy != "refuse") {
    throw UsageError("--max-len-policy: '" + max_len_policy +
                     "' is not a choice; expected truncate or refuse");
  }
  options->pack = pack == "on";
  options->long_examples =
      max_len_policy == "refuse" ? LongExamples::kRefuse : LongExamples::kTruncate;
}

RowStats& RowStats::operator+=(const RowStats& o) {
  examples += o.examples, rows += o.rows, tokens += o.tokens;
  padding += o.padding, truncated += o.truncated, targets += o.targets;
  return *this;
}

ExampleRows::ExampleRows(const TokenSpans& spans, int T, const RowOptions& options,
                         const std::string& shard_path)
    : T_(T), pad_(options.pad_token), mask_(size_t(T) + 1) {
  const size_t n = spans.num_examples();
  const uint64_t cap = uint64_t(T);
  first_.push_back(0);
  uint64_t used = 0;  // positions taken in the row being filled
  for (size_t e = 0; e < n; ++e) {
    uint64_t len = spans.example_end(e) - spans.example_start(e);
    if (len > cap) {
      if (options.long_examples == LongExamples::kRefuse) {
        throw FileError(shard_path, "example " + std::to_string(e) + " holds " +
                                          std::to_string(len) + " tokens, more than a row's " +
                                          std::to_string(T) +
                                          " (--seq-len; --max-len-policy truncate cuts it)");
      }
      len = cap;
      ++stats_.truncated;
    }
    if (used > 0 && (!options.pack || used + len > cap)) {  // a new row
      stats_.padding += cap - used;
      first_.push_back(e);
      used = 0;
    }
    used += len;
    stats_.tokens += len;
  }
  stats_.padding += cap - used;
  first_.push_back(n);
  stats_.examples = n;
  stats_.rows = rows();
  // The counted targets: every span's tokens whose position is inside a row (the cut ones are
  // not, but the token right after a cut is still the last position's target).
  for (size_t k = 0; k < spans.num_spans(); ++k) {
    const TokenSpan s = spans.span(k);
    const size_t e = spans.example_of(s.begin);
    const uint64_t last = std::min(s.end, spans.example_start(e) + cap + 1);
    stats_.targets += last > s.begin ? last - s.begin : 0;
  }
}

void ExampleRows::fill(const TokenShard& shard, const TokenSpans& spans, size_t r, int* inputs,
                       int* targets, int* starts) const {
  const uint64_t cap = uint64_t(T_);
  uint64_t t = 0;
  for (uint64_t e = first_[r]; e < first_[r + 1]; ++e) {
    const uint64_t begin = spans.example_start(e), end = spans.example_end(e);
    const uint64_t len = std::min(end - begin, cap);
    // Tokens begin .. begin+len are inputs; their targets are the next tokens of the example.
    const uint64_t with_next = std::min(end - begin, len + 1);  // len + 1 after a cut
    shard.copy(begin, len, inputs + t);
    spans.fill_mask(begin, with_next, mask_.data());
    const int next_after_cut = with_next > len ? int(shard.at(begin + len)) : -1;
    for (uint64_t i = 0; i < len; ++i) {
      const uint64_t j = i + 1;  // the target's index in the example
      const bool counted = j < with_next && mask_[j];
      const int next = j < len ? inputs[t + j] : next_after_cut;
      targets[t + i] = counted ? next : -1;
      starts[t + i] = int(t);
    }
    t += len;
  }
  for (const uint64_t pad_start = t; t < cap; ++t) {
    inputs[t] = pad_, targets[t] = -1, starts[t] = int(pad_start);
  }
}

}  // namespace llmcpu
