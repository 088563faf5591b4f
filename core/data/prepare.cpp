#include "core/data/prepare.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <regex>
#include <set>

#include "core/data/document_split.h"
#include "core/data/shard_writer.h"
#include "core/util/file.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

namespace fs = std::filesystem;

constexpr size_t kPieceBytes = size_t{1} << 20;

// Lists shards called NAME_val_NNNNNN.bin / NAME_train_NNNNNN.bin in dir that are not in `ours`.
std::vector<std::string> stale_shards(const std::string& dir, const std::string& name,
                                      const std::set<std::string>& ours) {
  std::vector<std::string> out;
  std::string quoted;
  for (char c : name) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) quoted += '\\';
    quoted += c;
  }
  const std::regex pattern(quoted + "_(val|train)_[0-9]{6}\\.bin");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    const std::string path = dir + "/" + file;
    if (std::regex_match(file, pattern) && !ours.count(path)) out.push_back(path);
  }
  std::sort(out.begin(), out.end());
  return out;
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
  if (o.inputs.empty()) throw UsageError("prepare: no input files (--input FILE...)");
  if (o.out_dir.empty()) throw UsageError("prepare: --out-dir is required");
  if (o.name.empty() || o.name.find('/') != std::string::npos) {
    throw UsageError("prepare: --name '" + o.name +
                     "' must be a non-empty file name prefix without '/'");
  }
  if (!tokenizer.can_encode()) {
    throw UsageError("prepare: the tokenizer " + tokenizer.source() +
                     " can only decode; give a folder with encoder.json and vocab.bpe");
  }

  const DocumentSplit split(o.split_on);

  PrepareProgress p;
  p.files_total = o.inputs.size();
  for (const std::string& in : o.inputs) {
    std::error_code ec;
    const fs::file_status st = fs::status(in, ec);
    if (!fs::exists(st)) throw FileError(in, "input file does not exist");
    if (!fs::is_regular_file(st)) throw FileError(in, "input is not a regular file");
    const uintmax_t size = fs::file_size(in, ec);
    if (ec) throw FileError(in, "cannot read its size: " + ec.message());
    if (size == 0) throw FileError(in, "input file is empty (each input file is one document)");
    p.bytes_total += size;
  }
  {
    std::error_code ec;
    fs::create_directories(o.out_dir, ec);
    if (ec || !fs::is_directory(o.out_dir)) {
      throw FileError(o.out_dir, "cannot create the output folder" +
                                     (ec ? ": " + ec.message() : std::string(": not a folder")));
    }
    AtomicFileWriter probe(o.out_dir + "/." + o.name +
                           ".probe");  // throws if the folder is not writable
  }

  ShardWriter writer(o.out_dir, o.name, o.shard_tokens, o.val_tokens);
  const auto start = std::chrono::steady_clock::now();
  const int eot = tokenizer.eot_token();
  std::vector<int> ids;
  for (const std::string& in : o.inputs) {
    const MappedFile f(in);
    const std::string_view text(reinterpret_cast<const char*>(f.data()), f.size());
    for (size_t begin = 0;;) {
      const size_t found = split.document_end(text, begin);
      const bool last = found == DocumentSplit::kNone;
      const size_t end = last ? text.size() : found;
      const std::string_view doc = text.substr(begin, end - begin);
      writer.add(&eot, 1);
      for (size_t at = 0;;) {  // at least once: an empty document still counts its bytes (none)
        const size_t cut = next_safe_cut(doc, at, kPieceBytes);
        ids.clear();
        tokenizer.encode_append(doc.substr(at, cut - at), ids);
        writer.add(ids.data(), ids.size());
        p.bytes_done += cut - at;
        p.tokens = writer.total_tokens();
        p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (last && cut >= doc.size()) ++p.files_done;
        if (progress) progress(p);
        at = cut;
        if (at >= doc.size()) break;
      }
      if (last) break;
      begin = end;
    }
  }
  writer.finish();

  PrepareResult r;
  r.val_files = writer.val_files();
  r.train_files = writer.train_files();
  r.val_tokens = writer.val_tokens();
  r.train_tokens = writer.train_tokens();
  r.bytes = p.bytes_done;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::set<std::string> ours(r.val_files.begin(), r.val_files.end());
  ours.insert(r.train_files.begin(), r.train_files.end());
  r.stale_files = stale_shards(o.out_dir, o.name, ours);
  return r;
}

}  // namespace llmcpu
