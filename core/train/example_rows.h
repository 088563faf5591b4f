// Rows of whole examples, for training on a shard whose .spans sidecar (core/io/token_spans.h)
// says where its examples start and which targets count. A row holds T positions:
//   packed:   the shard's next examples in order while they fit (greedy, the order prepare wrote),
//             as transformers' DataCollatorWithFlattening concatenates them;
//   unpacked: one example per row.
// The rest of a row is padding. An example longer than T is cut to its first T tokens (the token
// after them is still the last position's target) or refused (LongExamples), and counted. Per
// position t of a row, with j the token there:
//   inputs[t]  = token j (padding: pad_token)
//   targets[t] = token j+1 where j+1 lies in the same example and is a target, else -1 (masked:
//                the example's last token, the prompt's, the padding)
//   starts[t]  = the position in the row where t's example begins (a padding run is an example
//                of its own), so attention stays within each example and positions restart there.
// Rows are fixed by the sidecar and T alone, so a position in them (DataPosition) is exact on
// resume. Not here: the order rows are read in, batches (core/train/data_loader.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/io/token_shard.h"
#include "core/io/token_spans.h"

namespace llmcpu {

enum class LongExamples { kTruncate, kRefuse };  // --max-len-policy truncate | refuse

struct RowOptions {
  bool pack = true;  // --pack on|off
  LongExamples long_examples = LongExamples::kTruncate;
  int pad_token = 0;  // the input at padding positions (any token: nothing sees it, no loss)
};

// What laying out the examples came to (summed over shards by the loader).
struct RowStats {
  uint64_t examples = 0, rows = 0;
  uint64_t tokens = 0;     // the examples' tokens placed in rows (after cutting)
  uint64_t padding = 0;    // padding positions
  uint64_t truncated = 0;  // examples cut to T tokens
  uint64_t targets = 0;    // positions whose target counts

  RowStats& operator+=(const RowStats& o);
};

// "120 examples packed into 34 rows of 1024 tokens (4.1% padding), 15230 targets counted; 3
// examples longer than 1024 tokens cut" (or "one example per row").
std::string describe_rows(const RowStats& stats, int T, bool packed);

// --pack's word ("on" or "off") and --max-len-policy's ("truncate" or "refuse") into `options`;
// UsageError naming the flag and the words it takes.
void parse_row_flags(const std::string& pack, const std::string& max_len_policy,
                     RowOptions* options);

class ExampleRows {
 public:
  // Lays out the examples of `spans` (the sidecar of the shard `shard_path`) into rows of T
  // positions. With LongExamples::kRefuse an example longer than T is a FileError naming the
  // shard, the example and its length.
  ExampleRows(const TokenSpans& spans, int T, const RowOptions& options,
              const std::string& shard_path);

  size_t rows() const { return first_.size() - 1; }
  const RowStats& stats() const { return stats_; }
  // Fills row r (< rows()) from the shard and sidecar it was laid out from: inputs, targets and
  // starts, T each.
  void fill(const TokenShard& shard, const TokenSpans& spans, size_t r, int* inputs,
            int* targets, int* starts) const;

 private:
  int T_;
  int pad_;
  std::vector<uint64_t> first_;  // row r holds examples [first_[r], first_[r+1])
  RowStats stats_;
  mutable std::vector<uint8_t> mask_;  // (T + 1) fill's scratch
};

}  // namespace llmcpu
