#include "core/data/prepare.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <regex>
#include <set>

#include "core/data/chat_records.h"
#include "core/data/document_split.h"
#include "core/data/record_prepare.h"
#include "core/data/shard_writer.h"
#include "core/io/token_shard.h"
#include "core/util/file.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

namespace fs = std::filesystem;

constexpr size_t kPieceBytes = size_t{1} << 20;

// Lists shards called NAME_val_NNNNNN.bin / NAME_train_NNNNNN.bin in dir, and their sidecars
// (.spans), that are not in `ours`.
std::vector<std::string> stale_shards(const std::string& dir, const std::string& name,
                                      const std::set<std::string>& ours) {
  std::vector<std::string> out;
  std::string quoted;
  for (char c : name) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) quoted += '\\';
    quoted += c;
  }
  const std::regex pattern(quoted + "_(val|train)_[0-9]{6}\\.(bin|spans)");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    const std::string path = dir + "/" + file;
    if (std::regex_match(file, pattern) && !ours.count(path)) out.push_back(path);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The width of the shards' ids: --token-bytes, or what the tokenizer's vocabulary needs.
int shard_width(const Tokenizer& tokenizer, const PrepareOptions& o) {
  const int vocab = tokenizer.vocab_size();
  if (o.token_bytes == 0) return shard_token_bytes(vocab);
  if (o.token_bytes != 2 && o.token_bytes != 4) {
    throw UsageError("prepare: --token-bytes " + std::to_string(o.token_bytes) +
                     " must be 2 (uint16 ids) or 4 (uint32 ids)");
  }
  if (o.token_bytes < shard_token_bytes(vocab)) {
    throw UsageError("prepare: --token-bytes 2 cannot hold the ids of the tokenizer " +
                     tokenizer.source() + ", whose vocabulary has " + std::to_string(vocab) +
                     " tokens (uint16 ids reach 65535); use --token-bytes 4");
  }
  return o.token_bytes;
}

// The options a run needs before anything is read: inputs, an output folder, a plain name, a
// tokenizer that can encode (and name a document token where the format puts one), a format, and
// inputs of one kind in --format text.
void check_options(const Tokenizer& tokenizer, const PrepareOptions& o, bool records) {
  if (o.inputs.empty()) throw UsageError("prepare: no input files (--input FILE...)");
  if (o.out_dir.empty()) throw UsageError("prepare: --out-dir is required");
  if (o.name.empty() || o.name.find('/') != std::string::npos) {
    throw UsageError("prepare: --name '" + o.name +
                     "' must be a non-empty file name prefix without '/'");
  }
  if (!tokenizer.can_encode()) {
    throw UsageError("prepare: the tokenizer " + tokenizer.source() +
                     " can only decode; give a tokenizer.json or a folder with encoder.json and "
                     "vocab.bpe");
  }
  const DataFormat format = parse_data_format(o.format);
  const bool text = format == DataFormat::kText;
  if (text && records && !std::all_of(o.inputs.begin(), o.inputs.end(), is_json_input)) {
    throw UsageError(
        "prepare: --format text takes plain text files or JSON records (.jsonl, .json), not "
        "both in one run");
  }
  if (records && o.split_on != "file") {
    throw UsageError("prepare: --split-on " + o.split_on +
                     " cuts plain text files; a JSON record is one example");
  }
  if ((text || format == DataFormat::kCompletion) && tokenizer.document_token() < 0) {
    throw UsageError("prepare: the tokenizer " + tokenizer.source() +
                     " names no token to put between documents (neither BOS nor EOS); give its "
                     "tokenizer_config.json with eos_token beside it");
  }
}

// The bytes of all inputs, each checked to be a regular, non-empty file.
uint64_t input_bytes(const std::vector<std::string>& inputs) {
  uint64_t total = 0;
  for (const std::string& in : inputs) {
    std::error_code ec;
    const fs::file_status st = fs::status(in, ec);
    if (!fs::exists(st)) throw FileError(in, "input file does not exist");
    if (!fs::is_regular_file(st)) throw FileError(in, "input is not a regular file");
    const uintmax_t size = fs::file_size(in, ec);
    if (ec) throw FileError(in, "cannot read its size: " + ec.message());
    if (size == 0) {
      throw FileError(in, "input file is empty (each input file is one document, or records)");
    }
    total += size;
  }
  return total;
}

