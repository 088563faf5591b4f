// Text files -> llm.c token shards (`llmcpu prepare`). Each input file is one document, or is cut
// into documents by PrepareOptions::split_on (document_split.h: blank lines, lines or a regex, with
// llm.c's rule). Like llm.c's data scripts, every document is preceded by the tokenizer's document
// token (<|endoftext|> for GPT-2, BOS where a tokenizer adds one, as for Llama 3), so the stream
// reads [sep, doc 1 ..., sep, doc 2 ..., ...]; the stream is split into val and train shards by
// ShardWriter, with uint32 ids where the tokenizer's vocabulary has more than 65536 tokens and
// uint16 ids otherwise (llm.c writes GPT-2's as uint16, Llama 3's as uint32;
// PrepareOptions::token_bytes overrides the choice). Documents are encoded with
// Tokenizer::encode_document: a special token's text inside a document is encoded as text, as
// llm.c's scripts do (split_special_tokens). With GPT-2's files large documents are encoded in
// pieces of about a megabyte, cut where GPT-2's pre-tokenisation cannot join across the cut, so the
// ids are those of encoding each document whole; a tokenizer.json's documents are encoded whole.
// JSON records (--format chat, instruction, completion, or text with .jsonl/.json inputs) become
// examples instead (record_prepare.h): rendered through the chat template where they are
// conversations, encoded on several threads, written in input order, never cut by a shard, each
// shard with its spans sidecar of trained tokens (docs/formats.md).
// Not here: downloading data, any cleaning or normalisation of the text.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace llmcpu {

struct PrepareOptions {
  std::vector<std::string> inputs;
  std::string out_dir;
  std::string name = "data";
  int64_t val_tokens = -1;  // -1: 10% of all tokens, at most one shard
  int64_t shard_tokens = 100'000'000;
  std::string split_on = "file";  // --split-on: file, blank-lines, lines or regex:PATTERN
  int token_bytes = 0;  // --token-bytes: 2 (uint16 ids) or 4 (uint32); 0: from the vocabulary
  std::string format = "text";  // --format: text, chat, instruction or completion
  std::string train_on;       // --train-on: assistant, completion or all; "": the format's default
  std::string chat_template;  // --chat-template FILE; "": the tokenizer folder's
  std::string tokenizer_dir;  // the folder of the chat template and special tokens
  bool skip_bad = false;      // --skip-bad: count malformed records instead of stopping
  int threads = 0;            // --threads: for JSON records; 0: every core OpenMP offers
};

struct PrepareProgress {
  uint64_t bytes_done = 0, bytes_total = 0;
  uint64_t tokens = 0;
  size_t files_done = 0, files_total = 0;
  double seconds = 0;
};

struct PrepareResult {
  std::vector<std::string> val_files, train_files;
  uint64_t val_tokens = 0, train_tokens = 0, bytes = 0;
  double seconds = 0;
  // Shards named like ours in out_dir that this run did not write (left over from an earlier run).
  std::vector<std::string> stale_files;
  // JSON records: the examples written, the records skipped (--skip-bad) and the first few
  // reasons, the examples whose span boundaries needed the common-prefix rule
  // (example_tokens.h), and notes for the user (the built-in chat template is used, ...).
  bool examples_mode = false;
  uint64_t examples = 0, skipped = 0, approximate = 0;
  std::vector<std::string> skip_reasons;
  std::vector<std::string> notes;
};

// Checks every input (exists, non-empty) and the output folder (created if missing, writable)
// before encoding anything; errors are FileErrors naming the file. A token_bytes other than 0, 2
// and 4, or 2 for a vocabulary of more than 65536 tokens, is a UsageError. `progress` is called
// after each piece.
PrepareResult prepare_shards(const Tokenizer& tokenizer, const PrepareOptions& options,
                             const std::function<void(const PrepareProgress&)>& progress = {});

// Where encoding may cut `text` near `from + target` without changing the ids: just before a '\n'
// that follows a printable ASCII character. Returns text.size() if there is no such place after it.
size_t next_safe_cut(std::string_view text, size_t from, size_t target);

}  // namespace llmcpu
