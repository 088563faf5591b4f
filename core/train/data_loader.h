// Batches of (inputs, targets) from llm.c token shards, with llm.c's DataLoader semantics.
// A shard of n tokens holds (n - 1) / (B*T) samples; sample k covers tokens [k*B*T, k*B*T + B*T + 1)
// and its targets are its inputs shifted by one. Sequential reading walks the shards in sorted order
// and each shard's samples in order, wrapping around at the end. With shuffling, the order of the
// shards and the order of the samples inside each shard are drawn anew (seeded) for every epoch and
// every shard. The whole position is a value (DataPosition) that a training-state file carries, so a
// resumed run reads exactly the batches the uninterrupted run would have read.
// Shards of uint16 and of uint32 ids (token_shard.h) may be mixed in one glob.
// Shards with .spans sidecars (chat and instruction data, core/io/token_spans.h) are read as rows
// of whole examples instead (core/train/example_rows.h): sample k of a shard is its rows
// [k*B, k*B + B), targets outside the trained spans are -1, and packed rows come with the starts
// of their examples. Every shard of a glob has a sidecar, or none has.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/io/data_position.h"
#include "core/io/token_shard.h"
#include "core/io/token_spans.h"
#include "core/train/example_rows.h"
#include "core/util/rng.h"

namespace llmcpu {

class DataLoader {
 public:
  // `pattern`: a file or a glob (shards are taken in sorted order). A shard holding fewer than
  // B*T + 1 tokens (one sample; with sidecars: fewer than B rows) is left out and listed in
  // skipped(). Throws FileError when nothing matches, no shard holds a sample, a shard or its
  // sidecar is malformed, has a token >= vocab_size, or only some shards have sidecars. `rows`:
  // how shards with sidecars become rows.
  DataLoader(const std::string& pattern, int B, int T, int vocab_size, bool shuffle, uint64_t seed,
             const RowOptions& rows = {});

  // Fills inputs and targets, B*T ints each, and moves to the next sample.
  void next_batch(int* inputs, int* targets, int* starts = nullptr) {
    next_batch_of(0, 1, inputs, targets, starts);
  }
  // Data parallelism: moves over the next `ranks` samples of the stream a single loader reads and
  // fills inputs and targets with the one at `rank`. Every rank's loader stays at the same position,
  // so N ranks together read exactly the samples one rank reads.
  // `starts` (B*T): the starts of each token's example in its row, filled where packed() (it must
  // not be null then); otherwise untouched.
  void next_batch_of(int rank, int ranks, int* inputs, int* targets, int* starts = nullptr);
  // Whether the shards carry examples and loss masks (.spans sidecars): then targets may be
  // masked (-1); packed(): rows of several examples, which need their starts.
  bool masked() const { return !spans_.empty(); }
  bool packed() const { return masked() && row_options_.pack; }
  // The examples laid into rows, over all shards (masked() only).
  const RowStats& row_stats() const { return row_stats_; }
  // Back to the first sample of the first shard (sequential order), as before each validation.
  void reset();

  DataPosition position() const;
  // Restores a position saved from a loader over the same shards; throws Error if it cannot belong.
  void restore(const DataPosition& position);

  struct Skipped {
    std::string file;
    size_t tokens;
    std::string why;  // "holds N tokens, fewer than one batch needs (B*T+1 = M)"
  };
  // The shards too short for one sample, left out of the stream.
  const std::vector<Skipped>& skipped() const { return skipped_; }
  size_t num_shards() const { return shards_.size(); }
  uint64_t total_samples() const;
  const std::string& pattern() const { return pattern_; }

 private:
  uint64_t samples_in(uint32_t shard) const;
  // Where the next sample's B*T + 1 tokens are.
  struct Sample {
    uint32_t shard;  // index into shards_
    size_t first;    // its first token, or with sidecars its first row
  };
  Sample next_sample();
  void start_epoch();  // draws the shard order when shuffling, then starts the first shard
  void begin_shard();  // draws the sample order of the current shard when shuffling

  std::string pattern_;
  std::vector<TokenShard> shards_;
  std::vector<TokenSpans> spans_;  // with sidecars: shards_[i]'s, and its rows
  std::vector<ExampleRows> rows_;
  RowOptions row_options_;
  RowStats row_stats_;
  std::vector<int> scratch_starts_;  // unpacked rows' starts, which no one reads
  std::vector<Skipped> skipped_;
  int B_, T_;
  bool shuffle_;
  uint64_t seed_;
  Rng rng_;
  DataPosition pos_;
};

// Expands a glob pattern into sorted file names; a plain existing file is returned as is. Throws
// FileError naming the pattern when nothing matches.
std::vector<std::string> expand_glob(const std::string& pattern);

}  // namespace llmcpu