// Creates the output folder if missing and checks that it is writable.
void make_out_dir(const PrepareOptions& o) {
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec || !fs::is_directory(o.out_dir)) {
    throw FileError(o.out_dir, "cannot create the output folder" +
                                   (ec ? ": " + ec.message() : std::string(": not a folder")));
  }
  AtomicFileWriter probe(o.out_dir + "/." + o.name +
                         ".probe");  // throws if the folder is not writable
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Encodes one input file into the writer, document by document (each after the tokenizer's
// document token), in pieces of about kPieceBytes cut where the ids cannot change (GPT-2's files; a
// tokenizer.json's documents are encoded whole); progress after each piece.
void encode_input(const std::string& in, const Tokenizer& tokenizer, const DocumentSplit& split,
                  ShardWriter& writer, PrepareProgress& p, Clock::time_point start,
                  const std::function<void(const PrepareProgress&)>& progress) {
  const int eot = tokenizer.document_token();
  std::vector<int> ids;
  const MappedFile f(in);
  const std::string_view text(reinterpret_cast<const char*>(f.data()), f.size());
  for (size_t begin = 0;;) {
    const size_t found = split.document_end(text, begin);
    const bool last = found == DocumentSplit::kNone;
    const size_t end = last ? text.size() : found;
    const std::string_view doc = text.substr(begin, end - begin);
    writer.add(&eot, 1);
    for (size_t at = 0;;) {  // at least once: an empty document still counts its bytes (none)
      const size_t cut =
          tokenizer.cuts_at_newlines() ? next_safe_cut(doc, at, kPieceBytes) : doc.size();
      ids.clear();
      tokenizer.encode_document(doc.substr(at, cut - at), ids);
      writer.add(ids.data(), ids.size());
      p.bytes_done += cut - at;
      p.tokens = writer.total_tokens();
      p.seconds = seconds_since(start);
      if (last && cut >= doc.size()) ++p.files_done;
      if (progress) progress(p);
      at = cut;
      if (at >= doc.size()) break;
    }
    if (last) break;
    begin = end;
  }
}

}  // namespace

size_t next_safe_cut(std::string_view text, size_t from, size_t target) {
  // Just before such a '\n' every piece of GPT-2's pattern ends (the printable character cannot
  // share a piece with whitespace), and no alternative looks past its own end except (?!\S), which
  // sees whitespace there in the whole text and the end of the subject in the piece: both let it
  // match.
  for (size_t p = from + target; p < text.size(); ++p) {
    if (text[p] == '\n' && text[p - 1] > ' ' && text[p - 1] < 0x7f) return p;
  }
  return text.size();
}

PrepareResult prepare_shards(const Tokenizer& tokenizer, const PrepareOptions& o,
                             const std::function<void(const PrepareProgress&)>& progress) {
  const bool records =
      o.format != "text" || std::any_of(o.inputs.begin(), o.inputs.end(), is_json_input);
  check_options(tokenizer, o, records);
  const int token_bytes = shard_width(tokenizer, o);
  const DocumentSplit split(o.split_on);
  PrepareProgress p;
  p.files_total = o.inputs.size();
  p.bytes_total = input_bytes(o.inputs);
  make_out_dir(o);

  ShardWriter writer(o.out_dir, o.name, o.shard_tokens, o.val_tokens, token_bytes);
  const auto start = Clock::now();
  PrepareResult r;
  r.examples_mode = records;
  if (records) {
    RecordRun run{tokenizer, o, writer, p, r, start, progress};
    prepare_records(run);
  } else {
    for (const std::string& in : o.inputs) {
      encode_input(in, tokenizer, split, writer, p, start, progress);
    }
  }
  writer.finish();

  r.val_files = writer.val_files();
  r.train_files = writer.train_files();
  r.val_tokens = writer.val_tokens();
  r.train_tokens = writer.train_tokens();
  r.bytes = p.bytes_done;
  r.seconds = seconds_since(start);
  std::set<std::string> ours(r.val_files.begin(), r.val_files.end());
  ours.insert(r.train_files.begin(), r.train_files.end());
  if (records) {
    for (const auto* files : {&r.val_files, &r.train_files})
      for (const std::string& f : *files) ours.insert(spans_path(f));
  }
  r.stale_files = stale_shards(o.out_dir, o.name, ours);
  return r;
}

}  // namespace llmcpu
