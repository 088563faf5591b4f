// `llmcpu prepare` on JSON records (docs/formats.md): each input's records (records.h) are read
// as the format says (chat_records.h), conversations rendered through the chat template with their
// trained characters (chat_render.h), tokenized with their trained spans (example_tokens.h), and
// added to the writer as examples. Records are parsed, rendered and tokenized in batches on
// `threads` threads and added in input order, so the shards are the same bytes for any thread
// count. A malformed record stops the run with its RecordError (file:line and field), or with
// skip_bad is counted and left out. Not here: the options' checks and the shards' names
// (prepare.h), cutting shards (shard_writer.h).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "core/data/prepare.h"
#include "core/data/shard_writer.h"

namespace llmcpu {

// Whether `path` is read as JSON records in --format text: it ends in .jsonl or .json.
bool is_json_input(const std::string& path);

struct RecordRun {
  const Tokenizer& tokenizer;
  const PrepareOptions& options;
  ShardWriter& writer;
  PrepareProgress& progress;
  PrepareResult& result;
  std::chrono::steady_clock::time_point start;
  const std::function<void(const PrepareProgress&)>& report;
};

// Every input of the run, in order. Throws UsageError for a --train-on the format has no use for,
// RecordError for the first bad record (without skip_bad), FileError for unreadable files or
// templates.
void prepare_records(RecordRun& run);

}  // namespace llmcpu
